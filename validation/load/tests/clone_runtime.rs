//! The C clone runtime (`runtime/`), driven by the load generator: every network model with every
//! framing, the extra-op emitters, memory safety under Valgrind and ASan, and the per-request
//! syscall counts under strace.
//!
//! The runtime has no crate of its own, so its integration tests live here: they build the test
//! clones with `make -C runtime test` (hand-written configs in `runtime/tests/`), start them on a
//! free port and load them with `ditto-load`. A missing tool (cc, make, valgrind, strace) fails
//! the test with the package to install; nothing is skipped.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ditto_load::{
    run, Arrival, HttpWorkload, LengthPrefixedWorkload, LoadConfig, LoadReport, MemcachedWorkload,
    PixWorkload, Workload,
};

const FRAMINGS: [&str; 4] = ["mc", "http", "lp", "grpc"];

fn runtime_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../runtime")
}

/// Fails with what to install when `tool` is not on PATH.
fn require(tool: &str, package: &str) {
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "`{tool}` is not installed: install the Debian package `{package}` (scripts/setup.sh does); \
         the clone runtime tests need it"
    );
}

/// Builds every test clone once per test binary (`make test` also checks their flags), and the
/// sanitizer builds when `asan` is set.
fn build(asan: bool) -> PathBuf {
    static PLAIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    static ASAN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    require("cc", "build-essential");
    require("make", "build-essential");
    let (cell, target, dir) = if asan {
        (&ASAN, "asan", "build/asan/bin")
    } else {
        (&PLAIN, "test", "build/bin")
    };
    let result = cell.get_or_init(|| {
        let out = Command::new("make")
            .args(["-C"])
            .arg(runtime_dir())
            .args(["-j2", target])
            .output()
            .map_err(|e| format!("cannot run make: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "make -C runtime {target} failed:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(runtime_dir().join(dir))
    });
    match result {
        Ok(dir) => dir.clone(),
        Err(e) => panic!("{e}"),
    }
}

fn clone_binary(bin_dir: &Path, model: &str, framing: &str) -> PathBuf {
    bin_dir.join(format!("clone-{model}-{framing}"))
}

/// A running clone; stopped with SIGTERM (then killed) on drop.
struct Clone {
    child: Child,
    addr: SocketAddr,
    stderr: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
    what: String,
}

impl Clone {
    /// Starts `wrapper... binary --port 0 extra...` and waits for its "listening on" line.
    fn start(binary: &Path, wrapper: &[&str], extra: &[&str]) -> Clone {
        assert!(binary.is_file(), "{} was not built", binary.display());
        let mut cmd = match wrapper.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(binary);
                c
            }
            None => Command::new(binary),
        };
        cmd.args(["--port", "0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let what = format!("{} {}", wrapper.join(" "), binary.display());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let pipe = child.stderr.take().expect("stderr piped");
        let lines = stderr.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if let Some(addr) = line.strip_prefix("listening on ") {
                    let _ = tx.send(addr.to_string());
                }
                lines.lock().unwrap().push(line);
            }
        });
        // Valgrind takes seconds to start a program on this machine.
        let addr = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(addr) => addr
                .parse()
                .unwrap_or_else(|e| panic!("{what}: bad address {addr:?}: {e}")),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{what} never printed 'listening on':\n{}",
                    stderr.lock().unwrap().join("\n")
                );
            }
        };
        Clone {
            child,
            addr,
            stderr,
            reader: Some(reader),
            what,
        }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// SIGTERM, then the exit status and everything it printed on stderr.
    fn stop(mut self) -> (ExitStatus, Vec<String>) {
        let status = self.terminate();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let lines = self.stderr.lock().unwrap().clone();
        (status, lines)
    }

    fn terminate(&mut self) -> ExitStatus {
        // SAFETY: signals our own child, which has not been reaped yet.
        unsafe { libc::kill(self.pid(), libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let status = self.child.wait().expect("wait");
        panic!(
            "{} did not stop within 30 s of SIGTERM ({status})",
            self.what
        );
    }
}

impl Drop for Clone {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: as in terminate().
            unsafe { libc::kill(self.pid(), libc::SIGTERM) };
            std::thread::sleep(Duration::from_millis(200));
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn workload(framing: &str) -> Workload {
    match framing {
        "mc" => Workload::Memcached(MemcachedWorkload {
            keys: 1000,
            ..MemcachedWorkload::default()
        }),
        "http" => Workload::Http(HttpWorkload::default()),
        "lp" => Workload::LengthPrefixed(LengthPrefixedWorkload {
            request_bytes: 100,
            response_bytes: None,
        }),
        // The Pix ledger's own gRPC client (tonic over HTTP/2): the clone answers every call.
        "grpc" => Workload::PixGrpc(PixWorkload {
            accounts: 100,
            ..PixWorkload::default()
        }),
        other => panic!("unknown framing {other}"),
    }
}

fn drive(addr: SocketAddr, workload: Workload, rate: f64, duration: Duration) -> LoadReport {
    let mut cfg = LoadConfig::new(addr, workload, rate);
    cfg.connections = 4;
    cfg.arrival = Arrival::Fixed;
    cfg.warmup = Duration::from_millis(200);
    cfg.duration = duration;
    cfg.request_timeout = Duration::from_secs(5);
    run(&cfg, &mut |_| {}).unwrap_or_else(|e| panic!("load on {addr} failed: {e}"))
}

/// Every request sent was answered successfully, and (nearly) every scheduled one was sent.
///
/// A generator thread stalled by a busy machine may leave the last request of a connection past
/// the end of the period unsent (the load report counts it as scheduled, not sent); that says
/// nothing about the clone, so only the kept-up bound (95 %) applies to the scheduled count.
fn assert_all_ok(report: &LoadReport, what: &str) {
    assert_answered(report, what);
    assert!(
        report.requests_sent as f64 >= 0.95 * report.requests_scheduled as f64,
        "{what}: fewer than 95 % of the scheduled requests were sent\n{}",
        report.to_summary()
    );
}

/// Every request sent was answered successfully (no kept-up bound).
fn assert_answered(report: &LoadReport, what: &str) {
    let summary = report.to_summary();
    assert!(
        report.requests_scheduled > 0,
        "{what}: nothing scheduled\n{summary}"
    );
    assert_eq!(report.outcomes.errors_total, 0, "{what}: errors\n{summary}");
    assert_eq!(report.outcomes.miss, 0, "{what}: misses\n{summary}");
    assert_eq!(
        (report.requests_completed, report.outcomes.ok),
        (report.requests_sent, report.requests_sent),
        "{what}: not every request sent succeeded\n{summary}"
    );
}

/// Every request sent was answered successfully, and at least `min_sent` were sent: the bound for
/// tests about well-formed responses or memory errors rather than keeping up (see
/// `extras_clone_answers_every_framing_with_large_requests`).
fn assert_answered_at_least(report: &LoadReport, what: &str, min_sent: u64) {
    assert_answered(report, what);
    assert!(
        report.requests_sent >= min_sent,
        "{what}: only {} requests sent, need {min_sent}\n{}",
        report.requests_sent,
        report.to_summary()
    );
}

/// A clean stop: exit 0 and nothing on stderr but the listening line.
fn assert_clean_exit(status: ExitStatus, stderr: &[String], what: &str) {
    assert!(
        status.success(),
        "{what} exited with {status}:\n{}",
        stderr.join("\n")
    );
    assert_eq!(
        stderr.len(),
        1,
        "{what} printed more than its listening line:\n{}",
        stderr.join("\n")
    );
}

fn serve_every_framing(model: &str) {
    let bin = build(false);
    for framing in FRAMINGS {
        let _turn = common::one_at_a_time();
        let what = format!("clone-{model}-{framing}");
        let clone = Clone::start(&clone_binary(&bin, model, framing), &[], &[]);
        let report = drive(
            clone.addr,
            workload(framing),
            1000.0,
            Duration::from_secs(1),
        );
        assert_all_ok(&report, &what);
        let (status, stderr) = clone.stop();
        assert_clean_exit(status, &stderr, &what);
    }
}

#[test]
fn thread_per_conn_serves_every_framing() {
    serve_every_framing("thread_per_conn");
}

#[test]
fn poll_serves_every_framing() {
    serve_every_framing("poll");
}

#[test]
fn epoll_dispatch_serves_every_framing() {
    serve_every_framing("epoll_dispatch");
}

#[test]
fn epoll_single_serves_every_framing() {
    serve_every_framing("epoll_single");
}

#[test]
fn prefork_serves_every_framing() {
    serve_every_framing("prefork");
}

/// With sendfile, cork and every other extra op, responses stay well-formed: memcached values
/// end in the data file's "\r\nEND\r\n", HTTP and length-prefixed lengths include the file bytes.
/// Request bodies larger than the clone's 64 KiB read buffer are skipped across reads.
#[test]
fn extras_clone_answers_every_framing_with_large_requests() {
    let bin = build(false);
    for framing in FRAMINGS {
        let _turn = common::one_at_a_time();
        let what = format!("clone-extras-{framing}");
        let clone = Clone::start(&clone_binary(&bin, "extras", framing), &[], &[]);
        let w = match framing {
            "mc" => Workload::Memcached(MemcachedWorkload {
                keys: 100,
                value_size: 100_000,
                get_fraction: 0.5,
                ..MemcachedWorkload::default()
            }),
            "lp" => Workload::LengthPrefixed(LengthPrefixedWorkload {
                request_bytes: 70_000,
                response_bytes: None,
            }),
            _ => workload(framing),
        };
        let report = drive(clone.addr, w, 500.0, Duration::from_secs(1));
        // This clone is single-threaded and `fdatasync`s a data file every tenth request, so one
        // slow flush stalls every connection: in one CI run (other tests compiling beside it) its
        // p99 was 346 ms and 373 of 500 scheduled requests were sent. A flush waits on the disk,
        // whose latency is the machine's, and the test is about well-formed responses, so the
        // kept-up bound does not apply here; every request sent must still be answered, and enough
        // of them (each extra op runs at least ten times) for the check to mean something.
        assert_answered_at_least(&report, &what, 100);
        let (status, stderr) = clone.stop();
        assert_clean_exit(status, &stderr, &what);
    }
}

/// Exit status 99 is Valgrind's verdict of at least one error (invalid access, uninitialised
/// value in a syscall or branch, definite or possible leak) in any process of the clone.
#[test]
fn valgrind_memcheck_finds_no_errors() {
    require("valgrind", "valgrind");
    let bin = build(false);
    let wrapper = [
        "valgrind",
        "--tool=memcheck",
        "--error-exitcode=99",
        "--leak-check=full",
        "--errors-for-leak-kinds=definite,possible",
        "--trace-children=yes",
        "--child-silent-after-fork=no",
    ];
    // The models with the most machinery: threads handed connections, a thread per connection,
    // worker processes, and the single loop with every extra op.
    for (model, framing) in [
        ("extras", "mc"),
        ("epoll_dispatch", "mc"),
        ("thread_per_conn", "http"),
        ("prefork", "lp"),
        ("epoll_dispatch", "grpc"),
    ] {
        let _turn = common::one_at_a_time();
        let what = format!("clone-{model}-{framing} under valgrind");
        let clone = Clone::start(&clone_binary(&bin, model, framing), &wrapper, &[]);
        let report = drive(clone.addr, workload(framing), 100.0, Duration::from_secs(1));
        // Memcheck judges the requests that ran; keeping up (100 scheduled) is not its question.
        assert_answered_at_least(&report, &what, 50);
        let (status, stderr) = clone.stop();
        let log = stderr.join("\n");
        assert!(
            status.code() == Some(0),
            "{what}: exit {status} (99 = memcheck errors):\n{log}"
        );
        // One summary per process (prefork: the master and each worker), each with no errors.
        let summaries: Vec<&String> = stderr
            .iter()
            .filter(|l| l.contains("ERROR SUMMARY:"))
            .collect();
        assert!(
            !summaries.is_empty()
                && summaries
                    .iter()
                    .all(|l| l.contains("ERROR SUMMARY: 0 errors")),
            "{what}: memcheck reported problems:\n{log}"
        );
    }
}

/// AddressSanitizer and UBSan builds (`make -C runtime asan`) under load: any report aborts the
/// clone with a non-zero status; LeakSanitizer checks for leaks at exit.
#[test]
fn asan_and_ubsan_find_no_errors() {
    let bin = build(true);
    for (model, framing) in [
        ("extras", "mc"),
        ("extras", "http"),
        ("epoll_dispatch", "mc"),
        ("thread_per_conn", "lp"),
        ("poll", "http"),
        ("prefork", "mc"),
        ("epoll_single", "grpc"),
        ("contended", "http"),
        ("two_loads", "mc"),
        ("per_connection", "grpc"),
    ] {
        let _turn = common::one_at_a_time();
        let what = format!("asan clone-{model}-{framing}");
        let clone = Clone::start(&clone_binary(&bin, model, framing), &[], &[]);
        let report = drive(
            clone.addr,
            workload(framing),
            500.0,
            Duration::from_millis(700),
        );
        // The extras clone's `fdatasync` stalls every connection on a busy disk (in one CI run, an
        // ASan build: p99 286 ms, 213 of 350 scheduled requests sent); sanitizers judge the
        // requests that ran, so the kept-up bound does not apply.
        assert_answered_at_least(&report, &what, 100);
        let (status, stderr) = clone.stop();
        let log = stderr.join("\n");
        assert!(
            status.success() && !log.contains("Sanitizer") && !log.contains("runtime error"),
            "{what}: exit {status}:\n{log}"
        );
    }
}

/// What config_extras.c asks for, per request, as system calls (op count x calls per op), with
/// recvfrom and writev as its receive and send calls and sendfile once per response.
const EXTRAS_EXPECTED: [(&str, f64); 17] = [
    ("recvfrom", 1.4),    // one per request by the loop, topped up with peeks
    ("epoll_wait", 1.25), // the loop's wakeups, topped up with zero-timeout polls
    ("writev", 1.0),
    ("sendfile", 1.0),
    ("openat", 0.5),
    ("newfstatat", 0.5),
    ("close", 0.5),
    ("pread64", 0.25),
    ("pwrite64", 0.25),
    ("write", 0.3 + 0.1), // pipe write + eventfd write
    ("read", 0.3),        // pipe read
    ("futex", 0.2),
    ("clock_gettime", 1.5),
    ("fdatasync", 0.1),
    ("setsockopt", 2.0), // TCP_CORK on and off
    ("sched_yield", 0.1),
    ("mprotect", 0.2),
];

/// Parses `strace -c` output: syscall name → calls.
fn parse_strace_summary(text: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // "% time seconds usecs/call calls [errors] syscall"
        if fields.len() < 5 || fields[0].parse::<f64>().is_err() {
            continue;
        }
        let name = fields[fields.len() - 1];
        if name == "total" {
            continue;
        }
        if let Ok(calls) = fields[3].parse::<u64>() {
            counts.insert(name.to_string(), calls);
        }
    }
    counts
}

/// Attaches `strace -f -c` to `pids` (after start-up, so only serving counts), sends `requests`
/// requests of `workload` to `addr` over 2 connections, detaches, and returns the per-syscall
/// counts and the raw summary.
fn strace_during_load(
    pids: &[i32],
    addr: SocketAddr,
    workload: Workload,
    requests: u64,
) -> (BTreeMap<String, u64>, String) {
    let (counts, text, _) =
        strace_during_load_at(pids, addr, workload, requests, 1000.0, 2, Duration::ZERO);
    (counts, text)
}

/// `strace -f -c` of `pids` while `requests` requests are sent at `rate` per second over 2
/// connections, and for `settle` after (the server closes its side of the connections then): the
/// syscall counts, strace's summary and the rate the load achieved.
fn strace_during_load_at(
    pids: &[i32],
    addr: SocketAddr,
    workload: Workload,
    requests: u64,
    rate: f64,
    connections: usize,
    settle: Duration,
) -> (BTreeMap<String, u64>, String, f64) {
    let strace = AttachedStrace::attach(pids);
    let mut cfg = LoadConfig::new(addr, workload, rate);
    cfg.connections = connections;
    cfg.arrival = Arrival::Fixed;
    cfg.warmup = Duration::ZERO;
    cfg.duration = Duration::from_secs_f64(20.0f64.max(2.0 * requests as f64 / rate));
    cfg.max_requests = Some(requests);
    let report = run(&cfg, &mut |_| {}).expect("load under strace");
    assert_all_ok(&report, "load under strace");
    assert_eq!(report.requests_sent, requests);
    std::thread::sleep(settle);
    let (counts, text) = strace.detach();
    (counts, text, report.achieved_rate)
}

/// `strace -f` attached to running processes, counting (`-c`) or listing (`-ttt`) their calls
/// until `detach`.
struct AttachedStrace {
    child: Child,
    drain: std::thread::JoinHandle<String>,
    out: PathBuf,
    _dir: tempfile::TempDir,
}

impl AttachedStrace {
    /// Returns once strace has stopped every process in `pids`, so every call after it is counted.
    fn attach(pids: &[i32]) -> AttachedStrace {
        Self::attach_with(pids, "-c")
    }

    /// `attach`, with each call listed with its time (`-ttt`) instead of counted (`calls_after`).
    fn attach_timed(pids: &[i32]) -> AttachedStrace {
        Self::attach_with(pids, "-ttt")
    }

    fn attach_with(pids: &[i32], mode: &str) -> AttachedStrace {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("strace.txt");
        let mut cmd = Command::new("strace");
        cmd.args(["-f", mode, "-o"]).arg(&out);
        for pid in pids {
            cmd.args(["-p", &pid.to_string()]);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start strace");
        // strace prints "Process N attached [with K threads]" once per process it has stopped.
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let mut attached = 0;
        while attached < pids.len() {
            line.clear();
            if err.read_line(&mut line).unwrap_or(0) == 0 {
                panic!("strace exited before attaching (is ptrace allowed here?)");
            }
            if line.contains("attached") {
                attached += 1;
            }
        }
        // Keep draining strace's stderr so it can never block on a full pipe.
        let drain = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut rest);
            rest
        });
        AttachedStrace {
            child,
            drain,
            out,
            _dir: dir,
        }
    }

    /// Detaches (the processes keep running) and returns the calls counted and strace's summary.
    fn detach(self) -> (BTreeMap<String, u64>, String) {
        let text = self.finish();
        (parse_strace_summary(&text), text)
    }

    /// Detaches and returns strace's output.
    fn finish(mut self) -> String {
        // SIGINT makes strace detach and write its summary.
        // SAFETY: signals our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let status = self.child.wait().expect("wait for strace");
        let strace_err = self.drain.join().unwrap_or_default();
        let text = std::fs::read_to_string(&self.out).expect("strace summary");
        assert!(
            // strace re-raises the SIGINT it detached on.
            status.success() || status.signal() == Some(libc::SIGINT),
            "strace failed ({status}):\n{strace_err}\n{text}"
        );
        text
    }
}

