//! The load run: prepare, warm up, measure — one OS thread per connection.

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use rand::rngs::SmallRng;
use rand::SeedableRng;

use crate::arrivals::{Arrival, Schedule};
use crate::clock::{duration_ns, now_ns, set_fine_timer_slack, sleep_until};
use crate::config::LoadConfig;
use crate::error::LoadError;
use crate::outcome::Outcome;
use crate::protocols::{self, Connection, Protocol};
use crate::report::{ConnStats, LoadReport, RunFacts};

/// The stage a run is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Unmeasured protocol preparation (the Pix account population).
    Prepare,
    /// Unmeasured load at the offered rate.
    Warmup,
    /// The measured period.
    Measure,
}

/// A progress snapshot, delivered about once a second.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    pub phase: Phase,
    /// Time since the phase began.
    pub elapsed: Duration,
    /// Planned length of the phase; `None` while preparing (it depends on the server).
    pub phase_length: Option<Duration>,
    /// Preparing: steps done (accounts created). Otherwise: requests answered in this phase.
    pub completed: u64,
    /// Preparing: steps wanted. Otherwise `None`.
    pub expected: Option<u64>,
    /// Failed requests in this phase.
    pub errors: u64,
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.phase {
            Phase::Prepare => write!(
                f,
                "preparing: {}/{} after {:.1} s",
                self.completed,
                self.expected.unwrap_or(0),
                self.elapsed.as_secs_f64()
            ),
            Phase::Warmup | Phase::Measure => write!(
                f,
                "{} {:.1}/{:.1} s: {} answered, {} errors",
                if self.phase == Phase::Warmup {
                    "warm-up"
                } else {
                    "measuring"
                },
                self.elapsed.as_secs_f64(),
                self.phase_length.unwrap_or_default().as_secs_f64(),
                self.completed,
                self.errors
            ),
        }
    }
}

/// Counters a connection thread publishes for progress reports; padded to its own cache lines
/// so threads never contend on them.
#[repr(align(128))]
#[derive(Default)]
struct Live {
    answered: AtomicU64,
    errors: AtomicU64,
}

/// Everything one connection thread needs.
struct ThreadPlan {
    protocol: Arc<dyn Protocol>,
    addr: SocketAddr,
    index: usize,
    connections: usize,
    arrival: Arrival,
    rate: f64,
    seed: u64,
    request_timeout: Duration,
    warmup_ns: u64,
    duration_ns: u64,
    /// This connection's share of `max_requests`.
    budget: Option<u64>,
    spin_ns: u64,
    live: Arc<Live>,
}

struct Worker {
    handle: JoinHandle<ConnStats>,
    start: mpsc::Sender<Option<u64>>,
    live: Arc<Live>,
}

/// The protocol state a run needs, created by [`prepare`] (e.g. the Pix account population).
/// Preparing apart from running lets a caller exclude preparation from what it observes, as the
/// profiler does: it prepares, starts tracing, then runs.
pub struct Prepared {
    protocol: Arc<dyn Protocol>,
}

