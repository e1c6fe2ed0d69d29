//! The raw output of the syscall/scheduler collectors, shared by both backends ([`crate::bpftrace`]
//! and [`crate::ptrace`]), and the system-call knowledge they both need.
//!
//! A [`SyscallTrace`] is what one observation window of a process tree looked like from the kernel's
//! syscall boundary: per thread, how often each system call was entered, how it ended, which kind of
//! file descriptor it worked on and how many bytes it moved, plus the scheduler's view (context
//! switches, who woke whom, which threads and processes were created and exited). It is deliberately
//! raw — no per-request normalisation, no clustering — so that the analyzer can be changed without
//! re-tracing, and so that a trace can be saved as JSON and replayed in tests.
//!
//! System-call knowledge is data, not code: the number → name table is generated from the kernel
//! headers (`x86_64.tsv`), and which argument of which call is an fd, a byte count, an offset or a
//! flag word is a table too (`roles.tsv`). Both collectors read the same tables, which is what makes
//! their outputs comparable.

mod table;

pub use table::{
    all_roles, roles, syscall_name, syscall_number, ArgRoles, DataDir, FlagsArg, RetKind,
};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

/// Errors of the syscall/scheduler collectors. Each says what to do about it where that is known,
/// because most of them come from the environment (missing tool, wrong pid, no tracefs), not from
/// the program.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The tracing tool is not installed or not at the given path.
    #[error("{tool} not found (tried {path:?}): run scripts/setup.sh")]
    ToolNotFound { tool: &'static str, path: PathBuf },

    /// A pid to trace does not exist.
    #[error("no such process {pid}")]
    NoSuchProcess { pid: u32 },

    /// The id names a thread, not a process.
    #[error("{pid} is a thread of process {tgid}: give the process id")]
    NotAProcess { pid: u32, tgid: u32 },

    /// No pid was given.
    #[error("no process to trace: give at least one pid")]
    NoPids,

    /// tracefs is needed for tracepoints; it was absent and mounting it failed.
    #[error("tracefs not mounted and mount failed: {detail}")]
    Tracefs { detail: String },

    /// The tool started but failed (exited early, was killed, or its output was unusable).
    #[error("{tool} failed: {detail}{}", stderr_section(.stderr_tail))]
    ToolFailed {
        tool: &'static str,
        detail: String,
        stderr_tail: String,
    },

    /// The tool did not report being attached in time.
    #[error("{tool} did not attach within {secs:.0} s{}", stderr_section(.stderr_tail))]
    AttachTimeout {
        tool: &'static str,
        secs: f64,
        stderr_tail: String,
    },

    /// A recorded trace could not be parsed.
    #[error("parsing {what}: {detail}")]
    Parse { what: String, detail: String },

    /// An I/O error, with what we were doing.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

fn stderr_section(tail: &str) -> String {
    if tail.trim().is_empty() {
        String::new()
    } else {
        format!("; its stderr ends with:\n{}", tail.trim_end())
    }
}

/// What a file descriptor refers to, as far as the clone needs to know: network (socket), disk
/// (regular file), in-process plumbing (pipe), event machinery (anonymous inodes: epoll, eventfd,
/// timerfd, signalfd) or a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FdKind {
    Socket,
    File,
    Pipe,
    Anon,
    CharDev,
    /// Directories, block devices, symlinks, and descriptors that were not open (e.g. `-1` for an
    /// anonymous `mmap`, or a call that failed with `EBADF`).
    Other,
}

impl FdKind {
    /// The kind from the file type bits of an inode's `i_mode` (`i_mode >> 12`, as the bpftrace
    /// program computes it in kernel). Anonymous inodes have no type bits (0).
    pub fn from_mode_type(t: u64) -> FdKind {
        match t {
            0o14 => FdKind::Socket,
            0o10 => FdKind::File,
            0o01 => FdKind::Pipe,
            0 => FdKind::Anon,
            0o02 => FdKind::CharDev,
            _ => FdKind::Other,
        }
    }

