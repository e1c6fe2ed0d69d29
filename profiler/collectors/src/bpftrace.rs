//! The BPF syscall/scheduler collector: attaches bpftrace to kernel tracepoints, filtered to a process
//! tree, and returns per-thread statistics as a [`SyscallTrace`].
//!
//! # Design
//!
//! - **Tracepoints, not kprobes.** `raw_syscalls:sys_enter/sys_exit` see every system call with its
//!   number and raw arguments. Tracepoints are a stable kernel ABI and exist where kprobes do not
//!   (the machines this was built on have no kprobes).
//! - **Two programs do all syscall work.** Counts, errors, durations *and* the argument statistics
//!   of the calls listed in `roles.tsv` (fd kind, byte counts, offsets, flags) are recorded by the
//!   `raw_syscalls` entry and exit programs, selecting the argument by its position. Extra
//!   `syscalls:sys_enter_X` probes per call would be easier to read, but each adds a program run and
//!   a filter lookup to exactly the calls that matter most (reads and writes); merging them cut the
//!   measured cost per call by a quarter to a third.
//! - **The fd kind is derived in kernel** from BTF: `current->files->fdt->fd[fd]->f_inode->i_mode`
//!   gives socket / regular file / pipe / anonymous inode / char device at the moment of the call.
//!   Resolving fds afterwards from `/proc/PID/fd` would miss short-lived fds and race with `close`.
//! - **Aggregation in kernel, per thread.** Every statistic is a BPF map keyed by (tgid, tid,
//!   syscall, ...) and updated in place; nothing is streamed per event. Streaming costs a ring-buffer
//!   write per event plus user-space wakeups and can drop events under load; in-kernel counters cost a
//!   few hash-map operations per call and lose nothing (a full map is detected and reported). The
//!   price is that event order is lost, except for forks and exits, which carry a timestamp.
//! - **Requests without a load generator.** Per (process, socket fd), a receive that returned data
//!   followed by a send that returned > 0 counts one request/response cycle (`socket_requests`). It is
//!   keyed by process rather than thread so that a server which reads in one thread and replies from
//!   another still counts; the request is attributed to the replying thread.
//! - **Following the tree.** `sched_process_fork` adds children of traced threads (threads and
//!   processes) to the filter; `sched_process_exit` removes them. Threads that existed at attach time
//!   are read from `/proc` so that wakeups of threads asleep since before the trace are attributed.
//!   The traced pids themselves are tested by comparison, not by a map lookup, so the usual case
//!   (nothing forked) costs other processes only a comparison and one failed lookup per call.
//! - **Wakeups from `sched_waking`**, which runs in the waker's context (`sched_wakeup` can run on the
//!   wakee's CPU after an IPI, where `current` is unrelated). A wakeup done from interrupt context is
//!   attributed to whatever thread the interrupt hit: the kernel's softirq state is not readable from
//!   bpftrace 0.17. On loopback networking the sender's own softirq does the wakeup, which is right.
//!
//! # Overhead
//!
//! Measured on the 2-core Firecracker VMs this was developed on (the
//! `bpftrace_overhead_per_syscall` test, a C loop of 2M calls, best of 3):
//!
//! - `getppid()` (counts and duration only): 170 ns → 980–1000 ns, **+0.8 µs per call**; of that,
//!   ~0.2 µs (up to ~0.7 µs on a busy CPU) is the kernel's cost of running any BPF program on both
//!   syscall tracepoints, the rest four BPF hash-map operations at ~0.13 µs each on these VMs.
//! - `read()` on a bad fd (fd kind, size argument, error): 116 ns → 1.2–1.9 µs, **+1.1–1.8 µs**.
//! - Untraced processes pay the tracepoint cost and the filter, ~0.2–0.5 µs per call, while a trace
//!   runs.
//! - memcached, 4 threads, `ditto load --level medium` (10k req/s, 8 connections): achieved rate
//!   9999.5 → 9988 req/s (−0.1%), p50 latency 87–104 µs → 127 µs, p99 0.4–0.9 ms → 1.6 ms. At
//!   saturation (closed-loop `memcaslap`, load generator on the same 2 cores) throughput drops by
//!   about half: every call of the server *and* of the load generator pays.
//!
//! bpftrace quirks handled here: every run prints a harmless `couldn't set RLIMIT_MEMLOCK` line
//! (filtered out); `clear()` inside an `interval` probe crashes 0.17 (not used); maps are printed as
//! JSON only at exit, on SIGINT; reading `args->args[i]` in several branches lets LLVM merge the
//! loads into one at a variable context offset, which the verifier rejects (all six are loaded first).

pub use crate::syscalls::{
    ExitEvent, FdKind, ForkEvent, Log2Hist, SyscallStats, SyscallTrace, ThreadTrace, TraceError,
    WakeupEdge,
};

use crate::syscalls::{self, all_roles, check_process, DataDir, FlagsArg, RetKind, StderrTail};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The line the program prints from `BEGIN`, after bpftrace attached every probe.
const ATTACHED_MARKER: &str = "DITTO_ATTACHED";
/// The line the program prints from `END`: bpftrace left its event loop and will print its maps.
const END_MARKER: &str = "DITTO_END";
/// bpftrace prints this on every run when it lacks CAP_SYS_RESOURCE; it is harmless.
const MEMLOCK_NOISE: &str = "couldn't set RLIMIT_MEMLOCK";
/// Kind code the program uses for an fd that is not open (beyond `i_mode >> 12`'s 0..=15).
const FD_NOT_OPEN: u64 = 16;
/// `prev_state` of a preempted task in `sched_switch` (TASK_REPORT_MAX): still runnable.
const PREEMPTED_STATE: u64 = 0x100;
const EAGAIN_ERRNO: i64 = 11;
/// How long bpftrace may take to print its maps and exit after SIGINT.
const STOP_TIMEOUT: Duration = Duration::from_secs(120);

