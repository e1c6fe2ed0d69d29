//! From window counts to the profile's `body` section: threads are assigned to the skeleton's clusters and
//! every count becomes a per-request figure or a share.

use std::collections::BTreeMap;

use ditto_profile::{
    Body, Branches, ClusterBody, Dependencies, Histogram, HitCurve, HitPoint, IndirectBranches,
    MixShare,
};

use crate::analysis::{ProcessCounts, ThreadCounts, DEP_BINS, RATE_BINS};
use crate::cache::CurveSim;
use crate::classes::{CLASSES, OPERANDS};

/// Engine name recorded in profiles.
pub const ENGINE: &str = "valgrind/ditto-body";
pub const ASSOCIATIVITY: &str = "64-byte lines, LRU, 8-way below 1 MiB and 16-way from 1 MiB";

/// A cluster of the skeleton that threads can be assigned to.
#[derive(Debug, Clone)]
pub struct ClusterSlot {
    pub id: String,
    /// Threads the skeleton saw in this cluster (over all its processes).
    pub threads: u32,
    /// User CPU per request in the native run: busier clusters take the busier threads.
    pub cpu_user_per_request: f64,
    /// Names the cluster's threads had in the native run (kept in memory only, never in a profile).
    pub thread_names: Vec<String>,
}

/// Threads of one cluster: (process index, thread index) pairs.
type Members = Vec<(usize, usize)>;

/// Assigns traced threads to clusters. A thread whose name belongs to exactly one cluster's native
/// threads goes there. The others are ranked by instructions executed and fill the remaining places of
/// the clusters ranked by native user CPU (each cluster holds as many threads as the native run saw in
/// it); leftovers join the last cluster. Without clusters, all threads form one cluster `all`.
pub fn assign(
    processes: &[ProcessCounts],
    clusters: &[ClusterSlot],
    thread_name: &dyn Fn(u64, u32) -> Option<String>,
) -> Vec<(String, Members)> {
    let mut threads: Vec<(usize, usize, u64)> = processes
        .iter()
        .enumerate()
        .flat_map(|(p, pc)| {
            pc.threads
                .iter()
                .enumerate()
                .map(move |(t, tc)| (p, t, tc.instructions))
        })
        .collect();
    threads.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
    if clusters.is_empty() {
        return vec![(
            "all".to_string(),
            threads.iter().map(|&(p, t, _)| (p, t)).collect(),
        )];
    }
    let mut order: Vec<&ClusterSlot> = clusters.iter().collect();
    order.sort_by(|a, b| {
        b.cpu_user_per_request
            .partial_cmp(&a.cpu_user_per_request)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.id.cmp(&b.id))
    });
    let mut out: Vec<(String, Members)> =
        order.iter().map(|c| (c.id.clone(), Vec::new())).collect();
    let mut unnamed = Vec::new();
    for (p, t, n) in threads {
        let name = thread_name(processes[p].pid, processes[p].threads[t].lwp);
        let owners: Vec<usize> = match &name {
            Some(name) => order
                .iter()
                .enumerate()
                .filter(|(_, c)| c.thread_names.iter().any(|x| x == name))
                .map(|(k, _)| k)
                .collect(),
            None => Vec::new(),
        };
        match owners.as_slice() {
            [k] => out[*k].1.push((p, t)),
            _ => unnamed.push((p, t, n)),
        }
    }
    let mut next = unnamed.into_iter();
    for (k, c) in order.iter().enumerate() {
        let free = (c.threads as usize).saturating_sub(out[k].1.len());
        for _ in 0..free {
            match next.next() {
                Some((p, t, _)) => out[k].1.push((p, t)),
                None => break,
            }
        }
    }
    if let Some(last) = out.last_mut() {
        last.1.extend(next.map(|(p, t, _)| (p, t)));
    }
    out
}

/// The body section for `requests` requests. `thread_name(pid, lwp)` names traced threads (see
/// [`assign`]); return `None` where names are not known.
pub fn build_body(
    processes: &[ProcessCounts],
    clusters: &[ClusterSlot],
    thread_name: &dyn Fn(u64, u32) -> Option<String>,
    requests: u64,
) -> Body {
    let requests = requests.max(1) as f64;
    let mut bodies = Vec::new();
    for (id, members) in assign(processes, clusters, thread_name) {
        let threads: Vec<(usize, &ThreadCounts)> = members
            .iter()
            .map(|&(p, t)| (p, &processes[p].threads[t]))
            .collect();
        let instructions: u64 = threads.iter().map(|(_, t)| t.instructions).sum();
        if instructions == 0 {
            continue;
        }
        let mut procs: Vec<usize> = members.iter().map(|&(p, _)| p).collect();
        procs.sort_unstable();
        procs.dedup();
        bodies.push(cluster_body(
            id, &members, &threads, processes, &procs, requests,
        ));
    }
    Body {
        engine: ENGINE.to_string(),
        requests: requests as u64,
        clusters: bodies,
    }
}

