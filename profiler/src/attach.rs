//! Attach-mode profiling: observe a running process tree for a window, optionally while driving its
//! load, without restarting it.
//!
//! Order matters. Load preparation (e.g. the Pix account population) runs before anything is observed,
//! so it is not counted as requests. Then /proc is snapshot and page references cleared, perf counters
//! opened, and the syscall tracer attached; only then does load start, so every connection's accept and
//! every request falls inside the window. After the load, the tracer is stopped first and /proc read
//! last. The tracer and counters are owned values: whatever fails, dropping them detaches everything.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ditto_collect::bpftrace::{TraceOptions, TraceSession};
use ditto_collect::perf::SoftwareCounters;
use ditto_collect::procfs::{self, ProcSnapshot};
use ditto_collect::ptrace::{PtraceOptions, PtraceSession};
use ditto_load::{LoadConfig, LoadReport};
use ditto_profile::{Collector, Framing, LoadConditions, Overhead, Profile};
use ditto_target::{ResolvedLevel, TargetSpec};

use crate::observations::ObservedRequestClass;
use crate::{analyze, Observations, ProfileRunError};

/// Which syscall collector to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollectorChoice {
    /// bpftrace, or ptrace (labelled in the profile) when BPF is unavailable.
    Auto,
    Bpftrace,
    Ptrace,
}

/// The load ditto drives during the window.
#[derive(Debug, Clone)]
pub struct AttachLoad {
    pub spec: TargetSpec,
    pub level: ResolvedLevel,
    /// A second window at this level after the first, on the same running server: its syscall
    /// counts go into `syscalls.at_second_load`, so a clone can follow how they change with load.
    pub second_level: Option<ResolvedLevel>,
    pub addr: SocketAddr,
    pub seed: u64,
}

#[derive(Debug, Clone)]
pub struct AttachOptions {
    pub pid: u32,
    /// Window length without load; with load, the load's duration.
    pub duration: Duration,
    pub collector: CollectorChoice,
    pub load: Option<AttachLoad>,
    /// Run the same load once without profiling first and record the difference.
    pub measure_overhead: bool,
}

/// What a run produced: the profile, and the observations it was built from.
pub struct AttachResult {
    pub profile: Profile,
    pub observations: Observations,
    pub load_report: Option<LoadReport>,
}

fn framing_of(spec: &TargetSpec) -> Framing {
    match spec.workload.protocol() {
        "memcached" => Framing::Line,
        "http" => Framing::Http1,
        "pix-grpc" => Framing::Http2,
        "length-prefixed" => Framing::LengthPrefixed,
        _ => Framing::Unknown,
    }
}

fn load_config(load: &AttachLoad, duration: Duration) -> LoadConfig {
    let mut cfg = LoadConfig::new(load.addr, load.spec.workload.clone(), load.level.rate);
    cfg.connections = load.level.connections;
    cfg.arrival = load.level.arrival;
    // The window is the measured period itself: warm-up requests would be counted by the tracer but
    // not by the load generator.
    cfg.warmup = Duration::ZERO;
    cfg.duration = duration;
    cfg.seed = load.seed;
    cfg
}

/// CPU seconds (user + system) of the processes in a snapshot.
fn cpu_seconds(s: &ProcSnapshot) -> f64 {
    s.processes
        .values()
        .map(|p| p.user_secs + p.system_secs)
        .sum()
}

enum Tracer {
    Bpf(TraceSession),
    Ptrace(PtraceSession),
}

impl Tracer {
    fn start(
        choice: CollectorChoice,
        pids: &[u32],
        warnings: &mut Vec<String>,
    ) -> Result<(Tracer, Collector), ProfileRunError> {
        let bpf = || TraceSession::start(&TraceOptions::new(pids)).map(Tracer::Bpf);
        let ptrace = || PtraceSession::start(&PtraceOptions::new(pids)).map(Tracer::Ptrace);
        match choice {
            CollectorChoice::Bpftrace => {
                Ok((bpf().map_err(ProfileRunError::trace)?, Collector::Bpftrace))
            }
            CollectorChoice::Ptrace => {
                Ok((ptrace().map_err(ProfileRunError::trace)?, Collector::Ptrace))
            }
            CollectorChoice::Auto => match bpf() {
                Ok(t) => Ok((t, Collector::Bpftrace)),
                Err(e) => {
                    warnings.push(format!(
                        "BPF unavailable ({e}); fell back to ptrace, which slows the target"
                    ));
                    Ok((ptrace().map_err(ProfileRunError::trace)?, Collector::Ptrace))
                }
            },
        }
    }

