//! `report.json`: what a validation run measured and how the clone compares (schema in
//! docs/validation.md). Built from measurements by pure functions, so its assembly is tested without
//! running anything.

use std::collections::BTreeSet;
use std::path::Path;

use ditto_measure::counters::SimRunRecord;
use ditto_measure::{CounterFigures, Platform, SimSettings};
use serde::{Deserialize, Serialize};

use crate::metrics::{self, Group, MetricDef, MetricRow, LEVEL_METRICS, SATURATION};
use crate::native::NativeRun;
use crate::saturation::{Saturation, SweepSettings};
use crate::ValidateError;

/// The schema name and major version; readers refuse other majors.
pub const SCHEMA: &str = "ditto-validation/1";

/// A whole validation report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub tool_version: String,
    /// Wall-clock start, seconds since the Unix epoch.
    pub created_unix_s: f64,
    /// Wall-clock seconds the run took so far.
    pub elapsed_s: f64,
    /// False while the run is still going (the report is rewritten after every level).
    pub complete: bool,
    pub original: Subject,
    pub clone: CloneSubject,
    pub counters: CountersInfo,
    pub settings: Settings,
    pub levels: Vec<LevelReport>,
    pub saturation: Option<SaturationReport>,
    /// Per metric, over the levels.
    pub summary: Vec<SummaryRow>,
    /// The clone's `tune-history.json`, when it has one.
    pub tuning: Option<serde_json::Value>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subject {
    pub name: String,
    pub spec: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CloneSubject {
    pub name: String,
    pub dir: String,
    pub spec: String,
    pub seed: u64,
    /// The clone's knobs (as in its knobs.toml).
    pub knobs: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CountersInfo {
    /// `perf` or `sim`.
    pub backend: String,
    /// The source string CPU figures carry.
    pub source: String,
    /// The simulated geometry (sim only).
    pub platform: Option<Platform>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub levels: Vec<String>,
    pub native_duration_s: f64,
    pub native_warmup_s: f64,
    pub original_runs: usize,
    pub seed: u64,
    /// `auto`, `bpftrace` or `ptrace`.
    pub collector: String,
    pub sim: Option<SimSettings>,
    pub saturation: Option<SweepSettings>,
}

/// The load a level applied natively.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelLoad {
    pub rate: f64,
    pub connections: usize,
    pub arrival: String,
    pub duration_s: f64,
    pub warmup_s: f64,
}

/// The simulated runs' plan at a level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimPlanInfo {
    /// `window` or `differential` (`ditto_measure::SimMethod`); reports before the window have none
    /// and were measured by the differential.
    #[serde(default)]
    pub method: Option<String>,
    pub rate: f64,
    pub low_rate: f64,
    pub high_rate: f64,
    pub duration_s: f64,
    pub connections: usize,
    pub with_l2: bool,
}

/// Everything measured for one target at one level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub native: NativeRun,
    /// CPU figures (perf: from the native run; sim: from the cachegrind runs).
    pub counters: Option<CounterFigures>,
    /// The cachegrind runs behind sim figures.
    #[serde(default)]
    pub sim_runs: Vec<SimRunRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelReport {
    pub level: String,
    pub load: LevelLoad,
    pub sim_plan: Option<SimPlanInfo>,
    pub metrics: Vec<MetricRow>,
    /// Calls per request by syscall (keys `syscall:NAME`), busiest in the original first.
    pub syscalls: Vec<MetricRow>,
    /// Every run of the original, first (the reference) first.
    pub original: Vec<RunRecord>,
    pub clone: RunRecord,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SaturationReport {
    pub metric: MetricRow,
    pub original: Vec<Saturation>,
    pub clone: Saturation,
}

/// One metric over every level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryRow {
    pub key: String,
    pub label: String,
    pub group: Group,
    pub source: String,
    /// Mean of the levels' errors (levels with an error only).
    pub mean_error: Option<f64>,
    pub max_error: Option<f64>,
    /// Mean of the original's run-to-run variations.
    pub mean_variation: Option<f64>,
    pub levels_compared: usize,
}

