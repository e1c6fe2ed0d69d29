//! The thread model: process groups, per-thread behaviour, and clusters of threads that behave alike.
//!
//! Threads are clustered by their syscall mix (total-variation distance between the shares of each
//! syscall), with average-linkage agglomerative clustering inside each process group, because the number
//! of clusters is not known in advance. Names are never used: they are strings of the original.

use std::collections::{BTreeMap, BTreeSet};

use ditto_collect::bpftrace::{FdKind, SyscallStats, SyscallTrace};
use ditto_collect::procfs::ProcDelta;
use ditto_profile::{Lifetime, ProcessGroup, ProcessRole, ThreadRole, ThreadScaling, Trigger};

use super::classes;

/// Two clusters merge while their average mix distance is below this (0 = same mix, 1 = disjoint).
pub const MERGE_DISTANCE: f64 = 0.35;
/// A wait is listed as a trigger when it holds at least this share of the cluster's blocked time.
pub const TRIGGER_MIN_SHARE: f64 = 0.05;

/// What one thread did in the window.
#[derive(Debug, Clone, Default)]
pub struct ThreadFacts {
    pub tid: u32,
    pub tgid: u32,
    pub calls: BTreeMap<String, u64>,
    pub total: u64,
    pub accepts_ok: u64,
    pub socket_io: u64,
    /// Estimated nanoseconds blocked, per trigger.
    pub waits: BTreeMap<Trigger, f64>,
    pub created_in_window: bool,
    pub exited_in_window: bool,
    pub user_s: f64,
    pub sys_s: f64,
}

/// A cluster before it is written into the profile.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub id: String,
    pub group: String,
    pub role: ThreadRole,
    pub tids: Vec<u32>,
    pub lifetime: Lifetime,
    pub scaling: ThreadScaling,
    pub triggers: Vec<Trigger>,
    pub created: u64,
}

#[derive(Debug, Clone)]
pub struct ThreadModel {
    pub groups: Vec<ProcessGroup>,
    /// Process group id of each traced process.
    pub group_of_process: BTreeMap<u32, String>,
    pub clusters: Vec<Cluster>,
    pub cluster_of_thread: BTreeMap<u32, String>,
    pub facts: BTreeMap<u32, ThreadFacts>,
}

/// Midpoint of a power-of-two bucket, for time estimates from histograms.
pub fn bucket_mid(k: u32) -> f64 {
    match k {
        0 => 0.0,
        k => 1.5 * 2f64.powi(k as i32 - 1),
    }
}

fn socket_calls(s: &SyscallStats) -> u64 {
    s.fd_kinds.get(&FdKind::Socket).copied().unwrap_or(0)
}

pub fn thread_facts(trace: &SyscallTrace, delta: &ProcDelta) -> BTreeMap<u32, ThreadFacts> {
    let created: BTreeSet<u32> = trace.forks.iter().map(|f| f.child_tid).collect();
    let exited: BTreeSet<u32> = trace.exits.iter().map(|e| e.tid).collect();
    let mut out = BTreeMap::new();
    for (&tid, t) in &trace.threads {
        let mut f = ThreadFacts {
            tid,
            tgid: t.tgid,
            created_in_window: created.contains(&tid),
            exited_in_window: exited.contains(&tid),
            ..ThreadFacts::default()
        };
        for (name, s) in &t.syscalls {
            f.calls.insert(name.clone(), s.count);
            f.total += s.count;
            if classes::is_accept(name) {
                f.accepts_ok += s.count.saturating_sub(s.errors);
            }
            if classes::is_read(name) || classes::is_write(name) {
                f.socket_io += socket_calls(s);
            }
            let blocked: f64 = s
                .duration_ns
                .buckets
                .iter()
                .map(|(&k, &n)| n as f64 * bucket_mid(k))
                .sum();
            if let Some(trigger) = classes::wait_trigger(name) {
                *f.waits.entry(trigger).or_default() += blocked;
            } else if classes::is_read(name) {
                // A read that blocks for long is the trigger of a thread without a multiplexer; short
                // reads of ready data are not waits. Only time in reads of at least 1 ms counts.
                let long: f64 = s
                    .duration_ns
                    .buckets
                    .iter()
                    .filter(|(&k, _)| k > 20)
                    .map(|(&k, &n)| n as f64 * bucket_mid(k))
                    .sum();
                if long > 0.0 {
                    *f.waits.entry(Trigger::BlockingRead).or_default() += long;
                }
            }
        }
        if let Some(td) = delta
            .processes
            .get(&t.tgid)
            .and_then(|p| p.threads.get(&tid))
        {
            f.user_s = td.user_secs;
            f.sys_s = td.system_secs;
        }
        out.insert(tid, f);
    }
    out
}

