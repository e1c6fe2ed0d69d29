//! From observations to a profile. Pure functions of [`Observations`]: no collector runs here, so the
//! analysis is snapshot-tested on recorded observations of real runs.

pub mod classes;
pub mod second_load;
pub mod threads;

use std::collections::BTreeMap;

use ditto_collect::bpftrace::{FdKind, Log2Hist, SyscallStats};
use ditto_collect::procfs::{SocketFamily, SocketState};
use ditto_profile::{
    request_key_hash, AcceptModel, ClusterSyscalls, Conditions, Counters, Framing, Generator,
    Histogram, IoModel, ListenSocket, Mappings, Memory, Network, Profile, ProfileMode,
    RequestClass, RequestsSource, ServerModel, SocketOptions, SoftwareCounters, SyscallStat,
    Syscalls, ThreadCluster, ThreadRole, ThreadScaling, Threads, Trigger,
};

use crate::observations::ObservedRequestClass;
use crate::Observations;
use threads::ThreadModel;

fn fd_kind_name(k: FdKind) -> &'static str {
    match k {
        FdKind::Socket => "socket",
        FdKind::File => "file",
        FdKind::Pipe => "pipe",
        FdKind::Anon => "anon",
        FdKind::CharDev => "char-dev",
        FdKind::Other => "other",
    }
}

/// The profile's histogram of a collector's buckets, with each bucket's sum where it was recorded.
fn histogram(unit: &str, h: &Log2Hist) -> Option<Histogram> {
    (!h.is_empty()).then(|| {
        Histogram::from_log2_buckets_summed(
            unit,
            h.buckets
                .iter()
                .map(|(&k, &n)| (k, n, h.sums.get(&k).copied())),
        )
    })
}

/// Requests in the window: the load generator's count when it drove the load, else the
/// read-then-write cycles the collector saw on sockets.
fn requests(obs: &Observations) -> (u64, RequestsSource) {
    match obs.requests_from_load {
        Some(n) => (n, RequestsSource::LoadGenerator),
        None => (
            obs.trace.threads.values().map(|t| t.socket_requests).sum(),
            RequestsSource::NetworkSyscalls,
        ),
    }
}

fn per(n: f64, requests: u64) -> f64 {
    if requests == 0 {
        0.0
    } else {
        n / requests as f64
    }
}

/// Merges the stats of one syscall over several threads.
fn merge(into: &mut SyscallStats, s: &SyscallStats) {
    into.count += s.count;
    into.errors += s.errors;
    into.eagain += s.eagain;
    into.socket_bytes += s.socket_bytes;
    for (k, n) in &s.fd_kinds {
        *into.fd_kinds.entry(*k).or_default() += n;
    }
    for (dst, src) in [
        (&mut into.ret_bytes, &s.ret_bytes),
        (&mut into.size_arg, &s.size_arg),
        (&mut into.offsets, &s.offsets),
        (&mut into.duration_ns, &s.duration_ns),
        (&mut into.ret_count, &s.ret_count),
    ] {
        dst.absorb(src);
    }
    for (f, n) in &s.flags {
        *into.flags.entry(*f).or_default() += n;
    }
}

fn stat_of(name: &str, s: &SyscallStats, requests: u64) -> SyscallStat {
    let count = s.count.max(1) as f64;
    let fd_total: u64 = s.fd_kinds.values().sum();
    SyscallStat {
        name: name.to_string(),
        per_request: per(s.count as f64, requests),
        count: s.count,
        error_fraction: s.errors as f64 / count,
        eagain_fraction: s.eagain as f64 / count,
        fd_kinds: s
            .fd_kinds
            .iter()
            .filter(|_| fd_total > 0)
            .map(|(k, n)| (fd_kind_name(*k).to_string(), *n as f64 / fd_total as f64))
            .collect(),
        bytes: histogram("bytes", &s.ret_bytes),
        size_arg: histogram("bytes", &s.size_arg),
        offsets: histogram("bytes", &s.offsets),
        flags: s
            .flags
            .iter()
            .map(|(f, n)| (format!("{f:#x}"), *n))
            .collect(),
        duration: histogram("ns", &s.duration_ns),
    }
}

