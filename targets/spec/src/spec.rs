//! The target spec file format: parsing, defaults, validation and placeholder expansion.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ditto_load::{Arrival, Workload};
use serde::{Deserialize, Serialize};

use crate::SpecError;

/// One service that ditto can start, warm, load and clone. Read from a TOML file; see `docs/target-spec.md`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    /// Short name used in file names and reports (`memcached`, `pix-baseline`).
    pub name: String,
    /// One line for humans.
    #[serde(default)]
    pub description: String,
    pub server: ServerSpec,
    /// What requests load the target: protocol and request mix.
    pub workload: Workload,
    #[serde(default)]
    pub warm: WarmSpec,
    pub load: LoadLevels,
    /// Folder the spec was read from; `{{spec_dir}}` expands to it.
    #[serde(skip)]
    pub spec_dir: PathBuf,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// Program and arguments; placeholders allowed. The server must listen on `127.0.0.1:{{port}}`.
    pub command: Vec<String>,
    /// Loopback port the server listens on unless the user passes another one.
    pub port: u16,
    /// Start the server as this user (it must exist). Unset: as the invoking user.
    #[serde(default)]
    pub user: Option<String>,
    /// Optional build command run (from `spec_dir`) before every start; it must be idempotent.
    #[serde(default)]
    pub build: Option<Vec<String>>,
    /// Files rendered from templates into the run folder before start (e.g. a config file).
    #[serde(default)]
    pub files: Vec<RenderedFile>,
    /// Folders copied verbatim (recursively) into the run folder before start, e.g. a static site; the
    /// copy is readable by any user, so a server that drops privileges can serve it wherever the spec lives.
    #[serde(default)]
    pub copies: Vec<CopiedDir>,
    /// Extra environment variables for the server; placeholders allowed in values.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// How long to wait for the port to accept connections.
    #[serde(default = "default_ready_timeout_s")]
    pub ready_timeout_s: f64,
    /// Open-file limit (soft = hard) the server starts with. Valgrind keeps a few descriptors for itself
    /// and only lets the guest set its hard limit to exactly the remaining number, so a server that sets
    /// its own limit to a connection count (memcached `-c N`) needs `N + 12` here to run under it.
    #[serde(default)]
    pub nofile: Option<u64>,
}

fn default_ready_timeout_s() -> f64 {
    15.0
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RenderedFile {
    /// Template path relative to the spec's folder; its placeholders are expanded.
    pub template: String,
    /// Destination path relative to the run folder.
    pub path: String,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CopiedDir {
    /// Source folder relative to the spec's folder.
    pub from: String,
    /// Destination relative to the run folder.
    pub to: String,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WarmSpec {
    /// Put the server into its measured state after start (memcached: store every key once).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Then serve this many requests of the workload at the medium level's rate, not measured,
    /// so that the server's own state machines are past their start-up transient before any
    /// window: memcached's LRU maintainer sleeps nearly idle until about 20,000 requests after
    /// the keys are stored, then wakes about 1,100 times a second. Native runs only.
    #[serde(default)]
    pub steady_requests: u64,
}

impl Default for WarmSpec {
    fn default() -> Self {
        WarmSpec {
            enabled: true,
            steady_requests: 0,
        }
    }
}

fn yes() -> bool {
    true
}

/// What low, medium and high load mean for this target, plus the settings they share.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LoadLevels {
    #[serde(default = "default_connections")]
    pub connections: usize,
    #[serde(default = "default_warmup_s")]
    pub warmup_s: f64,
    #[serde(default = "default_duration_s")]
    pub duration_s: f64,
    #[serde(default = "default_arrival")]
    pub arrival: Arrival,
    pub low: LoadLevel,
    pub medium: LoadLevel,
    pub high: LoadLevel,
}

fn default_connections() -> usize {
    8
}
fn default_warmup_s() -> f64 {
    1.0
}
fn default_duration_s() -> f64 {
    10.0
}
fn default_arrival() -> Arrival {
    Arrival::Poisson
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LoadLevel {
    /// Offered requests per second.
    pub rate: f64,
    /// Overrides the shared connection count for this level.
    #[serde(default)]
    pub connections: Option<usize>,
}

/// The named load levels of a spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    Low,
    Medium,
    High,
}

impl Level {
    pub const ALL: [Level; 3] = [Level::Low, Level::Medium, Level::High];

    pub fn name(self) -> &'static str {
        match self {
            Level::Low => "low",
            Level::Medium => "medium",
            Level::High => "high",
        }
    }
}

impl std::str::FromStr for Level {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "low" => Ok(Level::Low),
            "medium" => Ok(Level::Medium),
            "high" => Ok(Level::High),
            other => Err(format!(
                "unknown load level '{other}': use low, medium or high"
            )),
        }
    }
}