    fn stop(self) -> Result<ditto_collect::bpftrace::SyscallTrace, ProfileRunError> {
        match self {
            Tracer::Bpf(t) => t.stop().map_err(ProfileRunError::trace),
            Tracer::Ptrace(t) => t.stop().map_err(ProfileRunError::trace),
        }
    }
}

/// Waits for `duration` or until the root process is gone; returns whether it is gone.
fn wait_window(pid: u32, duration: Duration, status: &mut dyn FnMut(&str)) -> bool {
    let start = Instant::now();
    let mut last_report = Instant::now();
    while start.elapsed() < duration {
        if !std::path::Path::new(&format!("/proc/{pid}/stat")).exists() || is_zombie(pid) {
            return true;
        }
        if last_report.elapsed() >= Duration::from_secs(1) {
            status(&format!(
                "observing: {:.0}/{:.0} s",
                start.elapsed().as_secs_f64(),
                duration.as_secs_f64()
            ));
            last_report = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|r| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// Profiles a running process tree.
pub fn profile_attach(
    opts: &AttachOptions,
    status: &mut dyn FnMut(&str),
) -> Result<AttachResult, ProfileRunError> {
    let pids = procfs::process_tree(opts.pid).map_err(ProfileRunError::collect)?;
    status(&format!(
        "attaching to pid {} ({} process{})",
        opts.pid,
        pids.len(),
        if pids.len() == 1 { "" } else { "es" }
    ));
    let mut warnings = Vec::new();

    let duration = match &opts.load {
        Some(l) => Duration::from_secs_f64(l.level.duration_s),
        None => opts.duration,
    };
    let prepared = match &opts.load {
        Some(l) => {
            status(&format!(
                "preparing {} load on {}",
                l.spec.workload.protocol(),
                l.addr
            ));
            Some(
                ditto_load::prepare(&load_config(l, duration), &mut |_| {})
                    .map_err(ProfileRunError::Load)?,
            )
        }
        None => None,
    };

    // Without the profiler: the same load, for the overhead figures.
    let baseline = match (&opts.load, &prepared, opts.measure_overhead) {
        (Some(l), Some(p), true) => {
            status(&format!(
                "overhead baseline: {} req/s for {:.0} s without profiling",
                l.level.rate,
                duration.as_secs_f64()
            ));
            let before = procfs::snapshot(&pids).map_err(ProfileRunError::collect)?;
            let report = ditto_load::run_prepared(&load_config(l, duration), p, &mut |_| {})
                .map_err(ProfileRunError::Load)?;
            let after = procfs::snapshot(&pids).map_err(ProfileRunError::collect)?;
            Some((report, cpu_seconds(&after) - cpu_seconds(&before)))
        }
        _ => None,
    };

    let before = procfs::snapshot(&pids).map_err(ProfileRunError::collect)?;
    let listeners = procfs::listening_sockets(&pids).unwrap_or_else(|e| {
        warnings.push(format!("listening sockets not read: {e}"));
        Vec::new()
    });
    for &p in &pids {
        if let Err(e) = procfs::clear_refs(p) {
            warnings.push(format!("working set not measured for a process: {e}"));
        }
    }
    let tids: Vec<u32> = before
        .processes
        .values()
        .flat_map(|p| p.threads.keys().copied())
        .collect();
    let mut perf = match SoftwareCounters::start(&tids) {
        Ok(p) => Some(p),
        Err(e) => {
            warnings.push(format!("perf software counters unavailable: {e}"));
            None
        }
    };
    let (tracer, collector) = Tracer::start(opts.collector, &pids, &mut warnings)?;
    status(&format!(
        "tracing with {}",
        match collector {
            Collector::Bpftrace => "bpftrace",
            Collector::Ptrace => "ptrace (strace)",
        }
    ));

    let window_start = Instant::now();
    let mut connections = Vec::new();
    let (report, died) = match (&opts.load, &prepared) {
        (Some(l), Some(p)) => {
            status(&format!(
                "loading {} at {} req/s over {} connections for {:.0} s",
                l.addr,
                l.level.rate,
                l.level.connections,
                duration.as_secs_f64()
            ));
            let mut last = Instant::now();
            let report = ditto_load::run_prepared(&load_config(l, duration), p, &mut |pr| {
                if last.elapsed() >= Duration::from_secs(1) {
                    status(&format!("{pr}"));
                    last = Instant::now();
                    // Once, while the load's connections are open.
                    if connections.is_empty() {
                        connections = connection_options(&pids);
                    }
                }
            });
            (Some(report), is_zombie(opts.pid))
        }
        _ => (None, wait_window(opts.pid, duration, status)),
    };
    let duration_s = window_start.elapsed().as_secs_f64();
    let trace = tracer.stop()?;
    let perf_counts = perf.as_mut().map(|p| p.read());
    drop(perf);

    let mut partial = None;
    let after_pids: Vec<u32> = pids
        .iter()
        .copied()
        .chain(
            trace
                .forks
                .iter()
                .filter(|f| !f.is_thread)
                .map(|f| f.child_tgid),
        )
        .collect();
    let after = match procfs::snapshot(&after_pids) {
        Ok(s) => s,
        Err(e) => {
            warnings.push(format!("/proc not readable at the end: {e}"));
            before.clone()
        }
    };
    if died || after.vanished.contains(&opts.pid) {
        partial = Some(
            "the target exited during the window; this profile holds what was seen until then"
                .to_string(),
        );
    }
    let referenced_bytes = after_pids
        .iter()
        .filter_map(|&p| procfs::referenced_bytes(p).ok())
        .sum();

    let report = match report {
        Some(Ok(r)) => Some(r),
        Some(Err(e)) if partial.is_some() => {
            warnings.push(format!("load stopped: {e}"));
            None
        }
        Some(Err(e)) => return Err(ProfileRunError::Load(e)),
        None => None,
    };
    let overhead = match (&baseline, &report) {
        (Some((base, base_cpu)), Some(prof)) => {
            let prof_cpu = cpu_seconds(&after) - cpu_seconds(&before);
            let per = |cpu: f64, r: &LoadReport| cpu / r.requests_completed.max(1) as f64;
            Some(Overhead {
                cpu_per_request: (*base_cpu > 0.0)
                    .then(|| per(prof_cpu, prof) / per(*base_cpu, base) - 1.0),
                throughput_loss: (base.achieved_rate > 0.0)
                    .then(|| 1.0 - prof.achieved_rate / base.achieved_rate),
                p50_increase: (base.latency_us.p50 > 0.0)
                    .then(|| prof.latency_us.p50 / base.latency_us.p50 - 1.0),
            })
        }
        _ => None,
    };

    if connections.is_empty() {
        // No load of ours: whatever clients were connected at the end.
        connections = established_options(&after);
    }
    let observations = Observations {
        collector,
        target: opts.load.as_ref().map(|l| l.spec.name.clone()),
        duration_s,
        before,
        after,
        trace,
        perf: perf_counts,
        referenced_bytes,
        listeners,
        connections,
        requests_from_load: report.as_ref().map(|r| r.requests_completed),
        load: match (&opts.load, &report) {
            (Some(l), Some(r)) => Some(LoadConditions {
                protocol: l.spec.workload.protocol().to_string(),
                offered_rate: r.offered_rate,
                achieved_rate: r.achieved_rate,
                connections: r.connections as u32,
                arrival: r.arrival.as_str().to_string(),
                latency_p50_us: r.latency_us.p50,
                latency_p99_us: r.latency_us.p99,
            }),
            _ => None,
        },
        request_classes: report
            .iter()
            .flat_map(|r| &r.request_classes)
            .map(|c| ObservedRequestClass {
                key: c.key.clone(),
                responses: c.responses,
                response_bytes: c.response_bytes,
            })
            .collect(),
        framing_hint: opts.load.as_ref().map(|l| framing_of(&l.spec)),
        partial,
        overhead,
        warnings,
    };
    let mut profile = analyze::analyze(&observations);
    if let Some(l) = opts
        .load
        .as_ref()
        .filter(|_| observations.partial.is_none())
    {
        if let Some(second) = &l.second_level {
            // Half as long, before and after the long window: the shorts against the long one tell
            // calls per connection from calls per request, and around it they cancel a steady drift.
            let long = Duration::from_secs_f64(second.duration_s);
            let before = second_window(opts, l, second, long / 2, &observations, status)?;
            profile.syscalls.at_second_load =
                second_window(opts, l, second, long, &observations, status)?;
            if profile.syscalls.at_second_load.is_none() {
                profile.conditions.warnings.push(format!(
                    "no syscall counts at the second load ({}): its window completed no request or the target exited in it",
                    second.level.name()
                ));
            } else {
                let after = second_window(opts, l, second, long / 2, &observations, status)?;
                profile.syscalls.at_second_load_short = before.into_iter().chain(after).collect();
                if profile.syscalls.at_second_load_short.len() < 2 {
                    profile.conditions.warnings.push(
                        "no calls per connection: a short window of the second load completed no request or the target exited in it".into(),
                    );
                }
            }
        }
    }
    Ok(AttachResult {
        profile,
        observations,
        load_report: report,
    })
}

/// A window of the second load ([`AttachLoad::second_level`]), `duration` long: its own attach run,
/// its calls carried over to the first window's clusters by thread. `None` (with a warning in the
/// profile) when the target died in it or it completed no request; a load that cannot run is an
/// error like the first's.
fn second_window(
    opts: &AttachOptions,
    load: &AttachLoad,
    level: &ResolvedLevel,
    duration: Duration,
    first: &Observations,
    status: &mut dyn FnMut(&str),
) -> Result<Option<ditto_profile::SecondLoadSyscalls>, ProfileRunError> {
    status(&format!(
        "second-load window: the {} level for {:.1} s, for how the syscalls change with load and connections",
        level.level.name(),
        duration.as_secs_f64()
    ));
    let second = profile_attach(
        &AttachOptions {
            pid: opts.pid,
            duration,
            collector: opts.collector,
            load: Some(AttachLoad {
                // A load's window is its level's duration.
                level: ResolvedLevel {
                    duration_s: duration.as_secs_f64(),
                    ..level.clone()
                },
                second_level: None,
                ..load.clone()
            }),
            measure_overhead: false,
        },
        status,
    )?;
    let Some(report) = second.load_report.filter(|r| r.requests_completed > 0) else {
        return Ok(None);
    };
    if second.observations.partial.is_some() {
        return Ok(None);
    }
    Ok(Some(analyze::second_load::second_load_syscalls(
        &second.profile.syscalls.clusters,
        &analyze::thread_clusters(&second.observations),
        &analyze::thread_clusters(first),
        analyze::second_load::WindowLoad {
            offered_rate: report.offered_rate,
            achieved_rate: report.achieved_rate,
            duration_s: second.observations.duration_s,
            requests: report.requests_completed,
            connections: u32::try_from(level.connections).unwrap_or(u32::MAX),
        },
    )))
}

/// Options of the accepted TCP connections of `pids` (a few per process), read now; empty when
/// /proc cannot be read.
fn connection_options(pids: &[u32]) -> Vec<procfs::SocketOptions> {
    let opts = procfs::SnapshotOptions {
        memory: false,
        fds: true,
        // Connection options are read beside the listeners' (their ports pick the connections).
        listener_details: true,
        connection_options: 4,
    };
    procfs::snapshot_with(pids, &opts)
        .map(|s| established_options(&s))
        .unwrap_or_default()
}

fn established_options(s: &ProcSnapshot) -> Vec<procfs::SocketOptions> {
    s.processes
        .values()
        .flat_map(|p| &p.sockets)
        .filter(|s| s.state == procfs::SocketState::Established)
        .filter_map(|s| s.options)
        .collect()
}