fn mix(f: &ThreadFacts) -> BTreeMap<&str, f64> {
    let total = f.total.max(1) as f64;
    f.calls
        .iter()
        .map(|(k, &v)| (k.as_str(), v as f64 / total))
        .collect()
}

/// Total-variation distance between two syscall mixes, in [0, 1].
pub fn mix_distance(a: &BTreeMap<&str, f64>, b: &BTreeMap<&str, f64>) -> f64 {
    let keys: BTreeSet<&str> = a.keys().chain(b.keys()).copied().collect();
    0.5 * keys
        .into_iter()
        .map(|k| (a.get(k).copied().unwrap_or(0.0) - b.get(k).copied().unwrap_or(0.0)).abs())
        .sum::<f64>()
}

/// Average-linkage agglomerative clustering of `items` (indices into `mixes`).
fn agglomerate(mixes: &[BTreeMap<&str, f64>], items: Vec<usize>) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = items.into_iter().map(|i| vec![i]).collect();
    loop {
        let mut best: Option<(f64, usize, usize)> = None;
        for i in 0..groups.len() {
            for j in i + 1..groups.len() {
                let mut sum = 0.0;
                for &a in &groups[i] {
                    for &b in &groups[j] {
                        sum += mix_distance(&mixes[a], &mixes[b]);
                    }
                }
                let d = sum / (groups[i].len() * groups[j].len()) as f64;
                if d < MERGE_DISTANCE && best.is_none_or(|(bd, _, _)| d < bd) {
                    best = Some((d, i, j));
                }
            }
        }
        match best {
            Some((_, i, j)) => {
                let merged = groups.remove(j);
                groups[i].extend(merged);
            }
            None => return groups,
        }
    }
}

/// Process groups: a single process, or the processes that serve (workers) and those that do not
/// (a master).
fn process_groups(
    facts: &BTreeMap<u32, ThreadFacts>,
    processes: &BTreeSet<u32>,
) -> (Vec<ProcessGroup>, BTreeMap<u32, String>) {
    let serving: BTreeSet<u32> = facts
        .values()
        .filter(|f| f.socket_io > 0 || f.accepts_ok > 0)
        .map(|f| f.tgid)
        .collect();
    let mut groups = Vec::new();
    let mut of = BTreeMap::new();
    if processes.len() <= 1 {
        groups.push(ProcessGroup {
            id: "p0".into(),
            role: ProcessRole::Single,
            count: processes.len() as u32,
        });
        for &p in processes {
            of.insert(p, "p0".to_string());
        }
        return (groups, of);
    }
    let masters: Vec<u32> = processes
        .iter()
        .copied()
        .filter(|p| !serving.contains(p))
        .collect();
    let workers: Vec<u32> = processes
        .iter()
        .copied()
        .filter(|p| serving.contains(p))
        .collect();
    for (role, members) in [
        (ProcessRole::Master, masters),
        (ProcessRole::Worker, workers),
    ] {
        if members.is_empty() {
            continue;
        }
        let id = format!("p{}", groups.len());
        for p in &members {
            of.insert(*p, id.clone());
        }
        groups.push(ProcessGroup {
            id,
            role,
            count: members.len() as u32,
        });
    }
    (groups, of)
}

