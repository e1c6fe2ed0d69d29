//! The dashboard in a real browser: a report recorded from a real `ditto validate` run
//! (`tests/fixtures/report.json`, with the clone's tuning history) is rendered by the current dashboard
//! code, loaded in headless Chromium, and the DOM after its scripts ran is compared with the JSON: every
//! plot is there, and every number the page shows is the report's. A screenshot checks the page is not
//! blank and that bars in the original's and the clone's colours were painted.
//!
//! Chromium missing is a failure with what to install, never a skip.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ditto_validate::Report;
use serde_json::Value;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report.json")
}

fn chromium() -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .flat_map(|d| [d.join("chromium"), d.join("chromium-browser")])
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "chromium is not installed: run `apt-get install chromium` (scripts/setup.sh installs it); \
             the dashboard test renders the page in a real headless browser"
        )
    })
}

/// Runs headless Chromium with `args` and returns its stdout; fails after 90 s.
fn run_chromium(profile: &Path, args: &[String]) -> String {
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        "--force-color-profile=srgb",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(args)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("chromium starts");
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    loop {
        match child.try_wait().expect("wait") {
            Some(status) => {
                assert!(status.success(), "chromium failed: {status}");
                break;
            }
            None if start.elapsed() > Duration::from_secs(90) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("chromium did not finish within 90 s");
            }
            None => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    reader.join().expect("reader")
}

/// One element of the dumped DOM: its tag, attributes and the text right after its start tag.
#[derive(Debug)]
struct Element {
    tag: String,
    attrs: BTreeMap<String, String>,
    text: String,
}

/// Start tags of an HTML serialisation (script contents skipped), enough for Chromium's `--dump-dom`.
fn elements(html: &str) -> Vec<Element> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(lt) = rest.find('<') {
        rest = &rest[lt + 1..];
        let Some(first) = rest.chars().next() else {
            break;
        };
        if !first.is_ascii_alphabetic() {
            continue;
        }
        let Some(gt) = rest.find('>') else { break };
        let inside = &rest[..gt];
        rest = &rest[gt + 1..];
        let name_end = inside
            .find(|c: char| c.is_whitespace() || c == '/')
            .unwrap_or(inside.len());
        let tag = inside[..name_end].to_ascii_lowercase();
        let mut attrs = BTreeMap::new();
        let mut a = &inside[name_end..];
        loop {
            a = a.trim_start_matches(|c: char| c.is_whitespace() || c == '/');
            if a.is_empty() {
                break;
            }
            let key_end = a
                .find(|c: char| c == '=' || c.is_whitespace())
                .unwrap_or(a.len());
            let key = a[..key_end].to_string();
            a = &a[key_end..];
            if let Some(v) = a.strip_prefix("=\"") {
                let end = v.find('"').unwrap_or(v.len());
                attrs.insert(key, unescape(&v[..end]));
                a = &v[(end + 1).min(v.len())..];
            } else {
                attrs.insert(key, String::new());
            }
        }
        let text_end = rest.find('<').unwrap_or(rest.len());
        let text = unescape(&rest[..text_end]);
        if tag == "script" {
            // Skip to the end of the script: its text is code and JSON, not markup.
            if let Some(end) = rest.find("</script>") {
                rest = &rest[end..];
            }
        }
        out.push(Element { tag, attrs, text });
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// Finds the one element with these data attributes.
fn cell<'a>(els: &'a [Element], tag: &str, key: &str, level: &str, role: &str) -> &'a Element {
    let found: Vec<&Element> = els
        .iter()
        .filter(|e| {
            e.tag == tag
                && e.attrs.get("data-key").map(String::as_str) == Some(key)
                && e.attrs.get("data-level").map(String::as_str) == Some(level)
                && e.attrs.get("data-role").map(String::as_str) == Some(role)
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected one <{tag}> for {key} / {level} / {role}, found {}",
        found.len()
    );
    found[0]
}

/// Checks a cell against a JSON number (or null): its exact value and its displayed text.
fn check_number(e: &Element, expected: &Value, percent: bool, what: &str) {
    let shown = e.attrs.get("data-value").map(String::as_str).unwrap_or("");
    match expected.as_f64() {
        None => {
            assert!(
                expected.is_null(),
                "{what}: report value {expected} is not a number"
            );
            assert_eq!(shown, "null", "{what}");
            assert_eq!(e.text.trim(), "n/a", "{what}");
        }
        Some(v) => {
            let got: f64 = shown
                .parse()
                .unwrap_or_else(|_| panic!("{what}: data-value '{shown}' is not a number"));
            assert_eq!(got, v, "{what}: the DOM's value differs from report.json's");
            let text = e.text.trim();
            let num: f64 = text
                .trim_end_matches('%')
                .parse()
                .unwrap_or_else(|_| panic!("{what}: shown text '{text}' is not a number"));
            let want = if percent { v * 100.0 } else { v };
            assert_eq!(text.ends_with('%'), percent, "{what}: '{text}'");
            // Shown with 4 significant digits (integers from 10,000 up).
            assert!(
                (num - want).abs()
                    <= 5e-4 * want.abs() + 0.5 * f64::from(u8::from(want.abs() >= 1e4)),
                "{what}: shows {text}, report has {want}"
            );
        }
    }
}

fn decode_png(bytes: &[u8]) -> (usize, usize, usize, Vec<u8>) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let mut pos = 8;
    let (mut w, mut h, mut channels) = (0usize, 0usize, 0usize);
    let mut idat = Vec::new();
    while pos + 8 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[pos..pos + 4].try_into().expect("len")) as usize;
        let kind = &bytes[pos + 4..pos + 8];
        let data = &bytes[pos + 8..pos + 8 + len];
        match kind {
            b"IHDR" => {
                w = u32::from_be_bytes(data[0..4].try_into().expect("w")) as usize;
                h = u32::from_be_bytes(data[4..8].try_into().expect("h")) as usize;
                assert_eq!(data[8], 8, "8-bit PNG expected");
                channels = match data[9] {
                    2 => 3,
                    6 => 4,
                    other => panic!("PNG colour type {other} not handled"),
                };
                assert_eq!(data[12], 0, "interlaced PNG not handled");
            }
            b"IDAT" => idat.extend_from_slice(data),
            b"IEND" => break,
            _ => {}
        }
        pos += 12 + len;
    }
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&idat[..])
        .read_to_end(&mut raw)
        .expect("PNG data inflates");
    let stride = w * channels;
    let mut out = vec![0u8; h * stride];
    for y in 0..h {
        let filter = raw[y * (stride + 1)];
        let line = &raw[y * (stride + 1) + 1..(y + 1) * (stride + 1)];
        for x in 0..stride {
            let a = if x >= channels {
                out[y * stride + x - channels]
            } else {
                0
            };
            let b = if y > 0 { out[(y - 1) * stride + x] } else { 0 };
            let c = if x >= channels && y > 0 {
                out[(y - 1) * stride + x - channels]
            } else {
                0
            };
            let pred = match filter {
                0 => 0,
                1 => a,
                2 => b,
                3 => ((u16::from(a) + u16::from(b)) / 2) as u8,
                4 => {
                    let p = i16::from(a) + i16::from(b) - i16::from(c);
                    let (pa, pb, pc) = (
                        (p - i16::from(a)).abs(),
                        (p - i16::from(b)).abs(),
                        (p - i16::from(c)).abs(),
                    );
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                f => panic!("PNG filter {f}"),
            };
            out[y * stride + x] = line[x].wrapping_add(pred);
        }
    }
    (w, h, channels, out)
}

