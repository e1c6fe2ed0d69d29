//! Short runs of the real thing: `validate` and `tune` on memcached and a clone generated from the
//! bundled memcached profile, with a small workload, one level and few simulated requests. They check the
//! plumbing (every metric measured or marked n/a, errors and variation computed, files written, the
//! clone regenerated, nothing left running), not accuracy; accuracy is the long validation runs'
//! business (docs/validation.md).
//!
//! A missing tool (memcached, valgrind, cc, make) fails the test with the package to install.

mod common;

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use common::{repo, require};
use ditto_load::{MemcachedWorkload, Workload};
use ditto_measure::{CounterBackend, Platform, SimMethod, SimSettings};
use ditto_profiler::CollectorChoice;
use ditto_target::{Level, TargetSpec};
use ditto_validate::saturation::SweepSettings;
use ditto_validate::tune::{default_tuned_metrics, TuneHistory, TuneSettings, HISTORY_SCHEMA};
use ditto_validate::validate::{resolve, CloneTuneBackend};
use ditto_validate::{CloneDir, Report, ValidateOptions};

/// The tests start servers on the same machine; one at a time keeps their measurements apart.
static SERIAL: Mutex<()> = Mutex::new(());

fn small_workload() -> Workload {
    Workload::Memcached(MemcachedWorkload {
        keys: 300,
        key_size: 30,
        value_size: 512,
        get_fraction: 0.9,
    })
}

/// The bundled memcached spec with a small workload, and a fresh clone of the bundled profile.
fn setup(dir: &Path) -> (TargetSpec, CloneDir) {
    require("memcached", "memcached");
    require("valgrind", "valgrind");
    require("cc", "build-essential");
    require("make", "build-essential");
    let spec_path = repo().join("targets/memcached.toml");
    let mut original = TargetSpec::load(&spec_path).expect("bundled spec");
    original.workload = small_workload();
    let clone_dir = dir.join("memcached");
    ditto_generator::generate(&ditto_generator::Options {
        profile: repo().join("profiles/memcached.json"),
        out: clone_dir.clone(),
        seed: 3,
        knobs: ditto_generator::Knobs::default(),
        skeleton: None,
        empty_body: false,
    })
    .expect("clone generated");
    let mut clone = CloneDir::open(&clone_dir).expect("clone opens");
    assert_eq!(clone.seed, 3);
    clone.spec.workload = small_workload();
    clone.build().expect("clone builds");
    (original, clone)
}

fn sim_settings() -> SimSettings {
    SimSettings {
        min_requests: 300,
        min_duration_s: 2.0,
        max_duration_s: 3.0,
        with_l2: false,
        ..SimSettings::default()
    }
}

