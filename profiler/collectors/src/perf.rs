//! perf software counters on the target's threads: task-clock, context switches, page faults
//! (with minor/major split) and CPU migrations, counted by the kernel per thread.
//!
//! Design trade-offs:
//!
//! - **Software counters only.** Our machines have no hardware PMU (`instructions` is not
//!   supported); [`probe`] says so instead of failing later, and body-level figures come from
//!   simulation elsewhere. Software events are maintained by the scheduler and fault handlers
//!   anyway, so counting them costs the target next to nothing.
//! - **One counter per thread and event, no inheritance.** Per-thread counters tell pool threads
//!   apart, which is what the thread-model analysis needs. The price is that threads created after
//!   [`SoftwareCounters::start`] are not covered; the session reports which tids it covers, and a
//!   caller that tracks thread creation (the tracing collectors) can start another session for new
//!   threads.
//! - **Kernel side included.** Context switches and most faults happen in the kernel; with
//!   `exclude_kernel` they would read as zero. If the kernel refuses (perf_event_paranoid ≥ 2 and no
//!   privilege), counters fall back to user-only and the session says so.
//! - **Threads exit.** The counter of an exited thread keeps its final value; reads never fail
//!   because of it. The thread is marked `exited` once /proc no longer shows it (or shows another
//!   thread under the same tid).

use crate::error::CollectError;
use crate::procfs::parse::{self, TaskState};
use perf_event::events::{Hardware, Software};
use perf_event::{Builder, Counter};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;

/// What perf_event_open offers on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerfCapabilities {
    /// Hardware events (instructions, cycles, ...) can be counted.
    pub hardware: bool,
    /// Software events (task-clock, context switches, ...) can be counted.
    pub software: bool,
    /// `/proc/sys/kernel/perf_event_paranoid` (-1 … 4; 2 if unreadable, the kernel's default).
    pub paranoid: i32,
    /// Why something is unavailable, when it is.
    pub reason: Option<String>,
}

fn paranoid_level() -> i32 {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(2)
}

fn open_self_hw() -> io::Result<Counter> {
    Builder::new(Hardware::INSTRUCTIONS)
        .observe_self()
        .any_cpu()
        .build()
}

fn open_self_sw() -> io::Result<Counter> {
    Builder::new(Software::TASK_CLOCK)
        .observe_self()
        .any_cpu()
        .build()
}

/// Whether hardware counters work: tries to open an instruction counter on the calling thread.
pub fn hardware_counters_available() -> bool {
    open_self_hw().is_ok()
}

/// Probes hardware and software counters on the calling thread.
pub fn probe() -> PerfCapabilities {
    let paranoid = paranoid_level();
    let hw = open_self_hw();
    let sw = open_self_sw();
    let mut reasons = Vec::new();
    if let Err(e) = &hw {
        reasons.push(format!(
            "hardware counters: {} ({})",
            e,
            match e.raw_os_error() {
                Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) =>
                    "no hardware PMU exposed, as in most VMs",
                Some(libc::EACCES) | Some(libc::EPERM) =>
                    "not permitted: run as root or lower perf_event_paranoid",
                _ => "perf_event_open failed",
            }
        ));
    }
    if let Err(e) = &sw {
        reasons.push(format!(
            "software counters: {e} (perf_event_paranoid = {paranoid}; 3 or more forbids perf for unprivileged users)"
        ));
    }
    PerfCapabilities {
        hardware: hw.is_ok(),
        software: sw.is_ok(),
        paranoid,
        reason: if reasons.is_empty() {
            None
        } else {
            Some(reasons.join("; "))
        },
    }
}

/// Counts of one thread since the session started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoftwareCounts {
    /// CPU time of the thread in nanoseconds.
    pub task_clock_ns: u64,
    pub context_switches: u64,
    pub cpu_migrations: u64,
    /// All page faults; the split below is `None` where the kernel does not offer it.
    pub page_faults: u64,
    pub minor_faults: Option<u64>,
    pub major_faults: Option<u64>,
    /// How long the counters were enabled and actually counting (software events are never
    /// multiplexed, so the two agree).
    pub time_enabled_ns: u64,
    pub time_running_ns: u64,
    /// The thread has exited; the counts are final.
    pub exited: bool,
}

