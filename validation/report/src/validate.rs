//! The validation run: for each load level, the original (twice, for its run-to-run variation) and the
//! clone under the same load generator, arrival process, rate, connections and seed; CPU counters from
//! the chosen backend; then the saturation sweep. The report is rewritten after every level, so a run
//! stopped midway leaves what it measured (marked incomplete).
//!
//! Every target is started through `ditto-target`'s `RunningTarget`, stopped on every path, and
//! registered so the CLI's Ctrl-C handler kills whatever is running.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use ditto_load::Progress;
use ditto_measure::counters::SimRunRecord;
use ditto_measure::{
    CounterBackend, CounterFigures, PerfSession, RunOptions, SimPlan, SimSettings,
};
use ditto_profiler::CollectorChoice;
use ditto_target::{LaunchOptions, Level, ResolvedLevel, TargetSpec};

use crate::clone_dir::CloneDir;
use crate::native::{free_port, measure_native, NativeSettings};
use crate::report::{
    level_rows, saturation_report, syscall_rows, CloneSubject, CountersInfo, LevelLoad,
    LevelReport, Report, RunRecord, Settings, SimPlanInfo, Subject, SCHEMA,
};
use crate::saturation::{sweep, SweepSettings};
use crate::ValidateError;

/// Everything a validation run needs.
#[derive(Debug, Clone)]
pub struct ValidateOptions {
    pub original_spec_path: PathBuf,
    pub original: TargetSpec,
    pub clone: CloneDir,
    pub levels: Vec<Level>,
    pub backend: CounterBackend,
    pub sim: SimSettings,
    /// Measured seconds of each native load run.
    pub duration_s: f64,
    pub warmup_s: f64,
    /// Runs of the original per level (2 gives its run-to-run variation).
    pub original_runs: usize,
    /// The sweep, or `None` to skip saturation.
    pub saturation: Option<SweepSettings>,
    pub seed: u64,
    pub request_timeout: Duration,
    pub collector: CollectorChoice,
    pub out: PathBuf,
}

fn collector_name(c: CollectorChoice) -> &'static str {
    match c {
        CollectorChoice::Auto => "auto",
        CollectorChoice::Bpftrace => "bpftrace",
        CollectorChoice::Ptrace => "ptrace",
    }
}

/// A level of the original's spec with the run's durations.
pub fn resolve(spec: &TargetSpec, level: Level, duration_s: f64, warmup_s: f64) -> ResolvedLevel {
    let mut l = spec.load.resolve(level);
    l.duration_s = duration_s;
    l.warmup_s = warmup_s;
    l
}

/// CPU counter figures of `spec` at `level` with `backend` (in runs of their own).
#[allow(clippy::too_many_arguments)]
pub fn measure_counters(
    spec: &TargetSpec,
    level: &ResolvedLevel,
    backend: &CounterBackend,
    sim: &SimSettings,
    seed: u64,
    request_timeout: Duration,
    status: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&Progress),
) -> Result<(CounterFigures, Vec<SimRunRecord>), ValidateError> {
    let run = RunOptions {
        port: Some(free_port()?),
        seed,
        request_timeout,
    };
    match backend {
        CounterBackend::Sim(platform) => {
            let plan = SimPlan::for_level(platform, level, sim)?;
            let d = ditto_measure::measure_sim(spec, &plan, &run, status, progress)?;
            Ok((d.figures, d.runs))
        }
        CounterBackend::Perf => {
            let launch = LaunchOptions {
                port: run.port,
                ..LaunchOptions::default()
            };
            // Counters open after the warm-up (at least 0.1 s, so that the connections are up) so
            // it is not counted.
            let mut level = level.clone();
            level.warmup_s = level.warmup_s.max(0.1);
            let figures = ditto_measure::with_started_target(
                spec,
                &launch,
                status,
                |target, status| -> Result<CounterFigures, ValidateError> {
                    let (cfg, prepared) = ditto_measure::prepare_and_warm_up(
                        spec,
                        &level,
                        target.addr(),
                        &run,
                        status,
                        progress,
                    )?;
                    let pids = ditto_collect::procfs::process_tree(target.pid())
                        .unwrap_or_else(|_| vec![target.pid()]);
                    let mut perf = PerfSession::start(&pids)?;
                    let report = ditto_load::run_prepared(&cfg, &prepared, progress)?;
                    let totals = perf.read();
                    Ok(totals.figures(report.requests_completed as f64, perf.kernel_included()))
                },
            )?;
            Ok((figures, Vec::new()))
        }
    }
}

