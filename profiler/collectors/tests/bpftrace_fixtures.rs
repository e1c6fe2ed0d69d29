//! The bpftrace output parser on recorded real output (`fixtures/bpftrace_workload.jsonl`, the
//! `bpftrace -f json` output of the collector's program tracing `workload.py`; re-record with
//! `DITTO_RECORD_FIXTURES=1 cargo test -p ditto-collect --test bpftrace_live bpftrace_counts`).

#[path = "fixtures/workload.rs"]
mod workload;

use ditto_collect::bpftrace::{parse_bpftrace_output, TraceError, WakeupEdge};
use ditto_collect::syscalls::SyscallTrace;
use workload::{check_workload, fixture};

fn recorded() -> (SyscallTrace, u32) {
    let raw = std::fs::read_to_string(fixture("bpftrace_workload.jsonl")).expect("fixture");
    let pid: u32 = std::fs::read_to_string(fixture("bpftrace_workload.pid"))
        .expect("pid fixture")
        .trim()
        .parse()
        .expect("pid");
    (
        parse_bpftrace_output(&raw, &[pid], 65536).expect("parses"),
        pid,
    )
}

#[test]
fn bpftrace_fixture_has_exact_workload_counts() {
    let (trace, pid) = recorded();
    assert_eq!(trace.backend, "bpftrace");
    assert_eq!(trace.pids, vec![pid]);
    check_workload(&trace, pid);
    assert!(trace.warnings.is_empty(), "{:?}", trace.warnings);
}

#[test]
fn bpftrace_fixture_golden_scheduler_and_timing() {
    let (trace, pid) = recorded();
    assert_eq!(pid, 12622);
    // @t_end - @t_begin.
    assert!(
        (trace.window_s - 0.840_616_978).abs() < 1e-9,
        "window {}",
        trace.window_s
    );
    let (worker, child) = (12709, 12710);
    assert_eq!(trace.threads[&pid].switches_voluntary, 220);
    assert_eq!(trace.threads[&pid].switches_involuntary, 29);
    assert_eq!(trace.threads[&worker].switches_voluntary, 21);
    assert_eq!(trace.threads[&worker].switches_involuntary, 0);
    assert_eq!(trace.threads[&child].switches_voluntary, 186);
    assert_eq!(trace.threads[&child].switches_involuntary, 49);
    let edge = |waker_tid, wakee_tid, count| WakeupEdge {
        waker_tid,
        wakee_tid,
        count,
    };
    assert_eq!(
        trace.wakeups,
        vec![
            edge(0, pid, 4),
            edge(0, worker, 20),
            edge(pid, child, 186),
            edge(worker, pid, 3),
            edge(child, pid, 213),
        ]
    );
    assert_eq!(trace.forks.len(), 2);
    assert!((trace.forks[0].at_s - 0.031_860_265).abs() < 1e-9);
    assert_eq!(trace.forks[0].child_tid, worker);
    assert!(trace.forks[0].is_thread);
    assert_eq!(trace.forks[1].child_tid, child);
    assert!(!trace.forks[1].is_thread);
    assert_eq!(
        trace
            .exits
            .iter()
            .map(|e| (e.tid, e.tgid))
            .collect::<Vec<_>>(),
        vec![(worker, pid), (child, child)]
    );
    // The futex op mix (flags role = op): FUTEX_WAKE_PRIVATE (129) twice in the main thread.
    assert_eq!(
        trace.stats(pid, "futex").and_then(|s| s.flags.get(&129)),
        Some(&2)
    );
    // lseek on the stdin pipe fails with ESPIPE; a futex wait found the value changed (EAGAIN).
    assert_eq!(
        trace.stats(pid, "lseek").map(|s| (s.count, s.errors)),
        Some((1, 1))
    );
    assert_eq!(trace.stats(pid, "futex").map(|s| s.eagain), Some(1));
}

#[test]
fn bpftrace_parser_warns_when_a_map_is_full() {
    let raw = std::fs::read_to_string(fixture("bpftrace_workload.jsonl")).expect("fixture");
    // The @flags map of the fixture has 17 keys: with a limit of 17 it counts as full.
    let trace = parse_bpftrace_output(&raw, &[12622], 17).expect("parses");
    assert!(
        trace
            .warnings
            .iter()
            .any(|w| w.contains("@flags") && w.contains("limit")),
        "{:?}",
        trace.warnings
    );
}

#[test]
fn bpftrace_parser_rejects_output_without_maps() {
    let out = "{\"type\": \"attached_probes\", \"data\": {\"probes\": 8}}\n\n";
    assert!(matches!(
        parse_bpftrace_output(out, &[1], 65536),
        Err(TraceError::Parse { .. })
    ));
    assert!(matches!(
        parse_bpftrace_output("{not json", &[1], 65536),
        Err(TraceError::Parse { .. })
    ));
}

#[test]
fn bpftrace_parser_reports_lost_events() {
    let out = "{\"type\": \"map\", \"data\": {\"@calls\": {\"5,5,0\": 3}}}\n{\"type\": \"lost_events\", \"data\": {\"events\": 7}}\n";
    let trace = parse_bpftrace_output(out, &[5], 65536).expect("parses");
    assert_eq!(trace.stats(5, "read").map(|s| s.count), Some(3));
    assert!(trace.warnings.iter().any(|w| w.contains("lost")));
}

#[test]
fn bpftrace_unknown_syscall_numbers_get_sys_names() {
    let out = "{\"type\": \"map\", \"data\": {\"@calls\": {\"5,6,470\": 2}}}\n";
    let trace = parse_bpftrace_output(out, &[5], 65536).expect("parses");
    assert_eq!(trace.stats(6, "sys_470").map(|s| s.count), Some(2));
    assert_eq!(trace.threads[&6].tgid, 5);
}
