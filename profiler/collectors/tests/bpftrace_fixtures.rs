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
    assert_eq!(pid, 27104);
    // @t_end - @t_begin.
    assert!(
        (trace.window_s - 0.851_359_327).abs() < 1e-9,
        "window {}",
        trace.window_s
    );
    let (worker, child) = (27148, 27149);
    let switches = |tid: u32| {
        let t = &trace.threads[&tid];
        (t.switches_voluntary, t.switches_involuntary)
    };
    assert_eq!(switches(pid), (203, 30));
    assert_eq!(switches(worker), (21, 0));
    assert_eq!(switches(child), (208, 16));
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
            edge(0, child, 1),
            edge(pid, child, 207),
            edge(worker, pid, 3),
            edge(child, pid, 196),
        ]
    );
    assert_eq!(trace.forks.len(), 2);
    assert!((trace.forks[0].at_s - 0.032_221_122).abs() < 1e-9);
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
    // The futex op mix (flags role = op): FUTEX_WAIT_BITSET|PRIVATE|CLOCK_REALTIME (393),
    // FUTEX_WAKE_PRIVATE (129), FUTEX_WAIT_BITSET_PRIVATE (137).
    let futex = trace.stats(pid, "futex").expect("futex");
    assert_eq!(futex.count, 4);
    let ops: Vec<(i64, u64)> = futex.flags.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(ops, vec![(129, 1), (137, 1), (393, 2)]);
    assert_eq!(
        trace
            .stats(worker, "futex")
            .map(|s| (s.count, s.flags.get(&129).copied())),
        Some((3, Some(3)))
    );
    // lseek(SEEK_CUR) on the stdin pipe fails (ESPIPE).
    let lseek = trace.stats(pid, "lseek").expect("lseek");
    assert_eq!(
        (lseek.count, lseek.errors, lseek.flags.get(&1).copied()),
        (1, 1, Some(1))
    );
}

#[test]
fn bpftrace_parser_warns_when_output_is_cut_short() {
    let raw = std::fs::read_to_string(fixture("bpftrace_workload.jsonl")).expect("fixture");
    let cut: String = raw
        .lines()
        .filter(|l| !l.contains("@zzz_complete"))
        .map(|l| format!("{l}\n"))
        .collect();
    let trace = parse_bpftrace_output(&cut, &[27104], 65536).expect("parses");
    assert!(
        trace
            .warnings
            .iter()
            .any(|w| w.contains("ended before its last map")),
        "{:?}",
        trace.warnings
    );
}

#[test]
fn bpftrace_parser_warns_when_a_map_is_full() {
    let raw = std::fs::read_to_string(fixture("bpftrace_workload.jsonl")).expect("fixture");
    // The @flags map of the fixture has 17 keys: with a limit of 17 it counts as full.
    let trace = parse_bpftrace_output(&raw, &[27104], 17).expect("parses");
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
    let out = "{\"type\": \"map\", \"data\": {\"@calls\": {\"5,5,0\": 3}}}\n{\"type\": \"lost_events\", \"data\": {\"events\": 7}}\n{\"type\": \"map\", \"data\": {\"@zzz_complete\": 1}}\n";
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