/// A thread the session could not count, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UncoveredThread {
    pub tid: u32,
    pub reason: String,
}

struct ThreadCounters {
    task_clock: Counter,
    context_switches: Counter,
    cpu_migrations: Counter,
    page_faults: Counter,
    minor_faults: Option<Counter>,
    major_faults: Option<Counter>,
    last: SoftwareCounts,
    tid: u32,
    /// Start time of the thread when counting started, to recognise its exit even if the tid is
    /// reused.
    start_ticks: Option<u64>,
}

/// A counting session over a fixed set of threads. Counting starts in [`start`](Self::start) and
/// stops when the session is dropped (which closes the counters).
pub struct SoftwareCounters {
    threads: BTreeMap<u32, ThreadCounters>,
    uncovered: Vec<UncoveredThread>,
    kernel_included: bool,
}

impl std::fmt::Debug for SoftwareCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SoftwareCounters")
            .field("covered", &self.covered())
            .field("uncovered", &self.uncovered)
            .field("kernel_included", &self.kernel_included)
            .finish()
    }
}

fn open(
    tid: u32,
    event: Software,
    name: &'static str,
    kernel: bool,
) -> Result<Counter, CollectError> {
    let mut b = Builder::new(event);
    b.observe_pid(tid as libc::pid_t)
        .any_cpu()
        .inherit(false)
        .exclude_kernel(!kernel)
        .exclude_hv(true);
    b.build().map_err(|source| CollectError::Perf {
        tid,
        event: name,
        source,
    })
}

fn is_permission(e: &CollectError) -> bool {
    matches!(e, CollectError::Perf { source, .. }
        if matches!(source.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)))
}

impl ThreadCounters {
    fn open(tid: u32, kernel: bool) -> Result<Self, CollectError> {
        let start_ticks = thread_start(tid);
        let mut t = ThreadCounters {
            task_clock: open(tid, Software::TASK_CLOCK, "task-clock", kernel)?,
            context_switches: open(tid, Software::CONTEXT_SWITCHES, "context-switches", kernel)?,
            cpu_migrations: open(tid, Software::CPU_MIGRATIONS, "cpu-migrations", kernel)?,
            page_faults: open(tid, Software::PAGE_FAULTS, "page-faults", kernel)?,
            minor_faults: open(tid, Software::PAGE_FAULTS_MIN, "minor-faults", kernel).ok(),
            major_faults: open(tid, Software::PAGE_FAULTS_MAJ, "major-faults", kernel).ok(),
            last: SoftwareCounts::default(),
            tid,
            start_ticks,
        };
        // Enable all events of the thread back to back so they cover the same window.
        t.task_clock.enable().map_err(|source| CollectError::Perf {
            tid,
            event: "enable",
            source,
        })?;
        for c in [
            &mut t.context_switches,
            &mut t.cpu_migrations,
            &mut t.page_faults,
        ]
        .into_iter()
        .chain(t.minor_faults.as_mut())
        .chain(t.major_faults.as_mut())
        {
            c.enable().map_err(|source| CollectError::Perf {
                tid,
                event: "enable",
                source,
            })?;
        }
        Ok(t)
    }