/// Unmeasured, protocol-specific preparation: for Pix, creating the account population.
pub fn prepare(
    cfg: &LoadConfig,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Prepared, LoadError> {
    cfg.validate()?;
    let prepare_start = now_ns();
    let protocol = protocols::prepare(cfg, &mut |done, total| {
        progress(&Progress {
            phase: Phase::Prepare,
            elapsed: Duration::from_nanos(now_ns() - prepare_start),
            phase_length: None,
            completed: done,
            expected: Some(total),
            errors: 0,
        })
    })?;
    Ok(Prepared { protocol })
}

/// Runs a load test: prepare (unmeasured), warm up for `cfg.warmup` at the offered rate
/// (unmeasured), then measure for `cfg.duration`. `progress` is called about once a second.
///
/// Fails before sending load if the configuration is invalid, the target is not loopback (unless
/// allowed), preparation fails, or any connection cannot be opened. Once load runs, server
/// misbehaviour is counted in the report, never returned as an error.
pub fn run(cfg: &LoadConfig, progress: &mut dyn FnMut(&Progress)) -> Result<LoadReport, LoadError> {
    let prepared = prepare(cfg, progress)?;
    run_prepared(cfg, &prepared, progress)
}

/// [`run`] without its preparation step, on state from [`prepare`] with the same configuration.
pub fn run_prepared(
    cfg: &LoadConfig,
    prepared: &Prepared,
    progress: &mut dyn FnMut(&Progress),
) -> Result<LoadReport, LoadError> {
    cfg.validate()?;
    let protocol = &prepared.protocol;
    let (ready_tx, ready_rx) = mpsc::channel::<(usize, Result<(), String>)>();
    let mut workers: Vec<Worker> = Vec::with_capacity(cfg.connections);
    for index in 0..cfg.connections {
        let live = Arc::new(Live::default());
        let plan = ThreadPlan {
            protocol: protocol.clone(),
            addr: cfg.addr,
            index,
            connections: cfg.connections,
            arrival: cfg.arrival,
            rate: cfg.rate,
            seed: cfg.seed,
            request_timeout: cfg.request_timeout,
            warmup_ns: duration_ns(cfg.warmup),
            duration_ns: duration_ns(cfg.duration),
            budget: cfg.max_requests.map(|m| {
                let n = cfg.connections as u64;
                m / n + u64::from((index as u64) < m % n)
            }),
            spin_ns: duration_ns(cfg.spin),
            live: live.clone(),
        };
        let (start_tx, start_rx) = mpsc::channel();
        let ready = ready_tx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("load-{index}"))
            .spawn(move || connection_thread(plan, ready, start_rx));
        match spawned {
            Ok(handle) => workers.push(Worker {
                handle,
                start: start_tx,
                live,
            }),
            Err(e) => {
                abort(workers);
                return Err(LoadError::Thread(e));
            }
        }
    }
    drop(ready_tx);

    // Every connection must open before any load is sent: a server that is not there is a
    // configuration error, not a load result.
    let mut failure: Option<String> = None;
    for _ in 0..workers.len() {
        match ready_rx.recv() {
            Ok((_, Ok(()))) => {}
            Ok((index, Err(reason))) => {
                failure.get_or_insert(format!("connection {index}: {reason}"));
            }
            Err(_) => {
                failure.get_or_insert("a load thread exited before connecting".into());
                break;
            }
        }
    }
    if let Some(reason) = failure {
        abort(workers);
        return Err(LoadError::Connect {
            addr: cfg.addr,
            protocol: protocol.name(),
            reason,
        });
    }

    // A short lead so every thread has its start time before the first send.
    let lead_ns = 1_000_000 + 5_000 * workers.len() as u64;
    let start_ns = now_ns() + lead_ns;
    let warm_end_ns = start_ns + duration_ns(cfg.warmup);
    let end_ns = warm_end_ns + duration_ns(cfg.duration);
    let measured_start = SystemTime::now() + Duration::from_nanos(warm_end_ns - now_ns());
    for w in &workers {
        // A thread that already exited just drops the message.
        let _ = w.start.send(Some(start_ns));
    }

    watch(cfg, &workers, start_ns, warm_end_ns, end_ns, progress);

    let mut total = ConnStats::new();
    let mut window_ends = Vec::with_capacity(workers.len());
    for (index, w) in workers.into_iter().enumerate() {
        let stats = w.handle.join().map_err(|panic| LoadError::Internal {
            index,
            reason: panic_text(&panic),
        })?;
        window_ends.push(stats.window_end_ns);
        total.merge(stats);
    }

    // With max_requests every connection may stop early; then the measured period ends where
    // the last connection's share ended.
    let mut duration = cfg.duration;
    if let Some(ends) = window_ends.into_iter().collect::<Option<Vec<u64>>>() {
        if let Some(last) = ends.into_iter().max() {
            let early = Duration::from_nanos(last.saturating_sub(warm_end_ns));
            if !early.is_zero() && early < duration {
                duration = early;
            }
        }
    }

    Ok(LoadReport::new(
        RunFacts {
            protocol: protocol.name(),
            target: cfg.addr.to_string(),
            arrival: cfg.arrival,
            connections: cfg.connections,
            seed: cfg.seed,
            offered_rate: cfg.rate,
            warmup: cfg.warmup,
            duration,
            measured_start,
            request_classes: protocol.request_classes(),
        },
        total,
    ))
}

/// Reports progress about once a second until every connection thread has finished.
fn watch(
    cfg: &LoadConfig,
    workers: &[Worker],
    start_ns: u64,
    warm_end_ns: u64,
    end_ns: u64,
    progress: &mut dyn FnMut(&Progress),
) {
    let sums = || {
        workers.iter().fold((0, 0), |(a, e), w| {
            (
                a + w.live.answered.load(Ordering::Relaxed),
                e + w.live.errors.load(Ordering::Relaxed),
            )
        })
    };
    let mut at_warm_end: Option<(u64, u64)> = None;
    let mut next_report = start_ns + 1_000_000_000;
    let snapshot = |now: u64, at_warm_end: Option<(u64, u64)>| {
        let (answered, errors) = sums();
        let (phase, base, since, length) = match at_warm_end {
            None => (Phase::Warmup, (0, 0), start_ns, cfg.warmup),
            Some(base) => (Phase::Measure, base, warm_end_ns, cfg.duration),
        };
        Progress {
            phase,
            elapsed: Duration::from_nanos(now.saturating_sub(since)).min(length),
            phase_length: Some(length),
            completed: answered - base.0,
            expected: None,
            errors: errors - base.1,
        }
    };
    while workers.iter().any(|w| !w.handle.is_finished()) {
        std::thread::sleep(Duration::from_millis(20));
        let now = now_ns();
        if at_warm_end.is_none() && now >= warm_end_ns {
            at_warm_end = Some(sums());
        }
        if now >= next_report && now < end_ns {
            next_report += 1_000_000_000;
            progress(&snapshot(now, at_warm_end));
        }
    }
    let at_warm_end = at_warm_end.or_else(|| Some(sums()));
    progress(&snapshot(end_ns, at_warm_end));
}