/// One metric's value in a run, and its source.
pub fn run_value(def: &MetricDef, run: &RunRecord) -> (Option<f64>, String) {
    let c = run.counters.as_ref();
    let counter_source = c.map(|c| c.source.clone()).unwrap_or_else(|| "none".into());
    let p = run.native.profile.as_ref();
    let profiler_source = p
        .map(|p| p.collector.clone())
        .unwrap_or_else(|| "none".into());
    let os = &run.native.os;
    let l = &run.native.load;
    let cpu = |f: fn(&CounterFigures) -> Option<f64>| (c.and_then(f), counter_source.clone());
    match def.key {
        "instructions_per_request" => cpu(|c| c.instructions_per_request),
        "ipc" => cpu(|c| c.ipc),
        "branch_mispredict_rate" => cpu(|c| c.branch_mispredict_rate),
        "conditional_mispredict_rate" => cpu(|c| c.conditional_mispredict_rate),
        "indirect_mispredict_rate" => cpu(|c| c.indirect_mispredict_rate),
        "l1i_miss_rate" => cpu(|c| c.l1i_miss_rate),
        "l1d_miss_rate" => cpu(|c| c.l1d_miss_rate),
        "l2_miss_rate" => cpu(|c| c.l2_miss_rate),
        "llc_miss_rate" => cpu(|c| c.llc_miss_rate),
        "itlb_misses_per_request" => cpu(|c| c.itlb_misses_per_request),
        "syscalls_per_request" => (p.map(|p| p.syscalls_per_request), profiler_source),
        "file_bytes_per_request" => (p.map(|p| p.file_bytes_per_request), profiler_source),
        "network_bytes_in_per_request" => {
            (p.map(|p| p.network_bytes_in_per_request), profiler_source)
        }
        "network_bytes_out_per_request" => {
            (p.map(|p| p.network_bytes_out_per_request), profiler_source)
        }
        "context_switches_per_request" => (
            os.measured.then_some(os.context_switches_per_request),
            "procfs".into(),
        ),
        "cpu_on_us_per_request" => (
            os.cpu_on_us_per_request.filter(|_| os.measured),
            "schedstat".into(),
        ),
        "cpu_user_us_per_request" => (
            os.measured.then_some(os.cpu_user_us_per_request),
            "procfs".into(),
        ),
        "cpu_sys_us_per_request" => (
            os.measured.then_some(os.cpu_sys_us_per_request),
            "procfs".into(),
        ),
        "disk_bytes_per_request" => (
            os.disk_bytes_per_request.filter(|_| os.measured),
            "procfs".into(),
        ),
        "latency_p50_us" => (Some(l.p50_us), "ditto-load".into()),
        "latency_p95_us" => (Some(l.p95_us), "ditto-load".into()),
        "latency_p99_us" => (Some(l.p99_us), "ditto-load".into()),
        _ => (None, "none".into()),
    }
}

/// The metric rows of a level from its runs.
pub fn level_rows(original: &[RunRecord], clone: &RunRecord) -> Vec<MetricRow> {
    LEVEL_METRICS
        .iter()
        .map(|def| {
            let runs: Vec<(Option<f64>, String)> =
                original.iter().map(|r| run_value(def, r)).collect();
            let (clone_value, clone_source) = run_value(def, clone);
            let source = runs.first().map(|(_, s)| s.clone()).unwrap_or(clone_source);
            MetricRow::new(
                def,
                source,
                runs.into_iter().map(|(v, _)| v).collect(),
                clone_value,
            )
        })
        .collect()
}