    /// Reads all counters; on any failure the previous values are kept.
    fn read(&mut self) -> SoftwareCounts {
        let mut c = self.last;
        if c.exited {
            return c;
        }
        // A thread that is gone, or whose tid now belongs to a thread with another start time,
        // has exited: its counts are final, so read once more and freeze. (perf's POLLHUP can't be
        // used: without a ring buffer, poll reports POLLHUP for live threads too.)
        let exited = thread_start(self.tid) != self.start_ticks;
        let Ok(tc) = self.task_clock.read_count_and_time() else {
            c.exited = true;
            self.last = c;
            return c;
        };
        c.task_clock_ns = tc.count;
        c.time_enabled_ns = tc.time_enabled;
        c.time_running_ns = tc.time_running;
        if let Ok(v) = self.context_switches.read() {
            c.context_switches = v;
        }
        if let Ok(v) = self.cpu_migrations.read() {
            c.cpu_migrations = v;
        }
        if let Ok(v) = self.page_faults.read() {
            c.page_faults = v;
        }
        if let Some(m) = self.minor_faults.as_mut() {
            if let Ok(v) = m.read() {
                c.minor_faults = Some(v);
            }
        }
        if let Some(m) = self.major_faults.as_mut() {
            if let Ok(v) = m.read() {
                c.major_faults = Some(v);
            }
        }
        c.exited = exited;
        self.last = c;
        c
    }
}

/// Start time (clock ticks since boot) of thread `tid`, or `None` if it is gone or a zombie.
/// /proc/TID works for any thread, not only process leaders.
fn thread_start(tid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    let stat = parse::parse_stat(&text).ok()?;
    match stat.state {
        TaskState::Zombie | TaskState::Dead => None,
        _ => Some(stat.start_ticks),
    }
}

impl SoftwareCounters {
    /// Opens and enables software counters on each of `tids` (threads of any process; ptrace
    /// access to them is needed). Threads that cannot be counted (exited meanwhile, no permission)
    /// are listed by [`uncovered`](Self::uncovered); it is an error only if none of `tids` could be
    /// covered.
    pub fn start(tids: &[u32]) -> Result<Self, CollectError> {
        let mut s = SoftwareCounters {
            threads: BTreeMap::new(),
            uncovered: Vec::new(),
            kernel_included: true,
        };
        let mut first_err = None;
        let mut unique: Vec<u32> = tids.to_vec();
        unique.sort_unstable();
        unique.dedup();
        for tid in unique {
            let mut r = ThreadCounters::open(tid, s.kernel_included);
            if s.kernel_included && r.as_ref().err().is_some_and(is_permission) {
                // Unprivileged under perf_event_paranoid 2: user-only counting is still allowed.
                if let Ok(t) = ThreadCounters::open(tid, false) {
                    s.kernel_included = false;
                    // Counters opened earlier include the kernel; keep the session uniform.
                    for (old, _) in std::mem::take(&mut s.threads) {
                        match ThreadCounters::open(old, false) {
                            Ok(t) => {
                                s.threads.insert(old, t);
                            }
                            Err(e) => s.uncovered.push(UncoveredThread {
                                tid: old,
                                reason: e.to_string(),
                            }),
                        }
                    }
                    r = Ok(t);
                }
            }
            match r {
                Ok(t) => {
                    s.threads.insert(tid, t);
                }
                Err(e) => {
                    let reason = match &e {
                        CollectError::Perf { source, .. }
                            if source.raw_os_error() == Some(libc::ESRCH) =>
                        {
                            format!("thread {tid} does not exist (exited before counting started)")
                        }
                        _ => e.to_string(),
                    };
                    s.uncovered.push(UncoveredThread { tid, reason });
                    first_err.get_or_insert(e);
                }
            }
        }
        if s.threads.is_empty() {
            if let Some(e) = first_err {
                return Err(e);
            }
        }
        Ok(s)
    }

    /// Tids being counted.
    pub fn covered(&self) -> Vec<u32> {
        self.threads.keys().copied().collect()
    }

    /// Tids that could not be counted, with the reason.
    pub fn uncovered(&self) -> &[UncoveredThread] {
        &self.uncovered
    }

    /// False if the kernel only allowed user-space counting (then context switches and faults
    /// taken in the kernel are missing).
    pub fn kernel_included(&self) -> bool {
        self.kernel_included
    }

    /// Current counts of every covered thread since `start`. Never fails: a thread that exited
    /// keeps its final counts and is marked `exited`.
    pub fn read(&mut self) -> BTreeMap<u32, SoftwareCounts> {
        self.threads
            .iter_mut()
            .map(|(tid, t)| (*tid, t.read()))
            .collect()
    }
}