/// Children of this test process that are still alive (zombies excluded).
fn live_children() -> Vec<u32> {
    let me = std::process::id();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rsplit(')').next() else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 1 && fields[0] != "Z" && fields[1].parse::<u32>().ok() == Some(me) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn validate_one_level_writes_a_complete_report_and_leaves_nothing_running() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let (original, clone) = setup(dir.path());
    let out = dir.path().join("report");
    let platform = Platform::by_name_or_path("epyc-host").expect("platform");
    let opts = ValidateOptions {
        original_spec_path: repo().join("targets/memcached.toml"),
        original,
        clone,
        levels: vec![Level::Low],
        backend: CounterBackend::Sim(platform),
        sim: sim_settings(),
        duration_s: 2.0,
        warmup_s: 0.5,
        original_runs: 2,
        saturation: Some(SweepSettings {
            start_rate: 2000.0,
            factor: 4.0,
            step_s: 1.0,
            warmup_s: 0.2,
            max_steps: 2,
            refine_steps: 1,
            connections: 8,
        }),
        seed: 1,
        request_timeout: Duration::from_secs(2),
        collector: CollectorChoice::Auto,
        out: out.clone(),
    };
    let mut lines = Vec::new();
    let report = ditto_validate::validate(&opts, &mut |m| lines.push(m.to_string()), &mut |_| {})
        .expect("validation runs");
    assert!(
        live_children().is_empty(),
        "processes left running: {:?}",
        live_children()
    );
    assert!(
        lines.iter().any(|l| l.starts_with("[1/")),
        "progress is shown: {lines:?}"
    );

    assert!(report.complete);
    assert_eq!(report.counters.source, "sim:callgrind:epyc-host");
    assert_eq!(report.levels.len(), 1);
    let level = &report.levels[0];
    assert_eq!(
        level.sim_plan.as_ref().and_then(|p| p.method.as_deref()),
        Some("window"),
        "the default simulated method is recorded"
    );
    assert_eq!(level.original.len(), 2);
    let row = |k: &str| {
        level
            .metrics
            .iter()
            .find(|m| m.key == k)
            .expect("metric row")
    };
    for k in [
        "instructions_per_request",
        "l1i_miss_rate",
        "l1d_miss_rate",
        "branch_mispredict_rate",
        "llc_miss_rate",
    ] {
        let r = row(k);
        assert!(
            r.original.is_some() && r.clone.is_some(),
            "{k} measured: {r:?}"
        );
        assert_eq!(r.source, "sim:callgrind:epyc-host");
        // A relative variation is undefined when the first run is zero: a short run's LLC
        // differential can come out negative (noise over a warm cache) and is clamped to 0.
        assert!(
            r.original_variation.is_some() || r.original == Some(0.0),
            "{k} has a run-to-run variation: {r:?}"
        );
    }
    assert!(row("instructions_per_request").original.unwrap_or(0.0) > 100.0);
    assert_eq!(row("ipc").original, None, "IPC is n/a under simulation");
    assert!(row("ipc").note.as_deref().unwrap_or("").starts_with("n/a"));
    assert_eq!(row("l2_miss_rate").clone, None, "no L2 runs asked for");
    for k in ["latency_p50_us", "latency_p95_us", "latency_p99_us"] {
        let r = row(k);
        assert!(
            r.original.unwrap_or(0.0) > 0.0 && r.clone.unwrap_or(0.0) > 0.0,
            "{k}: {r:?}"
        );
        assert!(r.error.is_some() && r.original_variation.is_some());
    }
    // Same workload, same responses: network bytes in agree closely.
    let bytes_in = row("network_bytes_in_per_request");
    assert!(
        bytes_in.error.expect("bytes in compared") < 0.05,
        "{bytes_in:?}"
    );
    assert!(
        level.syscalls.iter().any(|s| s.key == "syscall:epoll_wait"),
        "{:?}",
        level.syscalls
    );
    let sat = report.saturation.as_ref().expect("saturation measured");
    assert_eq!(sat.original.len(), 2);
    assert!(sat.metric.original.unwrap_or(0.0) > 1000.0);
    assert!(!report.summary.is_empty());

    let back = Report::load(&out.join("report.json")).expect("report.json reads back");
    assert_eq!(back, report);
    let html = std::fs::read_to_string(out.join("index.html")).expect("dashboard written");
    assert!(html.contains("report-data") && html.contains("plot-metrics"));
}