/// How to run the collector.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TraceOptions {
    /// Processes (thread-group ids) to trace, with all their threads. Processes and threads they
    /// create during the trace are followed; children that already exist must be listed here.
    pub pids: Vec<u32>,
    /// The bpftrace binary.
    pub bpftrace: PathBuf,
    /// How long to wait for bpftrace to compile the program and attach its probes.
    pub attach_timeout_s: f64,
    /// Maximum keys per BPF map (`BPFTRACE_MAP_KEYS_MAX`). Each map grows with threads × syscalls
    /// (× fd kinds / flag values / histogram buckets); reaching the limit is reported as a warning.
    pub map_keys_max: u32,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            pids: Vec::new(),
            bpftrace: PathBuf::from("bpftrace"),
            attach_timeout_s: 60.0,
            map_keys_max: 65536,
        }
    }
}

impl TraceOptions {
    /// Options to trace `pids` with the defaults.
    pub fn new(pids: &[u32]) -> TraceOptions {
        TraceOptions {
            pids: pids.to_vec(),
            ..Default::default()
        }
    }
}

/// A running trace. Dropping it stops bpftrace (SIGINT, then SIGKILL) without collecting.
pub struct TraceSession {
    child: Option<Child>,
    pids: Vec<u32>,
    initial_threads: BTreeMap<u32, u32>,
    map_keys_max: u32,
    script_path: PathBuf,
    stdout_reader: Option<JoinHandle<Vec<String>>>,
    stderr_reader: Option<JoinHandle<()>>,
    stderr_tail: Arc<Mutex<StderrTail>>,
    /// Set by the stdout reader once END has run.
    finishing: Arc<AtomicBool>,
    script_warnings: Vec<String>,
    attached_at: Instant,
}

/// Runs bpftrace's stdout reader: collects lines, signals once the attach marker arrives.
fn spawn_stdout_reader(
    out: std::process::ChildStdout,
    ready: mpsc::Sender<()>,
    finishing: Arc<AtomicBool>,
) -> JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut lines = Vec::new();
        let mut signalled = false;
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if !signalled && line.contains(ATTACHED_MARKER) {
                signalled = true;
                let _ = ready.send(());
            }
            if line.contains(END_MARKER) {
                finishing.store(true, Ordering::SeqCst);
            }
            lines.push(line);
        }
        lines
    })
}

/// Interrupts bpftrace until it starts finishing (its END probe ran) or exits; returns its exit
/// status, or `None` if it was still running at `timeout` and had to be killed.
///
/// One SIGINT is not enough: bpftrace 0.17 only notices SIGINT when the signal interrupts its
/// `epoll_wait`; one that lands while it handles a poll timeout sets its flag but is never looked at
/// again, and bpftrace runs forever. Later SIGINTs find the flag set and end the loop. Once END has
/// run no more are sent, because bpftrace restores the default action (exit) while it prints maps.
fn interrupt_until_done(
    child: &mut Child,
    finishing: &AtomicBool,
    timeout: Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    let mut next_signal = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) if Instant::now() < deadline => {
                if !finishing.load(Ordering::SeqCst) && Instant::now() >= next_signal {
                    signal(child.id(), libc::SIGINT);
                    next_signal = Instant::now() + Duration::from_secs(1);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

fn spawn_stderr_reader(
    err: std::process::ChildStderr,
    tail: Arc<Mutex<StderrTail>>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { break };
            if line.contains(MEMLOCK_NOISE) || line.trim().is_empty() {
                continue;
            }
            if let Ok(mut t) = tail.lock() {
                t.push(line);
            }
        }
    })
}

fn temp_script_path() -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("ditto-trace-{}-{n}.bt", std::process::id()))
}

