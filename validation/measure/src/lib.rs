//! Measuring a target: start it from its spec, warm it, drive a load level, stop it, and report what was
//! measured — natively (throughput and latency from `ditto-load`, on-CPU time from schedstat) or under the
//! simulated counter backend
//! (cachegrind: instructions, cache and branch behaviour per request).
//!
//! Design trade-off: native and simulated runs are separate runs. Under Valgrind a server is 30–60× slower,
//! so its latency means nothing and it can only take a fraction of the native rate; mixing the two in one
//! run would distort both. Simulated figures are per request and rates, which do not depend on speed, so
//! they are measured at a low rate and compared with other simulated figures only. Every number in a
//! [`Measurement`] says which backend produced it.

pub mod cachegrind;
pub mod callgrind;
pub mod counters;
pub mod platform;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use ditto_collect::procfs::{self, SnapshotOptions};
use ditto_load::{LoadConfig, LoadError, LoadReport, Progress, WarmReport};
use ditto_target::{LaunchOptions, ResolvedLevel, RunningTarget, SpecError, TargetSpec};
use serde::Serialize;

pub use cachegrind::{CachegrindTotals, SimRates};
pub use counters::{
    measure_sim, BackendChoice, CounterBackend, CounterFigures, PerfSession, SimDifferential,
    SimMethod, SimPlan, SimSettings,
};
pub use platform::{CacheGeometry, Platform};

#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error(transparent)]
    Target(#[from] SpecError),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("cannot read {}: {cause}", path.display())]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("platform file {}: {message}", path.display())]
    Platform { path: PathBuf, message: String },
    #[error("cachegrind output {}: {message}", path.display())]
    CachegrindOutput { path: PathBuf, message: String },
    #[error("simulated run: {0}")]
    Differential(String),
    #[error("counters: {0}")]
    Counters(String),
    #[error("target '{name}' died during the load run ({status}); its last output:\n{log_tail}")]
    TargetDied {
        name: String,
        status: String,
        log_tail: String,
    },
}

/// Settings of one run besides the spec and the level.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub port: Option<u16>,
    pub seed: u64,
    pub request_timeout: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            port: None,
            seed: 1,
            request_timeout: Duration::from_secs(2),
        }
    }
}

/// The load configuration a spec's level asks for, against `addr`.
pub fn load_config(
    spec: &TargetSpec,
    level: &ResolvedLevel,
    addr: SocketAddr,
    opts: &RunOptions,
) -> LoadConfig {
    let mut cfg = LoadConfig::new(addr, spec.workload.clone(), level.rate);
    cfg.connections = level.connections;
    cfg.arrival = level.arrival;
    cfg.warmup = Duration::from_secs_f64(level.warmup_s);
    cfg.duration = Duration::from_secs_f64(level.duration_s);
    cfg.seed = opts.seed;
    cfg.request_timeout = opts.request_timeout;
    cfg
}

/// Starts the target, warms it if its spec says so, and returns it running.
pub fn start_warm(
    spec: &TargetSpec,
    launch: &LaunchOptions,
    status: &mut dyn FnMut(&str),
) -> Result<(RunningTarget, Option<WarmReport>), MeasureError> {
    status(&format!("starting {}", spec.name));
    let target = RunningTarget::start(spec, launch)?;
    let warm = if spec.warm.enabled {
        status(&format!(
            "warming {} (pid {}) on {}",
            spec.name,
            target.pid(),
            target.addr()
        ));
        Some(ditto_load::warm(target.addr(), &spec.workload, false)?)
    } else {
        None
    };
    // Under a Valgrind wrapper the server runs tens of times slower: those runs have warm-ups of
    // their own, counted in requests (the body trace's, the simulated windows').
    if spec.warm.steady_requests > 0 && launch.wrapper.is_empty() {
        let level = spec.load.resolve(ditto_target::Level::Medium);
        status(&format!(
            "steady-state warm-up: {} requests at {} req/s, not measured",
            spec.warm.steady_requests, level.rate
        ));
        let mut cfg = LoadConfig::new(target.addr(), spec.workload.clone(), level.rate);
        cfg.connections = level.connections;
        cfg.arrival = level.arrival;
        cfg.warmup = Duration::ZERO;
        cfg.max_requests = Some(spec.warm.steady_requests);
        cfg.duration =
            Duration::from_secs_f64(2.0 * spec.warm.steady_requests as f64 / level.rate + 5.0);
        let report = ditto_load::run(&cfg, &mut |_| {})?;
        if report.requests_completed == 0 {
            return Err(MeasureError::TargetDied {
                name: spec.name.clone(),
                status: "answered none of the steady-state warm-up's requests".into(),
                log_tail: target.log_tail(),
            });
        }
    }
    Ok((target, warm))
}