    /// The kind from strace's `-yy` decoration of an fd, i.e. the text between the outer `<` `>`
    /// (`pipe:[123]`, `TCP:[1.2.3.4:80->...]`, `/etc/passwd`, `/dev/null<char 1:3>`,
    /// `anon_inode:[eventpoll]`). `None` (no decoration) means strace could not resolve the fd.
    pub fn from_strace_decoration(deco: Option<&str>) -> FdKind {
        let Some(d) = deco else { return FdKind::Other };
        if d.starts_with("pipe:") {
            FdKind::Pipe
        } else if d.starts_with("anon_inode:") {
            FdKind::Anon
        } else if d.starts_with("socket:") {
            FdKind::Socket
        } else if d.starts_with('/') {
            // A device is decorated with its path and then `<char M:m>` / `<block M:m>`.
            if d.ends_with('>') && d.contains("<char ") {
                FdKind::CharDev
            } else if d.ends_with('>') && d.contains("<block ") {
                FdKind::Other
            } else {
                FdKind::File
            }
        } else if is_socket_protocol_decoration(d) {
            FdKind::Socket
        } else {
            FdKind::Other
        }
    }
}

/// strace names sockets by protocol: `TCP:[..]`, `TCPv6:[..]`, `UDP:[..]`, `UNIX-STREAM:[..]`,
/// `NETLINK:[..]`, `RAW:[..]` ... — an upper-case word (with digits, `v`, `-`) then `:[`.
fn is_socket_protocol_decoration(d: &str) -> bool {
    let Some((proto, rest)) = d.split_once(':') else {
        return false;
    };
    rest.starts_with('[')
        && !proto.is_empty()
        && proto.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && proto.chars().all(|c| {
            c.is_ascii_uppercase() || c.is_ascii_digit() || c == 'v' || c == '-' || c == '_'
        })
}

/// A histogram over power-of-two buckets: bucket 0 holds the value 0, bucket k > 0 holds values in
/// [2^(k-1), 2^k). This is bpftrace's `hist()` layout, so kernel-side histograms convert exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Log2Hist {
    pub buckets: BTreeMap<u32, u64>,
    /// Values below zero (only possible for signed arguments such as an `lseek` offset).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub negative: u64,
    /// Sum of the values per bucket, for the histograms that record it (returned bytes, through
    /// [`Log2Hist::record_summed`]): the exact mean inside a bucket, which the bucket alone bounds
    /// only within a factor of two.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sums: BTreeMap<u32, u64>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Log2Hist {
    /// The bucket of a non-negative value.
    pub fn bucket_of(v: u64) -> u32 {
        if v == 0 {
            0
        } else {
            64 - v.leading_zeros()
        }
    }

    /// The inclusive value range of a bucket.
    pub fn bucket_range(k: u32) -> (u64, u64) {
        match k {
            0 => (0, 0),
            64.. => (1 << 63, u64::MAX),
            _ => (1 << (k - 1), (1u64 << k) - 1),
        }
    }

    /// Records one signed value.
    pub fn record(&mut self, v: i64) {
        if v < 0 {
            self.negative += 1;
        } else {
            self.add_bucket(Self::bucket_of(v as u64), 1);
        }
    }

    /// Records one signed value and adds it to its bucket's sum.
    pub fn record_summed(&mut self, v: i64) {
        self.record(v);
        if v >= 0 {
            self.add_sum(Self::bucket_of(v as u64), v as u64);
        }
    }

    /// Adds `n` to bucket `k`.
    pub fn add_bucket(&mut self, k: u32, n: u64) {
        if n > 0 {
            *self.buckets.entry(k).or_insert(0) += n;
        }
    }

    /// Adds `sum` to the sum of bucket `k`'s values.
    pub fn add_sum(&mut self, k: u32, sum: u64) {
        let s = self.sums.entry(k).or_insert(0);
        *s = s.saturating_add(sum);
    }

    /// Adds every count and sum of `other`.
    pub fn absorb(&mut self, other: &Log2Hist) {
        for (&k, &n) in &other.buckets {
            self.add_bucket(k, n);
        }
        for (&k, &sum) in &other.sums {
            self.add_sum(k, sum);
        }
        self.negative += other.negative;
    }

    /// Number of values recorded.
    pub fn total(&self) -> u64 {
        self.buckets.values().sum::<u64>() + self.negative
    }

    /// Count in bucket `k`.
    pub fn get(&self, k: u32) -> u64 {
        self.buckets.get(&k).copied().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }
}