/// Runs the validation and writes `report.json` and `index.html` into `opts.out` (after every level,
/// and at the end).
pub fn validate(
    opts: &ValidateOptions,
    status: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&Progress),
) -> Result<Report, ValidateError> {
    if opts.original_runs == 0 {
        return Err(ValidateError::Settings(
            "--original-runs must be at least 1".into(),
        ));
    }
    if opts.levels.is_empty() {
        return Err(ValidateError::Settings(
            "--levels must name at least one level".into(),
        ));
    }
    if !(opts.duration_s.is_finite()
        && opts.duration_s > 0.0
        && opts.warmup_s.is_finite()
        && opts.warmup_s >= 0.0)
    {
        return Err(ValidateError::Settings(
            "--duration must be positive and --warmup zero or positive".into(),
        ));
    }
    opts.sim.check()?;
    let started = Instant::now();
    let created_unix_s = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let tuning = std::fs::read_to_string(opts.clone.history_path())
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let platform = match &opts.backend {
        CounterBackend::Sim(p) => Some(p.clone()),
        CounterBackend::Perf => None,
    };
    let mut report = Report {
        schema: SCHEMA.into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        created_unix_s,
        elapsed_s: 0.0,
        complete: false,
        original: Subject {
            name: opts.original.name.clone(),
            spec: opts.original_spec_path.display().to_string(),
            description: opts.original.description.clone(),
        },
        clone: CloneSubject {
            name: opts.clone.name().to_string(),
            dir: opts.clone.dir.display().to_string(),
            spec: opts.clone.spec_path.display().to_string(),
            seed: opts.clone.seed,
            knobs: serde_json::to_value(&opts.clone.knobs).unwrap_or(serde_json::Value::Null),
        },
        counters: CountersInfo {
            backend: opts.backend.name().into(),
            source: opts.backend.source(opts.sim.method),
            platform,
        },
        settings: Settings {
            levels: opts.levels.iter().map(|l| l.name().to_string()).collect(),
            native_duration_s: opts.duration_s,
            native_warmup_s: opts.warmup_s,
            original_runs: opts.original_runs,
            seed: opts.seed,
            collector: collector_name(opts.collector).into(),
            sim: matches!(opts.backend, CounterBackend::Sim(_)).then(|| opts.sim.clone()),
            saturation: opts.saturation.clone(),
        },
        levels: Vec::new(),
        saturation: None,
        summary: Vec::new(),
        tuning,
        warnings: Vec::new(),
    };
    if !opts.clone.dir.join("clone").is_file() {
        status("building the clone (make)");
        opts.clone.build()?;
    }
    let native = NativeSettings {
        run: RunOptions {
            port: None,
            seed: opts.seed,
            request_timeout: opts.request_timeout,
        },
        profile: true,
        collector: opts.collector,
        perf: matches!(opts.backend, CounterBackend::Perf),
    };
    let sim_steps = usize::from(matches!(opts.backend, CounterBackend::Sim(_)));
    let per_target = 1 + sim_steps;
    let total = opts.levels.len() * (opts.original_runs + 1) * per_target
        + opts
            .saturation
            .as_ref()
            .map(|_| opts.original_runs + 1)
            .unwrap_or(0);
    let mut step = 0usize;
    let mut next = |what: &str, status: &mut dyn FnMut(&str)| {
        step += 1;
        status(&format!("[{step}/{total}] {what}"));
    };

    // The clone under the original's traffic, at every level and in the sweep.
    let clone_spec = opts.clone.spec_with_traffic_of(&opts.original);
    for &level in &opts.levels {
        let resolved = resolve(&opts.original, level, opts.duration_s, opts.warmup_s);
        let plan = match &opts.backend {
            CounterBackend::Sim(p) => Some(SimPlan::for_level(p, &resolved, &opts.sim)?),
            CounterBackend::Perf => None,
        };
        // Original first, clone second, then the original's repeats: drift over the run shows up as
        // variation, not as clone error.
        let mut order: Vec<(bool, usize)> = vec![(true, 0), (false, 0)];
        order.extend((1..opts.original_runs).map(|i| (true, i)));
        let mut originals: Vec<Option<RunRecord>> = vec![None; opts.original_runs];
        let mut clone_run = None;
        for (is_original, i) in order {
            let (spec, who) = if is_original {
                (&opts.original, format!("original run {}", i + 1))
            } else {
                (&clone_spec, "clone".to_string())
            };
            next(&format!("{} load, {who}: native", level.name()), status);
            let n = measure_native(spec, &resolved, &native, status, progress)?;
            let (counters, sim_runs) = match &opts.backend {
                CounterBackend::Perf => (n.counters.clone(), Vec::new()),
                CounterBackend::Sim(_) => {
                    next(
                        &format!(
                            "{} load, {who}: {}",
                            level.name(),
                            opts.sim.method.simulator()
                        ),
                        status,
                    );
                    let (f, runs) = measure_counters(
                        spec,
                        &resolved,
                        &opts.backend,
                        &opts.sim,
                        opts.seed,
                        opts.request_timeout,
                        status,
                        progress,
                    )?;
                    (Some(f), runs)
                }
            };
            let record = RunRecord {
                native: n,
                counters,
                sim_runs,
            };
            if is_original {
                originals[i] = Some(record);
            } else {
                clone_run = Some(record);
            }
        }
        let originals: Vec<RunRecord> = originals.into_iter().flatten().collect();
        let Some(clone) = clone_run else {
            return Err(ValidateError::Settings(
                "internal: the clone was not measured".into(),
            ));
        };
        report.levels.push(LevelReport {
            level: level.name().into(),
            load: LevelLoad {
                rate: resolved.rate,
                connections: resolved.connections,
                arrival: resolved.arrival.as_str().into(),
                duration_s: resolved.duration_s,
                warmup_s: resolved.warmup_s,
            },
            sim_plan: plan.as_ref().map(|p| {
                let (low_rate, high_rate) = p.rates();
                SimPlanInfo {
                    method: Some(p.method.name().into()),
                    rate: p.rate,
                    low_rate,
                    high_rate,
                    duration_s: p.duration_s,
                    connections: p.connections,
                    with_l2: p.with_l2,
                }
            }),
            metrics: level_rows(&originals, &clone),
            syscalls: syscall_rows(&originals, &clone),
            original: originals,
            clone,
        });
        report.refresh_summary();
        report.elapsed_s = started.elapsed().as_secs_f64();
        report.write(&opts.out)?;
        status(&format!(
            "{} load done; wrote {}",
            level.name(),
            opts.out.join("report.json").display()
        ));
    }

    if let Some(s) = &opts.saturation {
        let high = opts.original.load.resolve(Level::High);
        let run = RunOptions {
            port: None,
            seed: opts.seed,
            request_timeout: opts.request_timeout,
        };
        let mut originals = Vec::new();
        for i in 0..opts.original_runs {
            next(&format!("saturation sweep, original run {}", i + 1), status);
            originals.push(sweep(&opts.original, &high, s, &run, status, progress)?);
        }
        next("saturation sweep, clone", status);
        let clone = sweep(&clone_spec, &high, s, &run, status, progress)?;
        report.saturation = Some(saturation_report(originals, clone));
    }
    for l in &report.levels {
        for (who, r) in l
            .original
            .iter()
            .enumerate()
            .map(|(i, r)| (format!("original run {}", i + 1), r))
            .chain(std::iter::once(("clone".to_string(), &l.clone)))
        {
            if !r.native.load.kept_up {
                report.warnings.push(format!(
                    "{} load, {who}: the load generator did not keep up ({}); latency there includes queueing",
                    l.level,
                    r.native.load.kept_up_problem.clone().unwrap_or_default()
                ));
            }
            if let Some(p) = &r.native.profile {
                for w in &p.warnings {
                    report
                        .warnings
                        .push(format!("{} load, {who}: profiler: {w}", l.level));
                }
            }
        }
    }
    report.refresh_summary();
    report.complete = true;
    report.elapsed_s = started.elapsed().as_secs_f64();
    report.write(&opts.out)?;
    Ok(report)
}