fn shares<const N: usize>(counts: [u64; N]) -> Vec<f64> {
    let total: u64 = counts.iter().sum();
    counts
        .iter()
        .map(|&c| {
            if total == 0 {
                0.0
            } else {
                c as f64 / total as f64
            }
        })
        .collect()
}

/// Process `p`'s per-site statistics (branch or indirect-jump ids are per process), each site's
/// threads added up with `add`.
fn per_site<T: Clone + Default>(
    threads: &[(usize, &ThreadCounts)],
    p: usize,
    sites: impl Fn(&ThreadCounts) -> &[T],
    add: impl Fn(&mut T, &T),
) -> Vec<T> {
    let mut merged: Vec<T> = Vec::new();
    for (_, t) in threads.iter().filter(|(tp, _)| *tp == p) {
        let s = sites(t);
        if merged.len() < s.len() {
            merged.resize(s.len(), T::default());
        }
        for (m, b) in merged.iter_mut().zip(s) {
            add(m, b);
        }
    }
    merged
}

fn sum_arrays<const N: usize>(
    threads: &[(usize, &ThreadCounts)],
    f: impl Fn(&ThreadCounts) -> [u64; N],
) -> [u64; N] {
    let mut acc = [0u64; N];
    for (_, t) in threads {
        for (a, v) in acc.iter_mut().zip(f(t)) {
            *a += v;
        }
    }
    acc
}

/// The hit curve of `members`' (process, thread) accesses in their processes' caches: a cluster's
/// own accesses, each in the cache it shares with its process's other threads.
fn cluster_curve(
    members: &[(usize, usize)],
    processes: &[ProcessCounts],
    procs: &[usize],
    sim: impl Fn(&ProcessCounts) -> &CurveSim,
) -> HitCurve {
    let mut counts = sim(&processes[procs[0]]).empty_counts();
    for &(p, t) in members {
        counts.absorb(&sim(&processes[p]).counts_of(t));
    }
    let sims: Vec<&CurveSim> = procs.iter().map(|&p| sim(&processes[p])).collect();
    curve(counts.curve(CurveSim::footprint_bytes_of(&sims)))
}

fn curve((points, err): (Vec<(u64, f64)>, f64)) -> HitCurve {
    HitCurve {
        points: points
            .into_iter()
            .map(|(size, hit_rate)| HitPoint { size, hit_rate })
            .collect(),
        associativity: ASSOCIATIVITY.to_string(),
        sampling_error: (err > 0.0).then_some(err),
    }
}

