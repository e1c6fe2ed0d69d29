//! The strace output parser on recorded real output (`fixtures/ptrace_workload.txt`: strace
//! `-f -yy -ttt -T -X raw -s 0` attached to `workload.py`; re-record with
//! `DITTO_RECORD_FIXTURES=1 cargo test -p ditto-collect --test ptrace_live ptrace_counts`).

#[path = "fixtures/workload.rs"]
mod workload;

use ditto_collect::ptrace::{parse_strace_output, StraceContext};
use ditto_collect::syscalls::{FdKind, SyscallTrace};
use std::collections::BTreeMap;
use workload::{check_workload, fixture};

fn recorded() -> (SyscallTrace, u32) {
    let raw = std::fs::read_to_string(fixture("ptrace_workload.txt")).expect("fixture");
    let pid: u32 = std::fs::read_to_string(fixture("ptrace_workload.pid"))
        .expect("pid fixture")
        .trim()
        .parse()
        .expect("pid");
    let ctx = StraceContext {
        pids: vec![pid],
        threads: BTreeMap::from([(pid, pid)]),
        ..Default::default()
    };
    (parse_strace_output(raw.as_bytes(), &ctx), pid)
}

#[test]
fn ptrace_fixture_has_exact_workload_counts() {
    let (trace, pid) = recorded();
    assert_eq!(trace.backend, "ptrace");
    check_workload(&trace, pid);
    assert!(
        !trace.warnings.iter().any(|w| w.contains("could not")),
        "{:?}",
        trace.warnings
    );
}

#[test]
fn ptrace_fixture_golden_details() {
    let (trace, pid) = recorded();
    let (worker, child) = (15299, 15304);
    assert_eq!(pid, 15285);
    // First to last timestamp of the output.
    assert!(
        (trace.window_s - 0.175_337).abs() < 1e-5,
        "window {}",
        trace.window_s
    );
    // Forks: the thread (clone3 with CLONE_THREAD in 0x3d0f00), then the process (clone, SIGCHLD).
    assert_eq!(trace.forks.len(), 2);
    assert_eq!(
        (trace.forks[0].child_tid, trace.forks[0].is_thread),
        (worker, true)
    );
    assert!(
        (trace.forks[0].at_s - 0.052_529).abs() < 1e-5,
        "{}",
        trace.forks[0].at_s
    );
    assert_eq!(
        (
            trace.forks[1].child_tid,
            trace.forks[1].child_tgid,
            trace.forks[1].is_thread
        ),
        (child, child, false)
    );
    assert!(
        (trace.forks[1].at_s - 0.111_590).abs() < 1e-5,
        "{}",
        trace.forks[1].at_s
    );
    let exits: Vec<(u32, u32)> = trace.exits.iter().map(|e| (e.tid, e.tgid)).collect();
    assert_eq!(exits, vec![(worker, pid), (child, child)]);

    // The futex calls of the main thread: 11, one ETIMEDOUT and one EAGAIN; unfinished/resumed
    // pairs are counted once.
    let f = trace.stats(pid, "futex").expect("futex");
    assert_eq!((f.count, f.errors, f.eagain), (11, 2, 1));
    assert_eq!(f.duration_ns.total(), 11);
    assert_eq!(trace.stats(worker, "futex").map(|s| s.count), Some(9));
    // Calls that never return are not errors.
    assert_eq!(
        trace.stats(worker, "exit").map(|s| (s.count, s.errors)),
        Some((1, 0))
    );
    assert_eq!(
        trace
            .stats(child, "exit_group")
            .map(|s| (s.count, s.errors)),
        Some((1, 0))
    );
    // The read that was blocked at attach is seen (ptrace restarts it): the 3-byte "go\n".
    let r = trace.stats(pid, "read").expect("read");
    assert_eq!((r.count, r.ret_bytes.get(2)), (1, 1));
    assert_eq!(r.fd_kinds.get(&FdKind::Pipe), Some(&1));
    // Durations have microsecond resolution: the 8 us preads land in the 8192..16383 ns bucket.
    let p = trace.stats(pid, "pread64").expect("pread64");
    assert_eq!(p.duration_ns.total(), 500);
    // No scheduler data from ptrace.
    assert!(trace.wakeups.is_empty());
    assert!(trace
        .threads
        .values()
        .all(|t| t.switches_voluntary == 0 && t.switches_involuntary == 0));
}