/// A resolved load level: everything the load generator needs besides the address and workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResolvedLevel {
    pub level: Level,
    pub rate: f64,
    pub connections: usize,
    pub warmup_s: f64,
    pub duration_s: f64,
    pub arrival: Arrival,
}

impl LoadLevels {
    pub fn resolve(&self, level: Level) -> ResolvedLevel {
        let l = match level {
            Level::Low => &self.low,
            Level::Medium => &self.medium,
            Level::High => &self.high,
        };
        ResolvedLevel {
            level,
            rate: l.rate,
            connections: l.connections.unwrap_or(self.connections),
            warmup_s: self.warmup_s,
            duration_s: self.duration_s,
            arrival: self.arrival,
        }
    }
}

impl TargetSpec {
    /// Reads and validates a spec file.
    pub fn load(path: &Path) -> Result<TargetSpec, SpecError> {
        let text = std::fs::read_to_string(path).map_err(|cause| SpecError::Read {
            path: path.to_path_buf(),
            cause,
        })?;
        let spec_dir = path
            .parent()
            .map(|p| {
                if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                }
            })
            .unwrap_or(Path::new("."));
        let spec_dir = spec_dir.canonicalize().map_err(|cause| SpecError::Read {
            path: spec_dir.to_path_buf(),
            cause,
        })?;
        Self::parse(&text, path, spec_dir)
    }

    /// Parses spec text; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &Path, spec_dir: PathBuf) -> Result<TargetSpec, SpecError> {
        let mut spec: TargetSpec = toml::from_str(text).map_err(|e| SpecError::Parse {
            path: origin.to_path_buf(),
            message: e.message().to_string(),
            span: e.span().map(|s| line_of(text, s.start)),
        })?;
        spec.spec_dir = spec_dir;
        spec.validate().map_err(|message| SpecError::Invalid {
            path: origin.to_path_buf(),
            message,
        })?;
        Ok(spec)
    }

    fn validate(&self) -> Result<(), String> {
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "name '{}' must be non-empty and use only letters, digits, '-' and '_'",
                self.name
            ));
        }
        if self.server.command.is_empty() {
            return Err("server.command is empty: give the program and its arguments".into());
        }
        if self.server.port == 0 {
            return Err("server.port must be a fixed port (1-65535)".into());
        }
        if !(self.server.ready_timeout_s.is_finite() && self.server.ready_timeout_s > 0.0) {
            return Err("server.ready_timeout_s must be positive".into());
        }
        let mut texts: Vec<&str> = self.server.command.iter().map(String::as_str).collect();
        texts.extend(self.server.env.values().map(String::as_str));
        texts.extend(self.server.build.iter().flatten().map(String::as_str));
        for t in texts {
            check_placeholders(t)?;
        }
        for f in &self.server.files {
            if Path::new(&f.path).is_absolute() || f.path.contains("..") {
                return Err(format!(
                    "server.files path '{}' must stay inside the run folder",
                    f.path
                ));
            }
        }
        for c in &self.server.copies {
            if Path::new(&c.to).is_absolute() || c.to.contains("..") || c.to.is_empty() {
                return Err(format!(
                    "server.copies destination '{}' must stay inside the run folder",
                    c.to
                ));
            }
        }
        if self.load.connections == 0 {
            return Err("load.connections must be at least 1".into());
        }
        if !(self.load.duration_s.is_finite()
            && self.load.duration_s > 0.0
            && self.load.warmup_s >= 0.0)
        {
            return Err("load.duration_s must be positive and load.warmup_s not negative".into());
        }
        let mut previous = 0.0;
        for level in Level::ALL {
            let r = self.load.resolve(level);
            if !(r.rate.is_finite() && r.rate > 0.0) {
                return Err(format!(
                    "load.{}.rate must be a positive number",
                    level.name()
                ));
            }
            if r.connections == 0 {
                return Err(format!(
                    "load.{}.connections must be at least 1",
                    level.name()
                ));
            }
            if r.rate < previous {
                return Err(format!(
                    "load.{}.rate ({}) is below the level before it: low ≤ medium ≤ high",
                    level.name(),
                    r.rate
                ));
            }
            previous = r.rate;
        }
        Ok(())
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Names that `{{...}}` may hold.
pub const PLACEHOLDERS: [&str; 3] = ["port", "run_dir", "spec_dir"];

