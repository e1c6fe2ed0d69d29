//! The ptrace (strace) collector against real processes: the same exact workload counts as the
//! bpftrace collector, errors for bad input, and nothing left running.

#[path = "fixtures/workload.rs"]
mod workload;

use ditto_collect::ptrace::{PtraceOptions, PtraceSession, TraceError};
use std::process::Command;
use workload::{alive, check_memcached, check_workload, Memcached, Workload};

#[test]
fn ptrace_counts_known_workload_exactly() {
    workload::require_tool("strace", "-V");
    let mut w = Workload::spawn();
    let session = PtraceSession::start(&PtraceOptions::new(&[w.pid])).expect("strace attaches");
    let tracer = session.tracer_pid().expect("tracer pid");
    w.go();
    w.wait_done();
    // Let strace see the end of the final write before detaching.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (trace, raw) = session.stop_with_raw().expect("trace stops");
    if std::env::var_os("DITTO_RECORD_FIXTURES").is_some() {
        std::fs::write(workload::fixture("ptrace_workload.txt"), &raw).expect("save raw output");
        std::fs::write(
            workload::fixture("ptrace_workload.pid"),
            format!("{}\n", w.pid),
        )
        .expect("save pid");
    }
    // The program keeps running after strace detached.
    assert!(alive(w.pid), "target survived detaching");
    w.finish();

    assert!(!alive(tracer), "strace {tracer} still running after stop");
    assert_eq!(trace.backend, "ptrace");
    check_workload(&trace, w.pid);
    assert!(
        trace
            .warnings
            .iter()
            .any(|m| m.contains("no scheduler data")),
        "{:?}",
        trace.warnings
    );
    assert!(trace.wakeups.is_empty());
    assert_eq!(trace.threads[&w.pid].switches_voluntary, 0);
}

#[test]
fn ptrace_counts_memcached_requests_exactly() {
    workload::require_tool("strace", "-V");
    let Some(m) = Memcached::spawn() else {
        eprintln!("memcached not installed; skipping");
        return;
    };
    let session = PtraceSession::start(&PtraceOptions::new(&[m.pid])).expect("strace attaches");
    m.gets(100);
    // The client has its last reply once the send happened; give the server's return from that
    // send (where the request is counted) time to be seen before stopping.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let trace = session.stop().expect("trace stops");
    check_memcached(&trace, &m, 100);
}

#[test]
fn ptrace_nonexistent_pid_is_a_clear_error() {
    let pid = (3_000_000..4_000_000)
        .find(|p| !alive(*p))
        .expect("a free pid");
    match PtraceSession::start(&PtraceOptions::new(&[pid])) {
        Err(TraceError::NoSuchProcess { pid: p }) => assert_eq!(p, pid),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("tracing pid {pid} must fail"),
    }
}

#[test]
fn ptrace_missing_binary_says_run_setup() {
    let mut sleeper = Command::new("sleep").arg("30").spawn().expect("sleep");
    let opts = PtraceOptions {
        strace: "/nonexistent/strace".into(),
        ..PtraceOptions::new(&[sleeper.id()])
    };
    let r = PtraceSession::start(&opts);
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    match r {
        Err(e @ TraceError::ToolNotFound { .. }) => {
            assert!(e.to_string().contains("scripts/setup.sh"), "{e}")
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("must fail"),
    }
}

#[test]
fn ptrace_drop_detaches_and_leaves_nothing_running() {
    workload::require_tool("strace", "-V");
    let mut sleeper = Command::new("sleep").arg("60").spawn().expect("sleep");
    let session = PtraceSession::start(&PtraceOptions::new(&[sleeper.id()])).expect("attaches");
    let tracer = session.tracer_pid().expect("pid");
    assert!(alive(tracer));
    drop(session);
    assert!(!alive(tracer), "strace {tracer} survived the drop");
    // Detached, not killed: the target is still running and no longer traced.
    assert!(
        matches!(sleeper.try_wait(), Ok(None)),
        "target still running"
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", sleeper.id())).expect("status");
    assert!(
        status.lines().any(|l| l == "TracerPid:\t0"),
        "target no longer traced"
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

#[test]
fn ptrace_dies_with_the_thread_that_started_it_and_detaches() {
    workload::require_tool("strace", "-V");
    let mut sleeper = Command::new("sleep").arg("60").spawn().expect("sleep");
    let pid = sleeper.id();
    let tracer = std::thread::spawn(move || {
        let session = PtraceSession::start(&PtraceOptions::new(&[pid])).expect("attaches");
        let tracer = session.tracer_pid().expect("pid");
        std::mem::forget(session);
        tracer
    })
    .join()
    .expect("thread");
    assert!(
        workload::wait_gone(tracer),
        "strace {tracer} outlived the thread that started it"
    );
    assert!(
        matches!(sleeper.try_wait(), Ok(None)),
        "target still running"
    );
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    assert!(
        status.lines().any(|l| l == "TracerPid:\t0"),
        "target detached"
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

#[test]
fn ptrace_dying_mid_trace_is_a_clear_error_and_spares_the_target() {
    workload::require_tool("strace", "-V");
    let mut sleeper = Command::new("sleep").arg("60").spawn().expect("sleep");
    let mut session = PtraceSession::start(&PtraceOptions::new(&[sleeper.id()])).expect("attaches");
    let tracer = session.tracer_pid().expect("pid");
    // SAFETY: SIGKILL to the strace child this test started.
    unsafe { libc::kill(tracer as libc::pid_t, libc::SIGKILL) };
    while session.is_alive() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    match session.stop() {
        Err(e @ TraceError::ToolFailed { .. }) => {
            assert!(e.to_string().contains("died during the trace"), "{e}")
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a killed strace cannot return a trace"),
    }
    assert!(
        matches!(sleeper.try_wait(), Ok(None)),
        "the target survives its tracer's death"
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

#[test]
fn ptrace_target_exiting_mid_trace_still_returns_trace() {
    workload::require_tool("strace", "-V");
    let mut w = Workload::spawn();
    let pid = w.pid;
    let session = PtraceSession::start(&PtraceOptions::new(&[pid])).expect("attaches");
    w.go();
    w.wait_done();
    w.finish();
    let trace = session.stop().expect("trace of an exited process");
    assert!(
        trace
            .warnings
            .iter()
            .any(|m| m.contains(&format!("process {pid} exited"))),
        "{:?}",
        trace.warnings
    );
    assert_eq!(
        trace.stats(pid, "pread64").map(|s| s.count),
        Some(workload::PREADS)
    );
    assert!(
        trace.exits.iter().any(|e| e.tid == pid && e.tgid == pid),
        "main thread exit recorded"
    );
}