/// The real tuning backend: measures with a counter backend and regenerates the clone directory.
pub struct CloneTuneBackend {
    pub original: TargetSpec,
    pub clone: CloneDir,
    pub level: ResolvedLevel,
    pub backend: CounterBackend,
    pub sim: SimSettings,
    pub seed: u64,
    pub request_timeout: Duration,
}

impl CloneTuneBackend {
    /// Counter figures of one target at this tuner's level.
    fn measure(
        &self,
        spec: &TargetSpec,
        status: &mut dyn FnMut(&str),
    ) -> Result<CounterFigures, ValidateError> {
        let (f, _) = measure_counters(
            spec,
            &self.level,
            &self.backend,
            &self.sim,
            self.seed,
            self.request_timeout,
            status,
            &mut |_| {},
        )?;
        Ok(f)
    }
}

impl crate::tune::TuneBackend for CloneTuneBackend {
    fn has_background_body(&self) -> bool {
        self.clone.has_background_body()
    }

    fn has_first_touch_stream(&self, knobs: &ditto_generator::Knobs) -> bool {
        self.clone.has_first_touch_stream(knobs)
    }

    fn has_top_reuse_class(&self, knobs: &ditto_generator::Knobs) -> bool {
        self.clone.has_top_reuse_class(knobs)
    }

