//! Alone in its own test binary: it counts this process's open descriptors, which tests running
//! in parallel would disturb.

use ditto_collect::perf::SoftwareCounters;
use std::sync::mpsc;
use std::thread;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").expect("fd dir").count()
}

#[test]
fn dropping_the_session_closes_its_counter_fds() {
    let (tid_tx, tid_rx) = mpsc::channel();
    let (exit_tx, exit_rx) = mpsc::channel::<()>();
    let handle = thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tid_tx.send(unsafe { libc::gettid() } as u32).expect("tid");
        let _ = exit_rx.recv();
    });
    let tid = tid_rx.recv().expect("tid");
    let before = open_fds();
    let c = SoftwareCounters::start(&[tid]).expect("start");
    let during = open_fds();
    drop(c);
    let after = open_fds();
    exit_tx.send(()).expect("exit");
    handle.join().expect("join");
    // task-clock, context-switches, cpu-migrations, page-faults, minor and major faults.
    assert_eq!(during, before + 6, "one descriptor per event");
    assert_eq!(after, before, "descriptors left open after drop");
}