/// From `strace -f -ttt` output ("PID SECONDS.MICROS call(...) = ..."): every call that started
/// at least `settle` after the first one listed, by name, and the seconds from there to the last
/// one listed. A call strace split in two (`<unfinished ...>`, then `<... call resumed>`) counts
/// once, at its start.
fn calls_after(text: &str, settle: Duration) -> (BTreeMap<String, u64>, f64) {
    let calls: Vec<(f64, &str)> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let _pid = fields.next()?;
            let at: f64 = fields.next()?.parse().ok()?;
            let name = fields.next()?.split_once('(')?.0;
            (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
                .then_some((at, name))
        })
        .collect();
    let (Some(first), Some(last)) = (calls.first(), calls.last()) else {
        return (BTreeMap::new(), 0.0);
    };
    let from = first.0 + settle.as_secs_f64();
    let mut counts = BTreeMap::new();
    for &(_, name) in calls.iter().filter(|(at, _)| *at >= from) {
        *counts.entry(name.to_string()).or_insert(0) += 1;
    }
    (counts, (last.0 - from).max(0.0))
}

#[test]
fn calls_after_counts_each_call_once_from_the_settle_on() {
    let text = "\
101 1000.000000 sendmsg(5, {}, 0) = 10
102 1000.500000 mprotect(0x7f, 4096, PROT_READ) = 0
101 1001.000000 sendmsg(5, {}, 0) = 10
102 1001.200000 clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, {}, NULL <unfinished ...>
101 1001.250000 mprotect(0x7f, 4096, PROT_READ) = 0
102 1001.300000 <... clock_nanosleep resumed>) = 0
101 1001.400000 --- SIGINT {si_signo=SIGINT} ---
101 1002.000000 sendmsg(5, {}, 0) = 10
";
    let (counts, seconds) = calls_after(text, Duration::from_millis(1000));
    assert_eq!(counts.get("sendmsg"), Some(&2));
    assert_eq!(counts.get("mprotect"), Some(&1));
    assert_eq!(counts.get("clock_nanosleep"), Some(&1));
    assert_eq!(counts.len(), 3, "{counts:?}");
    assert!((seconds - 1.0).abs() < 1e-9, "{seconds}");
}