fn check_placeholders(text: &str) -> Result<(), String> {
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(format!("unclosed '{{{{' in '{text}'"));
        };
        let name = &after[..end];
        if !PLACEHOLDERS.contains(&name) {
            return Err(format!(
                "unknown placeholder '{{{{{name}}}}}' in '{text}': known are {}",
                PLACEHOLDERS.map(|p| format!("{{{{{p}}}}}")).join(", ")
            ));
        }
        rest = &after[end + 2..];
    }
    Ok(())
}

/// Values of the placeholders for one launch.
#[derive(Debug, Clone)]
pub struct Placeholders {
    pub port: u16,
    pub run_dir: PathBuf,
    pub spec_dir: PathBuf,
}

impl Placeholders {
    /// Replaces every `{{name}}`; unknown names are left as they are (spec validation rejects them earlier,
    /// and templates may legitimately contain other text).
    pub fn expand(&self, text: &str) -> String {
        text.replace("{{port}}", &self.port.to_string())
            .replace("{{run_dir}}", &self.run_dir.to_string_lossy())
            .replace("{{spec_dir}}", &self.spec_dir.to_string_lossy())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
name = "kv"
[server]
command = ["/usr/bin/memcached", "-p", "{{port}}"]
port = 11999
[workload]
protocol = "memcached"
[load]
low = { rate = 100 }
medium = { rate = 200 }
high = { rate = 400, connections = 16 }
"#;

    fn parse(text: &str) -> Result<TargetSpec, SpecError> {
        TargetSpec::parse(text, Path::new("test.toml"), PathBuf::from("/specs"))
    }

    #[test]
    fn minimal_spec_gets_documented_defaults() {
        let spec = parse(MINIMAL).expect("minimal spec parses");
        assert!(spec.warm.enabled);
        assert_eq!(spec.server.ready_timeout_s, 15.0);
        let high = spec.load.resolve(Level::High);
        assert_eq!(high.connections, 16);
        assert_eq!(high.arrival, Arrival::Poisson);
        assert_eq!(spec.load.resolve(Level::Low).connections, 8);
        assert_eq!(spec.load.resolve(Level::Medium).duration_s, 10.0);
    }

    #[test]
    fn unknown_field_is_rejected_with_its_line() {
        let text = MINIMAL.replace("port = 11999", "port = 11999\nbogus = 1");
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains("bogus"), "{err}");
        assert!(err.contains("line"), "{err}");
    }

    #[test]
    fn unknown_placeholder_is_rejected() {
        let text = MINIMAL.replace("{{port}}", "{{prot}}");
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains("{{prot}}"), "{err}");
    }

    #[test]
    fn levels_must_not_decrease() {
        let text = MINIMAL.replace("rate = 400", "rate = 150");
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains("load.high.rate"), "{err}");
    }

    #[test]
    fn rendered_file_may_not_escape_run_dir() {
        let text = MINIMAL.replace(
            "port = 11999",
            "port = 11999\nfiles = [{ template = \"a.conf\", path = \"../etc/x\" }]",
        );
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains("run folder"), "{err}");
    }

    #[test]
    fn copied_folder_may_not_escape_run_dir() {
        let text = MINIMAL.replace(
            "port = 11999",
            "port = 11999\ncopies = [{ from = \"site\", to = \"../../etc\" }]",
        );
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains("server.copies"), "{err}");
    }

    #[test]
    fn placeholders_expand_everywhere_in_a_string() {
        let p = Placeholders {
            port: 8080,
            run_dir: PathBuf::from("/tmp/run"),
            spec_dir: PathBuf::from("/specs"),
        };
        assert_eq!(
            p.expand("listen 127.0.0.1:{{port}}; root {{spec_dir}}/site; pid {{run_dir}}/pid; events { }"),
            "listen 127.0.0.1:8080; root /specs/site; pid /tmp/run/pid; events { }"
        );
    }

    #[test]
    fn bundled_specs_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut found = 0;
        for entry in std::fs::read_dir(&dir).expect("targets folder") {
            let path = entry.expect("dir entry").path();
            if path.extension().is_some_and(|e| e == "toml") {
                TargetSpec::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                found += 1;
            }
        }
        assert!(found >= 4, "expected the four bundled specs, found {found}");
    }
}
