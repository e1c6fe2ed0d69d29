//! One native measurement of a target at one load level: latency and OS figures from an unprofiled
//! load run, then syscalls and bytes from an attach-profiled load run on the same running target.
//!
//! Why two load runs per start: the attach profiler (bpftrace on every syscall) raises memcached's p50
//! by 76–91% and its CPU per request by ~70% (validation/bench/README.md). Latency, CPU time and context
//! switches are therefore taken without it, from /proc deltas around a plain `ditto-load` run; the
//! profiler's run contributes only what it counts exactly and what its overhead does not change: calls
//! per request by syscall, and bytes. Hardware counters (perf backend) are read around the plain run.

use std::net::TcpListener;
use std::time::Duration;

use ditto_collect::procfs::{self, SnapshotOptions};
use ditto_load::{LoadReport, Progress};
use ditto_measure::{CounterFigures, PerfSession, RunOptions};
use ditto_profiler::{AttachLoad, AttachOptions, CollectorChoice};
use ditto_target::{LaunchOptions, ResolvedLevel, RunningTarget, TargetSpec};
use serde::{Deserialize, Serialize};

use crate::ValidateError;

/// Settings shared by every native run.
#[derive(Debug, Clone)]
pub struct NativeSettings {
    pub run: RunOptions,
    /// Also profile with the attach profiler (syscalls, bytes).
    pub profile: bool,
    pub collector: CollectorChoice,
    /// Count hardware events with perf around the plain run.
    pub perf: bool,
}

/// Latency and throughput of a load run, with the distribution for CDF plots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadFigures {
    pub offered_rate: f64,
    pub achieved_rate: f64,
    pub requests: u64,
    pub kept_up: bool,
    pub kept_up_problem: Option<String>,
    pub errors: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// `[percentile (0–100), latency µs]` at HdrHistogram's percentile ticks.
    pub cdf: Vec<[f64; 2]>,
}

impl LoadFigures {
    pub fn from_report(r: &LoadReport) -> LoadFigures {
        let h = &r.latency_histogram;
        let p95_us = if h.is_empty() {
            0.0
        } else {
            h.value_at_quantile(0.95) as f64 / 1000.0
        };
        LoadFigures {
            offered_rate: r.offered_rate,
            achieved_rate: r.achieved_rate,
            requests: r.requests_completed,
            kept_up: r.kept_up,
            kept_up_problem: r.kept_up_problem.clone(),
            errors: r.outcomes.errors_total,
            mean_us: r.latency_us.mean,
            p50_us: r.latency_us.p50,
            p95_us,
            p99_us: r.latency_us.p99,
            max_us: r.latency_us.max,
            cdf: thin_cdf(
                r.latency_percentiles
                    .iter()
                    .map(|p| [p.percentile, p.latency_us])
                    .collect(),
            ),
        }
    }
}

/// Keeps a CDF small enough to embed: at most ~64 points, always the first and last.
fn thin_cdf(points: Vec<[f64; 2]>) -> Vec<[f64; 2]> {
    const MAX: usize = 64;
    if points.len() <= MAX {
        return points;
    }
    let step = points.len() as f64 / (MAX - 1) as f64;
    let mut out: Vec<[f64; 2]> = (0..MAX - 1)
        .map(|i| points[(i as f64 * step) as usize])
        .collect();
    if let Some(last) = points.last() {
        out.push(*last);
    }
    out
}

/// Per-request OS figures from /proc around the plain run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OsFigures {
    /// False when /proc could not be read around the run; the figures are then not measured.
    #[serde(default = "yes")]
    pub measured: bool,
    pub cpu_user_us_per_request: f64,
    pub cpu_sys_us_per_request: f64,
    /// Time on a CPU (user and system) summed over threads, from schedstat: nanosecond accounting,
    /// where the user/system split above is sampled at the clock tick (a 5 s run of a server that
    /// keeps under half a CPU busy gets a few dozen ticks, so that split repeats only within
    /// 10–60 %). `None` where schedstat is off (no CONFIG_SCHED_INFO) or in reports written before it.
    #[serde(default)]
    pub cpu_on_us_per_request: Option<f64>,
    pub context_switches_per_request: f64,
    /// Bytes the storage layer read and wrote (`/proc/PID/io` read_bytes + write_bytes).
    pub disk_bytes_per_request: Option<f64>,
}

fn yes() -> bool {
    true
}