#[test]
fn dashboard_shows_the_reports_numbers_in_headless_chromium() {
    let json: Value = serde_json::from_str(&std::fs::read_to_string(fixture()).expect("fixture"))
        .expect("fixture is JSON");
    // The fixture loads as a current report, and the page is rendered by the current code.
    let report = Report::load(&fixture()).expect("fixture is a current report");
    let dir = tempfile::tempdir().expect("tempdir");
    report.write(dir.path()).expect("dashboard written");
    let page = format!("file://{}", dir.path().join("index.html").display());
    let profile = tempfile::tempdir().expect("profile dir");

    let dom = run_chromium(profile.path(), &["--dump-dom".into(), page.clone()]);
    let els = elements(&dom);
    let ids: Vec<&str> = els
        .iter()
        .filter_map(|e| e.attrs.get("id").map(String::as_str))
        .collect();
    let levels: Vec<String> = json["levels"]
        .as_array()
        .expect("levels")
        .iter()
        .map(|l| l["level"].as_str().expect("level name").to_string())
        .collect();
    assert!(!levels.is_empty(), "the fixture has levels");
    let mut wanted: Vec<String> = [
        "plot-metrics",
        "plot-latency-load",
        "plot-syscalls",
        "plot-tuning",
        "summary-table",
        "tuning-table",
        "saturation-table",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for l in &levels {
        wanted.push(format!("plot-cdf-{l}"));
        wanted.push(format!("metrics-{l}"));
        wanted.push(format!("syscalls-{l}"));
    }
    for id in &wanted {
        let e = els
            .iter()
            .find(|e| e.attrs.get("id") == Some(id))
            .unwrap_or_else(|| {
                panic!("no element with id {id} in the rendered page (ids: {ids:?})")
            });
        if id.starts_with("plot-") {
            assert_eq!(e.tag, "svg", "{id} is an SVG plot");
        }
    }
    // Plots have drawn content: lines in every line plot, bars in the bar plots.
    let paths = els
        .iter()
        .filter(|e| e.tag == "path" && e.attrs.contains_key("data-series"))
        .count();
    assert!(paths >= 6 + 3 * levels.len(), "only {paths} plotted lines");

    // Every metric of every level: original, second original run, clone, error, variation.
    let mut checked = 0;
    for l in json["levels"].as_array().expect("levels") {
        let level = l["level"].as_str().expect("level");
        for rows in [&l["metrics"], &l["syscalls"]] {
            for m in rows.as_array().expect("rows") {
                let key = m["key"].as_str().expect("key");
                let percent = m["format"] == "percent";
                let second = m["original_runs"].get(1).cloned().unwrap_or(Value::Null);
                for (role, v, pct) in [
                    ("original", &m["original"], percent),
                    ("original_run2", &second, percent),
                    ("clone", &m["clone"], percent),
                    ("error", &m["error"], true),
                    ("variation", &m["original_variation"], true),
                ] {
                    check_number(
                        cell(&els, "td", key, level, role),
                        v,
                        pct,
                        &format!("{level} {key} {role}"),
                    );
                    checked += 1;
                }
            }
        }
        // Bars of the figure-5 plot carry the raw values of the rows they draw.
        for e in els.iter().filter(|e| {
            e.tag == "rect"
                && e.attrs.get("data-level").map(String::as_str) == Some(level)
                && e.attrs.contains_key("data-normalised")
        }) {
            let key = &e.attrs["data-key"];
            let role = &e.attrs["data-role"];
            let row = l["metrics"]
                .as_array()
                .expect("metrics")
                .iter()
                .find(|m| m["key"] == key.as_str())
                .expect("bar's metric is in the report");
            let got: f64 = e.attrs["data-value"].parse().expect("bar value");
            assert_eq!(
                Some(got),
                row[role.as_str()].as_f64(),
                "bar {level} {key} {role}"
            );
            checked += 1;
        }
    }
    // Summary rows.
    for s in json["summary"].as_array().expect("summary") {
        let key = s["key"].as_str().expect("key");
        for role in ["mean_error", "max_error", "mean_variation"] {
            check_number(
                cell(&els, "td", key, "all", role),
                &s[role],
                true,
                &format!("summary {key} {role}"),
            );
            checked += 1;
        }
    }
    // Saturation.
    let sat = &json["saturation"]["metric"];
    assert!(sat.is_object(), "the fixture has a saturation sweep");
    for (role, field, pct) in [
        ("original", "original", false),
        ("clone", "clone", false),
        ("error", "error", true),
    ] {
        check_number(
            cell(&els, "td", "saturation_rps", "all", role),
            &sat[field],
            pct,
            &format!("saturation {role}"),
        );
        checked += 1;
    }
    // Tuning history: every iteration's error of every tuned metric.
    let tuning = &json["tuning"];
    assert!(tuning.is_object(), "the fixture has a tuning history");
    for it in tuning["iterations"].as_array().expect("iterations") {
        let level = format!("iteration-{}", it["iteration"]);
        for k in tuning["tuned_metrics"].as_array().expect("tuned") {
            let k = k.as_str().expect("metric");
            check_number(
                cell(&els, "td", k, &level, "tune_error"),
                &it["errors"][k],
                true,
                &format!("tuning {level} {k}"),
            );
            checked += 1;
        }
    }
    // Seed trials: every iteration's generator seed (its own, or the run's).
    let iterations = tuning["iterations"].as_array().expect("iterations");
    assert!(
        iterations.iter().any(|it| it["seed"].is_u64()),
        "the fixture's tuning has a seed trial"
    );
    for it in iterations {
        let level = format!("iteration-{}", it["iteration"]);
        let seed = if it["seed"].is_u64() {
            &it["seed"]
        } else {
            &tuning["seed"]
        };
        let e = cell(&els, "td", "seed", &level, "seed");
        assert_eq!(
            e.attrs.get("data-value").map(String::as_str),
            Some(seed.to_string().as_str()),
            "seed of {level}"
        );
        assert_eq!(e.text.trim(), seed.to_string(), "seed shown for {level}");
        checked += 1;
    }
    assert!(checked > 100, "only {checked} numbers checked");

    // The page paints: a screenshot with plenty of non-white pixels, some in each role's colour.
    let shot = dir.path().join("shot.png");
    run_chromium(
        profile.path(),
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1300,2600".into(),
            page,
        ],
    );
    let (w, h, ch, px) = decode_png(&std::fs::read(&shot).expect("screenshot written"));
    assert!(w >= 1000 && h >= 2000, "screenshot is {w}×{h}");
    let near = |p: &[u8], rgb: (u8, u8, u8)| {
        (i16::from(p[0]) - i16::from(rgb.0)).abs() <= 6
            && (i16::from(p[1]) - i16::from(rgb.1)).abs() <= 6
            && (i16::from(p[2]) - i16::from(rgb.2)).abs() <= 6
    };
    let pixels: Vec<&[u8]> = px.chunks(ch).collect();
    let non_white = pixels.iter().filter(|p| !near(p, (255, 255, 255))).count();
    let original = pixels
        .iter()
        .filter(|p| near(p, (0x1f, 0x6f, 0xb4)))
        .count();
    let clone = pixels
        .iter()
        .filter(|p| near(p, (0xe8, 0x71, 0x0a)))
        .count();
    assert!(
        non_white * 50 > pixels.len(),
        "the page looks blank: {non_white} of {} pixels are not white",
        pixels.len()
    );
    assert!(
        original > 200 && clone > 200,
        "bars not painted: {original} original-coloured and {clone} clone-coloured pixels"
    );
}
