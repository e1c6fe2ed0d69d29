//! /proc collector: threads, memory, file descriptors and sockets of a running process tree, read
//! from outside without stopping or restarting it.
//!
//! Design trade-offs:
//!
//! - **Snapshots and deltas, not a stream.** /proc holds cumulative counters (CPU ticks, faults,
//!   context switches, schedstat); two snapshots bracketing a load phase give per-thread rates at the
//!   cost of two directory walks, with zero overhead on the target in between. Threads created and
//!   gone between two snapshots are invisible here; the process-wide totals in `/proc/PID/stat`
//!   still include them, and the tracing collectors see their clone/exit.
//! - **Statistics only.** The output carries numbers and classes. Thread names, command lines,
//!   mapped file names and socket paths are strings of the original; they are read past by the
//!   parsers and never stored, so a snapshot can go into a profile as is.
//! - **Races are normal.** A thread or process can vanish between listing a directory and reading a
//!   file in it; such entries are skipped (threads) or listed as vanished (processes). Only a
//!   process that is gone before we start, or a permission problem, is an error.
//! - **Working set via `clear_refs`.** Idle page tracking (`/sys/kernel/mm/page_idle`) and
//!   soft-dirty bits are absent on the kernels we run on. Writing `1` to `/proc/PID/clear_refs`
//!   clears the accessed bit of every page of the process; `Referenced:` in `smaps_rollup` then
//!   counts the pages touched since, which is the page-level working set over that window. The cost
//!   to the target is one page-table walk and TLB flush per clear, and re-setting the accessed bits
//!   (done by hardware) as it runs.
//! - **Socket options through `pidfd_getfd`**, not ptrace-injected `getsockopt`: see
//!   [`socket_options`]. Accept backlogs come from NETLINK_SOCK_DIAG (see [`accept_queues`]), not
//!   from parsing `ss` output.

pub mod parse;
mod sockets;

pub use parse::{
    AddressClass, FdKind, IoCounters, MapsSummary, Region, Schedstat, SmapsRollup, SocketState,
    SocketType, TaskState,
};
pub use sockets::{
    accept_queues, socket_options, AcceptQueue, FdRef, ListeningSocket, SocketFamily, SocketInfo,
    SocketOptions,
};

use crate::error::CollectError;
use serde::{Deserialize, Serialize};
use sockets::{is_gone, map_io, netns_inode, NetTables, Pidfd};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fs;
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------
// types

/// Memory figures of a process from `status`, in bytes; 0 where the kernel gives none (zombies).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryStatus {
    pub vm_size: u64,
    pub vm_rss: u64,
    pub vm_hwm: u64,
    pub vm_data: u64,
    pub vm_swap: u64,
    pub rss_anon: u64,
    pub rss_file: u64,
    pub rss_shmem: u64,
}

/// Open file descriptors of a process, counted by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FdInventory {
    pub total: u64,
    pub sockets: u64,
    pub pipes: u64,
    pub regular_files: u64,
    pub directories: u64,
    pub char_devices: u64,
    pub block_devices: u64,
    pub fifos: u64,
    pub memfds: u64,
    pub eventpoll: u64,
    pub eventfd: u64,
    pub timerfd: u64,
    pub signalfd: u64,
    pub inotify: u64,
    pub io_uring: u64,
    pub pidfd: u64,
    pub perf_event: u64,
    pub other_anon_inode: u64,
    pub other: u64,
}

/// One thread at the time of the snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadSnapshot {
    pub tid: u32,
    pub state: TaskState,
    pub user_secs: f64,
    pub system_secs: f64,
    pub minflt: u64,
    pub majflt: u64,
    pub voluntary_ctxt_switches: u64,
    pub nonvoluntary_ctxt_switches: u64,
    /// CPU the thread last ran on.
    pub processor: i32,
    /// Time on CPU, and runnable but waiting for a CPU, from schedstat (0 if schedstats are off).
    pub run_ns: u64,
    pub wait_ns: u64,
    pub timeslices: u64,
    /// Start time since boot (CLOCK_BOOTTIME), at clock-tick resolution.
    pub start_since_boot_ns: u64,
    /// Age at the time of the snapshot; tells long-lived pool threads from short-lived ones.
    pub age_ns: u64,
    pub nice: i64,
    pub priority: i64,
    pub rt_priority: u32,
    /// Scheduling policy (SCHED_OTHER = 0, SCHED_FIFO = 1, SCHED_RR = 2, SCHED_BATCH = 3, ...).
    pub policy: u32,
}