/// Per cluster, the merged syscall stats.
fn cluster_syscalls(
    obs: &Observations,
    model: &ThreadModel,
) -> BTreeMap<String, BTreeMap<String, SyscallStats>> {
    let mut out: BTreeMap<String, BTreeMap<String, SyscallStats>> = BTreeMap::new();
    for (tid, t) in &obs.trace.threads {
        let Some(cluster) = model.cluster_of_thread.get(tid) else {
            continue;
        };
        let calls = out.entry(cluster.clone()).or_default();
        for (name, s) in &t.syscalls {
            merge(calls.entry(name.clone()).or_default(), s);
        }
    }
    out
}

/// Builds the profile. Deterministic: the same observations give the same profile.
pub fn analyze(obs: &Observations) -> Profile {
    let (requests, requests_source) = requests(obs);
    let delta = obs.before.delta(&obs.after);
    let facts = threads::thread_facts(&obs.trace, &delta);
    let accepted: u64 = facts.values().map(|f| f.accepts_ok).sum();
    let model = threads::model(facts, accepted);
    let by_cluster = cluster_syscalls(obs, &model);

    // Wakeups: who wakes each cluster.
    let mut woken: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for w in &obs.trace.wakeups {
        let Some(wakee) = model.cluster_of_thread.get(&w.wakee_tid) else {
            continue;
        };
        let waker = model
            .cluster_of_thread
            .get(&w.waker_tid)
            .cloned()
            .unwrap_or_else(|| "external".to_string());
        *woken
            .entry(wakee.clone())
            .or_default()
            .entry(waker)
            .or_default() += w.count;
    }

    let clusters: Vec<ThreadCluster> = model
        .clusters
        .iter()
        .map(|c| {
            let group_count = model
                .groups
                .iter()
                .find(|g| g.id == c.group)
                .map_or(1, |g| g.count.max(1));
            let members: Vec<_> = c.tids.iter().filter_map(|t| model.facts.get(t)).collect();
            let wakeups = woken.get(&c.id).cloned().unwrap_or_default();
            let wake_total: u64 = wakeups.values().sum();
            ThreadCluster {
                id: c.id.clone(),
                process: c.group.clone(),
                role: c.role,
                threads: (c.tids.len() as u32).div_ceil(group_count),
                scaling: c.scaling,
                lifetime: c.lifetime,
                triggers: c.triggers.clone(),
                woken_by: wakeups
                    .into_iter()
                    .map(|(k, n)| (k, n as f64 / wake_total.max(1) as f64))
                    .collect(),
                cpu_user_s_per_request: per(members.iter().map(|f| f.user_s).sum(), requests),
                cpu_sys_s_per_request: per(members.iter().map(|f| f.sys_s).sum(), requests),
                syscalls_per_request: per(members.iter().map(|f| f.total as f64).sum(), requests),
            }
        })
        .collect();

    let syscall_clusters: Vec<ClusterSyscalls> = model
        .clusters
        .iter()
        .filter_map(|c| {
            let calls = by_cluster.get(&c.id)?;
            let mut list: Vec<SyscallStat> =
                calls.iter().map(|(n, s)| stat_of(n, s, requests)).collect();
            list.sort_by(|a, b| b.count.cmp(&a.count).then(a.name.cmp(&b.name)));
            Some(ClusterSyscalls {
                cluster: c.id.clone(),
                calls: list,
            })
        })
        .collect();
    let total_calls: u64 = by_cluster
        .values()
        .flat_map(|m| m.values())
        .map(|s| s.count)
        .sum();

    let network = network(obs, &model, &by_cluster, requests);
    let counters = counters(obs, &delta, requests);
    let memory = memory(obs);
    let processes = obs
        .trace
        .threads
        .values()
        .map(|t| t.tgid)
        .collect::<std::collections::BTreeSet<_>>()
        .len();

    Profile {
        schema_version: Profile::current_version(),
        generator: Generator {
            tool: "ditto".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        conditions: Conditions {
            mode: ProfileMode::Attach,
            collector: obs.collector,
            target: obs.target.clone(),
            duration_s: obs.duration_s,
            requests,
            requests_source,
            load: obs.load.clone(),
            processes: processes as u32,
            threads: obs.trace.threads.len() as u32,
            partial: obs.partial.clone(),
            overhead: obs.overhead.clone(),
            warnings: obs
                .warnings
                .iter()
                .chain(&obs.trace.warnings)
                .cloned()
                .collect(),
        },
        threads: Threads {
            processes: model.groups.clone(),
            clusters,
        },
        network,
        syscalls: Syscalls {
            per_request: per(total_calls as f64, requests),
            clusters: syscall_clusters,
            at_second_load: None,
            at_second_load_short: Vec::new(),
        },
        counters,
        memory,
        body: None,
        topology: None,
    }
}

fn network(
    obs: &Observations,
    model: &ThreadModel,
    by_cluster: &BTreeMap<String, BTreeMap<String, SyscallStats>>,
    requests: u64,
) -> Network {
    let score = |pick: &dyn Fn(&threads::ThreadFacts) -> u64| {
        model
            .clusters
            .iter()
            .map(|c| {
                (
                    c.id.clone(),
                    c.tids
                        .iter()
                        .filter_map(|t| model.facts.get(t))
                        .map(pick)
                        .sum::<u64>(),
                )
            })
            .filter(|(_, n)| *n > 0)
            .max_by_key(|(_, n)| *n)
            .map(|(id, _)| id)
    };
    let worker = score(&|f| f.socket_io);
    let acceptor = score(&|f| f.accepts_ok);
    let cluster = |id: &Option<String>| {
        id.as_ref()
            .and_then(|id| model.clusters.iter().find(|c| &c.id == id))
    };
    let worker_c = cluster(&worker);

    let multiplexer = worker_c.and_then(|c| {
        c.triggers
            .iter()
            .copied()
            .find(|t| classes::multiplexer(*t))
    });
    // Socket reads of the worker cluster: how often they found nothing to read.
    let (reads, eagain) = worker
        .as_ref()
        .and_then(|w| by_cluster.get(w))
        .map(|calls| {
            calls
                .iter()
                .filter(|(n, _)| classes::is_read(n))
                .fold((0u64, 0u64), |(r, e), (_, s)| (r + s.count, e + s.eagain))
        })
        .unwrap_or((0, 0));
    let io = match multiplexer {
        Some(Trigger::Epoll) => IoModel::Epoll,
        Some(Trigger::Poll) => IoModel::Poll,
        Some(Trigger::Select) => IoModel::Select,
        _ if reads > 0 && eagain * 3 > reads => IoModel::NonBlocking,
        _ => IoModel::Blocking,
    };
    let listen_nonblocking = obs
        .listeners
        .iter()
        .any(|l| l.options.as_ref().is_some_and(|o| o.nonblocking));
    let nonblocking = listen_nonblocking || eagain > 0 || multiplexer.is_some();

    let worker_group = worker_c.map(|c| c.group.clone());
    let multi_process = worker_group
        .as_ref()
        .and_then(|g| model.groups.iter().find(|x| &x.id == g))
        .is_some_and(|g| g.role == ditto_profile::ProcessRole::Worker);
    let accept = match (&acceptor, &worker) {
        (None, _) => AcceptModel::NotObserved,
        (Some(a), Some(w)) if a != w => AcceptModel::DispatchToWorkers,
        _ if worker_c.is_some_and(|c| c.scaling == ThreadScaling::PerConnection) => {
            AcceptModel::ThreadPerConnection
        }
        _ => AcceptModel::WorkersAccept,
    };
    let workers = match (multi_process, worker_c) {
        (true, Some(c)) => model
            .groups
            .iter()
            .find(|g| g.id == c.group)
            .map_or(1, |g| g.count),
        (false, Some(c)) => c.tids.len() as u32,
        _ => 0,
    };

    // Bytes on sockets: exact sums from the collector; the size histograms of calls made mostly on
    // sockets describe the messages.
    let mut read_sizes = Histogram {
        unit: "bytes".into(),
        bins: vec![],
    };
    let mut write_sizes = read_sizes.clone();
    let (mut bytes_in, mut bytes_out) = (0u64, 0u64);
    for calls in by_cluster.values() {
        for (name, s) in calls {
            let fd_total: u64 = s.fd_kinds.values().sum();
            let socket = s.fd_kinds.get(&FdKind::Socket).copied().unwrap_or(0);
            let mostly_socket = fd_total > 0 && socket * 2 > fd_total;
            if classes::is_read(name) {
                bytes_in += s.socket_bytes;
                if let Some(h) = histogram("bytes", &s.ret_bytes).filter(|_| mostly_socket) {
                    read_sizes.absorb(&h);
                }
            } else if classes::is_write(name) {
                bytes_out += s.socket_bytes;
                if let Some(h) = histogram("bytes", &s.ret_bytes).filter(|_| mostly_socket) {
                    write_sizes.absorb(&h);
                }
            }
        }
    }

    let connection_options = connection_options(obs.connections.iter());
    let listen = obs
        .listeners
        .iter()
        .map(|l| ListenSocket {
            family: match l.family {
                SocketFamily::Tcp4 => "tcp4",
                SocketFamily::Tcp6 => "tcp6",
                SocketFamily::Unix => "unix",
                _ => "other",
            }
            .to_string(),
            port: l.local_port.unwrap_or(0),
            backlog: l.accept_queue.as_ref().map(|q| q.backlog),
            options: l.options.as_ref().map(socket_options).unwrap_or_default(),
        })
        .collect();
    let connections_open = obs
        .after
        .processes
        .values()
        .flat_map(|p| &p.sockets)
        .filter(|s| s.state == SocketState::Established)
        .count() as u64;
    let accepted: u64 = model.facts.values().map(|f| f.accepts_ok).sum();

    Network {
        server: ServerModel {
            io,
            nonblocking,
            accept,
            acceptor_cluster: acceptor,
            worker_cluster: worker,
            workers,
            multi_process,
        },
        listen,
        connections_accepted: accepted,
        connections_open,
        framing: obs.framing_hint.unwrap_or(Framing::Unknown),
        framing_source: match obs.framing_hint {
            Some(_) => "target spec protocol".into(),
            None => "not determined (profile with --target to record it)".into(),
        },
        bytes_in_per_request: per(bytes_in as f64, requests),
        bytes_out_per_request: per(bytes_out as f64, requests),
        read_sizes,
        write_sizes,
        connection_options,
        request_classes: request_classes(&obs.request_classes),
    }
}

/// The profile's request classes from the load generator's counts: each answered class with its
/// share of the answered requests and its mean response bytes, the key hashed.
fn request_classes(observed: &[ObservedRequestClass]) -> Vec<RequestClass> {
    let total: u64 = observed.iter().map(|c| c.responses).sum();
    observed
        .iter()
        .filter(|c| c.responses > 0)
        .map(|c| RequestClass {
            key_hash: request_key_hash(c.key.as_bytes()),
            share: c.responses as f64 / total as f64,
            mean_response_bytes: c.response_bytes as f64 / c.responses as f64,
        })
        .collect()
}

fn socket_options(o: &ditto_collect::procfs::SocketOptions) -> SocketOptions {
    SocketOptions {
        reuse_addr: o.reuse_addr,
        reuse_port: o.reuse_port,
        keepalive: o.keepalive,
        nodelay: o.tcp_nodelay,
        nonblocking: Some(o.nonblocking),
        defer_accept_s: o.tcp_defer_accept,
        rcvbuf: o.rcvbuf,
        sndbuf: o.sndbuf,
    }
}

/// The options the sampled accepted connections agree on (`None` where they differ or none was
/// read); `None` when no connection's options were read.
fn connection_options<'a>(
    sampled: impl Iterator<Item = &'a ditto_collect::procfs::SocketOptions>,
) -> Option<SocketOptions> {
    fn agree<T: PartialEq + Copy>(v: impl Iterator<Item = Option<T>>) -> Option<T> {
        let mut out: Option<Option<T>> = None;
        for x in v {
            match out {
                None => out = Some(x),
                Some(prev) if prev != x => return None,
                Some(_) => {}
            }
        }
        out.flatten()
    }
    let all: Vec<SocketOptions> = sampled.map(socket_options).collect();
    if all.is_empty() {
        return None;
    }
    Some(SocketOptions {
        reuse_addr: agree(all.iter().map(|o| o.reuse_addr)),
        reuse_port: agree(all.iter().map(|o| o.reuse_port)),
        keepalive: agree(all.iter().map(|o| o.keepalive)),
        nodelay: agree(all.iter().map(|o| o.nodelay)),
        nonblocking: agree(all.iter().map(|o| o.nonblocking)),
        defer_accept_s: agree(all.iter().map(|o| o.defer_accept_s)),
        rcvbuf: agree(all.iter().map(|o| o.rcvbuf)),
        sndbuf: agree(all.iter().map(|o| o.sndbuf)),
    })
}