/// Calls counted in the middle of a steady load: strace attaches after the load has run `lead` at
/// its rate, and calls are counted from a second after it attached (`STRACE_SETTLE`) for `traced`,
/// then it detaches a `lead` before the load ends, so a clone's rate estimate holds the load's rate
/// for the whole count. Returns the counts, a summary of them, the seconds counted and the load's
/// report.
///
/// Why not from the attach: strace stops every thread to attach, so the served rate can dip and
/// then catch up, and a clone's rate estimate (windows of 0.25 s) follows both. Its extras and
/// timer are on a line in the rate, clamped, and convex in the share of overlapping requests, so a
/// dip and a burst need not cancel. One CI run of the two-loads test counted 0.166 mprotect a
/// request and 85 timer wakes a second at 1,000 req/s (the config's 0.1 and 50) while its sends
/// over the trace were within 10 % of the rate; the attach is the one disturbance at the trace's
/// start, so the count starts after it. That failure was not reproduced on demand (four runs each
/// with and without the settle, beside two busy loops, all read 0.099–0.101 and 50).
fn strace_in_steady_load(
    pid: i32,
    addr: SocketAddr,
    workload: Workload,
    rate: f64,
    connections: usize,
    lead: Duration,
    traced: Duration,
) -> (BTreeMap<String, u64>, String, f64, LoadReport) {
    let mut cfg = LoadConfig::new(addr, workload, rate);
    cfg.connections = connections;
    cfg.arrival = Arrival::Fixed;
    cfg.warmup = Duration::ZERO;
    cfg.duration = lead + STRACE_SETTLE + traced + lead;
    let load = std::thread::spawn(move || run(&cfg, &mut |_| {}));
    std::thread::sleep(lead);
    let strace = AttachedStrace::attach_timed(&[pid]);
    std::thread::sleep(STRACE_SETTLE + traced);
    let (counts, seconds) = calls_after(&strace.finish(), STRACE_SETTLE);
    let text = counts
        .iter()
        .map(|(name, n)| format!("{n:>8} {name}"))
        .collect::<Vec<_>>()
        .join("\n");
    let report = load
        .join()
        .expect("load thread")
        .expect("load around strace");
    assert_all_ok(&report, "load around strace");
    (counts, text, seconds, report)
}

