//! perf software counters on threads of this test process (perf_event_open on a tid works the same
//! for our own threads as for a target's). Needs perf_event_paranoid ≤ 2 or root.

use ditto_collect::error::CollectError;
use ditto_collect::perf::{self, SoftwareCounters};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// A thread that reports its tid, waits for `go`, runs `work`, reports `done`, then waits for
/// `exit` before returning (so it is still alive when the test reads its counters, unless the
/// test lets it go first).
struct Worker {
    tid: u32,
    go: mpsc::Sender<()>,
    done: mpsc::Receiver<()>,
    exit: mpsc::Sender<()>,
    handle: thread::JoinHandle<()>,
}

fn worker(work: impl FnOnce() + Send + 'static) -> Worker {
    let (tid_tx, tid_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel();
    let (exit_tx, exit_rx) = mpsc::channel::<()>();
    let handle = thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        tid_tx.send(tid).expect("send tid");
        go_rx.recv().expect("go");
        work();
        done_tx.send(()).expect("done");
        let _ = exit_rx.recv();
    });
    let tid = tid_rx.recv().expect("tid");
    Worker {
        tid,
        go: go_tx,
        done: done_rx,
        exit: exit_tx,
        handle,
    }
}

impl Worker {
    fn run(&self) {
        self.go.send(()).expect("go");
        self.done
            .recv_timeout(Duration::from_secs(20))
            .expect("work finished");
    }
    fn finish(self) {
        let _ = self.exit.send(());
        self.handle.join().expect("join");
    }
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into ts only.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[test]
fn probe_reports_software_counters_and_agrees_with_hardware_check() {
    let caps = perf::probe();
    assert!(
        caps.software,
        "software counters unavailable: {:?}",
        caps.reason
    );
    assert_eq!(caps.hardware, perf::hardware_counters_available());
    if !caps.hardware {
        assert!(
            caps.reason.is_some(),
            "a missing PMU must come with a reason"
        );
    }
    assert!((-1..=4).contains(&caps.paranoid));
}

#[test]
fn thread_sleeping_100_times_counts_at_least_100_context_switches() {
    let w = worker(|| {
        for _ in 0..100 {
            thread::sleep(Duration::from_millis(1));
        }
    });
    let mut c = SoftwareCounters::start(&[w.tid]).expect("start");
    assert_eq!(c.covered(), vec![w.tid]);
    assert!(c.uncovered().is_empty());
    assert!(
        c.kernel_included(),
        "running as root, kernel-side events must be counted"
    );
    w.run();
    let counts = c.read()[&w.tid];
    w.finish();
    assert!(
        counts.context_switches >= 100,
        "context switches {} < 100",
        counts.context_switches
    );
    // Sleeping is not CPU time: 100 sleeps of 1 ms must cost far less than 100 ms of CPU.
    assert!(
        counts.task_clock_ns < 50_000_000,
        "task clock {} ns",
        counts.task_clock_ns
    );
    assert!(!counts.exited);
}

#[test]
fn busy_loop_of_50_ms_reads_40_to_200_ms_of_task_clock() {
    // Spin until the thread itself has used 50 ms of CPU (by the kernel's per-thread CPU clock),
    // so that other tests competing for the two cores don't shorten it.
    let w = worker(|| {
        let mut x = 0u64;
        while thread_cpu_ns() < 50_000_000 {
            for _ in 0..1000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
    });
    let mut c = SoftwareCounters::start(&[w.tid]).expect("start");
    let before = c.read()[&w.tid];
    w.run();
    let after = c.read()[&w.tid];
    w.finish();
    let ms = (after.task_clock_ns - before.task_clock_ns) as f64 / 1e6;
    assert!(
        (40.0..=200.0).contains(&ms),
        "task clock {ms} ms for a 50 ms busy loop"
    );
    assert_eq!(
        after.time_enabled_ns, after.time_running_ns,
        "software events are not multiplexed"
    );
}

#[test]
fn touching_500_fresh_pages_counts_at_least_500_minor_faults() {
    const PAGES: usize = 500;
    let w = worker(|| {
        let page = 4096;
        let len = PAGES * page;
        // SAFETY: anonymous private mapping, unmapped below; no huge pages so that each page
        // faults on its own.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            libc::madvise(p, len, libc::MADV_NOHUGEPAGE);
            for i in 0..PAGES {
                std::ptr::write_volatile((p as *mut u8).add(i * page), 1);
            }
            libc::munmap(p, len);
        }
    });
    let mut c = SoftwareCounters::start(&[w.tid]).expect("start");
    w.run();
    let counts = c.read()[&w.tid];
    w.finish();
    assert!(
        counts.page_faults >= PAGES as u64,
        "page faults {}",
        counts.page_faults
    );
    assert!(counts.minor_faults.expect("minor faults counter") >= PAGES as u64);
    assert_eq!(counts.major_faults, Some(0));
}

#[test]
fn thread_exiting_mid_session_keeps_its_final_counts_and_is_marked_exited() {
    let w = worker(|| {
        for _ in 0..20 {
            thread::sleep(Duration::from_millis(1));
        }
    });
    let tid = w.tid;
    let mut c = SoftwareCounters::start(&[tid]).expect("start");
    w.run();
    let alive = c.read()[&tid];
    assert!(!alive.exited);
    w.finish(); // the thread has exited once join returns
    let gone = c.read()[&tid];
    assert!(gone.exited, "exit not detected: {gone:?}");
    assert!(gone.context_switches >= alive.context_switches);
    assert!(gone.context_switches >= 20);
    assert!(gone.task_clock_ns >= alive.task_clock_ns);
    // Later reads keep returning the final values.
    assert_eq!(c.read()[&tid], gone);
}

#[test]
fn nonexistent_thread_is_listed_as_uncovered_next_to_a_covered_one() {
    let w = worker(|| {});
    let bogus = u32::MAX - 7; // far above pid_max
    let c = SoftwareCounters::start(&[w.tid, bogus]).expect("start");
    assert_eq!(c.covered(), vec![w.tid]);
    assert_eq!(c.uncovered().len(), 1);
    assert_eq!(c.uncovered()[0].tid, bogus);
    assert!(
        c.uncovered()[0].reason.contains("does not exist"),
        "{}",
        c.uncovered()[0].reason
    );
    w.run();
    w.finish();
}

#[test]
fn session_with_only_nonexistent_threads_is_an_error_naming_the_thread() {
    let bogus = u32::MAX - 7;
    match SoftwareCounters::start(&[bogus]) {
        Err(CollectError::Perf { tid, .. }) => assert_eq!(tid, bogus),
        other => panic!("expected a perf error for tid {bogus}, got {other:?}"),
    }
}

#[test]
fn session_and_snapshot_types_can_move_to_a_collector_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<SoftwareCounters>();
    assert_send::<ditto_collect::procfs::ProcSnapshot>();
}