/// Syscall rows: every syscall at or above 0.001 calls per request in the original's first run or the
/// clone, busiest in the original first.
pub fn syscall_rows(original: &[RunRecord], clone: &RunRecord) -> Vec<MetricRow> {
    let by_name = |r: &RunRecord| {
        r.native
            .profile
            .as_ref()
            .map(|p| p.syscalls_by_name.clone())
    };
    let orig: Vec<_> = original.iter().map(by_name).collect();
    let cl = by_name(clone);
    let source = clone
        .native
        .profile
        .as_ref()
        .map(|p| p.collector.clone())
        .unwrap_or_else(|| "none".into());
    let mut names: BTreeSet<String> = BTreeSet::new();
    for m in orig.iter().take(1).flatten().chain(cl.iter()) {
        names.extend(
            m.iter()
                .filter(|(_, v)| **v >= 0.001)
                .map(|(k, _)| k.clone()),
        );
    }
    let value = |m: &Option<std::collections::BTreeMap<String, f64>>, name: &str| {
        m.as_ref().map(|m| m.get(name).copied().unwrap_or(0.0))
    };
    let mut rows: Vec<MetricRow> = names
        .iter()
        .map(|name| {
            let def = MetricDef {
                key: "syscall",
                label: "syscall",
                unit: "calls/request",
                group: Group::Os,
                format: metrics::Format::Number,
            };
            let mut row = MetricRow::new(
                &def,
                source.clone(),
                orig.iter().map(|m| value(m, name)).collect(),
                value(&cl, name),
            );
            row.key = format!("syscall:{name}");
            row.label = name.clone();
            row
        })
        .collect();
    rows.sort_by(|a, b| {
        b.original
            .unwrap_or(0.0)
            .total_cmp(&a.original.unwrap_or(0.0))
            .then(a.key.cmp(&b.key))
    });
    rows
}

/// The saturation comparison.
pub fn saturation_report(original: Vec<Saturation>, clone: Saturation) -> SaturationReport {
    let metric = MetricRow::new(
        &SATURATION,
        "ditto-load",
        original.iter().map(|s| Some(s.throughput)).collect(),
        Some(clone.throughput),
    );
    SaturationReport {
        metric,
        original,
        clone,
    }
}

/// Per-metric summary over levels (and the saturation row).
pub fn summarise(levels: &[LevelReport], saturation: Option<&SaturationReport>) -> Vec<SummaryRow> {
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let mut out: Vec<SummaryRow> = LEVEL_METRICS
        .iter()
        .map(|def| {
            let rows: Vec<&MetricRow> = levels
                .iter()
                .filter_map(|l| l.metrics.iter().find(|m| m.key == def.key))
                .collect();
            let errors: Vec<f64> = rows.iter().filter_map(|r| r.error).collect();
            let variations: Vec<f64> = rows.iter().filter_map(|r| r.original_variation).collect();
            SummaryRow {
                key: def.key.to_string(),
                label: def.label.to_string(),
                group: def.group,
                source: rows.first().map(|r| r.source.clone()).unwrap_or_default(),
                mean_error: mean(&errors),
                max_error: errors.iter().copied().reduce(f64::max),
                mean_variation: mean(&variations),
                levels_compared: errors.len(),
            }
        })
        .collect();
    if let Some(s) = saturation {
        out.push(SummaryRow {
            key: s.metric.key.clone(),
            label: s.metric.label.clone(),
            group: s.metric.group,
            source: s.metric.source.clone(),
            mean_error: s.metric.error,
            max_error: s.metric.error,
            mean_variation: s.metric.original_variation,
            levels_compared: usize::from(s.metric.error.is_some()),
        });
    }
    out
}

impl Report {
    /// Recomputes the summary from the levels and saturation.
    pub fn refresh_summary(&mut self) {
        self.summary = summarise(&self.levels, self.saturation.as_ref());
    }