fn counters(
    obs: &Observations,
    delta: &ditto_collect::procfs::ProcDelta,
    requests: u64,
) -> Counters {
    let (user, sys, vol, invol, minflt, majflt) = delta
        .processes
        .values()
        .flat_map(|p| p.threads.values())
        .fold(
            (0.0, 0.0, 0u64, 0u64, 0u64, 0u64),
            |(u, s, v, i, mi, ma), t| {
                (
                    u + t.user_secs,
                    s + t.system_secs,
                    v + t.voluntary_ctxt_switches,
                    i + t.nonvoluntary_ctxt_switches,
                    mi + t.minflt,
                    ma + t.majflt,
                )
            },
        );
    let mut c = SoftwareCounters {
        context_switches: per((vol + invol) as f64, requests),
        voluntary_switches: per(vol as f64, requests),
        involuntary_switches: per(invol as f64, requests),
        page_faults: per((minflt + majflt) as f64, requests),
        major_faults: per(majflt as f64, requests),
        cpu_migrations: 0.0,
        task_clock_s: 0.0,
        cpu_user_s: per(user, requests),
        cpu_sys_s: per(sys, requests),
    };
    let (source, covered) = match &obs.perf {
        Some(perf) => {
            let sum = |f: &dyn Fn(&ditto_collect::perf::SoftwareCounts) -> u64| {
                perf.values().map(f).sum::<u64>() as f64
            };
            c.cpu_migrations = per(sum(&|p| p.cpu_migrations), requests);
            c.task_clock_s = per(sum(&|p| p.task_clock_ns) / 1e9, requests);
            ("perf-software and procfs", perf.len() as u32)
        }
        None => ("procfs", 0),
    };
    Counters {
        source: source.into(),
        per_request: c,
        threads_covered: covered,
    }
}