/// Prepares the load of `level` against `addr` and runs its warm-up as a load run of its own, so that
/// what is read around the measured run (CPU time, counters) is the measured requests' alone. Returns
/// the measured run's configuration (no warm-up) and the prepared protocol state.
pub fn prepare_and_warm_up(
    spec: &TargetSpec,
    level: &ResolvedLevel,
    addr: SocketAddr,
    opts: &RunOptions,
    status: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&Progress),
) -> Result<(LoadConfig, ditto_load::Prepared), MeasureError> {
    let mut cfg = load_config(spec, level, addr, opts);
    cfg.warmup = Duration::ZERO;
    let prepared = ditto_load::prepare(&cfg, progress)?;
    if level.warmup_s > 0.0 {
        let mut warm = cfg.clone();
        warm.duration = Duration::from_secs_f64(level.warmup_s);
        status(&format!(
            "warm-up: {:.1} s at {} req/s",
            level.warmup_s, level.rate
        ));
        ditto_load::run_prepared(&warm, &prepared, &mut |_| {})?;
    }
    Ok((cfg, prepared))
}

/// What one native run measured.
#[derive(Debug, Clone, Serialize)]
pub struct NativeMeasurement {
    /// Throughput and latency (source: ditto-load).
    pub load: LoadReport,
    /// Time the target's threads spent on a CPU per completed request over the measured period,
    /// user and system together (source: schedstat). `None` where /proc or schedstat could not be
    /// read.
    pub on_cpu_us_per_request: Option<f64>,
}

/// One native run: start, warm, warm-up load, measured load at `level`, stop. The warm-up runs as a
/// load run of its own so that the CPU time read around the measured run is the measured requests'.
pub fn run_native(
    spec: &TargetSpec,
    level: &ResolvedLevel,
    opts: &RunOptions,
    status: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&Progress),
) -> Result<NativeMeasurement, MeasureError> {
    let launch = LaunchOptions {
        port: opts.port,
        ..LaunchOptions::default()
    };
    with_started_target(spec, &launch, status, |target, status| {
        measure_running(target, spec, level, opts, status, progress)
    })
}

/// Starts and warms `spec`, runs `work` on it, and stops it whether `work` succeeded or not; a failure
/// of `work` is the one reported.
pub fn with_started_target<T, E: From<MeasureError>>(
    spec: &TargetSpec,
    launch: &LaunchOptions,
    status: &mut dyn FnMut(&str),
    work: impl FnOnce(&mut RunningTarget, &mut dyn FnMut(&str)) -> Result<T, E>,
) -> Result<T, E> {
    let (mut target, _warm) = start_warm(spec, launch, status)?;
    let result = work(&mut target, status);
    let stopped = target.stop(Duration::from_secs(10));
    let value = result?;
    stopped.map_err(MeasureError::from)?;
    Ok(value)
}

fn measure_running(
    target: &mut RunningTarget,
    spec: &TargetSpec,
    level: &ResolvedLevel,
    opts: &RunOptions,
    status: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&Progress),
) -> Result<NativeMeasurement, MeasureError> {
    let (cfg, prepared) = prepare_and_warm_up(spec, level, target.addr(), opts, status, progress)?;
    let pids = procfs::process_tree(target.pid()).unwrap_or_else(|_| vec![target.pid()]);
    let snapshot = || procfs::snapshot_with(&pids, &SnapshotOptions::counters_only()).ok();
    status(&format!(
        "loading {} at {} req/s over {} connections for {} s",
        spec.name, level.rate, level.connections, level.duration_s
    ));
    let before = snapshot();
    let report = ditto_load::run_prepared(&cfg, &prepared, progress);
    let after = snapshot();
    check_alive(target, &spec.name)?;
    let load = report?;
    let on_cpu_us_per_request = match (before, after) {
        (Some(b), Some(a)) => b.delta(&a).on_cpu_us_per_request(load.requests_completed),
        _ => None,
    };
    Ok(NativeMeasurement {
        load,
        on_cpu_us_per_request,
    })
}