/// How long after strace attaches `strace_in_steady_load` starts counting.
const STRACE_SETTLE: Duration = Duration::from_secs(1);

/// Differences between measured and expected per-request counts: each expected syscall within
/// 2%; `wakeup` (epoll_wait, poll) at most once per request; anything else only per connection
/// (the loads use 2) or per background tick, never per request.
fn count_problems(
    counts: &BTreeMap<String, u64>,
    requests: u64,
    expected: &[(&str, f64)],
    wakeup: Option<&str>,
) -> Vec<String> {
    let n = requests as f64;
    // Shown with --nocapture: the measured per-request profile, for reports.
    let shown: Vec<String> = counts
        .iter()
        .filter(|(_, &c)| c as f64 / n >= 0.01)
        .map(|(name, &c)| format!("{name} {:.3}", c as f64 / n))
        .collect();
    eprintln!("per request over {requests}: {}", shown.join(", "));
    let mut problems = Vec::new();
    for &(name, per_request) in expected {
        let got = counts.get(name).copied().unwrap_or(0) as f64 / n;
        if (got - per_request).abs() / per_request > 0.02 {
            problems.push(format!(
                "{name}: {got:.4} per request, configured {per_request}"
            ));
        }
    }
    for (name, &calls) in counts {
        if expected.iter().any(|&(e, _)| e == name) {
            continue;
        }
        let per_request = calls as f64 / n;
        let allowed = if Some(name.as_str()) == wakeup {
            1.02
        } else if name == "clock_nanosleep" {
            // The 10 Hz timer thread of the test clusters.
            0.1
        } else {
            // Connection set-up (accept4, thread creation, epoll_ctl, ...): a few calls for each
            // of the 2 connections, never one per request.
            20.0 / n
        };
        if per_request > allowed {
            problems.push(format!(
                "{name}: {per_request:.4} per request, not configured"
            ));
        }
    }
    problems
}