/// One process at the time of the snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessSnapshot {
    pub pid: u32,
    pub ppid: u32,
    pub real_uid: u32,
    pub effective_uid: u32,
    pub state: TaskState,
    pub num_threads: u64,
    pub start_since_boot_ns: u64,
    /// CPU time and faults of the whole process, including threads that already exited.
    pub user_secs: f64,
    pub system_secs: f64,
    pub minflt: u64,
    pub majflt: u64,
    pub memory: MemoryStatus,
    /// `None` when memory collection was not requested or the process has no address space left.
    pub smaps: Option<SmapsRollup>,
    pub maps: Option<MapsSummary>,
    pub io: Option<IoCounters>,
    pub fds: Option<FdInventory>,
    pub sockets: Vec<SocketInfo>,
    /// Threads by tid.
    pub threads: BTreeMap<u32, ThreadSnapshot>,
    /// Parts that could not be read (our own messages; they name /proc files, never the target's
    /// strings).
    pub warnings: Vec<String>,
}

/// A set of processes at one point in time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcSnapshot {
    /// CLOCK_MONOTONIC when the snapshot started.
    pub monotonic_ns: u64,
    /// CLOCK_BOOTTIME when the snapshot started (the clock of the start times).
    pub boottime_ns: u64,
    /// How long taking the snapshot took.
    pub duration_ns: u64,
    pub clock_ticks_per_sec: u64,
    pub page_size: u64,
    pub processes: BTreeMap<u32, ProcessSnapshot>,
    /// Requested pids that no longer existed.
    pub vanished: Vec<u32>,
}

/// What a snapshot reads. Thread and process counters are always read; the rest costs more
/// (smaps_rollup walks the page tables, sockets read the net tables) and can be skipped for
/// frequent sampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotOptions {
    /// smaps_rollup and the maps summary.
    pub memory: bool,
    /// The fd inventory and the sockets.
    pub fds: bool,
    /// Options (via pidfd_getfd) and accept queues (via sock_diag) of listening sockets.
    pub listener_details: bool,
    /// Also read the options of up to this many accepted connections per process (TCP sockets
    /// whose local port is one the process listens on), since servers set some options (e.g.
    /// TCP_NODELAY) per connection.
    pub connection_options: usize,
}

impl SnapshotOptions {
    /// Thread and process counters only: what CPU time, faults and context switches around a load
    /// run need, without the page-table walk and the socket tables.
    pub fn counters_only() -> Self {
        SnapshotOptions {
            memory: false,
            fds: false,
            listener_details: false,
            connection_options: 0,
        }
    }
}

impl Default for SnapshotOptions {
    fn default() -> Self {
        SnapshotOptions {
            memory: true,
            fds: true,
            listener_details: true,
            connection_options: 4,
        }
    }
}

/// Change of one thread between two snapshots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadDelta {
    pub tid: u32,
    pub user_secs: f64,
    pub system_secs: f64,
    pub minflt: u64,
    pub majflt: u64,
    pub voluntary_ctxt_switches: u64,
    pub nonvoluntary_ctxt_switches: u64,
    pub run_ns: u64,
    pub wait_ns: u64,
    pub timeslices: u64,
}

/// Change of one process between two snapshots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessDelta {
    pub pid: u32,
    /// Whole-process figures (they include threads that exited during the interval).
    pub user_secs: f64,
    pub system_secs: f64,
    pub minflt: u64,
    pub majflt: u64,
    pub io: Option<IoCounters>,
    pub rss_change_bytes: i64,
    /// Threads present in the later snapshot. Threads that appeared during the interval are
    /// included with all their counts, which all accrued within the interval.
    pub threads: BTreeMap<u32, ThreadDelta>,
    pub threads_appeared: Vec<u32>,
    pub threads_disappeared: Vec<u32>,
}

/// Change between two snapshots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcDelta {
    pub interval_ns: u64,
    /// Processes present in both snapshots.
    pub processes: BTreeMap<u32, ProcessDelta>,
    /// In the later snapshot only (or the pid was reused by a new process).
    pub processes_appeared: Vec<u32>,
    /// In the earlier snapshot only (or the pid was reused by a new process).
    pub processes_disappeared: Vec<u32>,
}

