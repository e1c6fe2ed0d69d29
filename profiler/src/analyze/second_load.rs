//! The second load's syscall counts, carried over to the profiled window's clusters.
//!
//! The second window is analysed on its own, so its clustering can differ from the profiled
//! window's (a thread idle at one load and busy at the other). Its calls are therefore re-homed by
//! thread: each of its clusters goes to the profiled cluster most of its threads belonged to, and
//! clusters whose threads the profiled window never saw are left out (they have nothing to be
//! compared with).

use std::collections::BTreeMap;

use ditto_profile::{ClusterSyscalls, SecondLoadSyscalls, SyscallStat};

/// The load a second window ran: its rates, length, completed requests and connections.
#[derive(Debug, Clone, Copy)]
pub struct WindowLoad {
    pub offered_rate: f64,
    pub achieved_rate: f64,
    pub duration_s: f64,
    pub requests: u64,
    pub connections: u32,
}

/// `second_calls` are the second window's per-cluster calls, `second_threads` its thread → cluster
/// map and `profiled_threads` the profiled window's; the counts are per request of the second load.
pub fn second_load_syscalls(
    second_calls: &[ClusterSyscalls],
    second_threads: &BTreeMap<u32, String>,
    profiled_threads: &BTreeMap<u32, String>,
    load: WindowLoad,
) -> SecondLoadSyscalls {
    // Second cluster → profiled cluster, by the majority of its threads (ties: the smaller id, so
    // the result does not depend on map order).
    let mut votes: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    for (tid, second) in second_threads {
        if let Some(profiled) = profiled_threads.get(tid) {
            *votes
                .entry(second.as_str())
                .or_default()
                .entry(profiled.as_str())
                .or_default() += 1;
        }
    }
    let home_of = |second: &str| -> Option<&str> {
        let v = votes.get(second)?;
        let most = v.values().copied().max()?;
        v.iter().find(|(_, n)| **n == most).map(|(c, _)| *c)
    };

    let mut merged: BTreeMap<&str, BTreeMap<&str, SyscallStat>> = BTreeMap::new();
    for cs in second_calls {
        let Some(home) = home_of(&cs.cluster) else {
            continue;
        };
        let calls = merged.entry(home).or_default();
        for call in &cs.calls {
            let into = calls
                .entry(call.name.as_str())
                .or_insert_with(|| SyscallStat {
                    name: call.name.clone(),
                    ..SyscallStat::default()
                });
            merge_into(into, call);
        }
    }
    let clusters = merged
        .into_iter()
        .map(|(cluster, calls)| {
            let mut calls: Vec<SyscallStat> = calls.into_values().collect();
            calls.sort_by(|a, b| {
                b.per_request
                    .total_cmp(&a.per_request)
                    .then(a.name.cmp(&b.name))
            });
            ClusterSyscalls {
                cluster: cluster.to_string(),
                calls,
            }
        })
        .collect();
    SecondLoadSyscalls {
        offered_rate: load.offered_rate,
        achieved_rate: load.achieved_rate,
        duration_s: load.duration_s,
        requests: load.requests,
        connections: Some(load.connections),
        clusters,
    }
}

/// Adds `call` to `into`: counts add, shares are weighted by calls. Histograms are not kept.
fn merge_into(into: &mut SyscallStat, call: &SyscallStat) {
    let (a, b) = (into.count as f64, call.count as f64);
    let total = a + b;
    let weigh = |x: f64, y: f64| {
        if total > 0.0 {
            (x * a + y * b) / total
        } else {
            0.0
        }
    };
    into.error_fraction = weigh(into.error_fraction, call.error_fraction);
    into.eagain_fraction = weigh(into.eagain_fraction, call.eagain_fraction);
    // Each kind once: a kind both sides have must be weighed once, from the values before.
    let kinds: std::collections::BTreeSet<String> = into
        .fd_kinds
        .keys()
        .chain(call.fd_kinds.keys())
        .cloned()
        .collect();
    for k in kinds {
        let x = into.fd_kinds.get(&k).copied().unwrap_or(0.0);
        let y = call.fd_kinds.get(&k).copied().unwrap_or(0.0);
        into.fd_kinds.insert(k, weigh(x, y));
    }
    for (flag, n) in &call.flags {
        *into.flags.entry(flag.clone()).or_default() += n;
    }
    into.per_request += call.per_request;
    into.count += call.count;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(name: &str, per_request: f64, count: u64, socket: f64) -> SyscallStat {
        SyscallStat {
            name: name.into(),
            per_request,
            count,
            fd_kinds: [
                ("socket".to_string(), socket),
                ("pipe".to_string(), 1.0 - socket),
            ]
            .into_iter()
            .collect(),
            ..SyscallStat::default()
        }
    }

    #[test]
    fn second_clusters_go_to_the_profiled_cluster_most_of_their_threads_were_in_and_counts_add() {
        // The second window split the profiled c1's threads into its own c1 and c2, and saw a
        // thread (99) the profiled window did not.
        let profiled: BTreeMap<u32, String> = [(10, "c0"), (11, "c1"), (12, "c1"), (13, "c1")]
            .into_iter()
            .map(|(t, c)| (t, c.to_string()))
            .collect();
        let second: BTreeMap<u32, String> =
            [(10, "c0"), (11, "c1"), (12, "c1"), (13, "c2"), (99, "c3")]
                .into_iter()
                .map(|(t, c)| (t, c.to_string()))
                .collect();
        let calls = vec![
            ClusterSyscalls {
                cluster: "c1".into(),
                calls: vec![stat("recvfrom", 1.0, 1000, 1.0)],
            },
            ClusterSyscalls {
                cluster: "c2".into(),
                calls: vec![
                    stat("recvfrom", 0.25, 250, 0.0),
                    stat("futex", 0.5, 500, 0.0),
                ],
            },
            ClusterSyscalls {
                cluster: "c3".into(),
                calls: vec![stat("clock_nanosleep", 3.0, 3000, 0.0)],
            },
        ];
        let load = WindowLoad {
            offered_rate: 1000.0,
            achieved_rate: 998.0,
            duration_s: 1.0,
            requests: 1000,
            connections: 8,
        };
        let s = second_load_syscalls(&calls, &second, &profiled, load);
        assert_eq!(s.connections, Some(8));
        assert_eq!(
            s.clusters.len(),
            1,
            "c3's thread was not in the profiled window"
        );
        let c1 = &s.clusters[0];
        assert_eq!(c1.cluster, "c1");
        let names: Vec<&str> = c1.calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["recvfrom", "futex"], "most calls first");
        let recv = &c1.calls[0];
        assert!((recv.per_request - 1.25).abs() < 1e-12);
        assert_eq!(recv.count, 1250);
        assert!(
            (recv.fd_kinds["socket"] - 0.8).abs() < 1e-12,
            "weighted by calls"
        );
        assert!(recv.bytes.is_none());
        assert_eq!(s.achieved_rate, 998.0);
    }
}