fn role_of(members: &[&ThreadFacts]) -> ThreadRole {
    let accepts: u64 = members.iter().map(|f| f.accepts_ok).sum();
    let io: u64 = members.iter().map(|f| f.socket_io).sum();
    let total: u64 = members.iter().map(|f| f.total).sum();
    let mut waits: BTreeMap<Trigger, f64> = BTreeMap::new();
    for f in members {
        for (t, ns) in &f.waits {
            *waits.entry(*t).or_default() += ns;
        }
    }
    let dominant = waits
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(t, _)| *t);
    match (accepts > 0, io > 0) {
        (true, true) => ThreadRole::AcceptorWorker,
        (true, false) => ThreadRole::Acceptor,
        (false, true) => ThreadRole::NetworkWorker,
        (false, false) if total == 0 => ThreadRole::Idle,
        (false, false) if dominant == Some(Trigger::Timer) => ThreadRole::Timer,
        _ => ThreadRole::Background,
    }
}

fn triggers_of(members: &[&ThreadFacts]) -> Vec<Trigger> {
    let mut waits: BTreeMap<Trigger, f64> = BTreeMap::new();
    for f in members {
        for (t, ns) in &f.waits {
            *waits.entry(*t).or_default() += ns;
        }
    }
    let total: f64 = waits.values().sum();
    let mut list: Vec<(Trigger, f64)> = waits
        .into_iter()
        .filter(|(_, ns)| total > 0.0 && ns / total >= TRIGGER_MIN_SHARE)
        .collect();
    list.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    list.into_iter().map(|(t, _)| t).collect()
}

fn role_rank(r: ThreadRole) -> u8 {
    match r {
        ThreadRole::Acceptor => 0,
        ThreadRole::AcceptorWorker => 1,
        ThreadRole::NetworkWorker => 2,
        ThreadRole::Timer => 3,
        ThreadRole::Background => 4,
        ThreadRole::Idle => 5,
    }
}