impl ProcDelta {
    /// Nanoseconds the threads spent on a CPU (user and system), from schedstat: accounted at each
    /// context switch and tick, not sampled, unlike the user/system split of `stat`. Threads that
    /// exited within the interval are not counted. 0 where schedstat is off.
    pub fn on_cpu_ns(&self) -> u64 {
        self.processes
            .values()
            .flat_map(|p| p.threads.values())
            .map(|t| t.run_ns)
            .sum()
    }

    /// [`ProcDelta::on_cpu_ns`] in microseconds per one of `requests`; `None` for no requests, or
    /// no run time at all (a busy server accrues some every interval: schedstat is off).
    pub fn on_cpu_us_per_request(&self, requests: u64) -> Option<f64> {
        let ns = self.on_cpu_ns();
        (ns > 0 && requests > 0).then(|| ns as f64 / 1e3 / requests as f64)
    }
}

// ---------------------------------------------------------------------------------------------
// small helpers

fn proc_path(pid: u32, rest: &str) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/{rest}"))
}

fn read(pid: u32, path: &Path) -> Result<String, CollectError> {
    fs::read_to_string(path).map_err(|e| map_io(pid, path, e))
}

fn parsed<T>(path: &Path, r: Result<T, parse::ParseError>) -> Result<T, CollectError> {
    r.map_err(|e| CollectError::Parse {
        path: path.to_path_buf(),
        detail: e.0,
    })
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we pass; the clocks used always exist.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Clock ticks per second of the times in `stat` (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 {
        v as u64
    } else {
        100
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 {
        v as u64
    } else {
        4096
    }
}

fn numeric_entries(dir: &Path) -> io::Result<Vec<u32>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let Ok(entry) = entry else { continue };
        if let Some(n) = entry.file_name().to_str().and_then(|s| s.parse().ok()) {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Fails unless `pid` is a process (thread group leader) we can inspect.
fn check_process(pid: u32) -> Result<(), CollectError> {
    let status_path = proc_path(pid, "status");
    let text = read(pid, &status_path)?;
    // /proc/TID exists for every thread too; a thread id is not a process.
    let tgid = text
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse::<u32>().ok());
    if let Some(tgid) = tgid {
        if tgid != pid {
            return Err(CollectError::NotAProcess { tid: pid, tgid });
        }
    }
    // Listing descriptors needs the same access as everything else we read (ptrace read access),
    // so it is the earliest place a permission problem shows.
    let fd_dir = proc_path(pid, "fd");
    fs::read_dir(&fd_dir).map_err(|e| map_io(pid, &fd_dir, e))?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// process tree

/// The process `root` and all its descendant processes (e.g. an nginx master and its workers),
/// root first, then breadth-first in pid order.
///
/// Descendants are found by one pass over /proc building a parent → children map from `stat`;
/// processes that exit during the pass are skipped.
///
/// Errors: [`CollectError::NoSuchProcess`] if `root` does not exist,
/// [`CollectError::NotAProcess`] if it is a thread id, [`CollectError::PermissionDenied`] if its
/// descriptors cannot be listed (not root and not its owner).
pub fn process_tree(root: u32) -> Result<Vec<u32>, CollectError> {
    if root == 0 {
        return Err(CollectError::NoSuchProcess { pid: root });
    }
    check_process(root)?;
    let proc_dir = Path::new("/proc");
    let pids = numeric_entries(proc_dir).map_err(|e| CollectError::Io {
        path: proc_dir.to_path_buf(),
        source: e,
    })?;
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for pid in pids {
        let Ok(text) = fs::read_to_string(proc_path(pid, "stat")) else {
            continue; // exited meanwhile
        };
        if let Ok(stat) = parse::parse_stat(&text) {
            children.entry(stat.ppid).or_default().push(pid);
        }
    }
    let mut out = vec![root];
    let mut queue = VecDeque::from([root]);
    let mut seen = BTreeSet::from([root]);
    while let Some(p) = queue.pop_front() {
        if let Some(kids) = children.get(&p) {
            for &k in kids {
                if seen.insert(k) {
                    out.push(k);
                    queue.push_back(k);
                }
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// snapshot

/// Snapshot of `pids` with everything ([`SnapshotOptions::default`]).
pub fn snapshot(pids: &[u32]) -> Result<ProcSnapshot, CollectError> {
    snapshot_with(pids, &SnapshotOptions::default())
}

/// Per-snapshot caches: processes of a tree usually share a network namespace.
#[derive(Default)]
struct Ctx {
    tables: HashMap<u64, std::rc::Rc<NetTables>>,
    queues: HashMap<u64, Option<HashMap<u64, AcceptQueue>>>,
}

/// Snapshot of `pids`, reading what `opts` asks for. Pids that vanished (or are zombies) are
/// listed in [`ProcSnapshot::vanished`]; it is an error only if all of them did.
pub fn snapshot_with(pids: &[u32], opts: &SnapshotOptions) -> Result<ProcSnapshot, CollectError> {
    let ticks = clock_ticks_per_sec();
    let monotonic_ns = clock_ns(libc::CLOCK_MONOTONIC);
    let boottime_ns = clock_ns(libc::CLOCK_BOOTTIME);
    let mut snap = ProcSnapshot {
        monotonic_ns,
        boottime_ns,
        duration_ns: 0,
        clock_ticks_per_sec: ticks,
        page_size: page_size(),
        processes: BTreeMap::new(),
        vanished: Vec::new(),
    };
    let mut ctx = Ctx::default();
    let unique: BTreeSet<u32> = pids.iter().copied().collect();
    for &pid in &unique {
        match process_snapshot(pid, ticks, boottime_ns, opts, &mut ctx) {
            Ok(p) => {
                snap.processes.insert(pid, p);
            }
            Err(CollectError::NoSuchProcess { .. }) => snap.vanished.push(pid),
            Err(e) => return Err(e),
        }
    }
    if snap.processes.is_empty() {
        if let Some(&pid) = unique.iter().next() {
            return Err(CollectError::NoSuchProcess { pid });
        }
    }
    snap.duration_ns = clock_ns(libc::CLOCK_MONOTONIC).saturating_sub(monotonic_ns);
    Ok(snap)
}

fn ticks_to_secs(t: u64, ticks: u64) -> f64 {
    t as f64 / ticks as f64
}

fn ticks_to_ns(t: u64, ticks: u64) -> u64 {
    (t as u128 * 1_000_000_000u128 / ticks as u128) as u64
}

fn process_snapshot(
    pid: u32,
    ticks: u64,
    now_boot_ns: u64,
    opts: &SnapshotOptions,
    ctx: &mut Ctx,
) -> Result<ProcessSnapshot, CollectError> {
    let stat_path = proc_path(pid, "stat");
    let stat = parsed(&stat_path, parse::parse_stat(&read(pid, &stat_path)?))?;
    // A zombie has exited and only waits to be reaped; most of its files are gone already.
    if matches!(stat.state, TaskState::Zombie | TaskState::Dead) {
        return Err(CollectError::NoSuchProcess { pid });
    }
    let status_path = proc_path(pid, "status");
    let status = parsed(&status_path, parse::parse_status(&read(pid, &status_path)?))?;
    let start_since_boot_ns = ticks_to_ns(stat.start_ticks, ticks);
    let mut p = ProcessSnapshot {
        pid,
        ppid: stat.ppid,
        real_uid: status.real_uid,
        effective_uid: status.effective_uid,
        state: stat.state,
        num_threads: stat.num_threads,
        start_since_boot_ns,
        user_secs: ticks_to_secs(stat.utime_ticks, ticks),
        system_secs: ticks_to_secs(stat.stime_ticks, ticks),
        minflt: stat.minflt,
        majflt: stat.majflt,
        memory: MemoryStatus {
            vm_size: status.vm_size.unwrap_or(0),
            vm_rss: status.vm_rss.unwrap_or(0),
            vm_hwm: status.vm_hwm.unwrap_or(0),
            vm_data: status.vm_data.unwrap_or(0),
            vm_swap: status.vm_swap.unwrap_or(0),
            rss_anon: status.rss_anon.unwrap_or(0),
            rss_file: status.rss_file.unwrap_or(0),
            rss_shmem: status.rss_shmem.unwrap_or(0),
        },
        smaps: None,
        maps: None,
        io: None,
        fds: None,
        sockets: Vec::new(),
        threads: BTreeMap::new(),
        warnings: Vec::new(),
    };

    // Threads first: they are what changes fastest.
    let task_dir = proc_path(pid, "task");
    let tids = numeric_entries(&task_dir).map_err(|e| map_io(pid, &task_dir, e))?;
    for tid in tids {
        match thread_snapshot(pid, tid, ticks, now_boot_ns) {
            Ok(Some(t)) => {
                p.threads.insert(tid, t);
            }
            Ok(None) => {} // exited between readdir and read
            Err(e) => return Err(e),
        }
    }

    let io_path = proc_path(pid, "io");
    match fs::read_to_string(&io_path) {
        Ok(text) => p.io = Some(parsed(&io_path, parse::parse_io(&text))?),
        Err(e) if is_gone(&e) => return Err(CollectError::NoSuchProcess { pid }),
        Err(e) => p.warnings.push(format!("{}: {e}", io_path.display())),
    }

    if opts.memory {
        let path = proc_path(pid, "smaps_rollup");
        let text = read(pid, &path)?;
        // A zombie has no address space: the file is empty.
        if !text.trim().is_empty() {
            p.smaps = Some(parsed(&path, parse::parse_smaps_rollup(&text))?);
        }
        let path = proc_path(pid, "maps");
        p.maps = Some(parsed(&path, parse::parse_maps(&read(pid, &path)?))?);
    }

    if opts.fds {
        let (inventory, sockets) = fds_and_sockets(pid, opts, ctx, &mut p.warnings)?;
        p.fds = Some(inventory);
        p.sockets = sockets;
    }
    Ok(p)
}

/// Reads one thread; `Ok(None)` if it exited meanwhile.
fn thread_snapshot(
    pid: u32,
    tid: u32,
    ticks: u64,
    now_boot_ns: u64,
) -> Result<Option<ThreadSnapshot>, CollectError> {
    let dir = PathBuf::from(format!("/proc/{pid}/task/{tid}"));
    let read_thread = |name: &str| -> Result<Option<(PathBuf, String)>, CollectError> {
        let path = dir.join(name);
        match fs::read_to_string(&path) {
            Ok(t) => Ok(Some((path, t))),
            Err(e) if is_gone(&e) => Ok(None),
            Err(e) => Err(map_io(pid, &path, e)),
        }
    };
    let Some((stat_path, stat_text)) = read_thread("stat")? else {
        return Ok(None);
    };
    let Some((status_path, status_text)) = read_thread("status")? else {
        return Ok(None);
    };
    let stat = parsed(&stat_path, parse::parse_stat(&stat_text))?;
    let status = parsed(&status_path, parse::parse_status(&status_text))?;
    // schedstat is absent without CONFIG_SCHED_INFO; then run/wait stay 0.
    let sched = match read_thread("schedstat")? {
        Some((path, text)) => parsed(&path, parse::parse_schedstat(&text))?,
        None if dir.exists() => Schedstat::default(),
        None => return Ok(None),
    };
    let start = ticks_to_ns(stat.start_ticks, ticks);
    Ok(Some(ThreadSnapshot {
        tid,
        state: stat.state,
        user_secs: ticks_to_secs(stat.utime_ticks, ticks),
        system_secs: ticks_to_secs(stat.stime_ticks, ticks),
        minflt: stat.minflt,
        majflt: stat.majflt,
        voluntary_ctxt_switches: status.voluntary_ctxt_switches,
        nonvoluntary_ctxt_switches: status.nonvoluntary_ctxt_switches,
        processor: stat.processor,
        run_ns: sched.run_ns,
        wait_ns: sched.wait_ns,
        timeslices: sched.timeslices,
        start_since_boot_ns: start,
        age_ns: now_boot_ns.saturating_sub(start),
        nice: stat.nice,
        priority: stat.priority,
        rt_priority: stat.rt_priority,
        policy: stat.policy,
    }))
}

fn fds_and_sockets(
    pid: u32,
    opts: &SnapshotOptions,
    ctx: &mut Ctx,
    warnings: &mut Vec<String>,
) -> Result<(FdInventory, Vec<SocketInfo>), CollectError> {
    let fd_dir = proc_path(pid, "fd");
    let fds = numeric_entries(&fd_dir).map_err(|e| map_io(pid, &fd_dir, e))?;
    let mut inv = FdInventory::default();
    let mut socket_fds: Vec<(i32, u64)> = Vec::new();
    for fd in fds {
        let link = fd_dir.join(fd.to_string());
        let target = match fs::read_link(&link) {
            Ok(t) => t,
            Err(e) if is_gone(&e) => continue, // closed meanwhile
            Err(e) => return Err(map_io(pid, &link, e)),
        };
        inv.total += 1;
        let kind = parse::classify_fd_link(&target.to_string_lossy());
        match kind {
            FdKind::Socket(inode) => {
                inv.sockets += 1;
                socket_fds.push((fd as i32, inode));
            }
            FdKind::Pipe => inv.pipes += 1,
            FdKind::Memfd => inv.memfds += 1,
            FdKind::Eventpoll => inv.eventpoll += 1,
            FdKind::Eventfd => inv.eventfd += 1,
            FdKind::Timerfd => inv.timerfd += 1,
            FdKind::Signalfd => inv.signalfd += 1,
            FdKind::Inotify => inv.inotify += 1,
            FdKind::IoUring => inv.io_uring += 1,
            FdKind::Pidfd => inv.pidfd += 1,
            FdKind::PerfEvent => inv.perf_event += 1,
            FdKind::OtherAnonInode => inv.other_anon_inode += 1,
            FdKind::Other => inv.other += 1,
            FdKind::Path => {
                // stat through the fd link reaches the open file even if it was renamed or
                // deleted, so no path is needed.
                match fs::metadata(&link) {
                    Ok(m) => {
                        let ft = m.file_type();
                        if ft.is_file() {
                            inv.regular_files += 1
                        } else if ft.is_dir() {
                            inv.directories += 1
                        } else if ft.is_char_device() {
                            inv.char_devices += 1
                        } else if ft.is_block_device() {
                            inv.block_devices += 1
                        } else if ft.is_fifo() {
                            inv.fifos += 1
                        } else {
                            inv.other += 1
                        }
                    }
                    Err(_) => inv.other += 1,
                }
            }
        }
    }
    if socket_fds.is_empty() {
        return Ok((inv, Vec::new()));
    }

    let ns = netns_inode(Some(pid))?;
    let tables = match ctx.tables.get(&ns) {
        Some(t) => t.clone(),
        None => {
            let t = std::rc::Rc::new(NetTables::load(pid)?);
            ctx.tables.insert(ns, t.clone());
            t
        }
    };
    let mut sockets: Vec<SocketInfo> = socket_fds
        .iter()
        .map(|&(fd, inode)| {
            let mut s = tables.describe(fd, inode);
            let info = proc_path(pid, &format!("fdinfo/{fd}"));
            if let Ok(text) = fs::read_to_string(info) {
                s.nonblocking = parse::parse_fdinfo_flags(&text)
                    .ok()
                    .map(|f| f & libc::O_NONBLOCK as u32 != 0);
            }
            s
        })
        .collect();

    if opts.listener_details {
        let queues = ctx
            .queues
            .entry(ns)
            .or_insert_with(|| match accept_queues(pid) {
                Ok(q) => Some(q),
                Err(e) => {
                    warnings.push(format!("accept queues: {e}"));
                    None
                }
            });
        if let Some(q) = queues {
            for s in sockets.iter_mut().filter(|s| s.is_listening()) {
                s.accept_queue = q.get(&s.inode).copied();
            }
        }
        let listen_ports: BTreeSet<u16> = sockets
            .iter()
            .filter(|s| s.is_listening())
            .filter_map(|s| s.local_port)
            .collect();
        let mut wanted: Vec<usize> = sockets
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_listening())
            .map(|(i, _)| i)
            .collect();
        wanted.extend(
            sockets
                .iter()
                .enumerate()
                .filter(|(_, s)| {
                    matches!(s.family, SocketFamily::Tcp4 | SocketFamily::Tcp6)
                        && s.state == SocketState::Established
                        && s.local_port.is_some_and(|p| listen_ports.contains(&p))
                })
                .map(|(i, _)| i)
                .take(opts.connection_options),
        );
        if !wanted.is_empty() {
            match Pidfd::open(pid) {
                Ok(pidfd) => {
                    for i in wanted {
                        match pidfd.socket_options(sockets[i].fd) {
                            Ok(o) => sockets[i].options = Some(o),
                            // Closed between listing and duplicating: normal churn.
                            Err(CollectError::NoSuchFd { .. }) => {}
                            Err(CollectError::NoSuchProcess { pid }) => {
                                return Err(CollectError::NoSuchProcess { pid })
                            }
                            Err(e) => warnings.push(format!("socket options: {e}")),
                        }
                    }
                }
                Err(CollectError::NoSuchProcess { pid }) => {
                    return Err(CollectError::NoSuchProcess { pid })
                }
                Err(e) => warnings.push(format!("socket options: {e}")),
            }
        }
    }
    Ok((inv, sockets))
}

/// Listening sockets of `pids`, each once with every descriptor that refers to it, with options
/// and accept queue. Processes that vanish meanwhile are skipped.
pub fn listening_sockets(pids: &[u32]) -> Result<Vec<ListeningSocket>, CollectError> {
    let opts = SnapshotOptions {
        memory: false,
        fds: true,
        listener_details: true,
        connection_options: 0,
    };
    let mut ctx = Ctx::default();
    let mut by_inode: BTreeMap<u64, ListeningSocket> = BTreeMap::new();
    let unique: BTreeSet<u32> = pids.iter().copied().collect();
    for &pid in &unique {
        let mut warnings = Vec::new();
        let sockets = match fds_and_sockets(pid, &opts, &mut ctx, &mut warnings) {
            Ok((_, s)) => s,
            Err(CollectError::NoSuchProcess { .. }) => continue,
            Err(e) => return Err(e),
        };
        for s in sockets.into_iter().filter(|s| s.is_listening()) {
            let entry = by_inode.entry(s.inode).or_insert_with(|| ListeningSocket {
                inode: s.inode,
                family: s.family,
                socket_type: s.socket_type,
                local_port: s.local_port,
                local_address: s.local_address,
                holders: Vec::new(),
                accept_queue: s.accept_queue,
                options: None,
            });
            entry.holders.push(FdRef { pid, fd: s.fd });
            if entry.options.is_none() {
                entry.options = s.options;
            }
        }
    }
    Ok(by_inode.into_values().collect())
}

// ---------------------------------------------------------------------------------------------
// delta

impl ProcSnapshot {
    /// What changed from `self` to `later`. Counters that went backwards (which they cannot for
    /// the same task) count as 0. A pid or tid whose start time differs was reused by a new task:
    /// it counts as one that disappeared and one that appeared.
    pub fn delta(&self, later: &ProcSnapshot) -> ProcDelta {
        let mut d = ProcDelta {
            interval_ns: later.monotonic_ns.saturating_sub(self.monotonic_ns),
            processes: BTreeMap::new(),
            processes_appeared: Vec::new(),
            processes_disappeared: Vec::new(),
        };
        for (pid, a) in &self.processes {
            match later.processes.get(pid) {
                Some(b) if b.start_since_boot_ns == a.start_since_boot_ns => {
                    d.processes.insert(*pid, process_delta(a, b));
                }
                Some(_) => {
                    d.processes_disappeared.push(*pid);
                    d.processes_appeared.push(*pid);
                }
                None => d.processes_disappeared.push(*pid),
            }
        }
        for pid in later.processes.keys() {
            if !self.processes.contains_key(pid) {
                d.processes_appeared.push(*pid);
            }
        }
        d.processes_appeared.sort_unstable();
        d
    }
}

fn secs_diff(a: f64, b: f64) -> f64 {
    (b - a).max(0.0)
}

fn io_diff(a: &IoCounters, b: &IoCounters) -> IoCounters {
    IoCounters {
        rchar: b.rchar.saturating_sub(a.rchar),
        wchar: b.wchar.saturating_sub(a.wchar),
        syscr: b.syscr.saturating_sub(a.syscr),
        syscw: b.syscw.saturating_sub(a.syscw),
        read_bytes: b.read_bytes.saturating_sub(a.read_bytes),
        write_bytes: b.write_bytes.saturating_sub(a.write_bytes),
        cancelled_write_bytes: b
            .cancelled_write_bytes
            .saturating_sub(a.cancelled_write_bytes),
    }
}

fn thread_delta(a: Option<&ThreadSnapshot>, b: &ThreadSnapshot) -> ThreadDelta {
    let zero = ThreadSnapshot {
        tid: b.tid,
        state: b.state,
        user_secs: 0.0,
        system_secs: 0.0,
        minflt: 0,
        majflt: 0,
        voluntary_ctxt_switches: 0,
        nonvoluntary_ctxt_switches: 0,
        processor: b.processor,
        run_ns: 0,
        wait_ns: 0,
        timeslices: 0,
        start_since_boot_ns: b.start_since_boot_ns,
        age_ns: 0,
        nice: b.nice,
        priority: b.priority,
        rt_priority: b.rt_priority,
        policy: b.policy,
    };
    let a = a.unwrap_or(&zero);
    ThreadDelta {
        tid: b.tid,
        user_secs: secs_diff(a.user_secs, b.user_secs),
        system_secs: secs_diff(a.system_secs, b.system_secs),
        minflt: b.minflt.saturating_sub(a.minflt),
        majflt: b.majflt.saturating_sub(a.majflt),
        voluntary_ctxt_switches: b
            .voluntary_ctxt_switches
            .saturating_sub(a.voluntary_ctxt_switches),
        nonvoluntary_ctxt_switches: b
            .nonvoluntary_ctxt_switches
            .saturating_sub(a.nonvoluntary_ctxt_switches),
        run_ns: b.run_ns.saturating_sub(a.run_ns),
        wait_ns: b.wait_ns.saturating_sub(a.wait_ns),
        timeslices: b.timeslices.saturating_sub(a.timeslices),
    }
}

fn process_delta(a: &ProcessSnapshot, b: &ProcessSnapshot) -> ProcessDelta {
    let mut d = ProcessDelta {
        pid: b.pid,
        user_secs: secs_diff(a.user_secs, b.user_secs),
        system_secs: secs_diff(a.system_secs, b.system_secs),
        minflt: b.minflt.saturating_sub(a.minflt),
        majflt: b.majflt.saturating_sub(a.majflt),
        io: match (&a.io, &b.io) {
            (Some(x), Some(y)) => Some(io_diff(x, y)),
            _ => None,
        },
        rss_change_bytes: b.memory.vm_rss as i64 - a.memory.vm_rss as i64,
        threads: BTreeMap::new(),
        threads_appeared: Vec::new(),
        threads_disappeared: Vec::new(),
    };
    for (tid, tb) in &b.threads {
        match a.threads.get(tid) {
            Some(ta) if ta.start_since_boot_ns == tb.start_since_boot_ns => {
                d.threads.insert(*tid, thread_delta(Some(ta), tb));
            }
            Some(_) => {
                d.threads_disappeared.push(*tid);
                d.threads_appeared.push(*tid);
                d.threads.insert(*tid, thread_delta(None, tb));
            }
            None => {
                d.threads_appeared.push(*tid);
                d.threads.insert(*tid, thread_delta(None, tb));
            }
        }
    }
    for tid in a.threads.keys() {
        if !b.threads.contains_key(tid) {
            d.threads_disappeared.push(*tid);
        }
    }
    d.threads_disappeared.sort_unstable();
    d
}

// ---------------------------------------------------------------------------------------------
// working set

/// Clears the accessed ("referenced") bit of every page of process `pid` by writing `1` to
/// `/proc/PID/clear_refs`. After this, [`referenced_bytes`] counts the memory the process touches,
/// i.e. its page-level working set since the clear. This stands in for idle page tracking, which is
/// not available on our kernels. It affects only the accessed bits, which the kernel otherwise uses
/// as a page-reclaim hint; on a machine without memory pressure that makes no difference.
pub fn clear_refs(pid: u32) -> Result<(), CollectError> {
    let path = proc_path(pid, "clear_refs");
    fs::write(&path, b"1").map_err(|e| map_io(pid, &path, e))
}

/// Bytes of pages of process `pid` whose accessed bit is set (`Referenced:` of `smaps_rollup`):
/// everything touched since the last [`clear_refs`], or since it was mapped.
pub fn referenced_bytes(pid: u32) -> Result<u64, CollectError> {
    let path = proc_path(pid, "smaps_rollup");
    let text = read(pid, &path)?;
    if text.trim().is_empty() {
        return Ok(0); // a zombie has no pages
    }
    Ok(parsed(&path, parse::parse_smaps_rollup(&text))?.referenced)
}