/// The clone with every extra op makes exactly the configured system calls per request (within
/// 2%) and nothing else per request.
#[test]
fn strace_counts_match_the_configured_syscalls() {
    require("strace", "strace");
    let bin = build(false);
    let _turn = common::one_at_a_time();
    let clone = Clone::start(&clone_binary(&bin, "extras", "http"), &[], &[]);
    let requests = 2000;
    let (counts, text) = strace_during_load(
        &[clone.pid()],
        clone.addr,
        Workload::Http(HttpWorkload::default()),
        requests,
    );
    let (status, stderr) = clone.stop();
    assert_clean_exit(status, &stderr, "clone-extras-http");
    let problems = count_problems(&counts, requests, &EXTRAS_EXPECTED, None);
    assert!(
        problems.is_empty(),
        "per-request syscalls differ from the config:\n{}\n\nstrace -c:\n{text}",
        problems.join("\n")
    );
}

/// Epoll dispatch writes its notify eventfd once per accepted connection; the eventfd-write op
/// counts those hand-overs toward its process total, so the clone's writes per request are the
/// configured 0.02 whatever the connections (a per-thread accumulator put the 2 hand-overs on top:
/// 22 writes over 1000 requests, 10 % over).
#[test]
fn strace_eventfd_writes_are_a_process_total_that_counts_the_accept_hand_overs() {
    require("strace", "strace");
    let bin = build(false);
    let _turn = common::one_at_a_time();
    let clone = Clone::start(&clone_binary(&bin, "dispatch_eventfd", "lp"), &[], &[]);
    let requests = 1000;
    let (counts, text) = strace_during_load(&[clone.pid()], clone.addr, workload("lp"), requests);
    let (status, stderr) = clone.stop();
    assert_clean_exit(status, &stderr, "clone-dispatch_eventfd-lp");
    let expected = [("read", 1.0), ("sendmsg", 1.0), ("write", 0.02)];
    let problems = count_problems(&counts, requests, &expected, Some("epoll_wait"));
    assert!(
        problems.is_empty(),
        "per-request syscalls differ from the config:\n{}\n\nstrace -c:\n{text}",
        problems.join("\n")
    );
}

