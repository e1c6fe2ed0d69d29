//! The static HTML dashboard: one self-contained file (no network, no external scripts or fonts) with
//! the report embedded as JSON and drawn by inline JavaScript into SVG.
//!
//! Design trade-off: the page renders from the embedded JSON rather than from HTML generated here, so
//! the numbers on screen and in `report.json` come from one place, and a report can be re-rendered by
//! any later version. The price is that the page needs JavaScript; it says so when it is off. Every
//! number the page shows carries `data-key`, `data-level`, `data-role` and `data-value` (the exact JSON
//! value), which is what the headless-browser test compares against `report.json`.

use crate::report::Report;
use crate::ValidateError;

/// The page, with `__TITLE__` and `__DATA__` to fill.
const TEMPLATE: &str = include_str!("dashboard.html");

/// Renders the dashboard of `report`.
pub fn render(report: &Report) -> Result<String, ValidateError> {
    let json = serde_json::to_string(report)
        .map_err(|e| ValidateError::Io(format!("cannot serialise the report: {e}")))?;
    Ok(render_json(&json, &title(report)))
}

/// Renders a dashboard from report JSON text (e.g. a report.json written by another version).
pub fn render_json(json: &str, title: &str) -> String {
    TEMPLATE
        .replace("__TITLE__", &escape_html(title))
        .replace("__DATA__", &embed_json(json))
}

fn title(r: &Report) -> String {
    format!(
        "ditto validation: {} vs clone {}",
        r.original.name, r.clone.name
    )
}

/// JSON safe inside `<script type="application/json">`: `<` only occurs in strings there, and `\u003c`
/// means the same to a JSON parser, so no `</script>` or `<!--` can end the element early.
fn embed_json(json: &str) -> String {
    json.replace('<', "\\u003c")
}

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_json_cannot_close_its_script_element() {
        let html = render_json(r#"{"note":"</script><script>alert(1)</script>"}"#, "a<b");
        assert!(!html.contains("</script><script>alert"));
        assert!(html.contains("a&lt;b"));
        let marker = "id=\"report-data\">";
        let start = html.find(marker).expect("data element") + marker.len();
        let end = start + html[start..].find("</script>").expect("end");
        let back: serde_json::Value = serde_json::from_str(&html[start..end]).expect("JSON");
        assert_eq!(back["note"], "</script><script>alert(1)</script>");
    }

    #[test]
    fn page_is_self_contained() {
        let html = render_json("{}", "t");
        for forbidden in ["http://", "https://", "src=\"", "<link", "@import"] {
            // The SVG namespace URI is an identifier, not a fetch.
            let count = html.matches(forbidden).count()
                - html.matches("http://www.w3.org/2000/svg").count()
                    * usize::from(forbidden == "http://");
            assert_eq!(count, 0, "{forbidden} in the dashboard");
        }
    }
}