pub(crate) fn check_alive(target: &mut RunningTarget, name: &str) -> Result<(), MeasureError> {
    match target.try_exit_status() {
        Some(status) => Err(MeasureError::TargetDied {
            name: name.to_string(),
            status: status.to_string(),
            log_tail: target.log_tail(),
        }),
        None => Ok(()),
    }
}

/// How to drive a target under the simulator for `ditto compare --sim`.
#[derive(Debug, Clone)]
pub struct SimOptions {
    pub platform: Platform,
    /// Offered rate under simulation; the server runs tens of times slower than natively.
    pub rate: f64,
    /// Requests the measured window offers (it lasts `requests / rate` seconds).
    pub requests: u64,
    pub connections: usize,
    /// Also run a window with the platform's L2 as cachegrind's LL, for the L2 and LLC miss rates
    /// ([`SimMeasurement::figures`]) as `ditto tune` and `ditto validate` measure them.
    pub with_l2: bool,
}

/// What a simulated measurement found, with the raw totals of both windows.
#[derive(Debug, Clone, Serialize)]
pub struct SimMeasurement {
    /// Always `"callgrind"`: the counter backend that produced these figures.
    pub source: &'static str,
    pub platform: String,
    /// Per request: (loaded − idle) / requests answered in the loaded window.
    pub rates: SimRates,
    pub loaded_window: SimRun,
    /// A window as long as the loaded one with no load: the work the server does per second.
    pub idle_window: SimRun,
    /// With [`SimOptions::with_l2`]: the figures of both geometries' windows, L2 and LLC miss rates
    /// included, derived as `ditto tune` derives them (`counters::sim_figures`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub figures: Option<counters::CounterFigures>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SimRun {
    pub requests_completed: u64,
    pub achieved_rate: f64,
    pub totals: CachegrindTotals,
}

/// Per-request simulated counters of one callgrind window, as `ditto validate` measures them
/// (`counters::SimMethod::Window`): the server is started and warmed, 1 s of warm-up load runs, its
/// counters are zeroed, `requests` are offered at `rate` and the counters dumped, then an idle
/// window as long is taken and subtracted. It used to difference whole cachegrind runs of N and 2N
/// requests, where start-up and per-second work do not cancel: one Pix optimized clone measured
/// 0.0822 and 0.0915 mispredictions per branch in two such runs (docs/validation.md, "The
/// simulated window").
pub fn run_sim(
    spec: &TargetSpec,
    sim: &SimOptions,
    opts: &RunOptions,
    status: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&Progress),
) -> Result<SimMeasurement, MeasureError> {
    let plan = counters::SimPlan {
        platform: sim.platform.clone(),
        method: counters::SimMethod::Window,
        rate: sim.rate,
        duration_s: sim.requests as f64 / sim.rate,
        connections: sim.connections,
        with_l2: sim.with_l2,
    };
    status(&format!(
        "loading {} under callgrind ({}): {} requests at {} req/s",
        spec.name, sim.platform.name, sim.requests, sim.rate
    ));
    let (idle, loaded, figures) = if sim.with_l2 {
        // One window per geometry; the rates below are the LLC-as-LL window's, as without the L2.
        let measured = counters::measure_sim(spec, &plan, opts, status, progress)?;
        let mut llc = measured.runs.iter().filter(|r| r.ll_as == "llc");
        let (Some(idle), Some(loaded)) = (llc.next().cloned(), llc.next().cloned()) else {
            return Err(MeasureError::Differential(
                "the simulated windows lack the LLC geometry's idle and loaded runs".into(),
            ));
        };
        (idle, loaded, Some(measured.figures))
    } else {
        let [idle, loaded] = counters::measure_window(spec, &plan, opts, status, progress)?;
        (idle, loaded, None)
    };
    let rates = SimRates::from_totals(
        &loaded.totals.minus(&idle.totals),
        loaded.requests_completed as f64,
    )?;
    let window = |r: counters::SimRunRecord| SimRun {
        requests_completed: r.requests_completed,
        achieved_rate: r.requests_completed as f64 / r.duration_s.max(f64::MIN_POSITIVE),
        totals: r.totals,
    };
    Ok(SimMeasurement {
        source: counters::SimMethod::Window.simulator(),
        platform: sim.platform.name.clone(),
        rates,
        loaded_window: window(loaded),
        idle_window: window(idle),
        figures,
    })
}