/// Builds the thread model from per-thread facts.
pub fn model(facts: BTreeMap<u32, ThreadFacts>, connections_accepted: u64) -> ThreadModel {
    let processes: BTreeSet<u32> = facts.values().map(|f| f.tgid).collect();
    let (groups, group_of_process) = process_groups(&facts, &processes);
    let tids: Vec<u32> = facts.keys().copied().collect();
    let all: Vec<&ThreadFacts> = tids.iter().filter_map(|t| facts.get(t)).collect();
    let mixes: Vec<BTreeMap<&str, f64>> = all.iter().map(|f| mix(f)).collect();

    let mut raw: Vec<(String, Vec<usize>)> = Vec::new();
    for g in &groups {
        let in_group = |i: &usize| group_of_process.get(&all[*i].tgid) == Some(&g.id);
        let active: Vec<usize> = (0..all.len())
            .filter(|i| in_group(i) && all[*i].total > 0)
            .collect();
        let idle: Vec<usize> = (0..all.len())
            .filter(|i| in_group(i) && all[*i].total == 0)
            .collect();
        for c in agglomerate(&mixes, active) {
            raw.push((g.id.clone(), c));
        }
        if !idle.is_empty() {
            raw.push((g.id.clone(), idle));
        }
    }

    let mut clusters: Vec<Cluster> = raw
        .into_iter()
        .map(|(group, idx)| {
            let members: Vec<&ThreadFacts> = idx.iter().map(|&i| all[i]).collect();
            let created = members.iter().filter(|f| f.created_in_window).count() as u64;
            let short = members
                .iter()
                .filter(|f| f.created_in_window || f.exited_in_window)
                .count();
            let lifetime = if short * 2 > members.len() {
                Lifetime::ShortLived
            } else {
                Lifetime::LongLived
            };
            // Threads created in the window, about one per accepted connection, scale with connections.
            let scaling =
                if created > 0 && connections_accepted > 0 && created * 2 >= connections_accepted {
                    ThreadScaling::PerConnection
                } else {
                    ThreadScaling::Fixed
                };
            Cluster {
                id: String::new(),
                group,
                role: role_of(&members),
                tids: members.iter().map(|f| f.tid).collect(),
                lifetime,
                scaling,
                triggers: triggers_of(&members),
                created,
            }
        })
        .collect();
    clusters.sort_by(|a, b| {
        (
            a.group.as_str(),
            role_rank(a.role),
            std::cmp::Reverse(a.tids.len()),
            a.tids.first(),
        )
            .cmp(&(
                b.group.as_str(),
                role_rank(b.role),
                std::cmp::Reverse(b.tids.len()),
                b.tids.first(),
            ))
    });
    let mut cluster_of_thread = BTreeMap::new();
    for (i, c) in clusters.iter_mut().enumerate() {
        c.id = format!("c{i}");
        for &t in &c.tids {
            cluster_of_thread.insert(t, c.id.clone());
        }
    }
    ThreadModel {
        groups,
        group_of_process,
        clusters,
        cluster_of_thread,
        facts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(tid: u32, tgid: u32, calls: &[(&str, u64)], accepts: u64, io: u64) -> ThreadFacts {
        ThreadFacts {
            tid,
            tgid,
            calls: calls.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            total: calls.iter().map(|(_, v)| v).sum(),
            accepts_ok: accepts,
            socket_io: io,
            ..ThreadFacts::default()
        }
    }

    #[test]
    fn distance_is_zero_for_equal_mixes_and_one_for_disjoint() {
        let a = facts(1, 1, &[("read", 10), ("sendmsg", 10)], 0, 20);
        let b = facts(2, 1, &[("read", 1), ("sendmsg", 1)], 0, 2);
        let c = facts(3, 1, &[("futex", 5)], 0, 0);
        assert_eq!(mix_distance(&mix(&a), &mix(&b)), 0.0);
        assert_eq!(mix_distance(&mix(&a), &mix(&c)), 1.0);
    }

    #[test]
    fn memcached_like_threads_form_acceptor_workers_and_timer_clusters() {
        let mut all = BTreeMap::new();
        all.insert(
            10,
            facts(
                10,
                10,
                &[("epoll_wait", 10), ("accept4", 8), ("write", 8)],
                8,
                0,
            ),
        );
        for tid in 11..15 {
            all.insert(
                tid,
                facts(
                    tid,
                    10,
                    &[
                        ("epoll_wait", 100 + tid as u64),
                        ("read", 100),
                        ("sendmsg", 100),
                    ],
                    0,
                    200,
                ),
            );
        }
        let mut timer = facts(20, 10, &[("clock_nanosleep", 50)], 0, 0);
        timer.waits.insert(Trigger::Timer, 1e9);
        all.insert(20, timer);
        all.insert(21, facts(21, 10, &[], 0, 0));
        let m = model(all, 8);
        let roles: Vec<(ThreadRole, usize)> =
            m.clusters.iter().map(|c| (c.role, c.tids.len())).collect();
        assert_eq!(
            roles,
            vec![
                (ThreadRole::Acceptor, 1),
                (ThreadRole::NetworkWorker, 4),
                (ThreadRole::Timer, 1),
                (ThreadRole::Idle, 1)
            ]
        );
        assert_eq!(m.groups.len(), 1);
        assert_eq!(m.groups[0].role, ProcessRole::Single);
    }

    #[test]
    fn a_non_serving_parent_is_a_master_and_serving_children_are_workers() {
        let mut all = BTreeMap::new();
        all.insert(100, facts(100, 100, &[("rt_sigsuspend", 1)], 0, 0));
        all.insert(
            101,
            facts(
                101,
                101,
                &[("epoll_wait", 10), ("accept4", 4), ("recvfrom", 10)],
                4,
                10,
            ),
        );
        let m = model(all, 4);
        assert_eq!(
            m.groups.iter().map(|g| g.role).collect::<Vec<_>>(),
            vec![ProcessRole::Master, ProcessRole::Worker]
        );
        assert_eq!(m.clusters[1].role, ThreadRole::AcceptorWorker);
    }

    #[test]
    fn threads_created_per_connection_scale_with_connections() {
        let mut all = BTreeMap::new();
        for tid in 1..=8 {
            let mut f = facts(tid, 1, &[("read", 10), ("write", 10)], 0, 20);
            f.created_in_window = tid > 1;
            f.exited_in_window = tid > 1;
            all.insert(tid, f);
        }
        let m = model(all, 7);
        assert_eq!(m.clusters[0].scaling, ThreadScaling::PerConnection);
        assert_eq!(m.clusters[0].lifetime, Lifetime::ShortLived);
    }
}