/// A contended extra (a futex wake) runs its configured 0.5 per request at the profiled rate
/// (1000 req/s, requests 1 ms in flight) and falls with the share of requests that find another in
/// flight at a lower one: 0.5 x (1 - e^-0.25) / (1 - e^-1) = 0.175 at 250 req/s. The clone
/// estimates the rate over windows of 0.25 s, so each count sits in the middle of a steady load
/// (`strace_in_steady_load`): a trace that began with the load counted its first
/// windows at the rate before (a CI run read 0.441 at 1000 req/s over 3,000 requests). The config's
/// per-connection calls (getpeername, getsockname, shutdown) come once per connection, none while
/// the connections only carry requests.
#[test]
fn strace_contended_wakes_follow_the_share_of_overlapping_requests() {
    require("strace", "strace");
    let bin = build(false);
    let _turn = common::one_at_a_time();
    let clone = Clone::start(&clone_binary(&bin, "contended", "lp"), &[], &[]);
    let mut per_request = Vec::new();
    for (rate, traced) in [(250.0, 4), (1000.0, 4)] {
        let (counts, text, _, report) = strace_in_steady_load(
            clone.pid(),
            clone.addr,
            workload("lp"),
            rate,
            2,
            Duration::from_secs(1),
            Duration::from_secs(traced),
        );
        let requests = counts.get("sendmsg").copied().unwrap_or(0) as f64;
        let futex = counts.get("futex").copied().unwrap_or(0) as f64 / requests;
        let achieved = report.achieved_rate;
        eprintln!("{rate} req/s ({achieved:.0} achieved): futex {futex:.3} per request\n{text}");
        per_request.push((futex, achieved));
        for call in ["getpeername", "getsockname", "shutdown"] {
            assert_eq!(
                counts.get(call).copied().unwrap_or(0),
                0,
                "{call} at {rate} req/s on open connections:\n{text}"
            );
        }
        // The load's 2 connections were opened before the trace and closed after it: each one's
        // calls come once, on the connection, not per request.
        let (connection_counts, text, _) = strace_during_load_at(
            &[clone.pid()],
            clone.addr,
            workload("lp"),
            50,
            rate,
            2,
            Duration::from_millis(300),
        );
        for call in ["getpeername", "getsockname", "shutdown"] {
            assert_eq!(
                connection_counts.get(call).copied().unwrap_or(0),
                2,
                "{call} at {rate} req/s, once per connection:\n{text}"
            );
        }
    }
    let (status, stderr) = clone.stop();
    assert_clean_exit(status, &stderr, "clone-contended-lp");
    // The model at each load's achieved rate (answered requests over its scheduled window).
    let expected = |rate: f64| 0.5 * (1.0 - (-rate * 0.001f64).exp()) / (1.0 - (-1.0f64).exp());
    let ((low, low_rate), (high, high_rate)) = (per_request[0], per_request[1]);
    assert!(
        (low - expected(low_rate)).abs() <= 0.03,
        "{low_rate:.0} req/s: {low:.3} futex wakes per request, expected {:.3}",
        expected(low_rate)
    );
    assert!(
        (high - expected(high_rate)).abs() <= 0.03,
        "{high_rate:.0} req/s: {high:.3} futex wakes per request, expected {:.3}",
        expected(high_rate)
    );
    assert!(
        high > 2.0 * low,
        "the wakes follow the load: {low:.3} then {high:.3}"
    );
}