impl TraceSession {
    /// Starts bpftrace on `opts.pids` and returns once every probe is attached.
    ///
    /// bpftrace is killed if the thread that calls this exits, so that nothing stays attached when
    /// the profiler dies; stop the session before that thread ends.
    pub fn start(opts: &TraceOptions) -> Result<TraceSession, TraceError> {
        let initial_threads = syscalls::threads_of_processes(&opts.pids)?;
        let tracefs = ensure_tracefs()?;
        let tids: Vec<u32> = initial_threads.keys().copied().collect();
        let (script, script_warnings) = build_script(&opts.pids, &tids, &tracefs);
        let script_path = temp_script_path();
        std::fs::write(&script_path, &script).map_err(|e| TraceError::Io {
            context: format!("writing {}", script_path.display()),
            source: e,
        })?;

        let mut cmd = Command::new(&opts.bpftrace);
        syscalls::die_with_parent(&mut cmd);
        let spawned = cmd
            .arg("-f")
            .arg("json")
            .arg("--no-warnings")
            .arg(&script_path)
            .env("BPFTRACE_MAP_KEYS_MAX", opts.map_keys_max.to_string())
            // Enough programs for one per probe (we generate about a hundred).
            .env("BPFTRACE_MAX_PROBES", "1024")
            .env("BPFTRACE_MAX_BPF_PROGS", "1024")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Own process group: a Ctrl-C meant for the profiler must not stop bpftrace before the
            // profiler asks it to print its maps.
            .process_group(0)
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_file(&script_path);
                return Err(if e.kind() == std::io::ErrorKind::NotFound {
                    TraceError::ToolNotFound {
                        tool: "bpftrace",
                        path: opts.bpftrace.clone(),
                    }
                } else {
                    TraceError::Io {
                        context: format!("starting {}", opts.bpftrace.display()),
                        source: e,
                    }
                });
            }
        };
        let stderr_tail = Arc::new(Mutex::new(StderrTail::default()));
        let (ready_tx, ready_rx) = mpsc::channel();
        let finishing = Arc::new(AtomicBool::new(false));
        let stdout_reader = child
            .stdout
            .take()
            .map(|o| spawn_stdout_reader(o, ready_tx, finishing.clone()));
        let stderr_reader = child
            .stderr
            .take()
            .map(|e| spawn_stderr_reader(e, stderr_tail.clone()));
        let mut session = TraceSession {
            child: Some(child),
            pids: opts.pids.clone(),
            initial_threads,
            map_keys_max: opts.map_keys_max,
            script_path,
            stdout_reader,
            stderr_reader,
            stderr_tail,
            finishing,
            script_warnings,
            attached_at: Instant::now(),
        };
        let timeout = Duration::from_secs_f64(opts.attach_timeout_s.max(0.1));
        match ready_rx.recv_timeout(timeout) {
            Ok(()) => {
                session.attached_at = Instant::now();
                // bpftrace has compiled it; nothing should outlive a crashed profiler.
                let _ = std::fs::remove_file(&session.script_path);
                Ok(session)
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let stderr_tail = session.stderr_text();
                session.shutdown();
                Err(TraceError::AttachTimeout {
                    tool: "bpftrace",
                    secs: opts.attach_timeout_s,
                    stderr_tail,
                })
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // stdout closed before the marker: bpftrace exited (compile error, no permission).
                let status = session.child.as_mut().and_then(|c| c.wait().ok());
                session.join_readers();
                let stderr_tail = session.stderr_text();
                session.shutdown();
                Err(TraceError::ToolFailed {
                    tool: "bpftrace",
                    detail: match status {
                        Some(s) => format!("exited before attaching ({s})"),
                        None => "exited before attaching".to_string(),
                    },
                    stderr_tail,
                })
            }
        }
    }

    /// bpftrace's process id (for checks that nothing is left running).
    pub fn tracer_pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Whether bpftrace is still running.
    pub fn is_alive(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Warnings about the generated program (tracepoints missing on this kernel).
    pub fn script_warnings(&self) -> &[String] {
        &self.script_warnings
    }

    /// Stops the trace (SIGINT, so bpftrace prints its maps) and returns what it collected.
    pub fn stop(self) -> Result<SyscallTrace, TraceError> {
        self.stop_with_raw().map(|(trace, _)| trace)
    }

    /// Like [`stop`](Self::stop), and also returns bpftrace's raw JSON output (for saving as a
    /// fixture or re-parsing with [`parse_bpftrace_output`]).
    pub fn stop_with_raw(mut self) -> Result<(SyscallTrace, String), TraceError> {
        let wall = self.attached_at.elapsed().as_secs_f64();
        let Some(mut child) = self.child.take() else {
            return Err(TraceError::ToolFailed {
                tool: "bpftrace",
                detail: "already stopped".into(),
                stderr_tail: String::new(),
            });
        };
        let already_exited = matches!(child.try_wait(), Ok(Some(_)));
        // Printing large maps takes a while; a stuck bpftrace is killed.
        let status = interrupt_until_done(&mut child, &self.finishing, STOP_TIMEOUT);
        let lines = self.join_readers();
        let stderr_tail = self.stderr_text();
        let text = lines.join("\n");
        let printed_maps =
            text.contains("\"type\": \"map\"") || text.contains("\"type\": \"hist\"");
        if already_exited {
            return Err(TraceError::ToolFailed {
                tool: "bpftrace",
                detail: match status {
                    Some(s) => format!("died during the trace ({s}); nothing was collected"),
                    None => "died during the trace; nothing was collected".into(),
                },
                stderr_tail,
            });
        }
        let mut late = None;
        match status {
            None if !printed_maps => {
                return Err(TraceError::ToolFailed {
                    tool: "bpftrace",
                    detail: format!(
                        "printed nothing within {} s of SIGINT; killed",
                        STOP_TIMEOUT.as_secs()
                    ),
                    stderr_tail,
                })
            }
            // Maps printed but bpftrace hung afterwards (e.g. detaching probes): keep the data.
            None => {
                late = Some(format!(
                    "bpftrace did not exit within {} s of SIGINT and was killed",
                    STOP_TIMEOUT.as_secs()
                ))
            }
            Some(s) if !printed_maps => {
                return Err(TraceError::ToolFailed {
                    tool: "bpftrace",
                    detail: format!("printed no maps ({s})"),
                    stderr_tail,
                })
            }
            Some(_) => {}
        }
        let mut trace = parse_bpftrace_output(&text, &self.pids, self.map_keys_max)?;
        if trace.window_s <= 0.0 {
            trace.window_s = wall;
        }
        // Threads that existed but made no call and were never switched out during the window.
        for (&tid, &tgid) in &self.initial_threads {
            trace.thread_mut(tid, tgid);
        }
        for w in std::mem::take(&mut self.script_warnings) {
            trace.warn(w);
        }
        if let Some(w) = late {
            trace.warn(w);
        }
        note_exited_processes(&mut trace);
        Ok((trace, text))
    }

    fn stderr_text(&self) -> String {
        self.stderr_tail
            .lock()
            .map(|t| t.text())
            .unwrap_or_default()
    }

    fn join_readers(&mut self) -> Vec<String> {
        let lines = self
            .stdout_reader
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        if let Some(h) = self.stderr_reader.take() {
            let _ = h.join();
        }
        lines
    }

    /// Stops bpftrace without collecting: SIGINT, then SIGKILL if it lingers.
    fn shutdown(&mut self) {
        if let Some(mut child) = self.child.take() {
            if matches!(child.try_wait(), Ok(None)) {
                // Kills it if it is not gone within 5 s.
                interrupt_until_done(&mut child, &self.finishing, Duration::from_secs(5));
            }
        }
        self.join_readers();
        let _ = std::fs::remove_file(&self.script_path);
    }
}