#[test]
fn ptrace_parser_handles_interleaved_unfinished_calls() {
    // Real lines from a two-thread strace run, interleaved as strace writes them.
    let raw = "\
100 1.000000 clone3({flags=0x3d0f00, child_tid=0x7f, parent_tid=0x7f, exit_signal=0, stack=0x7e, stack_size=0x7fff80, tls=0x7f} <unfinished ...>
101 1.000100 rseq(0x7f1ce9c08fe0, 0x20, 0, 0x53053053 <unfinished ...>
100 1.000110 <... clone3 resumed> => {parent_tid=[101]}, 88) = 101 <0.000116>
101 1.000120 <... rseq resumed>) = 0 <0.000027>
101 1.000200 read(7<TCP:[127.0.0.1:80->127.0.0.1:5000]>,  <unfinished ...>
100 1.000300 --- SIGCHLD {si_signo=17, si_code=0x1} ---
101 1.000400 <... read resumed>\"\"..., 16384) = 40 <0.000200>
101 1.000500 sendmsg(7<TCP:[127.0.0.1:80->127.0.0.1:5000]>, {msg_name=NULL, msg_namelen=0, msg_iov=[{iov_base=\"\"..., iov_len=120}], msg_iovlen=1, msg_controllen=0, msg_flags=0}, 0x4000) = 120 <0.000030>
101 1.000600 read(7<TCP:[127.0.0.1:80->127.0.0.1:5000]>, 0x7f, 16384) = -1 EAGAIN (Resource temporarily unavailable) <0.000005>
101 1.000700 epoll_wait(5<anon_inode:[eventpoll]>,  <unfinished ...>
";
    let ctx = StraceContext {
        pids: vec![100],
        threads: BTreeMap::from([(100, 100)]),
        ..Default::default()
    };
    let t = parse_strace_output(raw.as_bytes(), &ctx);
    assert_eq!(t.forks.len(), 1);
    assert!(t.forks[0].is_thread);
    assert_eq!(t.threads[&101].tgid, 100);
    let read = t.stats(101, "read").expect("read");
    assert_eq!((read.count, read.errors, read.eagain), (2, 1, 1));
    assert_eq!(read.fd_kinds.get(&FdKind::Socket), Some(&2));
    // The size argument came after <unfinished ...> in the first read.
    assert_eq!(read.size_arg.get(15), 2);
    assert_eq!(read.ret_bytes.get(6), 1);
    let send = t.stats(101, "sendmsg").expect("sendmsg");
    assert_eq!(send.flags.get(&0x4000), Some(&1));
    assert_eq!(send.ret_bytes.get(7), 1);
    assert_eq!(t.threads[&101].socket_requests, 1);
    // Still blocked when strace detached: counted, with its fd kind, without a duration.
    let ep = t.stats(101, "epoll_wait").expect("epoll_wait");
    assert_eq!((ep.count, ep.duration_ns.total()), (1, 0));
    assert_eq!(ep.fd_kinds.get(&FdKind::Anon), Some(&1));
    assert!((t.window_s - 0.0007).abs() < 1e-9);
}

#[test]
fn ptrace_parser_ignores_calls_resumed_without_start_and_names_unknown_calls() {
    let raw = "\
7 2.0 <... epoll_wait resumed>[{events=EPOLLIN, data={u32=5, u64=5}}], 512, -1) = 1 <3.000000>
7 2.1 syscall_0x1d6(0x1, 0x2) = -1 ENOSYS (Function not implemented) <0.000004>
";
    let ctx = StraceContext {
        pids: vec![7],
        threads: BTreeMap::from([(7, 7)]),
        ..Default::default()
    };
    let t = parse_strace_output(raw.as_bytes(), &ctx);
    assert!(
        t.stats(7, "epoll_wait").is_none(),
        "entered before attach: not counted"
    );
    assert_eq!(
        t.stats(7, "sys_470").map(|s| (s.count, s.errors)),
        Some((1, 1))
    );
}