/// What the attach profiler counted during its run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileFigures {
    /// `bpftrace` or `ptrace`.
    pub collector: String,
    pub requests: u64,
    pub syscalls_per_request: f64,
    /// Calls per request by syscall name, summed over thread clusters.
    pub syscalls_by_name: std::collections::BTreeMap<String, f64>,
    pub network_bytes_in_per_request: f64,
    pub network_bytes_out_per_request: f64,
    /// Bytes moved by syscalls on regular files (estimated from the byte histograms' bin middles).
    pub file_bytes_per_request: f64,
    pub warnings: Vec<String>,
}

impl ProfileFigures {
    pub fn from_profile(p: &ditto_profile::Profile) -> ProfileFigures {
        let mut by_name = std::collections::BTreeMap::new();
        let mut file_bytes = 0.0;
        for cluster in &p.syscalls.clusters {
            for call in &cluster.calls {
                *by_name.entry(call.name.clone()).or_insert(0.0) += call.per_request;
                let file_share = call.fd_kinds.get("file").copied().unwrap_or(0.0);
                if let (Some(h), true) = (&call.bytes, file_share > 0.0 && call.count > 0) {
                    // Mean bytes of the calls that moved data × their share of all calls × calls per request.
                    let moved = h.total() as f64 / call.count as f64;
                    file_bytes +=
                        h.mean_estimate().unwrap_or(0.0) * moved * call.per_request * file_share;
                }
            }
        }
        ProfileFigures {
            collector: match p.conditions.collector {
                ditto_profile::Collector::Bpftrace => "bpftrace".into(),
                ditto_profile::Collector::Ptrace => "ptrace".into(),
            },
            requests: p.conditions.requests,
            syscalls_per_request: p.syscalls.per_request,
            syscalls_by_name: by_name,
            network_bytes_in_per_request: p.network.bytes_in_per_request,
            network_bytes_out_per_request: p.network.bytes_out_per_request,
            file_bytes_per_request: file_bytes,
            warnings: p.conditions.warnings.clone(),
        }
    }
}

/// Everything one native measurement produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NativeRun {
    pub load: LoadFigures,
    pub os: OsFigures,
    pub profile: Option<ProfileFigures>,
    /// Hardware counters (perf backend only).
    pub counters: Option<CounterFigures>,
}

/// A loopback port that is free now (the bundled specs' fixed ports may be taken by another run).
pub fn free_port() -> Result<u16, ValidateError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| ValidateError::Io(format!("no free loopback port: {e}")))
}

fn cheap_snapshot(pids: &[u32]) -> Option<procfs::ProcSnapshot> {
    procfs::snapshot_with(pids, &SnapshotOptions::counters_only()).ok()
}

/// OS figures from two snapshots around `requests` requests.
fn os_figures(
    before: &procfs::ProcSnapshot,
    after: &procfs::ProcSnapshot,
    requests: u64,
) -> OsFigures {
    let d = before.delta(after);
    let n = requests.max(1) as f64;
    let user: f64 = d.processes.values().map(|p| p.user_secs).sum();
    let sys: f64 = d.processes.values().map(|p| p.system_secs).sum();
    let switches: u64 = d
        .processes
        .values()
        .flat_map(|p| p.threads.values())
        .map(|t| t.voluntary_ctxt_switches + t.nonvoluntary_ctxt_switches)
        .sum();
    let io: Vec<_> = d.processes.values().filter_map(|p| p.io.as_ref()).collect();
    let disk = (!io.is_empty()).then(|| {
        io.iter()
            .map(|i| (i.read_bytes + i.write_bytes) as f64)
            .sum::<f64>()
            / n
    });
    OsFigures {
        measured: true,
        cpu_user_us_per_request: 1e6 * user / n,
        cpu_sys_us_per_request: 1e6 * sys / n,
        cpu_on_us_per_request: d.on_cpu_us_per_request(requests.max(1)),
        context_switches_per_request: switches as f64 / n,
        disk_bytes_per_request: disk,
    }
}

/// Starts `spec`, drives `level` once plainly and once under the attach profiler, stops it.
pub fn measure_native(
    spec: &TargetSpec,
    level: &ResolvedLevel,
    s: &NativeSettings,
    status: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&Progress),
) -> Result<NativeRun, ValidateError> {
    let launch = LaunchOptions {
        port: Some(free_port()?),
        ..LaunchOptions::default()
    };
    ditto_measure::with_started_target(spec, &launch, status, |target, status| {
        measure_running(target, spec, level, s, status, progress)
    })
}