impl Drop for TraceSession {
    fn drop(&mut self) {
        self.shutdown();
    }
}

pub(crate) fn signal(pid: u32, sig: libc::c_int) {
    if let Ok(p) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) with a pid we spawned and still own (not yet reaped), so it cannot name
        // another process.
        unsafe {
            libc::kill(p, sig);
        }
    }
}

/// Waits for `child` up to `timeout`; kills it if it is still running then. `None` = killed.
pub(crate) fn wait_with_timeout(
    child: &mut Child,
    timeout: Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// Adds a warning for each traced process that is gone at the end of the trace.
pub(crate) fn note_exited_processes(trace: &mut SyscallTrace) {
    let pids = trace.pids.clone();
    for pid in pids {
        if check_process(pid).is_err() {
            trace.warn(format!(
                "process {pid} exited during the trace; the trace covers it until its exit"
            ));
        }
    }
}

/// Makes sure tracefs is mounted; returns its path.
pub fn ensure_tracefs() -> Result<PathBuf, TraceError> {
    let candidates = [
        Path::new("/sys/kernel/tracing"),
        Path::new("/sys/kernel/debug/tracing"),
    ];
    for c in candidates {
        if c.join("events").is_dir() {
            return Ok(c.to_path_buf());
        }
    }
    let target = candidates[0];
    // SAFETY: mount(2) with NUL-terminated static strings and no data.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            c"/sys/kernel/tracing".as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        return Err(TraceError::Tracefs {
            detail: format!(
                "mount -t tracefs nodev {}: {err} (needs root)",
                target.display()
            ),
        });
    }
    if target.join("events").is_dir() {
        Ok(target.to_path_buf())
    } else {
        Err(TraceError::Tracefs {
            detail: format!(
                "mounted {} but it has no events/ directory",
                target.display()
            ),
        })
    }
}

/// Field names of a tracepoint `format` file.
fn format_fields(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix("field:"))
        .filter_map(|l| l.split(';').next())
        .filter_map(|decl| {
            let name = decl.split_whitespace().last()?;
            // Arrays are declared as `char comm[16]`.
            Some(name.split('[').next().unwrap_or(name).to_string())
        })
        .collect()
}

fn tracepoint_has_field(tracefs: &Path, category: &str, event: &str, field: &str) -> bool {
    std::fs::read_to_string(tracefs.join(format!("events/{category}/{event}/format")))
        .map(|t| format_fields(&t).iter().any(|f| f == field))
        .unwrap_or(false)
}

/// BPF map names, shared by the program generator and the output parser.
mod maps {
    pub const CALLS: &str = "@calls";
    pub const ERRORS: &str = "@err";
    pub const EAGAIN: &str = "@eagain";
    pub const DURATION: &str = "@dur";
    pub const UNPAIRED: &str = "@unpaired";
    pub const FD_KIND: &str = "@fdk";
    pub const SIZE: &str = "@size";
    pub const OFFSET: &str = "@off";
    pub const FLAGS: &str = "@flags";
    pub const RET_BYTES: &str = "@retb";
    /// Sum of the returned bytes per hist() bucket: the exact mean inside each bucket.
    pub const RET_BYTES_SUM: &str = "@retbs";
    pub const RET_COUNT: &str = "@retn";
    pub const SOCKET_BYTES: &str = "@sockb";
    pub const REQUESTS: &str = "@req";
    pub const VOLUNTARY: &str = "@vol";
    pub const INVOLUNTARY: &str = "@invol";
    pub const WAKEUPS: &str = "@wake";
    pub const FORKS: &str = "@fork";
    pub const EXITS: &str = "@exit";
    pub const T_BEGIN: &str = "@t_begin";
    pub const T_END: &str = "@t_end";
    /// Set in END; bpftrace prints maps in name order, so this one comes last and its presence
    /// shows the output is complete.
    pub const COMPLETE: &str = "@zzz_complete";
}

/// A BPF condition that `$id` is one of `nrs`; runs of consecutive numbers become range tests.
fn id_in(nrs: &BTreeSet<u64>) -> String {
    let mut parts = Vec::new();
    let mut it = nrs.iter().copied().peekable();
    while let Some(lo) = it.next() {
        let mut hi = lo;
        while it.peek() == Some(&(hi + 1)) {
            hi += 1;
            it.next();
        }
        parts.push(if lo == hi {
            format!("$id == {lo}")
        } else {
            format!("($id >= {lo} && $id <= {hi})")
        });
    }
    if parts.is_empty() {
        "0".to_string()
    } else {
        format!("({})", parts.join(" || "))
    }
}

/// Syscall numbers grouped by the argument index of one role, e.g. fd at 0: {read, write, ...}.
fn by_index(pick: impl Fn(&syscalls::ArgRoles) -> Option<usize>) -> BTreeMap<usize, BTreeSet<u64>> {
    let mut m: BTreeMap<usize, BTreeSet<u64>> = BTreeMap::new();
    for r in all_roles() {
        if let (Some(i), Some(nr)) = (pick(r), syscalls::syscall_number(&r.name)) {
            m.entry(i).or_default().insert(nr);
        }
    }
    m
}

fn numbers_where(pred: impl Fn(&syscalls::ArgRoles) -> bool) -> BTreeSet<u64> {
    all_roles()
        .iter()
        .filter(|r| pred(r))
        .filter_map(|r| syscalls::syscall_number(&r.name))
        .collect()
}

