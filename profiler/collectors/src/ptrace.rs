//! The ptrace fallback of the syscall collector, for machines where BPF tracing is unavailable
//! (no bpftrace, no tracepoints, no privileges for BPF). It runs `strace` attached to every thread of
//! the process tree and turns its decoded output into the same [`SyscallTrace`] as the bpftrace
//! collector, labelled `backend = "ptrace"`.
//!
//! # Trade-offs
//!
//! - **It slows the target heavily.** Every system call stops the thread twice and switches to strace
//!   and back; expect each call to take tens of microseconds instead of a fraction of one, so a busy
//!   server loses most of its throughput while traced. Durations include that overhead. Use it to
//!   learn *which* calls a service makes and with what arguments, not how fast.
//! - **No scheduler data.** ptrace sees system calls, signals and exits, not context switches or
//!   wakeups; those fields stay zero and the trace says so in its warnings.
//! - **Same knowledge, same output.** Argument roles come from the same `roles.tsv` as the BPF
//!   collector; strace runs with `-X raw` so flags are numbers (as the kernel sees them), `-yy` so fds
//!   carry their kind, `-T` for durations, `-s 0` to keep the output small. Counts, fd kinds, byte and
//!   size histograms, offsets, flags and request counts are therefore directly comparable.
//! - **Edge differences from bpftrace:** a call that was blocked when strace attached is counted
//!   (ptrace interrupts and restarts it, so strace sees it start), while bpftrace counts only calls
//!   entered after attach; a named FIFO opened by path shows as a file (strace decorates it with the
//!   path only); durations have microsecond resolution; a call still in progress when strace
//!   detaches is counted, but its result (bytes, error, request completion) is not seen.
//!
//! strace does not print its "attached" messages with `-q`/`-qq`, and `-qq` also drops exit lines, so
//! neither is used: the attach messages tell when every thread is traced, the exit lines give
//! [`ExitEvent`]s.

pub use crate::syscalls::{
    ExitEvent, FdKind, ForkEvent, Log2Hist, SyscallStats, SyscallTrace, ThreadTrace, TraceError,
};

use crate::bpftrace::{note_exited_processes, signal, wait_with_timeout};
use crate::syscalls::{
    self, check_process, threads_of_process, ArgRoles, DataDir, FlagsArg, RetKind, StderrTail,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// `CLONE_THREAD`: the new task joins the caller's thread group.
const CLONE_THREAD: u64 = 0x10000;

/// How to run the ptrace collector.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PtraceOptions {
    /// Processes (thread-group ids) to trace with all their threads; their children are followed.
    pub pids: Vec<u32>,
    /// The strace binary.
    pub strace: PathBuf,
    /// How long to wait for strace to attach to every thread.
    pub attach_timeout_s: f64,
}

impl Default for PtraceOptions {
    fn default() -> Self {
        PtraceOptions {
            pids: Vec::new(),
            strace: PathBuf::from("strace"),
            attach_timeout_s: 30.0,
        }
    }
}

impl PtraceOptions {
    /// Options to trace `pids` with the defaults.
    pub fn new(pids: &[u32]) -> PtraceOptions {
        PtraceOptions {
            pids: pids.to_vec(),
            ..Default::default()
        }
    }
}

/// A running strace. Dropping it detaches strace (SIGINT, then SIGKILL) without collecting.
pub struct PtraceSession {
    child: Option<Child>,
    pids: Vec<u32>,
    threads: BTreeMap<u32, u32>,
    out_path: PathBuf,
    /// strace's output, opened and unlinked once strace has it open, so that no file outlives a
    /// crashed profiler.
    out_file: Option<std::fs::File>,
    stderr_reader: Option<JoinHandle<()>>,
    stderr_tail: Arc<Mutex<StderrTail>>,
    attached_wall_s: f64,
    attached_at: Instant,
}

fn temp_output_path() -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("ditto-strace-{}-{n}.txt", std::process::id()))
}

fn wall_now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The tid in strace's "Process N attached" message, and whether it says "with M threads" (strace
/// then attached every thread of process N at once and names none of them).
fn attached_tid(line: &str) -> Option<(u32, bool)> {
    let rest = line.split("Process ").nth(1)?;
    let (n, tail) = rest.split_once(' ')?;
    if tail.starts_with("attached") {
        Some((n.parse().ok()?, tail.contains(" with ")))
    } else {
        None
    }
}