fn memory(obs: &Observations) -> Memory {
    let procs = obs.after.processes.values();
    let mut m = Memory {
        working_set_bytes: obs.referenced_bytes,
        working_set_source: "clear_refs + smaps_rollup Referenced".into(),
        ..Memory::default()
    };
    let mut maps = Mappings::default();
    for p in procs {
        m.rss_bytes += p.memory.vm_rss;
        m.peak_rss_bytes += p.memory.vm_hwm;
        m.vm_bytes += p.memory.vm_size;
        if let Some(s) = &p.maps {
            maps.code_bytes += s.exec_file.bytes;
            maps.file_bytes += s.other_file.bytes;
            maps.heap_bytes += s.heap.bytes;
            maps.anon_bytes += s.anonymous.bytes;
            maps.stack_bytes += s.stack.bytes;
            maps.count += s.total.count;
        }
    }
    m.mappings = maps;
    m
}

/// Roles that serve requests; used by callers that summarise a profile.
pub fn serves(role: ThreadRole) -> bool {
    matches!(role, ThreadRole::AcceptorWorker | ThreadRole::NetworkWorker)
}

/// A profile of a plain program run under the body tool: no skeleton was observed, so the skeleton
/// sections are those of an empty observation, and `requests` is what the caller says the run counts as.
pub fn empty_profile(mode: ditto_profile::ProfileMode, duration_s: f64, requests: u64) -> Profile {
    let snapshot = ditto_collect::procfs::ProcSnapshot {
        monotonic_ns: 0,
        boottime_ns: 0,
        duration_ns: 0,
        clock_ticks_per_sec: 100,
        page_size: 4096,
        processes: BTreeMap::new(),
        vanished: Vec::new(),
    };
    let obs = Observations {
        collector: ditto_profile::Collector::Ptrace,
        target: None,
        duration_s,
        before: snapshot.clone(),
        after: snapshot,
        trace: Default::default(),
        perf: None,
        referenced_bytes: 0,
        listeners: Vec::new(),
        connections: Vec::new(),
        requests_from_load: Some(requests),
        load: None,
        request_classes: Vec::new(),
        framing_hint: None,
        partial: None,
        overhead: None,
        warnings: vec!["plain program: no skeleton observed; the body covers the whole run".into()],
    };
    let mut p = analyze(&obs);
    p.conditions.mode = mode;
    p
}