#[test]
fn tune_regenerates_the_clone_and_records_every_iteration() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let (original, clone) = setup(dir.path());
    let clone_dir = clone.dir.clone();
    let initial = clone.knobs.clone();
    let platform = Platform::by_name_or_path("epyc-host").expect("platform");
    let backend = CounterBackend::Sim(platform);
    let settings = TuneSettings {
        // Unreachable on purpose: the loop must run to its cap and regenerate in between.
        tolerance: 1e-6,
        max_iterations: 2,
        tuned_metrics: default_tuned_metrics(false, false),
        // Two runs: the reference is their mean and each metric's tolerance is recorded.
        original_runs: 2,
        // Then the best knobs with the next seed.
        seed_trials: 1,
    };
    let history = TuneHistory {
        schema: HISTORY_SCHEMA.into(),
        clone: clone.name().to_string(),
        clone_dir: clone_dir.display().to_string(),
        target: "targets/memcached.toml".into(),
        level: "low".into(),
        counters: backend.source(SimMethod::Window),
        tolerance: 0.0,
        max_iterations: 0,
        tuned_metrics: vec![],
        original: None,
        original_runs: vec![],
        tolerances: Default::default(),
        iterations: vec![],
        converged: false,
        best_iteration: None,
        final_knobs: None,
        seed: None,
        final_seed: None,
        stop_reason: String::new(),
        complete: false,
    };
    let mut b = CloneTuneBackend {
        level: resolve(&original, Level::Low, 2.0, 0.5),
        original,
        clone,
        backend,
        sim: sim_settings(),
        seed: 1,
        request_timeout: Duration::from_secs(2),
    };
    let h = ditto_validate::tune::tune(&settings, initial.clone(), history, &mut b, &mut |_| {})
        .expect("tuning runs");
    assert!(
        live_children().is_empty(),
        "processes left running: {:?}",
        live_children()
    );
    assert_eq!(
        h.iterations.len(),
        3,
        "two knob iterations and a seed trial; stopped: {}",
        h.stop_reason
    );
    assert_eq!(h.seed, Some(3));
    assert_eq!(h.iterations[0].seed, None);
    assert_eq!(
        h.iterations[2].seed,
        Some(4),
        "the trial ran with the next seed"
    );
    assert!(
        h.stop_reason.ends_with("then 1 seed trial"),
        "{}",
        h.stop_reason
    );
    assert!(!h.converged && h.complete);
    assert_eq!(h.original_runs.len(), 2, "both runs of the original kept");
    assert_eq!(h.tolerances.len(), h.tuned_metrics.len());
    assert!(h.tolerances.values().all(|t| *t >= 1e-6));
    let first = &h.iterations[0];
    assert_eq!(first.knobs, initial);
    assert!(
        first.adjustments.iter().any(|a| a.to != a.from),
        "{:?}",
        first.adjustments
    );
    assert_ne!(
        h.iterations[1].knobs, initial,
        "the second iteration ran with new knobs"
    );
    // The history is in the clone directory, and the clone holds the best iteration's knobs.
    let saved: TuneHistory = serde_json::from_str(
        &std::fs::read_to_string(clone_dir.join("tune-history.json")).expect("history written"),
    )
    .expect("history parses");
    assert_eq!(saved, h);
    let best = h.final_knobs.as_ref().expect("final knobs");
    let now = CloneDir::open(&clone_dir).expect("clone still opens");
    assert_eq!(&now.knobs, best);
    let best_iteration = &h.iterations[h.best_iteration.expect("best") - 1];
    assert_eq!(h.final_seed, Some(best_iteration.seed.unwrap_or(3)));
    assert_eq!(
        Some(now.seed),
        h.final_seed,
        "the clone is left with the best iteration's seed"
    );
    assert!(
        clone_dir.join("clone").is_file(),
        "the regenerated clone is built"
    );
}

#[test]
fn interrupting_a_validation_stops_every_target() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let (original, clone) = setup(dir.path());
    let platform = Platform::by_name_or_path("epyc-host").expect("platform");
    let opts = ValidateOptions {
        original_spec_path: repo().join("targets/memcached.toml"),
        original,
        clone,
        levels: vec![Level::Low],
        backend: CounterBackend::Sim(platform),
        sim: sim_settings(),
        duration_s: 8.0,
        warmup_s: 0.0,
        original_runs: 1,
        saturation: None,
        seed: 1,
        request_timeout: Duration::from_secs(2),
        collector: CollectorChoice::Auto,
        out: dir.path().join("report"),
    };
    // What the CLI's Ctrl-C handler does: kill every registered target while the run is midway.
    let killer = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(3));
        ditto_target::kill_all_running();
    });
    let result = ditto_validate::validate(&opts, &mut |_| {}, &mut |_| {});
    killer.join().expect("killer");
    assert!(
        result.is_err(),
        "the run cannot finish once its target is killed"
    );
    // Give the reaper a moment, then nothing the run started may be alive.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        live_children().is_empty(),
        "processes left running: {:?}",
        live_children()
    );
}