impl PtraceSession {
    /// Attaches strace to every thread of `opts.pids`; returns once all are attached.
    ///
    /// strace is killed (and the target thereby detached) if the thread that calls this exits; stop
    /// the session before that thread ends.
    pub fn start(opts: &PtraceOptions) -> Result<PtraceSession, TraceError> {
        let threads = syscalls::threads_of_processes(&opts.pids)?;
        let out_path = temp_output_path();
        let mut cmd = Command::new(&opts.strace);
        syscalls::die_with_parent(&mut cmd);
        cmd.args([
            "-f",
            "-yy",
            "-ttt",
            "-T",
            "-X",
            "raw",
            "-s",
            "0",
            "-e",
            "trace=all",
            "-o",
        ])
        .arg(&out_path);
        for pid in &opts.pids {
            cmd.arg("-p").arg(pid.to_string());
        }
        let spawned = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            // Own process group, so that a Ctrl-C meant for the profiler does not detach strace
            // before the profiler stops it.
            .process_group(0)
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(TraceError::ToolNotFound {
                    tool: "strace",
                    path: opts.strace.clone(),
                })
            }
            Err(e) => {
                return Err(TraceError::Io {
                    context: format!("starting {}", opts.strace.display()),
                    source: e,
                })
            }
        };
        let stderr_tail = Arc::new(Mutex::new(StderrTail::default()));
        let (tx, rx) = mpsc::channel::<(u32, bool)>();
        let stderr_reader = child.stderr.take().map(|err| {
            let tail = stderr_tail.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines() {
                    let Ok(line) = line else { break };
                    if let Some(attached) = attached_tid(&line) {
                        let _ = tx.send(attached);
                    } else if !line.contains(" detached") {
                        if let Ok(mut t) = tail.lock() {
                            t.push(line);
                        }
                    }
                }
            })
        });
        let mut session = PtraceSession {
            child: Some(child),
            pids: opts.pids.clone(),
            threads,
            out_path,
            out_file: None,
            stderr_reader,
            stderr_tail,
            attached_wall_s: wall_now_s(),
            attached_at: Instant::now(),
        };
        let deadline = Instant::now() + Duration::from_secs_f64(opts.attach_timeout_s.max(0.1));
        let mut waiting: BTreeSet<u32> = session.threads.keys().copied().collect();
        while !waiting.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok((tid, whole_process)) => {
                    waiting.remove(&tid);
                    if whole_process {
                        let threads = &session.threads;
                        waiting.retain(|t| threads.get(t) != Some(&tid));
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    // Threads that exited meanwhile will never be attached.
                    waiting.retain(|tid| std::path::Path::new(&format!("/proc/{tid}")).exists());
                    if waiting.is_empty() {
                        break;
                    }
                    let stderr_tail = session.stderr_text();
                    session.shutdown();
                    return Err(TraceError::AttachTimeout {
                        tool: "strace",
                        secs: opts.attach_timeout_s,
                        stderr_tail,
                    });
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = session.child.as_mut().and_then(|c| c.wait().ok());
                    if let Some(h) = session.stderr_reader.take() {
                        let _ = h.join();
                    }
                    let stderr_tail = session.stderr_text();
                    session.shutdown();
                    return Err(TraceError::ToolFailed {
                        tool: "strace",
                        detail: match status {
                            Some(s) => format!("exited before attaching ({s})"),
                            None => "exited before attaching".into(),
                        },
                        stderr_tail,
                    });
                }
            }
        }
        // Threads created while strace was attaching are traced too; learn their process now.
        for &pid in &session.pids {
            if let Ok(tids) = threads_of_process(pid) {
                for tid in tids {
                    session.threads.entry(tid).or_insert(pid);
                }
            }
        }
        // strace opened its output before attaching.
        if let Ok(f) = std::fs::File::open(&session.out_path) {
            session.out_file = Some(f);
            let _ = std::fs::remove_file(&session.out_path);
        }
        session.attached_wall_s = wall_now_s();
        session.attached_at = Instant::now();
        Ok(session)
    }

    /// strace's process id.
    pub fn tracer_pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Whether strace is still running.
    pub fn is_alive(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Detaches strace and returns the trace.
    pub fn stop(self) -> Result<SyscallTrace, TraceError> {
        self.stop_with_raw().map(|(t, _)| t)
    }

    /// Like [`stop`](Self::stop), and also returns strace's raw output.
    pub fn stop_with_raw(mut self) -> Result<(SyscallTrace, String), TraceError> {
        let end_wall_s = wall_now_s();
        let window = self.attached_at.elapsed().as_secs_f64();
        let Some(mut child) = self.child.take() else {
            return Err(TraceError::ToolFailed {
                tool: "strace",
                detail: "already stopped".into(),
                stderr_tail: String::new(),
            });
        };
        let running = matches!(child.try_wait(), Ok(None));
        if running {
            signal(child.id(), libc::SIGINT);
        }
        let status = wait_with_timeout(&mut child, Duration::from_secs(30));
        if let Some(h) = self.stderr_reader.take() {
            let _ = h.join();
        }
        let stderr_tail = self.stderr_text();
        let read = match self.out_file.as_mut() {
            Some(f) => {
                use std::io::{Read, Seek};
                let mut text = String::new();
                f.rewind()
                    .and_then(|_| f.read_to_string(&mut text))
                    .map(|_| text)
            }
            None => std::fs::read_to_string(&self.out_path),
        };
        let text = read.map_err(|e| TraceError::Io {
            context: format!("reading strace output {}", self.out_path.display()),
            source: e,
        })?;
        if !running {
            // strace exits by itself when every traced process has exited; that is a complete trace.
            // Any other early exit is a failure.
            let all_gone = self.pids.iter().all(|&p| check_process(p).is_err());
            if !all_gone || !status.is_some_and(|s| s.success()) {
                return Err(TraceError::ToolFailed {
                    tool: "strace",
                    detail: match status {
                        Some(s) => format!("died during the trace ({s})"),
                        None => "died during the trace".into(),
                    },
                    stderr_tail,
                });
            }
        } else if status.is_none() {
            return Err(TraceError::ToolFailed {
                tool: "strace",
                detail: "did not detach within 30 s; killed".into(),
                stderr_tail,
            });
        }
        let ctx = StraceContext {
            pids: self.pids.clone(),
            threads: self.threads.clone(),
            start_s: Some(self.attached_wall_s),
            end_s: Some(end_wall_s),
        };
        let mut trace = parse_strace_output(text.as_bytes(), &ctx);
        if trace.window_s <= 0.0 {
            trace.window_s = window;
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

    fn shutdown(&mut self) {
        if let Some(mut child) = self.child.take() {
            if matches!(child.try_wait(), Ok(None)) {
                signal(child.id(), libc::SIGINT);
                if wait_with_timeout(&mut child, Duration::from_secs(10)).is_none() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        }
        if let Some(h) = self.stderr_reader.take() {
            let _ = h.join();
        }
        let _ = std::fs::remove_file(&self.out_path);
    }
}

impl Drop for PtraceSession {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// What the parser needs besides strace's output.
#[derive(Debug, Clone, Default)]
pub struct StraceContext {
    /// The traced processes.
    pub pids: Vec<u32>,
    /// tid → tgid of the threads traced from the start (later ones are learnt from clone calls).
    pub threads: BTreeMap<u32, u32>,
    /// Wall-clock start and end of the window (seconds since the epoch); when absent, the first and
    /// last timestamps of the output are used.
    pub start_s: Option<f64>,
    pub end_s: Option<f64>,
}

/// One parsed strace line.
#[derive(Debug, Clone, PartialEq)]
enum Line<'a> {
    /// `name(args) = ret ...`
    Complete {
        name: &'a str,
        args: &'a str,
        ret: &'a str,
    },
    /// `name(args <unfinished ...>` (or `<detached ...>`)
    Unfinished { name: &'a str, args: &'a str },
    /// `<... name resumed>args) = ret ...`
    Resumed {
        name: &'a str,
        args: &'a str,
        ret: &'a str,
    },
    /// `+++ exited with N +++`, `+++ killed by SIG +++`
    Exit,
    /// Signals and anything else.
    Other,
}

/// Scans strace argument text; calls `on_top_comma` at depth-0 commas and returns the index of the
/// first unmatched `)` (the end of the argument list), if any. Knows strings (`"..."` with escapes),
/// nesting (`()[]{}`), comments (`/* */`) and fd decorations (`3<TCP:[a->b]>`, `4</dev/null<char 1:3>>`),
/// whose `->` and nested `<>` must not end anything.
fn scan_args(s: &str, mut on_top_comma: impl FnMut(usize)) -> Option<usize> {
    let b = s.as_bytes();
    let mut depth: i32 = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = s[i + 2..]
                    .find("*/")
                    .map(|e| i + 2 + e + 1)
                    .unwrap_or(b.len());
            }
            b'<' if i > 0 && b[i - 1].is_ascii_digit() => {
                // A decoration: skip to its matching '>' ('[...]' may contain '>' in "->").
                let mut angle = 0;
                let mut square = 0;
                while i < b.len() {
                    match b[i] {
                        b'[' => square += 1,
                        b']' => square -= 1,
                        b'<' if square == 0 => angle += 1,
                        b'>' if square == 0 => {
                            angle -= 1;
                            if angle == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                if depth == 0 && b[i] == b')' {
                    return Some(i);
                }
                depth -= 1;
            }
            b',' if depth == 0 => on_top_comma(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// Splits an argument list at its top-level commas.
fn split_args(args: &str) -> Vec<&str> {
    let mut cuts = Vec::new();
    let end = scan_args(args, |i| cuts.push(i)).unwrap_or(args.len());
    let mut out = Vec::new();
    let mut start = 0;
    for c in cuts.into_iter().filter(|&c| c < end) {
        out.push(args[start..c].trim());
        start = c + 1;
    }
    let last = args[start..end].trim();
    if !last.is_empty() || !out.is_empty() {
        out.push(last);
    }
    out
}

/// Splits `TID TIMESTAMP REST`.
fn split_prefix(line: &str) -> Option<(u32, f64, &str)> {
    let (tid, rest) = line.split_once(' ')?;
    let tid = tid.parse().ok()?;
    let rest = rest.trim_start();
    let (ts, rest) = rest.split_once(' ')?;
    Some((tid, ts.parse().ok()?, rest))
}

fn parse_line(rest: &str) -> Line<'_> {
    if rest.starts_with("+++ ") {
        return if rest.contains("exited with") || rest.contains("killed by") {
            Line::Exit
        } else {
            Line::Other
        };
    }
    if rest.starts_with("--- ") {
        return Line::Other;
    }
    if let Some(r) = rest.strip_prefix("<... ") {
        let Some((name, after)) = r.split_once(" resumed>") else {
            return Line::Other;
        };
        let Some(close) = scan_args(after, |_| {}) else {
            return Line::Other;
        };
        return Line::Resumed {
            name,
            args: &after[..close],
            ret: after[close + 1..].trim_start(),
        };
    }
    let Some(open) = rest.find('(') else {
        return Line::Other;
    };
    let name = &rest[..open];
    if name.is_empty() || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        return Line::Other;
    }
    let after = &rest[open + 1..];
    for suffix in [" <unfinished ...>", " <detached ...>"] {
        if let Some(args) = after.strip_suffix(suffix) {
            return Line::Unfinished { name, args };
        }
    }
    match scan_args(after, |_| {}) {
        Some(close) => Line::Complete {
            name,
            args: &after[..close],
            ret: after[close + 1..].trim_start(),
        },
        None => Line::Unfinished { name, args: after },
    }
}

/// A parsed return: the value (None for `?`), whether it is an error, the errno name, the duration.
#[derive(Debug, Clone, PartialEq)]
struct Ret {
    value: Option<i64>,
    error: bool,
    errno: Option<String>,
    duration_ns: Option<u64>,
}

/// Parses `= 100 <0.000010>`, `= -1 EAGAIN (Resource ...) <0.000005>`, `= ? ERESTARTSYS (...)`,
/// `= 12<TCP:[..]> <..>`, `= 0x7f00 <..>`, `= ?`.
fn parse_ret(ret: &str) -> Ret {
    let body = ret.trim().strip_prefix('=').unwrap_or(ret).trim();
    let duration_ns = body
        .rfind(" <")
        .filter(|_| body.ends_with('>'))
        .and_then(|i| body[i + 2..body.len() - 1].parse::<f64>().ok())
        .map(|s| (s * 1e9).round() as u64);
    let mut words = body.split_whitespace();
    let first = words.next().unwrap_or("?");
    let errno = words
        .next()
        .filter(|w| {
            w.len() > 1
                && w.starts_with('E')
                && w.bytes()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        })
        .map(str::to_string);
    let value = if first == "?" { None } else { parse_int(first) };
    let error = errno.is_some() || value.is_some_and(|v| v < 0);
    Ret {
        value,
        error,
        errno,
        duration_ns,
    }
}

/// An integer argument: decimal, negative or hex, possibly followed by an fd decoration or comment.
fn parse_int(s: &str) -> Option<i64> {
    let s = s.trim();
    if s == "NULL" {
        return Some(0);
    }
    let (neg, body) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let v = if let Some(hex) = body.strip_prefix("0x") {
        let digits: String = hex.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
        u64::from_str_radix(&digits, 16).ok()? as i64
    } else {
        let digits: String = body.chars().take_while(|c| c.is_ascii_digit()).collect();
        if digits.is_empty() {
            return None;
        }
        // Octal file modes (0644) do not occur in the roles we read.
        digits.parse::<u64>().ok()? as i64
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Whether `p` is a whole number: decimal, or hex with `0x`, optionally negative.
fn is_number(p: &str) -> bool {
    let p = p.strip_prefix('-').unwrap_or(p);
    match p.strip_prefix("0x") {
        Some(h) => !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()),
        None => !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()),
    }
}

/// A flag word: `0x80000`, `0x1|0x80000`, `17`; `None` if any part is symbolic.
fn parse_flags(s: &str) -> Option<i64> {
    let s = s.split("/*").next().unwrap_or(s).trim();
    let mut v: i64 = 0;
    for part in s.split('|').map(str::trim) {
        if !is_number(part) {
            return None;
        }
        v |= parse_int(part)?;
    }
    Some(v)
}

/// The fd number and decoration of an fd argument (`3<pipe:[1]>` → (3, Some("pipe:[1]"))).
fn parse_fd(s: &str) -> (Option<i64>, Option<&str>) {
    let s = s.trim();
    match s.find('<') {
        Some(i) if s.ends_with('>') => (parse_int(&s[..i]), Some(&s[i + 1..s.len() - 1])),
        _ => (parse_int(s), None),
    }
}

/// strace prints the 64-bit offset of the vectored positional calls as one argument where the
/// system call ABI has two (`pos_l`, `pos_h`); arguments after it move down by one.
fn printed_index(r: &ArgRoles, abi_index: usize) -> usize {
    const SPLIT_OFFSET: [&str; 4] = ["preadv", "pwritev", "preadv2", "pwritev2"];
    match r.offset {
        Some(off) if SPLIT_OFFSET.contains(&r.name.as_str()) && abi_index > off + 1 => {
            abi_index - 1
        }
        _ => abi_index,
    }
}

/// The `flags=` value inside clone/clone3 arguments.
fn clone_flags(args: &str) -> Option<u64> {
    let i = args.find("flags=")?;
    let rest = &args[i + 6..];
    let end = rest.find([',', '}', ' ']).unwrap_or(rest.len());
    let text = &rest[..end];
    if text.contains("CLONE_THREAD") {
        return Some(CLONE_THREAD);
    }
    parse_flags(text).map(|v| v as u64)
}

#[derive(Debug)]
enum SockEvent {
    Received { tid: u32, fd: i64 },
    Sent { tid: u32, fd: i64 },
    Closed { tid: u32, fd: i64 },
}

struct RawFork {
    parent_tid: u32,
    child_tid: u32,
    is_thread: bool,
    ts: f64,
}

/// Parses strace output (`-f -yy -ttt -T -X raw`) into a trace.
pub fn parse_strace_output(reader: impl BufRead, ctx: &StraceContext) -> SyscallTrace {
    let mut trace = SyscallTrace::new("ptrace", &ctx.pids);
    // Stats by tid; the tgid is filled in at the end, once forks are known.
    let mut stats: BTreeMap<u32, BTreeMap<String, SyscallStats>> = BTreeMap::new();
    let mut sock_events = Vec::new();
    let mut forks: Vec<RawFork> = Vec::new();
    let mut exits: Vec<(u32, f64)> = Vec::new();
    let mut first_ts: Option<f64> = None;
    let mut last_ts: Option<f64> = None;
    let mut unparsed = 0u64;
    // The unfinished call of each thread: (name, argument text so far). Its arguments are recorded
    // once the call resumes, because the part before `<unfinished ...>` may lack them.
    let mut pending: HashMap<u32, (String, String)> = HashMap::new();

    for line in reader.lines().map_while(Result::ok) {
        let Some((tid, ts, rest)) = split_prefix(&line) else {
            if !line.trim().is_empty() {
                unparsed += 1;
            }
            continue;
        };
        first_ts.get_or_insert(ts);
        last_ts = Some(ts);
        let (name, args, ret): (&str, String, &str) = match parse_line(rest) {
            Line::Complete { name, args, ret } => {
                stats_entry(&mut stats, tid, name).count += 1;
                (name, args.to_string(), ret)
            }
            Line::Unfinished { name, args } => {
                stats_entry(&mut stats, tid, name).count += 1;
                if let Some((n, a)) = pending.insert(tid, (name.to_string(), args.to_string())) {
                    // A new call without the previous one resuming (lost line): keep what we have.
                    record_args(&mut stats, &mut sock_events, tid, &n, &a);
                }
                continue;
            }
            Line::Resumed { name, args, ret } => match pending.remove(&tid) {
                Some((pname, mut pargs)) if pname == name => {
                    pargs.push_str(args);
                    (name, pargs, ret)
                }
                // Resumed without its start: entered before attach; not counted, like bpftrace.
                _ => continue,
            },
            Line::Exit => {
                exits.push((tid, ts));
                if let Some((n, a)) = pending.remove(&tid) {
                    record_args(&mut stats, &mut sock_events, tid, &n, &a);
                }
                continue;
            }
            Line::Other => continue,
        };
        let ret = parse_ret(ret);
        record_args(&mut stats, &mut sock_events, tid, name, &args);
        record_exit(&mut stats, &mut sock_events, tid, name, &args, &ret);
        if matches!(name, "clone" | "clone3" | "fork" | "vfork") {
            if let Some(child) = ret
                .value
                .filter(|&v| v > 0)
                .and_then(|v| u32::try_from(v).ok())
            {
                let is_thread = matches!(name, "clone" | "clone3")
                    && clone_flags(&args).is_some_and(|f| f & CLONE_THREAD != 0);
                forks.push(RawFork {
                    parent_tid: tid,
                    child_tid: child,
                    is_thread,
                    ts,
                });
            }
        }
    }
    // Calls still in progress when strace detached.
    for (tid, (n, a)) in pending {
        record_args(&mut stats, &mut sock_events, tid, &n, &a);
    }
    if unparsed > 0 {
        trace.warn(format!(
            "{unparsed} strace output lines could not be parsed"
        ));
    }

    // Processes: initial threads, then each fork in order.
    let mut tgid_of: HashMap<u32, u32> = ctx.threads.iter().map(|(&t, &g)| (t, g)).collect();
    for &p in &ctx.pids {
        tgid_of.entry(p).or_insert(p);
    }
    let origin = ctx.start_s.or(first_ts).unwrap_or(0.0);
    let at = |ts: f64| (ts - origin).max(0.0);
    for f in &forks {
        let parent_tgid = *tgid_of.entry(f.parent_tid).or_insert(f.parent_tid);
        let child_tgid = if f.is_thread {
            parent_tgid
        } else {
            f.child_tid
        };
        tgid_of.insert(f.child_tid, child_tgid);
        trace.forks.push(ForkEvent {
            parent_tid: f.parent_tid,
            parent_tgid,
            child_tid: f.child_tid,
            child_tgid,
            is_thread: f.is_thread,
            at_s: at(f.ts),
        });
    }
    let mut unknown = BTreeSet::new();
    let mut tgid = |tid: u32| -> u32 {
        *tgid_of.entry(tid).or_insert_with(|| {
            unknown.insert(tid);
            tid
        })
    };
    for (tid, calls) in stats {
        let g = tgid(tid);
        trace.thread_mut(tid, g).syscalls = calls;
    }
    for (tid, ts) in exits {
        let g = tgid(tid);
        trace.thread_mut(tid, g);
        trace.exits.push(ExitEvent {
            tid,
            tgid: g,
            at_s: at(ts),
        });
    }
    for (&tid, &g) in &ctx.threads {
        trace.thread_mut(tid, g);
    }
    // Request/response cycles per (process, socket), in output order.
    let mut open: BTreeSet<(u32, i64)> = BTreeSet::new();
    for ev in sock_events {
        match ev {
            SockEvent::Received { tid, fd } => {
                open.insert((tgid(tid), fd));
            }
            SockEvent::Sent { tid, fd } => {
                let g = tgid(tid);
                if open.remove(&(g, fd)) {
                    trace.thread_mut(tid, g).socket_requests += 1;
                }
            }
            SockEvent::Closed { tid, fd } => {
                open.remove(&(tgid(tid), fd));
            }
        }
    }
    for tid in unknown {
        trace.warn(format!(
            "could not tell which process thread {tid} belongs to; assumed its own"
        ));
    }
    trace.window_s = match (ctx.start_s.or(first_ts), ctx.end_s.or(last_ts)) {
        (Some(a), Some(b)) if b > a => b - a,
        _ => 0.0,
    };
    trace.warn("ptrace backend: no scheduler data (context switches and wakeups are not observed)");
    trace.warn("ptrace backend: the target ran much slower while traced; durations include the tracing overhead");
    trace
}

fn stats_entry<'s>(
    stats: &'s mut BTreeMap<u32, BTreeMap<String, SyscallStats>>,
    tid: u32,
    name: &str,
) -> &'s mut SyscallStats {
    let name = canonical_name(name);
    stats.entry(tid).or_default().entry(name).or_default()
}

/// strace names calls it does not know `syscall_0x1d3`; use the table's name (or `sys_NNN`).
fn canonical_name(name: &str) -> String {
    match name
        .strip_prefix("syscall_0x")
        .and_then(|h| u64::from_str_radix(h, 16).ok())
    {
        Some(nr) => syscalls::syscall_name(nr),
        None => name.to_string(),
    }
}

/// Records the argument statistics of one call.
fn record_args(
    stats: &mut BTreeMap<u32, BTreeMap<String, SyscallStats>>,
    sock_events: &mut Vec<SockEvent>,
    tid: u32,
    name: &str,
    args_text: &str,
) {
    let Some(r) = syscalls::roles(name) else {
        return;
    };
    let st = stats_entry(stats, tid, name);
    let args = split_args(args_text);
    let arg = |i: usize| args.get(printed_index(r, i)).copied();
    if let Some(a) = r.fd.and_then(arg) {
        let (fd, deco) = parse_fd(a);
        *st.fd_kinds
            .entry(FdKind::from_strace_decoration(deco))
            .or_insert(0) += 1;
        if r.dir == DataDir::Close {
            if let Some(fd) = fd {
                sock_events.push(SockEvent::Closed { tid, fd });
            }
        }
    }
    if let Some(v) = r.size.and_then(arg).and_then(parse_int) {
        st.size_arg.record(v);
    }
    if let Some(v) = r.offset.and_then(arg).and_then(parse_int) {
        st.offsets.record(v);
    }
    let flag = match r.flags {
        Some(FlagsArg::One(i)) => arg(i).and_then(parse_flags),
        Some(FlagsArg::Pair(a, b)) => {
            match (arg(a).and_then(parse_flags), arg(b).and_then(parse_flags)) {
                (Some(x), Some(y)) => Some((x << 32) | y),
                _ => None,
            }
        }
        None => None,
    };
    if let Some(f) = flag {
        *st.flags.entry(f).or_insert(0) += 1;
    }
}

fn record_exit(
    stats: &mut BTreeMap<u32, BTreeMap<String, SyscallStats>>,
    sock_events: &mut Vec<SockEvent>,
    tid: u32,
    name: &str,
    args_text: &str,
    ret: &Ret,
) {
    let roles = syscalls::roles(name);
    let st = stats_entry(stats, tid, name);
    if let Some(d) = ret.duration_ns {
        st.duration_ns.record(d as i64);
    }
    let no_ret = roles.is_some_and(|r| r.ret == RetKind::None);
    if ret.error && !no_ret {
        st.errors += 1;
        if ret.errno.as_deref() == Some("EAGAIN") {
            st.eagain += 1;
        }
        return;
    }
    let (Some(v), Some(r)) = (ret.value.filter(|&v| v > 0), roles) else {
        return;
    };
    match r.ret {
        RetKind::Bytes => st.ret_bytes.record_summed(v),
        RetKind::Count => st.ret_count.record(v),
        _ => {}
    }
    if matches!(r.dir, DataDir::In | DataDir::Out) {
        let args = split_args(args_text);
        if let Some(a) = r.fd.and_then(|i| args.get(printed_index(r, i))) {
            let (fd, deco) = parse_fd(a);
            if let (Some(fd), FdKind::Socket) = (fd, FdKind::from_strace_decoration(deco)) {
                if r.ret == RetKind::Bytes {
                    st.socket_bytes += v as u64;
                }
                sock_events.push(if r.dir == DataDir::In {
                    SockEvent::Received { tid, fd }
                } else {
                    SockEvent::Sent { tid, fd }
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_strace_attach_messages() {
        assert_eq!(
            attached_tid("strace: Process 19078 attached with 8 threads"),
            Some((19078, true))
        );
        assert_eq!(
            attached_tid("strace: Process 12091 attached"),
            Some((12091, false))
        );
        assert_eq!(attached_tid("strace: Process 12091 detached"), None);
        assert_eq!(
            attached_tid("strace: attach: ptrace(PTRACE_SEIZE, 1): Operation not permitted"),
            None
        );
    }

    #[test]
    fn splits_arguments_around_strings_structs_and_decorations() {
        assert_eq!(
            split_args(r#"5<UNIX-STREAM:[133329->133330]>, ""..., 2, 0, NULL, 0"#),
            vec![
                "5<UNIX-STREAM:[133329->133330]>",
                r#"""..."#,
                "2",
                "0",
                "NULL",
                "0"
            ]
        );
        assert_eq!(
            split_args("3</tmp/st/a\\76b/x,y>, \"a,b\", 1"),
            vec!["3</tmp/st/a\\76b/x,y>", "\"a,b\"", "1"]
        );
        assert_eq!(
            split_args("4</dev/null<char 1:3>>, \"\"..., 1"),
            vec!["4</dev/null<char 1:3>>", "\"\"...", "1"]
        );
        assert_eq!(
            split_args("12<TCP:[127.0.0.1:43791->127.0.0.1:55042]>, {sa_family=0x2, sin_port=\"\\xab\\x0f\"}, [128 => 16]"),
            vec!["12<TCP:[127.0.0.1:43791->127.0.0.1:55042]>", "{sa_family=0x2, sin_port=\"\\xab\\x0f\"}", "[128 => 16]"]
        );
        assert_eq!(
            split_args("11</x>, 0x55f1 /* 4 entries, more */, 32768"),
            vec!["11</x>", "0x55f1 /* 4 entries, more */", "32768"]
        );
        assert_eq!(split_args(""), Vec::<&str>::new());
    }

    #[test]
    fn parses_line_shapes() {
        assert_eq!(
            parse_line("write(4<pipe:[1]>, \"\"..., 100) = 100 <0.000018>"),
            Line::Complete {
                name: "write",
                args: "4<pipe:[1]>, \"\"..., 100",
                ret: "= 100 <0.000018>"
            }
        );
        assert_eq!(
            parse_line("rseq(0x7f1c, 0x20, 0, 0x53053053 <unfinished ...>"),
            Line::Unfinished {
                name: "rseq",
                args: "0x7f1c, 0x20, 0, 0x53053053"
            }
        );
        assert_eq!(
            parse_line("<... clone3 resumed> => {parent_tid=[12091]}, 88) = 12091 <0.000116>"),
            Line::Resumed {
                name: "clone3",
                args: " => {parent_tid=[12091]}, 88",
                ret: "= 12091 <0.000116>"
            }
        );
        assert_eq!(parse_line("+++ exited with 0 +++"), Line::Exit);
        assert_eq!(parse_line("+++ killed by SIGKILL +++"), Line::Exit);
        assert_eq!(parse_line("--- SIGCHLD {si_signo=17} ---"), Line::Other);
        assert_eq!(
            parse_line("exit_group(0)   = ?"),
            Line::Complete {
                name: "exit_group",
                args: "0",
                ret: "= ?"
            }
        );
        assert_eq!(
            parse_line("gettid()        = 12043 <0.000008>"),
            Line::Complete {
                name: "gettid",
                args: "",
                ret: "= 12043 <0.000008>"
            }
        );
    }

    #[test]
    fn parses_returns() {
        let r = parse_ret("= -1 EAGAIN (Resource temporarily unavailable) <0.000008>");
        assert_eq!(
            (r.value, r.error, r.errno.as_deref(), r.duration_ns),
            (Some(-1), true, Some("EAGAIN"), Some(8000))
        );
        let r = parse_ret("= ? ERESTARTSYS (To be restarted if SA_RESTART is set) <0.1>");
        assert_eq!(
            (r.value, r.error, r.errno.as_deref()),
            (None, true, Some("ERESTARTSYS"))
        );
        let r = parse_ret("= 12<TCP:[127.0.0.1:1->127.0.0.1:2]> <0.000138>");
        assert_eq!(
            (r.value, r.error, r.duration_ns),
            (Some(12), false, Some(138_000))
        );
        let r = parse_ret("= 0x7f1ce9c09000 <0.000025>");
        assert_eq!(r.value, Some(0x7f1ce9c09000));
        let r = parse_ret("= ?");
        assert_eq!((r.value, r.error, r.duration_ns), (None, false, None));
        let r = parse_ret("= 1 ([{fd=3, revents=POLLIN}]) <0.000010>");
        assert_eq!(
            (r.value, r.error, r.duration_ns),
            (Some(1), false, Some(10_000))
        );
    }

    #[test]
    fn parses_numbers_flags_and_fds() {
        assert_eq!(parse_int("0x80000"), Some(0x80000));
        assert_eq!(parse_int("-100</tmp>"), Some(-100));
        assert_eq!(parse_int("4096"), Some(4096));
        assert_eq!(parse_int("NULL"), Some(0));
        assert_eq!(parse_int("\"\"..."), None);
        assert_eq!(parse_flags("0x1|0x80000"), Some(0x80001));
        assert_eq!(parse_flags("0x1200000|17"), Some(0x1200011));
        assert_eq!(parse_flags("-1"), Some(-1));
        assert_eq!(parse_flags("MSG_DONTWAIT"), None);
        assert_eq!(parse_flags("0x3 /* F_GETFL */"), Some(3));
        assert_eq!(parse_fd("3<pipe:[5]>"), (Some(3), Some("pipe:[5]")));
        assert_eq!(
            parse_fd("4</dev/null<char 1:3>>"),
            (Some(4), Some("/dev/null<char 1:3>"))
        );
        assert_eq!(parse_fd("99"), (Some(99), None));
        assert_eq!(
            clone_flags("child_stack=NULL, flags=0x1200000|17, child_tidptr=0x7f"),
            Some(0x1200011)
        );
        assert_eq!(
            clone_flags("{flags=0x3d0f00, child_tid=0x7f}"),
            Some(0x3d0f00)
        );
        assert_eq!(
            clone_flags("{flags=CLONE_VM|CLONE_THREAD, exit_signal=0}"),
            Some(CLONE_THREAD)
        );
    }

    #[test]
    fn preadv2_flags_are_one_argument_earlier_in_strace() {
        let r = syscalls::roles("preadv2").expect("roles");
        assert_eq!(printed_index(r, 0), 0);
        assert_eq!(printed_index(r, 3), 3);
        assert_eq!(printed_index(r, 5), 4);
        let w = syscalls::roles("write").expect("roles");
        assert_eq!(printed_index(w, 2), 2);
    }
}