/// Statistics of one system call in one thread.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyscallStats {
    /// Calls entered during the window.
    pub count: u64,
    /// Calls that returned a negative value (an error), of those entered during the window.
    pub errors: u64,
    /// Of the errors, `EAGAIN`/`EWOULDBLOCK` (a non-blocking call that found nothing to do).
    pub eagain: u64,
    /// Calls by the kind of their fd argument (only for calls with an `fd` role in `roles.tsv`).
    pub fd_kinds: BTreeMap<FdKind, u64>,
    /// Positive returns of calls whose return counts bytes (`ret = bytes` in `roles.tsv`).
    pub ret_bytes: Log2Hist,
    /// Exact sum of those returns on sockets: the network bytes the call moved (histograms only
    /// bound a sum within a factor of two).
    #[serde(default)]
    pub socket_bytes: u64,
    /// Positive returns of calls whose return counts items: epoll/poll events, mmsg messages.
    #[serde(default, skip_serializing_if = "Log2Hist::is_empty")]
    pub ret_count: Log2Hist,
    /// The requested byte count argument (`size` role), e.g. `read`'s `count`, `sendto`'s `len`.
    pub size_arg: Log2Hist,
    /// The file offset argument (`offset` role): `pread64`/`pwrite64` position, `lseek` offset.
    pub offsets: Log2Hist,
    /// Counts per value of the `flags` role argument: accept4/send/recv flags, the epoll_wait and
    /// poll timeout (ms, -1 = forever), the futex op, the fcntl/ioctl command, open flags, socket
    /// (family << 32 | type), setsockopt (level << 32 | optname) — see `roles.tsv`.
    pub flags: BTreeMap<i64, u64>,
    /// Time from entry to return in nanoseconds; long ones are blocking waits.
    pub duration_ns: Log2Hist,
}

/// What one thread did during the window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadTrace {
    /// The process (thread group) the thread belongs to.
    pub tgid: u32,
    /// Per system call name.
    pub syscalls: BTreeMap<String, SyscallStats>,
    /// Switches away from the thread because it blocked.
    pub switches_voluntary: u64,
    /// Switches away from the thread while it could still run (preemption, yield).
    pub switches_involuntary: u64,
    /// Request/response cycles on sockets: a receive that returned data on a socket followed by a
    /// send that returned > 0 on the same socket of the same process counts one, attributed to the
    /// sending thread.
    pub socket_requests: u64,
}

impl ThreadTrace {
    /// Total calls of all system calls.
    pub fn total_calls(&self) -> u64 {
        self.syscalls.values().map(|s| s.count).sum()
    }
}

/// A thread or process created by a traced thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForkEvent {
    pub parent_tid: u32,
    pub parent_tgid: u32,
    pub child_tid: u32,
    pub child_tgid: u32,
    /// The child shares the parent's thread group (a thread), rather than being a new process.
    pub is_thread: bool,
    /// Seconds since the start of the window.
    pub at_s: f64,
}

/// A traced thread that exited.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExitEvent {
    pub tid: u32,
    pub tgid: u32,
    /// Seconds since the start of the window.
    pub at_s: f64,
}

/// How often one thread woke another up.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WakeupEdge {
    /// The waking thread; 0 when it was not a traced thread (kernel, interrupt, other process).
    pub waker_tid: u32,
    /// The traced thread that was woken.
    pub wakee_tid: u32,
    pub count: u64,
}

/// Everything one trace window observed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SyscallTrace {
    /// `bpftrace` or `ptrace`.
    pub backend: String,
    /// The processes the trace was started on.
    pub pids: Vec<u32>,
    /// Length of the observation window in seconds.
    pub window_s: f64,
    /// Per thread id.
    pub threads: BTreeMap<u32, ThreadTrace>,
    /// Threads and processes created by traced threads, in time order.
    pub forks: Vec<ForkEvent>,
    /// Traced threads that exited, in time order.
    pub exits: Vec<ExitEvent>,
    /// Wakeups of traced threads, sorted by (waker, wakee).
    pub wakeups: Vec<WakeupEdge>,
    /// Anything that makes the trace less than complete or exact.
    pub warnings: Vec<String>,
}