    fn second_level_mid_from(&self, knobs: &ditto_generator::Knobs) -> Option<u64> {
        // The perf backend tunes no L2 miss rate.
        let CounterBackend::Sim(platform) = &self.backend else {
            return None;
        };
        self.clone.second_level_mid_from(platform.l1d.size, knobs)
    }

    fn code_elasticity(&self) -> Option<f64> {
        // The perf backend does not say the L1i's size.
        let CounterBackend::Sim(platform) = &self.backend else {
            return None;
        };
        self.clone.code_elasticity(platform.l1i.size)
    }

    fn data_elasticity(&self) -> Option<f64> {
        // The perf backend does not say the L1d's size.
        let CounterBackend::Sim(platform) = &self.backend else {
            return None;
        };
        self.clone.data_elasticity(platform.l1d.size)
    }

    fn measure_original(
        &mut self,
        status: &mut dyn FnMut(&str),
    ) -> Result<CounterFigures, ValidateError> {
        self.measure(&self.original, status)
    }

    fn measure_clone(
        &mut self,
        status: &mut dyn FnMut(&str),
    ) -> Result<CounterFigures, ValidateError> {
        if !self.clone.dir.join("clone").is_file() {
            self.clone.build()?;
        }
        let spec = self.clone.spec_with_traffic_of(&self.original);
        self.measure(&spec, status)
    }

    fn regenerate(
        &mut self,
        knobs: &ditto_generator::Knobs,
        seed: u64,
        status: &mut dyn FnMut(&str),
    ) -> Result<(), ValidateError> {
        status(&format!(
            "regenerating {} and building it",
            self.clone.dir.display()
        ));
        self.clone.regenerate(knobs, seed)
    }

    fn seed(&self) -> u64 {
        self.clone.seed
    }

    fn save(&mut self, history: &crate::tune::TuneHistory) -> Result<(), ValidateError> {
        let text = serde_json::to_string_pretty(history)
            .map_err(|e| ValidateError::Io(format!("cannot serialise the history: {e}")))?;
        let path = self.clone.history_path();
        std::fs::write(&path, text + "\n")
            .map_err(|e| ValidateError::Io(format!("cannot write {}: {e}", path.display())))
    }
}