/// The cluster of every observed thread (by thread id), as `analyze` assigns them. Used in launch mode
/// to carry the clustering over to the traced run by thread name, without writing names anywhere.
pub fn thread_clusters(obs: &Observations) -> BTreeMap<u32, String> {
    let delta = obs.before.delta(&obs.after);
    let facts = threads::thread_facts(&obs.trace, &delta);
    let accepted: u64 = facts.values().map(|f| f.accepts_ok).sum();
    threads::model(facts, accepted).cluster_of_thread
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_classes_are_shares_of_the_answered_with_hashed_keys() {
        let observed = |key: &str, responses, response_bytes| ObservedRequestClass {
            key: key.into(),
            responses,
            response_bytes,
        };
        let classes = request_classes(&[
            observed("/index.html", 300, 300 * 850),
            observed("/never", 0, 0),
            observed("/photo.bin", 100, 100 * 131_300),
        ]);
        assert_eq!(
            classes.len(),
            2,
            "an unanswered class is left out: {classes:?}"
        );
        assert_eq!(classes[0].key_hash, request_key_hash(b"/index.html"));
        assert_eq!((classes[0].share, classes[1].share), (0.75, 0.25));
        assert_eq!(classes[1].mean_response_bytes, 131_300.0);
    }

    #[test]
    fn returned_byte_bins_carry_the_collectors_sums_into_the_profile() {
        let mut h = Log2Hist::default();
        for v in [3_155, 3_155, 131_072] {
            h.record_summed(v);
        }
        h.record(20); // a bucket the collector did not sum
        let p = histogram("bytes", &h).expect("not empty");
        let bins: Vec<(u64, u64, Option<u64>)> =
            p.bins.iter().map(|b| (b.lo, b.count, b.sum)).collect();
        assert_eq!(
            bins,
            vec![
                (16, 1, None),
                (2048, 2, Some(6_310)),
                (131_072, 1, Some(131_072))
            ]
        );
        assert!(histogram("bytes", &Log2Hist::default()).is_none());
    }
}