/// A config measured at two loads (runtime/tests/config_two_loads.c) makes each load's counts at
/// that load: an mprotect at 0.6 per request at 250 req/s and 0.1 at 1000 (the line in the share of
/// requests that overlap), a timer waking 200 times a second at 250 req/s and 50 at 1000 (the line
/// in the rate). strace attaches after the load has run a second at its rate, counts from a second
/// after that and detaches before the load ends (`strace_in_steady_load`), so the clone's rate
/// estimate (windows of 0.25 s) holds that rate for the whole count; the requests counted are the
/// sends.
#[test]
fn strace_a_config_measured_at_two_loads_makes_each_loads_counts() {
    require("strace", "strace");
    let bin = build(false);
    let _turn = common::one_at_a_time();
    let clone = Clone::start(&clone_binary(&bin, "two_loads", "lp"), &[], &[]);
    let (lead, traced) = (Duration::from_secs(1), Duration::from_secs(4));
    let mut seen = Vec::new();
    for rate in [250.0, 1000.0] {
        let (counts, text, seconds, report) = strace_in_steady_load(
            clone.pid(),
            clone.addr,
            workload("lp"),
            rate,
            2,
            lead,
            traced,
        );
        let per = |call: &str| counts.get(call).copied().unwrap_or(0) as f64;
        let requests = per("sendmsg");
        assert!(
            (requests - rate * seconds).abs() <= 0.1 * rate * seconds,
            "{rate} req/s: {requests} sends over the {seconds:.2} s traced\n{text}"
        );
        let mprotect = per("mprotect") / requests;
        let wakes_per_s = per("clock_nanosleep") / seconds;
        eprintln!(
            "{rate} req/s ({:.0} achieved): mprotect {mprotect:.3} per request, timer \
             {wakes_per_s:.0} wakes/s over {seconds:.2} s\n{text}",
            report.achieved_rate
        );
        seen.push((rate, mprotect, wakes_per_s));
    }
    let (status, stderr) = clone.stop();
    assert_clean_exit(status, &stderr, "clone-two_loads-lp");
    for (rate, mprotect, wakes_per_s, want_mprotect, want_wakes) in [
        (seen[0].0, seen[0].1, seen[0].2, 0.6, 200.0),
        (seen[1].0, seen[1].1, seen[1].2, 0.1, 50.0),
    ] {
        assert!(
            (mprotect - want_mprotect).abs() <= 0.1 * want_mprotect + 0.01,
            "{rate} req/s: {mprotect:.3} mprotect per request, the config's {want_mprotect}"
        );
        assert!(
            (wakes_per_s - want_wakes).abs() <= 0.1 * want_wakes,
            "{rate} req/s: the timer woke {wakes_per_s:.0} times a second, the config's {want_wakes}"
        );
    }
}

/// Without extras, every model costs one receive and one send call per request (the calls its
/// config names) plus at most one wakeup, and nothing else per request.
#[test]
fn strace_every_model_makes_one_receive_and_one_send_per_request() {
    require("strace", "strace");
    let bin = build(false);
    // model, receive call, send call, wakeup call (see runtime/tests/config_*.c)
    let models = [
        ("thread_per_conn", "read", "write", None),
        ("poll", "recvfrom", "sendto", Some("poll")),
        ("epoll_dispatch", "read", "sendmsg", Some("epoll_wait")),
        ("epoll_single", "recvmsg", "writev", Some("epoll_wait")),
        ("prefork", "recvfrom", "writev", Some("epoll_wait")),
    ];
    for (model, recv, send, wakeup) in models {
        let _turn = common::one_at_a_time();
        let clone = Clone::start(&clone_binary(&bin, model, "lp"), &[], &[]);
        let mut pids = vec![clone.pid()];
        if model == "prefork" {
            // The master only supervises: trace the two worker processes.
            eventually("prefork workers", || {
                pids = children(clone.pid());
                if pids.len() == 2 {
                    Ok(())
                } else {
                    Err(format!("workers {pids:?}"))
                }
            });
        }
        let requests = 1000;
        let (counts, text) = strace_during_load(&pids, clone.addr, workload("lp"), requests);
        let (status, stderr) = clone.stop();
        assert_clean_exit(status, &stderr, model);
        let problems = count_problems(&counts, requests, &[(recv, 1.0), (send, 1.0)], wakeup);
        assert!(
            problems.is_empty(),
            "{model}: per-request syscalls differ from the config:\n{}\n\nstrace -c:\n{text}",
            problems.join("\n")
        );
    }
}

fn task_names(pid: i32) -> Vec<String> {
    let mut names = Vec::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return names;
    };
    for entry in dir.flatten() {
        if let Ok(name) = std::fs::read_to_string(entry.path().join("comm")) {
            names.push(name.trim().to_string());
        }
    }
    names.sort();
    names
}