/// An `if / else if` chain that runs `stmt(argument variable)` for the calls whose role argument is
/// at each index; the argument is `$aI`, loaded from `args->args[I]` at the top of the program.
fn per_index_chain(
    groups: &BTreeMap<usize, BTreeSet<u64>>,
    stmt: impl Fn(String) -> String,
) -> String {
    let mut s = String::new();
    for (n, (i, nrs)) in groups.iter().enumerate() {
        let kw = if n == 0 { "  if" } else { " else if" };
        let _ = write!(s, "{kw} ({}) {{ {} }}", id_in(nrs), stmt(format!("$a{i}")));
    }
    if !s.is_empty() {
        s.push('\n');
    }
    s
}

/// Generates the bpftrace program for the given processes and their current threads. Returns the
/// program and warnings about kernel features it had to do without.
///
/// All system-call work happens in the two `raw_syscalls` programs: one program run per entry and
/// one per exit, whatever the call. (Separate `syscalls:sys_enter_X` probes would be easier to read
/// but double the program runs and the filter lookups for exactly the calls that matter most.)
/// Which argument of which call is recorded comes from `roles.tsv`, by argument position.
pub fn build_script(pids: &[u32], tids: &[u32], tracefs: &Path) -> (String, Vec<String>) {
    use maps::*;
    let mut warnings = Vec::new();
    let mut s = String::new();
    // The initial processes are tested by comparison (no map lookup); followed children by @tg.
    let filter = {
        let mut f: Vec<String> = pids.iter().map(|p| format!("pid == {p}")).collect();
        f.push("@tg[pid]".to_string());
        f.join(" || ")
    };
    let _ = writeln!(
        s,
        "// Generated by ditto-collect: syscall and scheduler statistics of a process tree."
    );
    let _ = writeln!(
        s,
        "// @tg: traced thread groups; @th: traced threads (for wakeups); @t0: the call in flight"
    );
    let _ = writeln!(
        s,
        "// per thread (entry time, fd << 8 | fd kind); @rx: sockets with an unanswered receive."
    );
    let _ = writeln!(s, "BEGIN {{");
    for p in pids {
        let _ = writeln!(s, "  @tg[(uint64){p}] = 1;");
    }
    for t in tids {
        let _ = writeln!(s, "  @th[(uint64){t}] = 1;");
    }
    let _ = writeln!(s, "  {T_BEGIN} = nsecs;");
    let _ = writeln!(s, "  printf(\"{ATTACHED_MARKER}\\n\");");
    let _ = writeln!(s, "}}\n");

    // ---- entry
    let fd_groups = by_index(|r| r.fd);
    let fd_chain = per_index_chain(&fd_groups, |a| format!("$fd = {a};"));
    let size_chain = per_index_chain(&by_index(|r| r.size), |a| {
        format!("{SIZE}[pid, tid, $id] = hist({a});")
    });
    let off_chain = per_index_chain(&by_index(|r| r.offset), |a| {
        format!("{OFFSET}[pid, tid, $id] = hist({a});")
    });
    let flag_single = by_index(|r| match r.flags {
        Some(FlagsArg::One(i)) => Some(i),
        _ => None,
    });
    let flags_chain = per_index_chain(&flag_single, |a| {
        format!("{FLAGS}[pid, tid, $id, {a}] = count();")
    });
    let mut pair_chain = String::new();
    let mut pairs: BTreeMap<(usize, usize), BTreeSet<u64>> = BTreeMap::new();
    for r in all_roles() {
        if let (Some(FlagsArg::Pair(a, b)), Some(nr)) = (r.flags, syscalls::syscall_number(&r.name))
        {
            pairs.entry((a, b)).or_default().insert(nr);
        }
    }
    for ((a, b), nrs) in &pairs {
        let _ = writeln!(
            pair_chain,
            "  if ({}) {{ {FLAGS}[pid, tid, $id, ($a{a} << 32) | $a{b}] = count(); }}",
            id_in(nrs)
        );
    }
    let all_fd: BTreeSet<u64> = fd_groups.values().flatten().copied().collect();
    let close = numbers_where(|r| r.dir == DataDir::Close);
    let _ = write!(
        s,
        "tracepoint:raw_syscalls:sys_enter /{filter}/ {{
  $id = args->id;
  {CALLS}[pid, tid, $id] = count();
  // All six arguments are loaded up front: reading args->args[i] inside the branches lets the
  // compiler merge the loads into one at a variable context offset, which the verifier rejects.
  $a0 = (int64)args->args[0];
  $a1 = (int64)args->args[1];
  $a2 = (int64)args->args[2];
  $a3 = (int64)args->args[3];
  $a4 = (int64)args->args[4];
  $a5 = (int64)args->args[5];
  $fd = (int64)-1;
  $k = (int64){FD_NOT_OPEN};
{fd_chain}  if ({all_fd_in}) {{
    // The kind of the fd's inode, read through the task's fd table (bounds-checked).
    if ($fd >= 0) {{
      $fdt = curtask->files->fdt;
      if ($fd < (int64)$fdt->max_fds) {{
        $f = *($fdt->fd + $fd);
        if ($f != 0) {{ $k = (int64)($f->f_inode->i_mode >> 12); }}
      }}
    }}
    {FD_KIND}[pid, tid, $id, $k] = count();
  }}
  if ({close_in}) {{ delete(@rx[pid, $fd]); }}
{size_chain}{off_chain}{flags_chain}{pair_chain}  @t0[tid] = (nsecs, ($fd << 8) | $k);
}}