fn measure_running(
    target: &mut RunningTarget,
    spec: &TargetSpec,
    level: &ResolvedLevel,
    s: &NativeSettings,
    status: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&Progress),
) -> Result<NativeRun, ValidateError> {
    let addr = target.addr();
    let (cfg, prepared) =
        ditto_measure::prepare_and_warm_up(spec, level, addr, &s.run, status, progress)?;
    let pids = procfs::process_tree(target.pid()).unwrap_or_else(|_| vec![target.pid()]);
    let mut perf = if s.perf {
        Some(PerfSession::start(&pids)?)
    } else {
        None
    };
    let before = cheap_snapshot(&pids);
    status(&format!(
        "load: {} req/s over {} connections for {:.1} s",
        level.rate, level.connections, level.duration_s
    ));
    let report = ditto_load::run_prepared(&cfg, &prepared, progress)?;
    let hw = perf.as_mut().map(|p| p.read());
    let after = cheap_snapshot(&pids);
    if let Some(status) = target.try_exit_status() {
        return Err(ValidateError::TargetDied {
            name: spec.name.clone(),
            status: status.to_string(),
            log_tail: target.log_tail(),
        });
    }
    let os = match (&before, &after) {
        (Some(b), Some(a)) => os_figures(b, a, report.requests_completed),
        _ => OsFigures::default(),
    };
    let counters = match (hw, &perf) {
        (Some(t), Some(p)) => {
            Some(t.figures(report.requests_completed as f64, p.kernel_included()))
        }
        _ => None,
    };
    drop(perf);
    let profile = if s.profile {
        status(&format!(
            "profiling (attach): {} req/s for {:.1} s",
            level.rate, level.duration_s
        ));
        let result = ditto_profiler::profile_attach(
            &AttachOptions {
                pid: target.pid(),
                duration: Duration::from_secs_f64(level.duration_s),
                collector: s.collector,
                load: Some(AttachLoad {
                    spec: spec.clone(),
                    level: level.clone(),
                    second_level: None,
                    addr,
                    seed: s.run.seed,
                }),
                measure_overhead: false,
            },
            status,
        )
        .map_err(|e| ValidateError::Profile(e.to_string()))?;
        Some(ProfileFigures::from_profile(&result.profile))
    } else {
        None
    };
    if let Some(status) = target.try_exit_status() {
        return Err(ValidateError::TargetDied {
            name: spec.name.clone(),
            status: status.to_string(),
            log_tail: target.log_tail(),
        });
    }
    Ok(NativeRun {
        load: LoadFigures::from_report(&report),
        os,
        profile,
        counters,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_is_thinned_keeping_both_ends() {
        let pts: Vec<[f64; 2]> = (0..500).map(|i| [i as f64 / 5.0, i as f64]).collect();
        let thin = thin_cdf(pts.clone());
        assert_eq!(thin.len(), 64);
        assert_eq!(thin[0], pts[0]);
        assert_eq!(thin.last(), pts.last());
        assert!(thin.windows(2).all(|w| w[0][0] <= w[1][0]));
        assert_eq!(thin_cdf(pts[..10].to_vec()).len(), 10);
    }

    #[test]
    fn on_cpu_time_comes_from_schedstat_in_microseconds_per_request() {
        let pids = [std::process::id()];
        let before = cheap_snapshot(&pids).expect("own /proc");
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let after = cheap_snapshot(&pids).expect("own /proc");
        let wall_us = 1e6 * start.elapsed().as_secs_f64();
        let one = os_figures(&before, &after, 1).cpu_on_us_per_request;
        let ten = os_figures(&before, &after, 10).cpu_on_us_per_request;
        let one = one.expect("schedstat is on in the kernels ditto supports");
        // This thread spun for the whole interval; the other test threads may add their own time.
        assert!(one > 0.2 * wall_us, "{one} µs on CPU over {wall_us} µs");
        assert!((ten.expect("same snapshots") * 10.0 - one).abs() < 1e-6 * one);
    }

    #[test]
    fn profile_figures_sum_syscalls_over_clusters() {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../profiles/memcached.json"),
        )
        .expect("bundled profile");
        let p: ditto_profile::Profile = serde_json::from_str(&text).expect("profile parses");
        let f = ProfileFigures::from_profile(&p);
        let total: f64 = f.syscalls_by_name.values().sum();
        assert!((total - p.syscalls.per_request).abs() < 1e-6 * p.syscalls.per_request.max(1.0));
        assert!(f.syscalls_by_name.contains_key("sendmsg"));
        assert!(f.network_bytes_out_per_request > 1000.0);
        assert_eq!(f.file_bytes_per_request, 0.0);
    }
}