/// Polls `f` until it holds, for up to 10 s: processes and threads start after the clone says it
/// listens (connections wait in the backlog meanwhile).
fn eventually(what: &str, mut f: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match f() {
            Ok(()) => return,
            Err(e) if Instant::now() > deadline => panic!("{what}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn children(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// --threads sets the epoll workers (threads) and the prefork workers (processes); threads are
/// named after their cluster; background clusters add their threads in every serving process.
#[test]
fn threads_flag_sets_workers_and_threads_are_named() {
    let bin = build(false);
    let _turn = common::one_at_a_time();
    let clone = Clone::start(
        &clone_binary(&bin, "epoll_dispatch", "mc"),
        &[],
        &["--threads", "3"],
    );
    eventually("epoll_dispatch --threads 3", || {
        let names = task_names(clone.pid());
        let count = |n: &str| names.iter().filter(|x| *x == n).count();
        // main (the acceptor) + 3 workers + 1 timer + 2 idle.
        let got = (
            names.len(),
            count("ditto-worker"),
            count("ditto-timer"),
            count("ditto-idle"),
        );
        if got == (7, 3, 1, 2) {
            Ok(())
        } else {
            Err(format!("threads {names:?}"))
        }
    });
    let (status, stderr) = clone.stop();
    assert_clean_exit(status, &stderr, "epoll_dispatch --threads 3");

    let clone = Clone::start(
        &clone_binary(&bin, "prefork", "http"),
        &[],
        &["--threads", "3"],
    );
    let mut workers = Vec::new();
    eventually("prefork --threads 3", || {
        workers = children(clone.pid());
        let master = task_names(clone.pid()).len();
        // Each worker: its serving thread plus the timer and the two idle threads.
        let per_worker: Vec<usize> = workers.iter().map(|w| task_names(*w).len()).collect();
        if workers.len() == 3 && master == 1 && per_worker.iter().all(|&n| n == 4) {
            Ok(())
        } else {
            Err(format!(
                "workers {workers:?} with {per_worker:?} threads, master {master} threads"
            ))
        }
    });
    let report = drive(
        clone.addr,
        workload("http"),
        500.0,
        Duration::from_millis(500),
    );
    assert_all_ok(&report, "prefork --threads 3");
    let (status, stderr) = clone.stop();
    assert_clean_exit(status, &stderr, "prefork --threads 3");
    for w in workers {
        assert!(
            !Path::new(&format!("/proc/{w}")).exists()
                || std::fs::read_to_string(format!("/proc/{w}/stat"))
                    .map(|s| s.contains(") Z "))
                    .unwrap_or(true),
            "worker process {w} outlived the master"
        );
    }
}

/// The data dir holds the configured files while the clone runs and is removed at exit when the
/// clone created it.
#[test]
fn data_dir_is_created_filled_and_removed() {
    let bin = build(false);
    let _turn = common::one_at_a_time();
    let parent = tempfile::tempdir().unwrap();
    let data = parent.path().join("data");
    let clone = Clone::start(
        &clone_binary(&bin, "extras", "lp"),
        &[],
        &["--data-dir", data.to_str().unwrap()],
    );
    let mut files: Vec<(String, u64)> = std::fs::read_dir(&data)
        .expect("data dir exists while running")
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    files.sort();
    assert_eq!(
        files,
        (0..4)
            .map(|i| (format!("data-{i:05}"), 65536))
            .collect::<Vec<_>>()
    );
    let tail = std::fs::read(data.join("data-00000")).unwrap();
    assert!(
        tail.ends_with(b"\r\nEND\r\n"),
        "memcached trailer at the end"
    );
    let (status, stderr) = clone.stop();
    assert_clean_exit(status, &stderr, "extras with --data-dir");
    assert!(!data.exists(), "the data dir it created outlived the clone");
}

#[test]
fn command_line_errors_are_one_line_with_status_2() {
    let bin = build(false);
    let binary = clone_binary(&bin, "epoll_single", "mc");
    let help = Command::new(&binary).arg("--help").output().unwrap();
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for flag in ["--port", "--threads", "--data-dir", "--bind"] {
        assert!(text.contains(flag), "--help lacks {flag}:\n{text}");
    }
    for args in [
        &["--bogus"][..],
        &["--port"],
        &["--port", "70000"],
        &["--port", "-1"],
        &["--threads", "0"],
        &["--bind", "localhost"],
    ] {
        let out = Command::new(&binary).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains("--help"),
            "{args:?} should point at --help: {err}"
        );
    }
}

#[test]
fn busy_port_fails_with_one_line_and_status_1() {
    let bin = build(false);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let out = Command::new(clone_binary(&bin, "poll", "http"))
        .args(["--port", &port])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&port) && err.contains("--port"), "{err}");
}

/// Extras with calls per connection (runtime/tests/config_per_connection.c: sched_yield 0.1 a
/// request and 5 a connection, receives topped up to 1 a request and 10 a connection) make them once per
/// connection whatever the requests: the same 400 requests over 4 and over 16 connections. Each
/// traced run follows an untraced one on as many connections, as validation's measured runs follow
/// a warm-up: a connection's end-of-stream receive comes after its last top-up and counts towards
/// the next run's.
#[test]
fn strace_calls_per_connection_come_once_per_connection() {
    require("strace", "strace");
    let bin = build(false);
    let _turn = common::one_at_a_time();
    let clone = Clone::start(&clone_binary(&bin, "per_connection", "lp"), &[], &[]);
    let requests = 400;
    for connections in [4, 16] {
        let mut settle = LoadConfig::new(clone.addr, workload("lp"), 500.0);
        settle.connections = connections;
        settle.arrival = Arrival::Fixed;
        settle.warmup = Duration::ZERO;
        settle.duration = Duration::from_millis(400);
        assert_all_ok(
            &run(&settle, &mut |_| {}).expect("settling load"),
            "settling load",
        );
        let (counts, text, _) = strace_during_load_at(
            &[clone.pid()],
            clone.addr,
            workload("lp"),
            requests,
            500.0,
            connections,
            Duration::from_millis(300),
        );
        let got = |call: &str| counts.get(call).copied().unwrap_or(0) as f64;
        eprintln!(
            "{connections} connections, {requests} requests: {} sched_yield, {} recvfrom",
            got("sched_yield"),
            got("recvfrom")
        );
        let c = connections as f64;
        // sched_yield: no call of the runtime's own (unlike mprotect, which glibc makes when a
        // thread's heap grows for new connections' buffers).
        let want_yields = 0.1 * requests as f64 + 5.0 * c;
        assert!(
            (got("sched_yield") - want_yields).abs() <= 2.0,
            "{connections} connections: {} sched_yield, the config's {want_yields}\n{text}",
            got("sched_yield")
        );
        // The top-up counts the worker's own receives.
        let want_recv = requests as f64 + 10.0 * c;
        assert!(
            (got("recvfrom") - want_recv).abs() <= 2.0,
            "{connections} connections: {} recvfrom, the config's {want_recv}\n{text}",
            got("recvfrom")
        );
    }
    let (status, stderr) = clone.stop();
    assert_clean_exit(status, &stderr, "clone-per_connection-lp");
}