",
        all_fd_in = id_in(&all_fd),
        close_in = id_in(&close),
    );

    // ---- exit
    let no_ret = numbers_where(|r| r.ret == RetKind::None);
    let bytes = numbers_where(|r| r.ret == RetKind::Bytes);
    let counts = numbers_where(|r| r.ret == RetKind::Count);
    let ins = numbers_where(|r| r.dir == DataDir::In && r.fd.is_some());
    let outs = numbers_where(|r| r.dir == DataDir::Out && r.fd.is_some());
    let _ = write!(
        s,
        "tracepoint:raw_syscalls:sys_exit /{filter}/ {{
  $v = @t0[tid];
  if ($v.0 == 0) {{
    // Entered before the trace began, or a new task returning from clone: tells its tgid.
    {UNPAIRED}[pid, tid] = count();
  }} else {{
    // @t0 is overwritten by the next entry rather than deleted here: one map update fewer.
    $id = args->id;
    $ret = args->ret;
    {DURATION}[pid, tid, $id] = hist(nsecs - $v.0);
    if ($ret < 0) {{
      if (!{no_ret_in}) {{
        {ERRORS}[pid, tid, $id] = count();
        if ($ret == -{EAGAIN_ERRNO}) {{ {EAGAIN_MAP}[pid, tid, $id] = count(); }}
      }}
    }} else if ($ret > 0) {{
      if ({bytes_in}) {{
        {RET_BYTES}[pid, tid, $id] = hist($ret);
        // hist()'s bucket of $ret (64 - leading zeros) by binary search, for the bucket's exact sum.
        $rest = $ret; $bucket = 1;
        if ($rest >= 4294967296) {{ $bucket = $bucket + 32; $rest = $rest >> 32; }}
        if ($rest >= 65536) {{ $bucket = $bucket + 16; $rest = $rest >> 16; }}
        if ($rest >= 256) {{ $bucket = $bucket + 8; $rest = $rest >> 8; }}
        if ($rest >= 16) {{ $bucket = $bucket + 4; $rest = $rest >> 4; }}
        if ($rest >= 4) {{ $bucket = $bucket + 2; $rest = $rest >> 2; }}
        if ($rest >= 2) {{ $bucket = $bucket + 1; }}
        {RET_BYTES_SUM}[pid, tid, $id, $bucket] = sum($ret);
        if (($v.1 & 255) == 12) {{ {SOCKET_BYTES}[pid, tid, $id] = sum($ret); }}
      }}
      else if ({counts_in}) {{ {RET_COUNT}[pid, tid, $id] = hist($ret); }}
      if (($v.1 & 255) == 12) {{
        // A socket: a receive with data opens a request, the next send on that socket closes it.
        $sock = $v.1 >> 8;
        if ({ins_in}) {{
          @rx[pid, $sock] = 1;
        }} else if ({outs_in}) {{
          if (@rx[pid, $sock]) {{
            delete(@rx[pid, $sock]);
            {REQUESTS}[pid, tid] = count();
          }}
        }}
      }}
    }}
  }}
}}

",
        no_ret_in = id_in(&no_ret),
        bytes_in = id_in(&bytes),
        counts_in = id_in(&counts),
        ins_in = id_in(&ins),
        outs_in = id_in(&outs),
        EAGAIN_MAP = maps::EAGAIN,
    );

    let group_dead = if tracepoint_has_field(tracefs, "sched", "sched_process_exit", "group_dead") {
        "  if (args->group_dead) { delete(@tg[pid]); }\n"
    } else {
        warnings.push(
            "sched_process_exit has no group_dead field on this kernel: exited processes stay in the filter".to_string(),
        );
        ""
    };
    let _ = write!(
        s,
        "tracepoint:sched:sched_switch /{filter}/ {{
  // The switched-out task is current. Preempted (0x100) or runnable (0) = involuntary.
  if (args->prev_state == 0 || args->prev_state == {PREEMPTED_STATE}) {{
    {INVOLUNTARY}[pid, tid] = count();
  }} else {{
    {VOLUNTARY}[pid, tid] = count();
    // Only a thread that blocked can be woken; threads created before attach enter @th here.
    @th[tid] = 1;
  }}
}}

tracepoint:sched:sched_waking /@th[(uint64)args->pid]/ {{
  $w = (uint64)0;
  if ({filter}) {{ $w = tid; }}
  {WAKEUPS}[$w, (uint64)args->pid] = count();
}}

tracepoint:sched:sched_process_fork /{filter}/ {{
  {FORKS}[tid, (uint64)args->child_pid, pid] = nsecs;
  @tg[(uint64)args->child_pid] = 1;
  @th[(uint64)args->child_pid] = 1;
}}

tracepoint:sched:sched_process_exit /{filter}/ {{
  {EXITS}[tid, pid] = nsecs;
  delete(@t0[tid]);
  delete(@th[tid]);
  if (tid != pid) {{ delete(@tg[tid]); }}
{group_dead}}}

END {{
  {T_END} = nsecs;
  {COMPLETE} = 1;
  printf(\"{END_MARKER}\\n\");
  // Bookkeeping maps are not results; clearing @tg also stops followed children from being
  // recorded while the maps are printed.
  clear(@tg);
  clear(@th);
  clear(@t0);
  clear(@rx);
}}
"
    );
    (s, warnings)
}

/// One decoded map: entries of (integer keys, value).
type Entries<'a> = Vec<(Vec<i64>, &'a Value)>;

fn map_entries(v: &Value) -> Entries<'_> {
    match v {
        Value::Object(o) => o
            .iter()
            .filter_map(|(k, v)| {
                let keys: Option<Vec<i64>> = k.split(',').map(|p| p.trim().parse().ok()).collect();
                keys.map(|k| (k, v))
            })
            .collect(),
        other => vec![(Vec::new(), other)],
    }
}