    /// Reads a report, refusing another schema major.
    pub fn load(path: &Path) -> Result<Report, ValidateError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ValidateError::Io(format!("cannot read {}: {e}", path.display())))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| ValidateError::Io(format!("{}: not JSON: {e}", path.display())))?;
        let schema = value.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        if schema != SCHEMA {
            return Err(ValidateError::Io(format!(
                "{}: schema '{schema}', this ditto reads '{SCHEMA}': regenerate it with `ditto validate`",
                path.display()
            )));
        }
        serde_json::from_value(value)
            .map_err(|e| ValidateError::Io(format!("{}: {e}", path.display())))
    }

    /// Writes `report.json` and `index.html` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), ValidateError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| ValidateError::Io(format!("cannot create {}: {e}", dir.display())))?;
        let json = serde_json::to_string_pretty(self)
            .map_err(|e| ValidateError::Io(format!("cannot serialise the report: {e}")))?;
        write_atomic(&dir.join("report.json"), (json + "\n").as_bytes())?;
        write_atomic(
            &dir.join("index.html"),
            crate::dashboard::render(self)?.as_bytes(),
        )
    }
}

/// Writes through a temporary file and a rename, so a reader never sees half a file.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ValidateError> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| ValidateError::Io(format!("cannot write {}: {e}", path.display())))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::native::{LoadFigures, OsFigures, ProfileFigures};

    pub(crate) fn run(scale: f64, ipr: f64) -> RunRecord {
        RunRecord {
            native: NativeRun {
                load: LoadFigures {
                    offered_rate: 1000.0,
                    achieved_rate: 999.0,
                    requests: 5000,
                    kept_up: true,
                    kept_up_problem: None,
                    errors: 0,
                    mean_us: 40.0 * scale,
                    p50_us: 35.0 * scale,
                    p95_us: 60.0 * scale,
                    p99_us: 90.0 * scale,
                    max_us: 400.0,
                    cdf: vec![[0.0, 20.0], [50.0, 35.0 * scale], [100.0, 400.0]],
                },
                os: OsFigures {
                    measured: true,
                    cpu_user_us_per_request: 4.0 * scale,
                    cpu_sys_us_per_request: 20.0,
                    cpu_on_us_per_request: Some(24.0 * scale),
                    context_switches_per_request: 1.5,
                    disk_bytes_per_request: Some(0.0),
                },
                profile: Some(ProfileFigures {
                    collector: "bpftrace".into(),
                    requests: 5000,
                    syscalls_per_request: 3.0,
                    syscalls_by_name: [
                        ("read".to_string(), 1.0),
                        ("sendmsg".to_string(), 1.0 * scale),
                        ("epoll_wait".to_string(), 1.0),
                    ]
                    .into_iter()
                    .collect(),
                    network_bytes_in_per_request: 444.0,
                    network_bytes_out_per_request: 3736.0,
                    file_bytes_per_request: 0.0,
                    warnings: vec![],
                }),
                counters: None,
            },
            counters: Some(CounterFigures {
                source: "sim:cachegrind:epyc-host".into(),
                instructions_per_request: Some(ipr),
                l1d_miss_rate: Some(0.05 * scale),
                l1i_miss_rate: Some(0.01),
                branch_mispredict_rate: Some(0.02),
                l2_miss_rate: Some(0.3),
                llc_miss_rate: Some(0.1),
                requests: 500.0,
                ..CounterFigures::default()
            }),
            sim_runs: vec![],
        }
    }

    #[test]
    fn level_rows_compare_every_metric_with_sources() {
        let rows = level_rows(&[run(1.0, 3000.0), run(1.1, 3100.0)], &run(1.2, 3600.0));
        assert_eq!(rows.len(), LEVEL_METRICS.len());
        let get = |k: &str| rows.iter().find(|r| r.key == k).expect("row");
        let ipr = get("instructions_per_request");
        assert_eq!(ipr.source, "sim:cachegrind:epyc-host");
        assert!((ipr.error.unwrap() - 0.2).abs() < 1e-12);
        assert!((ipr.original_variation.unwrap() - 0.1 / 3.0).abs() < 1e-12);
        let ipc = get("ipc");
        assert_eq!(ipc.error, None);
        assert!(ipc.note.as_deref().unwrap_or("").starts_with("n/a"));
        assert_eq!(get("latency_p99_us").source, "ditto-load");
        assert_eq!(get("syscalls_per_request").source, "bpftrace");
        assert_eq!(get("cpu_sys_us_per_request").error, Some(0.0));
        let on_cpu = get("cpu_on_us_per_request");
        assert_eq!(on_cpu.source, "schedstat");
        assert!((on_cpu.error.unwrap() - 0.2).abs() < 1e-12);
    }

    #[test]
    fn syscall_rows_are_by_name_busiest_first() {
        let rows = syscall_rows(&[run(2.0, 1.0)], &run(1.0, 1.0));
        assert_eq!(rows[0].key, "syscall:sendmsg");
        assert_eq!(rows[0].original, Some(2.0));
        assert_eq!(rows[0].clone, Some(1.0));
        assert_eq!(rows[0].error, Some(0.5));
        assert_eq!(rows.len(), 3);
    }

    #[test]
    fn report_round_trips_through_json() {
        let original = vec![run(1.0, 3000.0), run(1.05, 3050.0)];
        let clone = run(1.2, 3300.0);
        let level = LevelReport {
            level: "medium".into(),
            load: LevelLoad {
                rate: 10000.0,
                connections: 8,
                arrival: "poisson".into(),
                duration_s: 5.0,
                warmup_s: 1.0,
            },
            sim_plan: None,
            metrics: level_rows(&original, &clone),
            syscalls: syscall_rows(&original, &clone),
            original,
            clone,
        };
        let sat = |t: f64| Saturation {
            throughput: t,
            saturated: true,
            points: vec![],
            stopped_because: "fell behind".into(),
        };
        let saturation = saturation_report(vec![sat(30000.0), sat(31000.0)], sat(27000.0));
        let mut report = Report {
            schema: SCHEMA.into(),
            tool_version: "0.1.0".into(),
            created_unix_s: 1.0,
            elapsed_s: 2.0,
            complete: true,
            original: Subject {
                name: "memcached".into(),
                spec: "targets/memcached.toml".into(),
                description: String::new(),
            },
            clone: CloneSubject {
                name: "memcached".into(),
                dir: "clones/memcached".into(),
                spec: "clones/memcached/target.toml".into(),
                seed: 1,
                knobs: serde_json::json!({"instructions": {"per_request_scale": 1.0}}),
            },
            counters: CountersInfo {
                backend: "sim".into(),
                source: "sim:cachegrind:epyc-host".into(),
                platform: Some(Platform::by_name_or_path("epyc-host").expect("platform")),
            },
            settings: Settings {
                levels: vec!["medium".into()],
                native_duration_s: 5.0,
                native_warmup_s: 1.0,
                original_runs: 2,
                seed: 1,
                collector: "auto".into(),
                sim: Some(SimSettings::default()),
                saturation: None,
            },
            levels: vec![level],
            saturation: Some(saturation),
            summary: vec![],
            tuning: None,
            warnings: vec![],
        };
        report.refresh_summary();
        let sat_row = report.summary.last().expect("saturation summary");
        assert_eq!(sat_row.key, "saturation_rps");
        assert!((sat_row.mean_error.unwrap() - 0.1).abs() < 1e-12);
        let dir = tempfile::tempdir().expect("tempdir");
        report.write(dir.path()).expect("write");
        let back = Report::load(&dir.path().join("report.json")).expect("load");
        assert_eq!(back, report);
        let html = std::fs::read_to_string(dir.path().join("index.html")).expect("html");
        assert!(html.contains("id=\"report-data\""));
        let mut bad: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap())
                .unwrap();
        bad["schema"] = "ditto-validation/2".into();
        std::fs::write(dir.path().join("bad.json"), bad.to_string()).unwrap();
        let err = Report::load(&dir.path().join("bad.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("regenerate"), "{err}");
    }
}