fn abort(workers: Vec<Worker>) {
    for w in &workers {
        let _ = w.start.send(None);
    }
    for w in workers {
        let _ = w.handle.join();
    }
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panicked".into())
}

/// SplitMix64: spreads one user seed into independent per-connection streams.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One connection: connect, wait for the common start, then send at the scheduled times.
fn connection_thread(
    plan: ThreadPlan,
    ready: mpsc::Sender<(usize, Result<(), String>)>,
    start: mpsc::Receiver<Option<u64>>,
) -> ConnStats {
    set_fine_timer_slack();
    let mut stats = ConnStats::new();
    let timeout_ns = duration_ns(plan.request_timeout);
    let mut conn: Option<Box<dyn Connection>> =
        match plan
            .protocol
            .connect(plan.addr, plan.request_timeout, plan.index)
        {
            Ok(c) => {
                let _ = ready.send((plan.index, Ok(())));
                Some(c)
            }
            Err(reason) => {
                let _ = ready.send((plan.index, Err(reason)));
                return stats;
            }
        };
    drop(ready);
    let Ok(Some(start_ns)) = start.recv() else {
        return stats;
    };

    let stream = mix(plan.seed ^ mix(plan.index as u64));
    let mut rng = SmallRng::seed_from_u64(stream);
    let mut schedule = Schedule::new(
        plan.arrival,
        plan.rate,
        plan.connections,
        plan.index,
        mix(stream),
    );
    let gap_ns = schedule.mean_gap_ns() as u64;
    let warm_end_ns = start_ns + plan.warmup_ns;
    let end_ns = warm_end_ns + plan.duration_ns;
    let mut budget = plan.budget;
    let mut last_measured: Option<u64> = None;
    let mut out_of_time = false;
    // When the previous request on this connection completed.
    let mut free_ns = 0;

    for offset in schedule.by_ref() {
        let intended = start_ns.saturating_add(offset);
        if intended >= end_ns {
            break;
        }
        let measured = intended >= warm_end_ns;
        if measured {
            match budget.as_mut() {
                Some(0) => {
                    stats.window_end_ns =
                        Some(last_measured.map_or(warm_end_ns, |t| t.saturating_add(gap_ns)));
                    break;
                }
                Some(left) => *left -= 1,
                None => {}
            }
            stats.scheduled += 1;
            last_measured = Some(intended);
        }
        // A connection that fell behind stops at the end of the period; what it did not send
        // still counts as scheduled, so falling behind shows in the report.
        if out_of_time || now_ns() >= end_ns {
            out_of_time = true;
            continue;
        }

        sleep_until(intended, plan.spin_ns);
        let sent = now_ns();
        let deadline = sent.saturating_add(timeout_ns);
        let outcome = match conn.as_mut() {
            Some(c) => c.request(&mut rng, deadline),
            // The previous connection broke: reconnecting is part of this request's latency.
            None => match plan
                .protocol
                .connect(plan.addr, plan.request_timeout, plan.index)
            {
                Ok(c) => conn.insert(c).request(&mut rng, deadline),
                Err(_) => Outcome::Error(crate::outcome::ErrorKind::Connect),
            },
        };
        let done = now_ns();
        let was_free_at = std::mem::replace(&mut free_ns, done);
        if measured {
            if let Some((class, bytes)) = conn.as_ref().and_then(|c| c.last_class()) {
                stats.record_class(class, bytes);
            }
        }
        if conn.as_ref().is_some_and(|c| !c.is_open()) {
            conn = None;
        }

        match outcome {
            Outcome::Error(kind) if !kind.is_answer() => {
                plan.live.errors.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Error(_) => {
                plan.live.errors.fetch_add(1, Ordering::Relaxed);
                plan.live.answered.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                plan.live.answered.fetch_add(1, Ordering::Relaxed);
            }
        }
        if measured {
            stats.record(outcome, intended, was_free_at, sent, done);
        }
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_streams_differ_per_connection() {
        let a = mix(1 ^ mix(0));
        let b = mix(1 ^ mix(1));
        assert_ne!(a, b);
        assert_eq!(a, mix(1 ^ mix(0)));
    }

    #[test]
    fn progress_lines_read_well() {
        let p = Progress {
            phase: Phase::Measure,
            elapsed: Duration::from_secs(3),
            phase_length: Some(Duration::from_secs(10)),
            completed: 2999,
            expected: None,
            errors: 1,
        };
        assert_eq!(
            p.to_string(),
            "measuring 3.0/10.0 s: 2999 answered, 1 errors"
        );
    }
}