fn hist_from_json(v: &Value) -> Log2Hist {
    let mut h = Log2Hist::default();
    for b in v.as_array().into_iter().flatten() {
        let count = b.get("count").and_then(Value::as_u64).unwrap_or(0);
        match b.get("min").and_then(Value::as_i64) {
            Some(min) if min >= 0 => h.add_bucket(Log2Hist::bucket_of(min as u64), count),
            Some(_) => h.negative += count,
            // The negative bucket has only a max.
            None => h.negative += count,
        }
    }
    h
}

fn key_u32(k: &[i64], i: usize) -> Option<u32> {
    k.get(i).and_then(|&v| u32::try_from(v).ok())
}

/// Number of BPF map entries a printed map used (a histogram uses one per non-empty bucket).
fn entries_used(v: &Value) -> usize {
    map_entries(v)
        .iter()
        .map(|(_, val)| match val {
            Value::Array(a) => a
                .iter()
                .filter(|b| b.get("count").and_then(Value::as_u64).unwrap_or(0) > 0)
                .count(),
            _ => 1,
        })
        .sum()
}

/// Parses bpftrace's `-f json` output of the generated program into a trace. `pids` are the traced
/// processes; `map_keys_max` is the map size limit the program ran with (maps that reached it are
/// reported in the warnings).
pub fn parse_bpftrace_output(
    output: &str,
    pids: &[u32],
    map_keys_max: u32,
) -> Result<SyscallTrace, TraceError> {
    use maps::*;
    let mut trace = SyscallTrace::new("bpftrace", pids);
    let mut maps_seen: HashMap<String, Value> = HashMap::new();
    for line in output.lines().map(str::trim).filter(|l| l.starts_with('{')) {
        let v: Value = serde_json::from_str(line).map_err(|e| TraceError::Parse {
            what: "bpftrace output".into(),
            detail: format!("{e} in line {line:.120}"),
        })?;
        let ty = v.get("type").and_then(Value::as_str).unwrap_or("");
        match ty {
            "map" | "hist" => {
                if let Some(Value::Object(data)) = v.get("data") {
                    for (name, val) in data {
                        maps_seen.insert(name.clone(), val.clone());
                    }
                }
            }
            t if t.contains("lost") => {
                trace.warn(format!("bpftrace reported lost events: {line}"));
            }
            _ => {}
        }
    }
    if !maps_seen.is_empty() && !maps_seen.contains_key(maps::COMPLETE) {
        trace.warn("bpftrace output ended before its last map: some statistics may be missing");
    }
    if maps_seen.is_empty() {
        return Err(TraceError::Parse {
            what: "bpftrace output".into(),
            detail: "no maps printed".into(),
        });
    }
    for (name, v) in &maps_seen {
        let used = entries_used(v);
        if map_keys_max > 0 && used >= map_keys_max as usize {
            trace.warn(format!(
                "bpftrace map {name} reached its limit of {map_keys_max} entries; some counts are missing (raise map_keys_max)"
            ));
        }
    }
    let get = |name: &str| maps_seen.get(name).map(map_entries).unwrap_or_default();
    let scalar = |name: &str| maps_seen.get(name).and_then(Value::as_u64);

    // tid -> tgid from every map that carries both.
    let mut tgid_of: HashMap<u32, u32> = HashMap::new();
    for name in [CALLS, UNPAIRED, VOLUNTARY, INVOLUNTARY] {
        for (k, _) in get(name) {
            if let (Some(tgid), Some(tid)) = (key_u32(&k, 0), key_u32(&k, 1)) {
                tgid_of.insert(tid, tgid);
            }
        }
    }
    for (k, _) in get(EXITS) {
        if let (Some(tid), Some(tgid)) = (key_u32(&k, 0), key_u32(&k, 1)) {
            tgid_of.insert(tid, tgid);
        }
    }

    // Per (tgid, tid, nr) maps, and per (tgid, tid, nr, what the map counts by) maps.
    let call_of = |k: &[i64]| -> Option<(u32, u32, String)> {
        let nr = u64::try_from(*k.get(2)?).ok()?;
        Some((key_u32(k, 0)?, key_u32(k, 1)?, syscalls::syscall_name(nr)))
    };
    let per_call = |name: &str| -> Vec<(u32, u32, String, &Value)> {
        get(name)
            .into_iter()
            .filter_map(|(k, v)| {
                let (tgid, tid, name) = call_of(&k)?;
                Some((tgid, tid, name, v))
            })
            .collect()
    };
    let per_call_by = |name: &str| -> Vec<(u32, u32, String, i64, &Value)> {
        get(name)
            .into_iter()
            .filter_map(|(k, v)| {
                let (tgid, tid, name) = call_of(&k)?;
                Some((tgid, tid, name, *k.get(3)?, v))
            })
            .collect()
    };
    for (tgid, tid, name, v) in per_call(CALLS) {
        trace.stats_mut(tid, tgid, &name).count += v.as_u64().unwrap_or(0);
    }
    for (tgid, tid, name, v) in per_call(ERRORS) {
        trace.stats_mut(tid, tgid, &name).errors += v.as_u64().unwrap_or(0);
    }
    for (tgid, tid, name, v) in per_call(maps::EAGAIN) {
        trace.stats_mut(tid, tgid, &name).eagain += v.as_u64().unwrap_or(0);
    }
    for (tgid, tid, name, v) in per_call(SOCKET_BYTES) {
        trace.stats_mut(tid, tgid, &name).socket_bytes += v.as_u64().unwrap_or(0);
    }
    for (map, pick) in [
        (
            DURATION,
            (|s: &mut SyscallStats| &mut s.duration_ns) as fn(&mut SyscallStats) -> &mut Log2Hist,
        ),
        (SIZE, |s| &mut s.size_arg),
        (OFFSET, |s| &mut s.offsets),
        (RET_BYTES, |s| &mut s.ret_bytes),
        (RET_COUNT, |s| &mut s.ret_count),
    ] {
        for (tgid, tid, name, v) in per_call(map) {
            let h = hist_from_json(v);
            pick(trace.stats_mut(tid, tgid, &name)).absorb(&h);
        }
    }
    for (tgid, tid, name, bucket, v) in per_call_by(RET_BYTES_SUM) {
        if let Ok(bucket) = u32::try_from(bucket) {
            let st = trace.stats_mut(tid, tgid, &name);
            st.ret_bytes.add_sum(bucket, v.as_u64().unwrap_or(0));
        }
    }
    for (tgid, tid, name, kind, v) in per_call_by(FD_KIND) {
        let kind = FdKind::from_mode_type(u64::try_from(kind).unwrap_or(FD_NOT_OPEN));
        let st = trace.stats_mut(tid, tgid, &name);
        *st.fd_kinds.entry(kind).or_insert(0) += v.as_u64().unwrap_or(0);
    }
    for (tgid, tid, name, flag, v) in per_call_by(FLAGS) {
        let st = trace.stats_mut(tid, tgid, &name);
        *st.flags.entry(flag).or_insert(0) += v.as_u64().unwrap_or(0);
    }
    for (map, field) in [
        (
            VOLUNTARY,
            (|t: &mut ThreadTrace| &mut t.switches_voluntary) as fn(&mut ThreadTrace) -> &mut u64,
        ),
        (INVOLUNTARY, |t| &mut t.switches_involuntary),
        (REQUESTS, |t| &mut t.socket_requests),
    ] {
        for (k, v) in get(map) {
            if let (Some(tgid), Some(tid)) = (key_u32(&k, 0), key_u32(&k, 1)) {
                *field(trace.thread_mut(tid, tgid)) += v.as_u64().unwrap_or(0);
            }
        }
    }

    let t_begin = scalar(T_BEGIN);
    let at = |ts: u64| match t_begin {
        Some(b) => ts.saturating_sub(b) as f64 / 1e9,
        None => 0.0,
    };
    if let (Some(b), Some(e)) = (t_begin, scalar(T_END)) {
        trace.window_s = e.saturating_sub(b) as f64 / 1e9;
    }

    let mut forks: Vec<(u64, ForkEvent)> = Vec::new();
    for (k, v) in get(FORKS) {
        let (Some(parent_tid), Some(child_tid), Some(parent_tgid)) =
            (key_u32(&k, 0), key_u32(&k, 1), key_u32(&k, 2))
        else {
            continue;
        };
        let ts = v.as_u64().unwrap_or(0);
        let child_tgid = match tgid_of.get(&child_tid) {
            Some(&t) => t,
            None => {
                trace.warn(format!(
                    "new task {child_tid} did nothing visible; assumed to be a process, not a thread"
                ));
                child_tid
            }
        };
        forks.push((
            ts,
            ForkEvent {
                parent_tid,
                parent_tgid,
                child_tid,
                child_tgid,
                is_thread: child_tgid == parent_tgid,
                at_s: at(ts),
            },
        ));
    }
    forks.sort_by_key(|(ts, f)| (*ts, f.child_tid));
    trace.forks = forks.into_iter().map(|(_, f)| f).collect();

    let mut exits: Vec<(u64, ExitEvent)> = get(EXITS)
        .into_iter()
        .filter_map(|(k, v)| {
            let ts = v.as_u64().unwrap_or(0);
            Some((
                ts,
                ExitEvent {
                    tid: key_u32(&k, 0)?,
                    tgid: key_u32(&k, 1)?,
                    at_s: at(ts),
                },
            ))
        })
        .collect();
    exits.sort_by_key(|(ts, e)| (*ts, e.tid));
    // A thread that exited is part of the trace even if it made no call after attach.
    for (_, e) in &exits {
        trace.thread_mut(e.tid, e.tgid);
    }
    trace.exits = exits.into_iter().map(|(_, e)| e).collect();
    for f in trace.forks.clone() {
        trace.thread_mut(f.child_tid, f.child_tgid);
    }

    let mut wakeups: BTreeSet<WakeupEdge> = BTreeSet::new();
    for (k, v) in get(WAKEUPS) {
        if let (Some(waker_tid), Some(wakee_tid)) = (key_u32(&k, 0), key_u32(&k, 1)) {
            wakeups.insert(WakeupEdge {
                waker_tid,
                wakee_tid,
                count: v.as_u64().unwrap_or(0),
            });
        }
    }
    trace.wakeups = wakeups.into_iter().collect();
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_fields_reads_names_and_arrays() {
        let text = "name: x\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
                    \tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
                    \tfield:unsigned int fd;\toffset:16;\tsize:8;\tsigned:0;\n\
                    \tfield:char comm[16];\toffset:24;\tsize:16;\tsigned:0;\n";
        assert_eq!(
            format_fields(text),
            vec!["common_type", "__syscall_nr", "fd", "comm"]
        );
    }

    #[test]
    fn hist_json_converts_to_log2_buckets() {
        let v: Value = serde_json::from_str(
            r#"[{"max": -1, "count": 2}, {"min": 0, "max": 0, "count": 1}, {"min": 1, "max": 1, "count": 0},
                {"min": 2, "max": 3, "count": 4}, {"min": 64, "max": 127, "count": 9}]"#,
        )
        .expect("json");
        let h = hist_from_json(&v);
        assert_eq!(h.negative, 2);
        assert_eq!(h.get(0), 1);
        assert_eq!(h.get(1), 0);
        assert_eq!(h.get(2), 4);
        assert_eq!(h.get(7), 9);
        assert_eq!(h.total(), 16);
    }
}