impl SyscallTrace {
    /// An empty trace of the given backend.
    pub fn new(backend: &str, pids: &[u32]) -> SyscallTrace {
        SyscallTrace {
            backend: backend.to_string(),
            pids: pids.to_vec(),
            ..Default::default()
        }
    }

    /// The thread's record, created (with the given tgid) if absent.
    pub fn thread_mut(&mut self, tid: u32, tgid: u32) -> &mut ThreadTrace {
        self.threads.entry(tid).or_insert_with(|| ThreadTrace {
            tgid,
            ..Default::default()
        })
    }

    /// The stats of one call in one thread, created if absent.
    pub fn stats_mut(&mut self, tid: u32, tgid: u32, syscall: &str) -> &mut SyscallStats {
        self.thread_mut(tid, tgid)
            .syscalls
            .entry(syscall.to_string())
            .or_default()
    }

    /// Statistics of a call in a thread, if it was seen.
    pub fn stats(&self, tid: u32, syscall: &str) -> Option<&SyscallStats> {
        self.threads.get(&tid).and_then(|t| t.syscalls.get(syscall))
    }

    /// Thread ids of a process.
    pub fn threads_of(&self, tgid: u32) -> Vec<u32> {
        self.threads
            .iter()
            .filter(|(_, t)| t.tgid == tgid)
            .map(|(tid, _)| *tid)
            .collect()
    }

    /// Adds a warning once.
    pub fn warn(&mut self, w: impl Into<String>) {
        let w = w.into();
        if !self.warnings.contains(&w) {
            self.warnings.push(w);
        }
    }
}

/// Thread ids of a live process, from `/proc/PID/task`.
/// Every thread of the given processes, mapped to its process; checks each process exists first.
pub(crate) fn threads_of_processes(pids: &[u32]) -> Result<BTreeMap<u32, u32>, TraceError> {
    if pids.is_empty() {
        return Err(TraceError::NoPids);
    }
    let mut threads = BTreeMap::new();
    for &pid in pids {
        check_process(pid)?;
        for tid in threads_of_process(pid)? {
            threads.insert(tid, pid);
        }
    }
    Ok(threads)
}

pub(crate) fn threads_of_process(pid: u32) -> Result<Vec<u32>, TraceError> {
    let dir = format!("/proc/{pid}/task");
    let rd = std::fs::read_dir(&dir).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            TraceError::NoSuchProcess { pid }
        } else {
            TraceError::Io {
                context: format!("listing {dir}"),
                source: e,
            }
        }
    })?;
    let mut tids: Vec<u32> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .collect();
    tids.sort_unstable();
    if tids.is_empty() {
        // A zombie has an empty task list: nothing left to trace.
        return Err(TraceError::NoSuchProcess { pid });
    }
    Ok(tids)
}

/// Checks that `pid` names a thread-group leader (a process, not a thread id of one) that is alive.
pub(crate) fn check_process(pid: u32) -> Result<(), TraceError> {
    let status = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&status).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            TraceError::NoSuchProcess { pid }
        } else {
            TraceError::Io {
                context: format!("reading {status}"),
                source: e,
            }
        }
    })?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    if let Some(tgid) = field("Tgid:")
        .and_then(|t| t.parse::<u32>().ok())
        .filter(|&t| t != pid)
    {
        return Err(TraceError::NotAProcess { pid, tgid });
    }
    if field("State:").is_some_and(|s| s.starts_with('Z') || s.starts_with('X')) {
        return Err(TraceError::NoSuchProcess { pid });
    }
    Ok(())
}

/// Makes a tracer die with the thread that starts it (`PR_SET_PDEATHSIG`), so that a profiler that
/// crashes or is killed does not leave bpftrace or strace attached to the target, slowing it down for
/// good. The kernel then detaches BPF programs and ptrace by itself. Consequence for callers: a
/// session must be stopped before the thread that started it exits.
pub(crate) fn die_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: prctl and getppid are async-signal-safe; nothing is allocated between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before the prctl took effect.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(io::Error::other("parent exited"));
            }
            Ok(())
        });
    }
}