fn cluster_body(
    id: String,
    members: &[(usize, usize)],
    threads: &[(usize, &ThreadCounts)],
    processes: &[ProcessCounts],
    procs: &[usize],
    requests: f64,
) -> ClusterBody {
    let sum = |f: &dyn Fn(&ThreadCounts) -> u64| -> u64 { threads.iter().map(|(_, t)| f(t)).sum() };
    let instructions = sum(&|t| t.instructions);
    let mix = sum_arrays(threads, |t| t.mix);
    let instruction_mix = mix
        .iter()
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .map(|(slot, &c)| MixShare {
            class: CLASSES[slot / OPERANDS.len()].to_string(),
            operand: OPERANDS[slot % OPERANDS.len()].to_string(),
            share: c as f64 / instructions as f64,
        })
        .collect();

    // Branch statistics merge per static branch within a process (ids are per process).
    let mut taken_hist = [0u64; RATE_BINS];
    let mut majority_taken_hist = [0u64; RATE_BINS];
    let mut transition_hist = [0u64; RATE_BINS];
    let mut executions = 0u64;
    let mut static_count = 0u64;
    for &p in procs {
        let merged = per_site(
            threads,
            p,
            |t| &t.branches,
            |m, b| {
                m.executions += b.executions;
                m.taken += b.taken;
                m.transitions += b.transitions;
            },
        );
        for b in merged.iter().filter(|b| b.executions > 0) {
            let p_taken = b.taken as f64 / b.executions as f64;
            let t = b.transitions as f64 / b.executions as f64;
            let bin = Branches::bin(p_taken.min(1.0 - p_taken));
            taken_hist[bin] += b.executions;
            if p_taken > 0.5 {
                majority_taken_hist[bin] += b.executions;
            }
            transition_hist[Branches::bin(t.min(1.0 - t))] += b.executions;
            executions += b.executions;
            static_count += 1;
        }
    }

    // Indirect sites merge the same way; a site's target changes are counted per thread.
    let mut change_hist = [0u64; IndirectBranches::BINS];
    let (mut indirect_executions, mut indirect_changes, mut indirect_sites) = (0u64, 0u64, 0u64);
    for &p in procs {
        let merged = per_site(
            threads,
            p,
            |t| &t.indirect,
            |m, b| {
                m.executions += b.executions;
                m.changes += b.changes;
            },
        );
        for b in merged.iter().filter(|b| b.executions > 0) {
            let rate = b.changes as f64 / b.executions as f64;
            change_hist[IndirectBranches::bin(rate)] += b.executions;
            indirect_executions += b.executions;
            indirect_changes += b.changes;
            indirect_sites += 1;
        }
    }

    // Bucket 0 holds zero repeats, bucket k > 0 holds [2^(k-1), 2^k) (Histogram::from_log2_buckets).
    let mut rep = [[0u64; 65]; OPERANDS.len()];
    let mut all = [0u64; 65];
    for (_, t) in threads {
        for (op, counts) in t.rep_counts.iter().enumerate() {
            for ((slot, total), &c) in rep[op].iter_mut().zip(all.iter_mut()).zip(counts) {
                *slot += c;
                *total += c;
            }
        }
    }
    let histogram = |buckets: &[u64; 65]| {
        buckets.iter().any(|&c| c > 0).then(|| {
            Histogram::from_log2_buckets(
                "count",
                buckets.iter().enumerate().map(|(b, &c)| (b as u32, c)),
            )
        })
    };
    let rep_counts = histogram(&all);
    let rep_counts_by_operand: BTreeMap<String, Histogram> = rep
        .iter()
        .enumerate()
        .filter_map(|(op, b)| Some((OPERANDS[op].to_string(), histogram(b)?)))
        .collect();

    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    ClusterBody {
        cluster: id,
        instructions_per_request: instructions as f64 / requests,
        // Filled by the caller from the skeleton's clusters when there is a skeleton.
        syscalls_per_request: 0.0,
        mean_instruction_bytes: ratio(sum(&|t| t.instruction_bytes), instructions),
        instruction_mix,
        rep_counts,
        rep_counts_by_operand: (!rep_counts_by_operand.is_empty()).then_some(rep_counts_by_operand),
        branches: Branches {
            per_request: executions as f64 / requests,
            static_count,
            taken_rate: shares(taken_hist),
            transition_rate: shares(transition_hist),
            majority_taken: Some(
                majority_taken_hist
                    .iter()
                    .zip(&taken_hist)
                    .map(|(&t, &all)| if all == 0 { 0.0 } else { t as f64 / all as f64 })
                    .collect(),
            ),
            indirect: Some(IndirectBranches {
                per_request: indirect_executions as f64 / requests,
                static_count: indirect_sites,
                target_change_rate: shares(change_hist),
                mean_target_change_rate: if indirect_executions == 0 {
                    0.0
                } else {
                    indirect_changes as f64 / indirect_executions as f64
                },
            }),
        },
        instruction_working_set: cluster_curve(members, processes, procs, |p| &p.icache),
        data_working_set: cluster_curve(members, processes, procs, |p| &p.dcache),
        dependencies: Dependencies {
            raw: shares::<DEP_BINS>(sum_arrays(threads, |t| t.raw)),
            war: shares::<DEP_BINS>(sum_arrays(threads, |t| t.war)),
            waw: shares::<DEP_BINS>(sum_arrays(threads, |t| t.waw)),
        },
        shared_data_fraction: ratio(sum(&|t| t.shared_accesses), sum(&|t| t.data_accesses)),
        regular_access_fraction: ratio(sum(&|t| t.regular_accesses), sum(&|t| t.data_accesses)),
        pointer_chase_fraction: ratio(sum(&|t| t.chased_loads), sum(&|t| t.loads)),
        instruction_pages: procs.iter().map(|&p| processes[p].instruction_pages).sum(),
    }
}

/// A traced thread's current name, from /proc (the process must still run).
pub fn proc_thread_name(pid: u64, lwp: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{lwp}/comm"))
        .ok()
        .map(|s| s.trim_end().to_string())
}

/// For callers without names.
pub fn no_names(_: u64, _: u32) -> Option<String> {
    None
}