/// Keeps the last lines of a tool's stderr for error messages.
#[derive(Debug, Default)]
pub(crate) struct StderrTail {
    lines: std::collections::VecDeque<String>,
}

impl StderrTail {
    const KEEP: usize = 40;

    pub(crate) fn push(&mut self, line: String) {
        if self.lines.len() == Self::KEEP {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    pub(crate) fn text(&self) -> String {
        self.lines.iter().map(|l| format!("{l}\n")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_buckets_match_bpftrace_layout() {
        assert_eq!(Log2Hist::bucket_of(0), 0);
        assert_eq!(Log2Hist::bucket_of(1), 1);
        assert_eq!(Log2Hist::bucket_of(2), 2);
        assert_eq!(Log2Hist::bucket_of(3), 2);
        assert_eq!(Log2Hist::bucket_of(4), 3);
        assert_eq!(Log2Hist::bucket_of(100), 7);
        assert_eq!(Log2Hist::bucket_of(u64::MAX), 64);
        for k in 0..64 {
            let (lo, hi) = Log2Hist::bucket_range(k);
            assert_eq!(Log2Hist::bucket_of(lo), k);
            assert_eq!(Log2Hist::bucket_of(hi), k);
        }
        let mut h = Log2Hist::default();
        h.record(-3);
        h.record(0);
        h.record(100);
        assert_eq!((h.negative, h.get(0), h.get(7), h.total()), (1, 1, 1, 3));
    }

    #[test]
    fn summed_records_keep_each_buckets_exact_sum_and_absorb_adds_them() {
        let mut h = Log2Hist::default();
        for v in [131_072, 131_072, 3_155] {
            h.record_summed(v);
        }
        assert_eq!(h.get(18), 2);
        assert_eq!(h.sums.get(&18), Some(&262_144));
        assert_eq!(h.sums.get(&12), Some(&3_155));
        let mut total = Log2Hist::default();
        total.absorb(&h);
        total.absorb(&h);
        assert_eq!((total.get(18), total.sums.get(&18)), (4, Some(&524_288)));
    }

    #[test]
    fn fd_kind_from_inode_type_bits() {
        assert_eq!(FdKind::from_mode_type(12), FdKind::Socket);
        assert_eq!(FdKind::from_mode_type(8), FdKind::File);
        assert_eq!(FdKind::from_mode_type(1), FdKind::Pipe);
        assert_eq!(FdKind::from_mode_type(0), FdKind::Anon);
        assert_eq!(FdKind::from_mode_type(2), FdKind::CharDev);
        assert_eq!(FdKind::from_mode_type(4), FdKind::Other);
        assert_eq!(FdKind::from_mode_type(16), FdKind::Other);
    }

    #[test]
    fn fd_kind_from_strace_decorations() {
        let k = |d: &str| FdKind::from_strace_decoration(Some(d));
        assert_eq!(k("pipe:[133328]"), FdKind::Pipe);
        assert_eq!(k("TCP:[127.0.0.1:43791->127.0.0.1:55042]"), FdKind::Socket);
        assert_eq!(k("TCPv6:[[::1]:80->[::1]:5000]"), FdKind::Socket);
        assert_eq!(k("UNIX-STREAM:[133329->133330]"), FdKind::Socket);
        assert_eq!(k("socket:[1234]"), FdKind::Socket);
        assert_eq!(k("/etc/passwd"), FdKind::File);
        assert_eq!(k("/dev/null<char 1:3>"), FdKind::CharDev);
        assert_eq!(k("anon_inode:[eventpoll]"), FdKind::Anon);
        assert_eq!(FdKind::from_strace_decoration(None), FdKind::Other);
    }

    #[test]
    fn trace_round_trips_through_json() {
        let mut t = SyscallTrace::new("bpftrace", &[7]);
        let s = t.stats_mut(8, 7, "read");
        s.count = 3;
        s.fd_kinds.insert(FdKind::Socket, 3);
        s.flags.insert(-1, 2);
        s.ret_bytes.record_summed(100);
        t.wakeups.push(WakeupEdge {
            waker_tid: 0,
            wakee_tid: 8,
            count: 1,
        });
        let json = serde_json::to_string(&t).expect("serialize");
        let back: SyscallTrace = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, t);
    }
}
