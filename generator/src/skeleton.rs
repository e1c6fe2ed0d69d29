//! The skeleton: which runtime network model, framing, I/O calls, extra per-request system calls and
//! thread clusters reproduce the profile's thread, network and syscall sections (paper §4.3, §4.4.1).
//! The result is plain data; `render.rs` writes it as `src/config.c`.

use ditto_profile::{
    AcceptModel, ClusterSyscalls, Framing, IoModel, ProcessRole, Profile, SyscallStat,
    ThreadCluster, ThreadRole, Trigger,
};

use crate::connections::{conn_calls, per_connection, ConnCalls, ConnectionWindows};

/// A distribution as (lo, hi, count) bins, `[lo, hi)`.
pub type Bins = Vec<(u64, u64, u64)>;

/// One request class's place in the size distributions: a request of this class draws every
/// response size (payload and sendfile) at a quantile in `[lo, hi)`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassRange {
    /// `ditto_profile::request_key_hash` of the key.
    pub key_hash: u64,
    pub lo: f64,
    pub hi: f64,
}

/// Most request classes a clone recognises; the rest draw from the whole distributions.
pub const MAX_REQUEST_CLASSES: usize = 256;

#[derive(Debug, Clone, PartialEq)]
pub struct Extra {
    /// `DITTO_OP_*` name.
    pub op: &'static str,
    pub per_request: f64,
    /// Its count per request at the profile's second load, where it has one
    /// (`syscalls.at_second_load`): the runtime follows the line through both.
    pub per_request_second: Option<f64>,
    /// Its count per accepted connection, on top of `per_request` (both loads' counts have had
    /// the windows' connections taken out): [`per_connection`].
    pub per_connection: f64,
    pub bytes: Bins,
    /// The profiled syscalls it stands for, for the README.
    pub from: String,
    /// A synchronisation between threads ([`CONTENDED_OPS`]): `per_request` holds at the profiled
    /// load, and the runtime scales it with the share of requests that overlap another.
    pub contended: bool,
}

/// Ops that synchronise threads: the original makes them when requests overlap (a worker waking a
/// parked sibling for work it cannot take, a spinning one yielding), so their count per request
/// follows the load. Pix baseline's workers made 0.047 futex calls a request at 500 req/s and 0.165
/// at 2,000 (profiled); a clone making the profiled rate at every load made 0.159 at both. The
/// share of Poisson arrivals that find another request in flight, 1 − exp(−rate × latency), is
/// 0.096 at 500 and 0.33 at 2,000 with its 202 µs median: 0.159 × 0.096 / 0.33 = 0.046.
pub const CONTENDED_OPS: &[&str] = &["DITTO_OP_FUTEX_WAKE", "DITTO_OP_SCHED_YIELD"];

#[derive(Debug, Clone, PartialEq)]
pub struct RtCluster {
    /// Profile id (`c1`).
    pub id: String,
    /// C identifier fragment (the id made safe).
    pub cname: String,
    /// `DITTO_ROLE_*` name.
    pub role: &'static str,
    /// The profile's role, for the README.
    pub profile_role: String,
    pub threads: u32,
    pub period_us: u32,
    /// Background threads: the period at the profile's second load (0: none, the period is fixed).
    pub period_us_second: u32,
    /// Body calls per request (1 for the request worker).
    pub calls_per_request: f64,
    /// Whether this cluster gets a generated body.
    pub has_body: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Skeleton {
    pub net_model: &'static str,
    pub net_model_why: String,
    pub framing: &'static str,
    pub port: u16,
    pub processes: u32,
    pub backlog: u32,
    pub tcp_nodelay: bool,
    pub recv_call: &'static str,
    pub send_call: &'static str,
    pub response: Bins,
    pub extras: Vec<Extra>,
    pub clusters: Vec<RtCluster>,
    pub data_files: u32,
    pub data_file_bytes: u64,
    /// Profiled per-request syscalls the runtime makes by itself (network model) or that are not
    /// reproduced, for the README.
    pub not_extras: Vec<(String, f64, &'static str)>,
    /// Request classes the runtime recognises (HTTP request targets, by hash), each with the
    /// quantile range its responses' sizes are drawn from (`request_class_ranges`).
    pub request_classes: Vec<ClassRange>,
    /// The profiled load for the contended extras: requests per second (every process) and how
    /// long a request was in flight (the load's median latency, seconds; 0 without a recorded
    /// load, which leaves the contended extras at their per-request count).
    pub profiled_rate: f64,
    pub in_flight_s: f64,
    /// The second load's request rate, where the profile has one (0: none): the extras'
    /// `per_request_second` and the clusters' `period_us_second` hold at it.
    pub second_rate: f64,
    /// Calls the original made per accepted connection ([`conn_calls`]).
    pub conn_calls: ConnCalls,
    pub warnings: Vec<String>,
}

/// Requests per second during the profile window.
pub fn request_rate(p: &Profile) -> f64 {
    let c = &p.conditions;
    if c.duration_s > 0.0 && c.requests > 0 {
        c.requests as f64 / c.duration_s
    } else {
        c.load.as_ref().map(|l| l.achieved_rate).unwrap_or(0.0)
    }
}

/// A cluster id as a C identifier fragment: other characters become `_`, and a leading digit gets a
/// prefix. Uniqueness is restored by the caller.
pub fn c_ident(id: &str) -> String {
    let mut s: String = id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(24)
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, 'c');
    }
    s
}

fn bins_of(h: &Option<ditto_profile::Histogram>) -> Bins {
    h.as_ref().map(sampled_bins).unwrap_or_default()
}

/// The runtime's sampling bins of a profile histogram. A bin whose sum was recorded becomes the one
/// value of its exact mean: a power-of-two bin sampled uniformly overshoots a bin of one file size by
/// up to ×2 (nginx's 131,072-byte file in [131072, 262144) was sent as 196,608 bytes on average), which
/// skews bytes out and, past a multiple of the MSS, how often Nagle holds a response's last segment.
/// The spread inside the bin is what is given up; the profile did not record it.
fn sampled_bins(h: &ditto_profile::Histogram) -> Bins {
    h.bins
        .iter()
        .filter(|b| b.count > 0 && b.hi > b.lo)
        .map(|b| match b.mean() {
            Some(m) => {
                let v = m.round() as u64;
                (v, v + 1, b.count)
            }
            None => (b.lo, b.hi, b.count),
        })
        .collect()
}

fn calls<'a>(cs: Option<&'a ClusterSyscalls>, names: &[&str]) -> Vec<&'a SyscallStat> {
    cs.map(|c| {
        c.calls
            .iter()
            .filter(|s| names.contains(&s.name.as_str()))
            .collect()
    })
    .unwrap_or_default()
}

fn per_request(cs: Option<&ClusterSyscalls>, names: &[&str]) -> f64 {
    calls(cs, names).iter().map(|s| s.per_request).sum()
}

/// Share of a call's executions on fds of `kind` (1 when the collector recorded no kinds).
fn fd_share(s: &SyscallStat, kind: &str) -> f64 {
    if s.fd_kinds.is_empty() {
        1.0
    } else {
        s.fd_kinds.get(kind).copied().unwrap_or(0.0)
    }
}

/// Below this many calls per request above the loop's one, receives and wakeups are not topped up.
const TOPUP_MIN: f64 = 0.01;

/// One candidate extra op and its count per request in one syscall table.
struct ExtraCount {
    op: &'static str,
    per_request: f64,
    bytes: Bins,
    from: &'static str,
    /// A top-up: `per_request` is the total the loop's own calls count towards.
    topup: bool,
}

/// Every extra op the runtime has and its count per request in the serving cluster's table `wcs`,
/// zero where the table lacks the call; always the same rows in the same order, so that two tables
/// (the profiled load's and the second load's) line up. `recv` is the receive call the runtime
/// makes and the syscall it stands for.
fn extra_counts(
    wcs: Option<&ClusterSyscalls>,
    recv: Option<(&'static str, &str)>,
    epoll_model: bool,
) -> Vec<ExtraCount> {
    let row = |op, per_request, bytes, from| ExtraCount {
        op,
        per_request,
        bytes,
        from,
        topup: false,
    };
    let mut rows = vec![row(
        "DITTO_OP_OPEN_FSTAT_CLOSE",
        per_request(wcs, &["openat", "open"]),
        Bins::new(),
        "openat + newfstatat + close",
    )];
    for (names, op) in [
        (&["sendfile", "sendfile64"][..], "DITTO_OP_SENDFILE"),
        (&["pread64", "preadv", "preadv2"][..], "DITTO_OP_FILE_PREAD"),
        (
            &["pwrite64", "pwritev", "pwritev2"][..],
            "DITTO_OP_FILE_PWRITE",
        ),
    ] {
        let cs = calls(wcs, names);
        let per: f64 = cs.iter().map(|s| s.per_request).sum();
        let mut bytes = Bins::new();
        for s in &cs {
            bytes.extend(bins_of(&s.bytes));
        }
        bytes.sort();
        rows.push(row(op, per, merge_bins(bytes), names[0]));
    }
    for (op, names, from) in [
        (
            "DITTO_OP_CORK",
            &["setsockopt"][..],
            "setsockopt pairs (TCP_CORK on/off)",
        ),
        ("DITTO_OP_SCHED_YIELD", &["sched_yield"][..], "sched_yield"),
        ("DITTO_OP_MPROTECT", &["mprotect"][..], "mprotect"),
        ("DITTO_OP_FUTEX_WAKE", &["futex"][..], "futex"),
        (
            "DITTO_OP_GETTIME",
            &["clock_gettime", "gettimeofday"][..],
            "clock_gettime",
        ),
        (
            "DITTO_OP_FSYNC",
            &["fsync", "fdatasync"][..],
            "fsync/fdatasync",
        ),
    ] {
        let per = per_request(wcs, names);
        // Cork on and off are two setsockopt calls.
        let per = if op == "DITTO_OP_CORK" {
            per / 2.0
        } else {
            per
        };
        rows.push(row(op, per, Bins::new(), from));
    }
    // write/read on an eventfd (fd kind `anon`) wake an idle peer; on a pipe they are a pipe round trip.
    // (Socket writes are the send call's, which the runtime makes by itself.)
    let writes = calls(wcs, &["write"]);
    let anon_writes: f64 = writes
        .iter()
        .map(|s| s.per_request * fd_share(s, "anon"))
        .sum();
    rows.push(row(
        "DITTO_OP_EVENTFD_WRITE",
        anon_writes,
        Bins::new(),
        "write to an eventfd",
    ));
    let pipe_writes: Vec<&&SyscallStat> = writes
        .iter()
        .filter(|s| fd_share(s, "pipe") > 0.0)
        .collect();
    rows.push(row(
        "DITTO_OP_PIPE_RW",
        pipe_writes
            .iter()
            .map(|s| s.per_request * fd_share(s, "pipe"))
            .sum(),
        pipe_writes
            .first()
            .map(|s| bins_of(&s.bytes))
            .unwrap_or_default(),
        "write + read on a pipe",
    ));

    // Receives and wakeups beyond one per request (a server that reads again until EAGAIN, an event
    // loop woken by more than its requests): the runtime's loop makes one receive per request and at
    // most one epoll_wait, so these are topped up to the profile's totals (docs/runtime.md). Peeking
    // needs recvfrom or recvmsg (a read cannot peek and would have to consume), and only the epoll
    // loops count their wakeups.
    let receives = match recv {
        Some((call, name)) if call != "DITTO_IO_READ" => calls(wcs, &[name])
            .into_iter()
            .find(|s| fd_share(s, "socket") > 0.5)
            .map(|s| s.per_request)
            .unwrap_or(0.0),
        _ => 0.0,
    };
    rows.push(ExtraCount {
        topup: true,
        ..row(
            "DITTO_OP_RECV_TOPUP",
            receives,
            Bins::new(),
            "receives per request (total; the loop makes one)",
        )
    });
    let wakeups = if epoll_model {
        per_request(wcs, &["epoll_wait", "epoll_pwait"])
    } else {
        0.0
    };
    rows.push(ExtraCount {
        topup: true,
        ..row(
            "DITTO_OP_WAKEUP_TOPUP",
            wakeups,
            Bins::new(),
            "epoll_wait per request (total; the loop makes at most one)",
        )
    });
    rows
}

pub fn skeleton(p: &Profile) -> Skeleton {
    let mut warnings = Vec::new();
    let net = &p.network;
    let server = &net.server;
    let rate = request_rate(p);

    let worker_processes = p
        .threads
        .processes
        .iter()
        .filter(|g| g.role == ProcessRole::Worker)
        .map(|g| g.count)
        .sum::<u32>();
    let (net_model, why) = if server.multi_process || worker_processes > 0 {
        (
            "DITTO_NET_PREFORK",
            "requests are served by worker processes of a master".to_string(),
        )
    } else {
        match (server.io, server.accept) {
            (IoModel::Blocking, _) | (_, AcceptModel::ThreadPerConnection) => (
                "DITTO_NET_THREAD_PER_CONN",
                "blocking I/O, a thread per connection".to_string(),
            ),
            (IoModel::Poll | IoModel::Select | IoModel::NonBlocking, _) => (
                "DITTO_NET_NONBLOCKING",
                format!(
                    "{:?} readiness on non-blocking sockets in one thread",
                    server.io
                )
                .to_lowercase(),
            ),
            (IoModel::Epoll, AcceptModel::DispatchToWorkers) => (
                "DITTO_NET_EPOLL_DISPATCH",
                "epoll: an acceptor thread dispatches connections to worker threads".to_string(),
            ),
            (IoModel::Epoll, _) if server.workers <= 1 => (
                "DITTO_NET_EPOLL_SINGLE",
                "epoll: one thread accepts and serves".to_string(),
            ),
            (IoModel::Epoll, _) => (
                "DITTO_NET_EPOLL_DISPATCH",
                "epoll with several serving threads (modelled as acceptor + workers)".to_string(),
            ),
        }
    };
    let processes = if net_model == "DITTO_NET_PREFORK" {
        worker_processes.max(server.workers).max(1)
    } else {
        1
    };

    let framing = match net.framing {
        Framing::Line => "DITTO_FRAME_MEMCACHED_TEXT",
        Framing::Http1 => "DITTO_FRAME_HTTP1",
        // HTTP/2 is gRPC's transport: the clone answers unary calls over HTTP/2 (runtime
        // framing.c), so the original's own gRPC client drives it, client-side cost included.
        Framing::Http2 => "DITTO_FRAME_GRPC",
        Framing::LengthPrefixed => "DITTO_FRAME_LENGTH_PREFIXED",
        Framing::Unknown => {
            warnings.push(
                "network.framing is unknown; the clone uses length-prefixed framing".to_string(),
            );
            "DITTO_FRAME_LENGTH_PREFIXED"
        }
    };
    let listen = net.listen.iter().find(|l| l.family.starts_with("tcp"));
    let port = listen.map(|l| l.port).filter(|p| *p != 0).unwrap_or(8080);
    let backlog = listen.and_then(|l| l.backlog).unwrap_or(1024).max(1);
    // Accepted connections inherit the listener's TCP_NODELAY, or the server sets it after accept
    // (nginx, on keep-alive connections): either way the clone sets it on every connection. Without
    // it, a response's last partial segment waits for the client's delayed ACK (40 ms on Linux).
    let tcp_nodelay = listen.and_then(|l| l.options.nodelay).unwrap_or(false)
        || net
            .connection_options
            .as_ref()
            .and_then(|o| o.nodelay)
            .unwrap_or(false);

    // The serving cluster's syscalls drive I/O choice and extras.
    let worker_id = server
        .worker_cluster
        .clone()
        .or_else(|| {
            p.threads
                .clusters
                .iter()
                .find(|c| {
                    matches!(
                        c.role,
                        ThreadRole::NetworkWorker | ThreadRole::AcceptorWorker
                    )
                })
                .map(|c| c.id.clone())
        })
        .unwrap_or_default();
    let wcs = p.syscalls.clusters.iter().find(|c| c.cluster == worker_id);

    let pick = |names: &[(&str, &'static str)]| -> Option<(&'static str, &SyscallStat)> {
        names
            .iter()
            .filter_map(|(n, e)| {
                calls(wcs, &[n])
                    .into_iter()
                    .find(|s| fd_share(s, "socket") > 0.5)
                    .map(|s| (*e, s))
            })
            .max_by(|a, b| {
                a.1.per_request
                    .partial_cmp(&b.1.per_request)
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
    };
    let recv = pick(&[
        ("read", "DITTO_IO_READ"),
        ("recvfrom", "DITTO_IO_RECVFROM"),
        ("recvmsg", "DITTO_IO_RECVMSG"),
    ]);
    let send = pick(&[
        ("write", "DITTO_IO_WRITE"),
        ("sendto", "DITTO_IO_SENDTO"),
        ("sendmsg", "DITTO_IO_SENDMSG"),
        ("writev", "DITTO_IO_WRITEV"),
    ]);
    let recv_call = recv.map(|r| r.0).unwrap_or_else(|| {
        warnings.push("no socket receive call in the worker's syscalls; using read".into());
        "DITTO_IO_READ"
    });
    let send_call = send.map(|s| s.0).unwrap_or_else(|| {
        warnings.push("no socket send call in the worker's syscalls; using write".into());
        "DITTO_IO_WRITE"
    });
    let mut response: Bins = send.map(|s| bins_of(&s.1.bytes)).unwrap_or_default();
    if response.is_empty() {
        response = sampled_bins(&net.write_sizes);
    }
    if response.is_empty() {
        let b = net.bytes_out_per_request.max(1.0).round() as u64;
        response = vec![(b, b + 1, 1)];
    }

    // Extra per-request system calls, from the serving cluster's syscall table, and the same at the
    // second load where the profile has one: the runtime draws a line through the two.
    let epoll_model = matches!(
        net_model,
        "DITTO_NET_EPOLL_DISPATCH" | "DITTO_NET_EPOLL_SINGLE" | "DITTO_NET_PREFORK"
    );
    let recv_name = recv.map(|(call, s)| (call, s.name.as_str()));
    let second = p.syscalls.at_second_load.as_ref();
    // A serving cluster missing from the second table is a mapping that failed, not zero calls.
    let rows_of = |s: &ditto_profile::SecondLoadSyscalls| {
        s.clusters
            .iter()
            .find(|c| c.cluster == worker_id)
            .map(|wcs| extra_counts(Some(wcs), recv_name, epoll_model))
    };
    let at_second = second.and_then(rows_of);
    // Calls per connection: the second load over shorter windows, on as many connections.
    let windows = ConnectionWindows::of(p);
    let at_shorts: Option<Vec<Vec<ExtraCount>>> = windows.as_ref().and_then(|_| {
        p.syscalls
            .at_second_load_short
            .iter()
            .map(rows_of)
            .collect()
    });
    let mut extras: Vec<Extra> = Vec::new();
    for (i, c) in extra_counts(wcs, recv_name, epoll_model)
        .into_iter()
        .enumerate()
    {
        // All tables give the same rows in the same order.
        let second = at_second.as_ref().map(|rows| rows[i].per_request);
        let per_conn = match (&windows, second, &at_shorts) {
            (Some(w), Some(long), Some(shorts)) => {
                let short: Vec<f64> = shorts.iter().map(|rows| rows[i].per_request).collect();
                per_connection(long, &short, w)
            }
            _ => 0.0,
        };
        let (first_out, second_out) = windows.as_ref().map_or((0.0, 0.0), |w| {
            (
                per_conn * w.first.connections / w.first.requests,
                per_conn * w.long.connections / w.long.requests,
            )
        });
        // `+ 0.0` writes a negative zero as zero.
        let per = (c.per_request - first_out).clamp(0.0, 64.0) + 0.0;
        let second = second.map(|v| (v - second_out).clamp(0.0, 64.0) + 0.0);
        // A top-up stands for the calls above the loop's one per request: below 1 % of a call
        // over that at both loads, and with nothing per connection, it is left alone.
        let floor = if c.topup { 1.0 + TOPUP_MIN } else { 0.0 };
        if per > floor || second.is_some_and(|v| v > floor) || per_conn > 0.0 {
            extras.push(Extra {
                op: c.op,
                per_request: per,
                per_request_second: second,
                per_connection: per_conn,
                bytes: c.bytes,
                from: c.from.to_string(),
                contended: CONTENDED_OPS.contains(&c.op),
            });
        }
    }

    // What the runtime does by itself, or what is not reproduced.
    let mut not_extras = Vec::new();
    let covered = [
        "openat",
        "open",
        "newfstatat",
        "fstat",
        "statx",
        "sendfile",
        "sendfile64",
        "pread64",
        "preadv",
        "preadv2",
        "pwrite64",
        "pwritev",
        "pwritev2",
        "setsockopt",
        "sched_yield",
        "mprotect",
        "futex",
        "clock_gettime",
        "gettimeofday",
        "fsync",
        "fdatasync",
    ];
    let by_runtime = [
        "read",
        "recvfrom",
        "recvmsg",
        "write",
        "sendto",
        "sendmsg",
        "writev",
        "epoll_wait",
        "epoll_pwait",
        "epoll_ctl",
        "accept",
        "accept4",
        "poll",
        "ppoll",
        "select",
        "pselect6",
        "close",
        "shutdown",
        "getpeername",
        "getsockname",
    ];
    if let Some(cs) = wcs {
        for s in &cs.calls {
            let n = s.name.as_str();
            if covered.contains(&n) {
                continue;
            }
            let how = if by_runtime.contains(&n) {
                "made by the runtime's network model"
            } else {
                "not reproduced"
            };
            not_extras.push((s.name.clone(), s.per_request, how));
        }
    }

    let needs_files = extras.iter().any(|e| {
        matches!(
            e.op,
            "DITTO_OP_OPEN_FSTAT_CLOSE"
                | "DITTO_OP_FILE_PREAD"
                | "DITTO_OP_FILE_PWRITE"
                | "DITTO_OP_SENDFILE"
                | "DITTO_OP_FSYNC"
        )
    });
    let (data_files, data_file_bytes) = if needs_files {
        let max_hi = extras
            .iter()
            .flat_map(|e| e.bytes.iter().map(|b| b.1))
            .max()
            .unwrap_or(4096)
            .clamp(4096, 64 << 20);
        (8, max_hi.div_ceil(4096) * 4096)
    } else {
        (0, 0)
    };

    // Thread clusters.
    let mut clusters: Vec<RtCluster> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let master_groups: Vec<&str> = p
        .threads
        .processes
        .iter()
        .filter(|g| g.role == ProcessRole::Master)
        .map(|g| g.id.as_str())
        .collect();
    for c in &p.threads.clusters {
        if net_model == "DITTO_NET_PREFORK" && master_groups.contains(&c.process.as_str()) {
            continue; // the runtime's own master process stands for these
        }
        let cs = p.syscalls.clusters.iter().find(|s| s.cluster == c.id);
        let (role, period_us, period_us_second, calls_per_request, has_body) = match c.role {
            ThreadRole::NetworkWorker | ThreadRole::AcceptorWorker => {
                ("DITTO_ROLE_WORKER", 0, 0, 1.0, true)
            }
            ThreadRole::Acceptor => {
                let accepts = per_request(cs, &["accept", "accept4"]).max(1e-9);
                ("DITTO_ROLE_ACCEPTOR", 0, 0, accepts, true)
            }
            ThreadRole::Timer | ThreadRole::Background => {
                let wakeups = wakeups_per_request(c, cs);
                let per_thread_hz = wakeups * rate / f64::from(c.threads.max(1));
                let period = if per_thread_hz > 0.0 {
                    (1e6 / per_thread_hz).clamp(100.0, 3.6e9)
                } else {
                    1e6
                };
                // The same cluster's wakeups at the second load: the runtime moves the period
                // along the line through both wakeup rates.
                let second_period = second
                    .and_then(|s| {
                        let cs2 = s.clusters.iter().find(|x| x.cluster == c.id)?;
                        let hz = trigger_calls(c, Some(cs2)) * s.achieved_rate
                            / f64::from(c.threads.max(1));
                        (hz > 0.0 && per_thread_hz > 0.0).then(|| (1e6 / hz).clamp(100.0, 3.6e9))
                    })
                    .map_or(0, |p| p.round() as u32);
                (
                    "DITTO_ROLE_BACKGROUND",
                    period.round() as u32,
                    second_period,
                    wakeups,
                    true,
                )
            }
            // period 0: threads that only exist, as the original's idle helpers do.
            ThreadRole::Idle => ("DITTO_ROLE_BACKGROUND", 0, 0, 0.0, false),
        };
        let mut cname = c_ident(&c.id);
        while names.contains(&cname) {
            cname.push('_');
        }
        names.push(cname.clone());
        clusters.push(RtCluster {
            id: c.id.clone(),
            cname,
            role,
            profile_role: format!("{:?}", c.role),
            threads: c.threads.max(1),
            period_us,
            period_us_second,
            calls_per_request,
            has_body,
        });
    }
    if !clusters.iter().any(|c| c.role == "DITTO_ROLE_WORKER") {
        // A plain program's profile has one body and no thread clusters: the worker runs it
        // (`generate`).
        let one_body =
            p.threads.clusters.is_empty() && p.body.as_ref().is_some_and(|b| b.clusters.len() == 1);
        let body = if one_body {
            "the profile's one body"
        } else {
            "the default body"
        };
        warnings.push(format!(
            "no request-serving thread cluster in the profile; the clone adds one worker cluster `w0` \
             with {body}"
        ));
        clusters.push(RtCluster {
            id: "w0".into(),
            cname: "w0".into(),
            role: "DITTO_ROLE_WORKER",
            profile_role: "NetworkWorker (assumed)".into(),
            threads: server.workers.max(1),
            period_us: 0,
            period_us_second: 0,
            calls_per_request: 1.0,
            has_body: true,
        });
    }
    // The runtime serves with the first WORKER cluster: put the profile's serving cluster first.
    if let Some(pos) = clusters
        .iter()
        .position(|c| c.id == worker_id && c.role == "DITTO_ROLE_WORKER")
    {
        let c = clusters.remove(pos);
        let first_worker = clusters
            .iter()
            .position(|c| c.role == "DITTO_ROLE_WORKER")
            .unwrap_or(clusters.len());
        clusters.insert(first_worker.min(pos), c);
    }

    // Payload sizes: the send calls' sizes are log2 bins that include the protocol's framing, so
    // sampling them as payloads overshoots (a 4 KiB memcached value sampled from [4096, 8192) averages
    // 6 KiB). The bins are scaled so that payload plus the clone's own framing, plus what sendfile
    // carries (nginx's bodies, in bins of their own), gives the profile's exact bytes out per request.
    let file_bytes: f64 = extras
        .iter()
        .filter(|e| e.op == "DITTO_OP_SENDFILE")
        .map(|e| e.per_request * bins_mean(&e.bytes).unwrap_or(0.0))
        .sum();
    let sends = send.map(|s| s.1.per_request).unwrap_or(1.0);
    let recv_bins = recv.map(|r| bins_of(&r.1.bytes)).unwrap_or_default();
    if let Some((calibrated, note)) = calibrate_payload(
        &response,
        framing,
        &recv_bins,
        Sent {
            bytes_out: net.bytes_out_per_request,
            file_bytes,
            sends_per_request: sends,
        },
    ) {
        response = calibrated;
        warnings.push(note);
    }

    Skeleton {
        net_model,
        net_model_why: why,
        framing,
        port,
        processes,
        backlog,
        tcp_nodelay,
        recv_call,
        send_call,
        response: merge_bins(response),
        extras,
        clusters,
        data_files,
        data_file_bytes,
        not_extras,
        request_classes: if framing == "DITTO_FRAME_HTTP1" {
            request_class_ranges(&net.request_classes)
        } else {
            Vec::new()
        },
        profiled_rate: rate,
        in_flight_s: p
            .conditions
            .load
            .as_ref()
            .map(|l| l.latency_p50_us * 1e-6)
            .filter(|s| s.is_finite() && *s > 0.0 && rate > 0.0)
            .unwrap_or(0.0),
        second_rate: second.map_or(0.0, |s| s.achieved_rate),
        conn_calls: conn_calls(p),
        warnings,
    }
}

/// Quantile ranges for the request classes, laid out in order of their mean response bytes: the
/// class with the smallest responses takes the first `share` of every size distribution, and so
/// on. The profile's size distributions are the mixture of the classes', so ranking them this way
/// gives each class the sizes it had (exactly, when each class has one size, as static files do)
/// while the mixture stays the profile's. A run's bytes then follow the requests it gets: nginx's
/// bytes out at low load were 3.9 % above the medium-load profile's mean, because that run's
/// request mix happened to hold more of the largest file, and a clone drawing sizes independently
/// of the request was 5.1 % from it. Fewer than two classes tell the runtime nothing.
fn request_class_ranges(classes: &[ditto_profile::RequestClass]) -> Vec<ClassRange> {
    let mut kept: Vec<&ditto_profile::RequestClass> = classes
        .iter()
        .filter(|c| c.share > 0.0 && c.mean_response_bytes.is_finite())
        .collect();
    // The most frequent classes when there are too many; then by size, ties by hash (stable).
    kept.sort_by(|a, b| {
        b.share
            .total_cmp(&a.share)
            .then(a.key_hash.cmp(&b.key_hash))
    });
    kept.truncate(MAX_REQUEST_CLASSES);
    if kept.len() < 2 {
        return Vec::new();
    }
    kept.sort_by(|a, b| {
        a.mean_response_bytes
            .total_cmp(&b.mean_response_bytes)
            .then(a.key_hash.cmp(&b.key_hash))
    });
    let total: f64 = kept.iter().map(|c| c.share).sum();
    let mut at = 0.0;
    kept.iter()
        .map(|c| {
            let lo = at / total;
            at += c.share;
            ClassRange {
                key_hash: c.key_hash,
                lo,
                hi: (at / total).min(1.0),
            }
        })
        .collect()
}

/// Mean of a bin distribution as the runtime samples it (uniform in [lo, hi)).
fn bins_mean(b: &Bins) -> Option<f64> {
    let n: u64 = b.iter().map(|x| x.2).sum();
    (n > 0).then(|| {
        b.iter()
            .map(|&(lo, hi, c)| (lo + hi.max(lo + 1) - 1) as f64 / 2.0 * c as f64)
            .sum::<f64>()
            / n as f64
    })
}

/// HTTP/2 bytes around a gRPC message in the runtime's response after a connection's first: HEADERS
/// (9 + 2, both fields named from the client's HPACK table), the DATA frame's 9 and the message's
/// 5-byte prefix, trailers (9 + 1). `grpc_respond` in the runtime's framing.c.
const GRPC_RESPONSE_FRAMING: f64 = 35.0;

/// Bytes a request sends, from the profile: all of them, and the part sendfile carries.
struct Sent {
    bytes_out: f64,
    file_bytes: f64,
    sends_per_request: f64,
}

/// Scales the response bins so that payload + the clone's framing per response, times responses per
/// request, plus the file bytes, is `bytes_out` per request. memcached: the short replies (`STORED`,
/// `END`: bins below 32 bytes) are the runtime's own answers to other commands, so only the value
/// responses are kept, and the overhead of a value response (`VALUE <key> 0 <n>\r\n` …
/// `\r\nEND\r\n`) takes the key length from the requests' dominant size bin (`get <key>\r\n`). HTTP:
/// the clone's header is `HTTP/1.1 200 OK\r\nContent-Length: <n>\r\n\r\n`, whose length counts the
/// file bytes too. Returns the bins and a note for the README.
fn calibrate_payload(
    response: &Bins,
    framing: &str,
    recv: &Bins,
    sent: Sent,
) -> Option<(Bins, String)> {
    let Sent {
        bytes_out,
        file_bytes,
        sends_per_request,
    } = sent;
    if !(bytes_out.is_finite()
        && file_bytes.is_finite()
        && bytes_out > file_bytes
        && sends_per_request > 0.0)
    {
        return None;
    }
    let per_response = (bytes_out - file_bytes) / sends_per_request;
    let digits = |v: f64| (v.max(1.0).log10().floor() + 1.0).max(1.0);
    // (distribution to scale, target mean payload, what the note adds)
    let (values, target, detail) = match framing {
        "DITTO_FRAME_MEMCACHED_TEXT" => {
            let (short, values): (Bins, Bins) = response.iter().partition(|b| b.1 <= 32);
            let all: u64 = response.iter().map(|b| b.2).sum();
            let value_count: u64 = values.iter().map(|b| b.2).sum();
            if all == 0 || value_count == 0 {
                return None;
            }
            let share = value_count as f64 / all as f64;
            let short_bytes = bins_mean(&short).unwrap_or(0.0) * (1.0 - share);
            let key = recv
                .iter()
                .max_by_key(|b| b.2)
                .map(|b| ((b.0 + b.1) as f64 / 2.0 - 6.0).max(1.0))
                .unwrap_or(16.0);
            let mean_value = (per_response - short_bytes) / share;
            let overhead = 18.0 + key + digits(mean_value);
            // The runtime samples this distribution for value responses only (its other replies
            // are fixed strings), so the short bins leave it.
            (
                values,
                mean_value - overhead,
                format!(" per value response (key ~{key:.0} bytes)"),
            )
        }
        "DITTO_FRAME_HTTP1" => {
            let content = bytes_out / sends_per_request - 37.0;
            let header = 37.0 + digits(content);
            let detail = if file_bytes > 0.0 {
                format!(" beside {file_bytes:.0} bytes of sendfile")
            } else {
                String::new()
            };
            (response.clone(), per_response - header, detail)
        }
        "DITTO_FRAME_GRPC" => (
            response.clone(),
            per_response - GRPC_RESPONSE_FRAMING,
            format!(" of gRPC message ({GRPC_RESPONSE_FRAMING:.0} bytes of HTTP/2 framing per response)"),
        ),
        _ => (response.clone(), per_response - 4.0, String::new()),
    };
    let target = target.max(1.0);
    let scaled = scale_bins(&values, target)?;
    Some((
        scaled,
        format!(
            "response payloads scaled to a mean of {target:.0} bytes{detail}, so bytes out per \
             request match the profile's {bytes_out:.0}"
        ),
    ))
}

/// The bins with every edge multiplied so that their sampled mean is `target`.
fn scale_bins(b: &Bins, target: f64) -> Option<Bins> {
    let mean = bins_mean(b)?;
    if mean <= 0.0 {
        return None;
    }
    let f = target / mean;
    Some(
        b.iter()
            .map(|&(lo, hi, c)| {
                let l = ((lo as f64) * f).round().max(0.0) as u64;
                // Keep the bin's relative width; a bin of one value stays one value.
                let h = if hi <= lo + 1 {
                    l + 1
                } else {
                    ((hi as f64 - 1.0) * f).round().max(l as f64) as u64 + 1
                };
                (l, h, c)
            })
            .collect(),
    )
}

/// Wakeups per request of a timer or background cluster, from the syscall its trigger blocks in.
fn wakeups_per_request(c: &ThreadCluster, cs: Option<&ClusterSyscalls>) -> f64 {
    match trigger_calls(c, cs) {
        v if v > 0.0 => v,
        _ => c.syscalls_per_request,
    }
}

/// Calls per request of the syscall a cluster's first trigger with any blocks in; 0 when none.
fn trigger_calls(c: &ThreadCluster, cs: Option<&ClusterSyscalls>) -> f64 {
    for t in &c.triggers {
        let names: &[&str] = match t {
            Trigger::Timer => &["clock_nanosleep", "nanosleep"],
            Trigger::Futex => &["futex"],
            Trigger::Epoll => &["epoll_wait", "epoll_pwait"],
            Trigger::Poll => &["poll", "ppoll"],
            Trigger::Select => &["select", "pselect6"],
            Trigger::BlockingRead => &["read", "recvfrom", "recvmsg"],
            Trigger::Accept => &["accept", "accept4"],
            Trigger::Signal => &["rt_sigtimedwait", "pause", "rt_sigsuspend"],
        };
        let v = per_request(cs, names);
        if v > 0.0 {
            return v;
        }
    }
    0.0
}

/// Sorts bins and merges overlapping or duplicate ones (the runtime requires increasing, disjoint bins).
fn merge_bins(mut b: Bins) -> Bins {
    b.sort();
    let mut out: Bins = Vec::new();
    for (lo, hi, n) in b {
        match out.last_mut() {
            Some(last) if lo < last.1 => {
                last.1 = last.1.max(hi);
                last.2 += n;
            }
            _ => out.push((lo, hi, n)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_merge() {
        assert_eq!(
            merge_bins(vec![(8, 16, 1), (0, 4, 2), (8, 16, 3), (12, 20, 1)]),
            vec![(0, 4, 2), (8, 20, 5)]
        );
    }

    #[test]
    fn idents() {
        assert_eq!(c_ident("c1"), "c1");
        assert_eq!(c_ident("1-x"), "c1_x");
        assert_eq!(c_ident(""), "c");
    }

    fn example(name: &str) -> Profile {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../profiles")
            .join(format!("{name}.json"));
        Profile::load(&path).expect("example profile")
    }

    #[test]
    fn a_plain_programs_added_worker_is_said_to_run_its_one_body() {
        // A plain program's profile: no thread clusters, one body.
        let mut p = example("memcached");
        p.threads.clusters.clear();
        let added = |p: &Profile| {
            skeleton(p)
                .warnings
                .into_iter()
                .find(|w| w.contains("adds one worker cluster `w0`"))
                .expect("a worker is added")
        };
        if let Some(b) = p.body.as_mut() {
            b.clusters.truncate(1);
        }
        assert!(added(&p).ends_with("with the profile's one body"));
        p.body = None;
        assert!(added(&p).ends_with("with the default body"));
    }

    #[test]
    fn memcached_is_epoll_dispatch_with_memcached_framing() {
        let s = skeleton(&example("memcached"));
        assert_eq!(s.net_model, "DITTO_NET_EPOLL_DISPATCH");
        assert_eq!(s.framing, "DITTO_FRAME_MEMCACHED_TEXT");
        assert_eq!(s.recv_call, "DITTO_IO_READ");
        assert_eq!(s.send_call, "DITTO_IO_SENDMSG");
        let roles: Vec<_> = s.clusters.iter().map(|c| (c.id.as_str(), c.role)).collect();
        assert_eq!(
            roles,
            vec![
                ("c0", "DITTO_ROLE_ACCEPTOR"),
                ("c1", "DITTO_ROLE_WORKER"),
                ("c2", "DITTO_ROLE_BACKGROUND"),
                ("c3", "DITTO_ROLE_BACKGROUND"),
            ]
        );
        // the timer thread wakes about every millisecond
        let timer = &s.clusters[2];
        assert!(
            (500..2000).contains(&timer.period_us),
            "{}",
            timer.period_us
        );
        assert_eq!(s.clusters[3].period_us, 0);
    }

    #[test]
    fn request_classes_take_quantile_ranges_in_order_of_their_response_size() {
        use ditto_profile::{request_key_hash, RequestClass};
        let class = |key: &str, share, bytes| RequestClass {
            key_hash: request_key_hash(key.as_bytes()),
            share,
            mean_response_bytes: bytes,
        };
        let mut p = example("nginx");
        p.network.request_classes = vec![
            class("/photo.bin", 0.1, 131_320.0),
            class("/index.html", 0.5, 3_400.0),
            class("/app.js", 0.2, 49_460.0),
            class("/style.css", 0.2, 12_550.0),
        ];
        let s = skeleton(&p);
        let got: Vec<(u64, f64, f64)> = s
            .request_classes
            .iter()
            .map(|c| (c.key_hash, c.lo, c.hi))
            .collect();
        let hash = |k: &str| request_key_hash(k.as_bytes());
        let want = [
            (hash("/index.html"), 0.0, 0.5),
            (hash("/style.css"), 0.5, 0.7),
            (hash("/app.js"), 0.7, 0.9),
            (hash("/photo.bin"), 0.9, 1.0),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (g, w) in got.iter().zip(want) {
            assert_eq!(g.0, w.0, "{got:?}");
            assert!(
                (g.1 - w.1).abs() < 1e-12 && (g.2 - w.2).abs() < 1e-12,
                "{got:?}"
            );
        }
        // One class says nothing about sizes; nor do classes of a protocol the runtime cannot key.
        p.network.request_classes.truncate(1);
        assert!(skeleton(&p).request_classes.is_empty());
        let mut m = example("memcached");
        m.network.request_classes = vec![class("a", 0.5, 10.0), class("b", 0.5, 20.0)];
        assert!(skeleton(&m).request_classes.is_empty());
    }

    #[test]
    fn pix_wakes_and_yields_are_contended_at_the_profiled_rate_and_latency() {
        let p = example("pix-baseline");
        let s = skeleton(&p);
        let op = |name: &str| s.extras.iter().find(|e| e.op == name);
        for name in CONTENDED_OPS {
            let e = op(name).unwrap_or_else(|| panic!("{name} is an extra of Pix baseline"));
            assert!(e.contended, "{name}");
        }
        let mprotect = op("DITTO_OP_MPROTECT").expect("mprotect is an extra of Pix baseline");
        assert!(
            !mprotect.contended,
            "an allocator's mprotect is per request"
        );
        let load = p.conditions.load.as_ref().expect("the profile's load");
        assert!((s.profiled_rate - request_rate(&p)).abs() < 1e-9);
        assert!((s.in_flight_s - load.latency_p50_us * 1e-6).abs() < 1e-12);
        assert!(s.in_flight_s > 0.0);

        // Without a recorded load nothing is scaled.
        let mut bare = p.clone();
        bare.conditions.load = None;
        assert_eq!(skeleton(&bare).in_flight_s, 0.0);
    }

    /// The memcached profile with a second load made from its own counts: its workers woke 1.5
    /// times as often per request, yielded where they never did, and its timer thread woke three
    /// times as often per request at a fifth of the rate.
    fn with_second_load(p: &Profile) -> Profile {
        let mut p = p.clone();
        let rate = request_rate(&p) / 5.0;
        let mut clusters = p.syscalls.clusters.clone();
        for cs in &mut clusters {
            for call in &mut cs.calls {
                call.bytes = None;
                match call.name.as_str() {
                    "epoll_wait" => call.per_request *= 1.5,
                    "clock_nanosleep" => call.per_request *= 3.0,
                    _ => {}
                }
            }
        }
        let worker = worker_of(&p);
        let wcs = clusters
            .iter_mut()
            .find(|c| c.cluster == worker)
            .expect("the worker's calls");
        wcs.calls.push(SyscallStat {
            name: "sched_yield".into(),
            per_request: 0.2,
            count: 1,
            ..SyscallStat::default()
        });
        p.syscalls.at_second_load = Some(ditto_profile::SecondLoadSyscalls {
            offered_rate: rate,
            achieved_rate: rate,
            duration_s: 10.0,
            requests: (rate * 10.0) as u64,
            connections: None,
            clusters,
        });
        p.syscalls.at_second_load_short = Vec::new();
        p
    }

    fn worker_of(p: &Profile) -> String {
        p.network
            .server
            .worker_cluster
            .clone()
            .expect("a worker cluster")
    }

    /// Pix baseline's profile with a second-load window of 10,000 requests and two short ones of
    /// 2,500 around it, on 8 connections each, whose workers received `long` and `shorts` times a
    /// request and made every other call as often in all three.
    fn with_connection_windows(long: f64, shorts: [f64; 2]) -> Profile {
        let mut p = example("pix-baseline");
        let worker = worker_of(&p);
        let window = |requests: u64, recv: f64| {
            let mut clusters = p.syscalls.clusters.clone();
            for cs in &mut clusters {
                for call in &mut cs.calls {
                    call.bytes = None;
                    if cs.cluster == worker && call.name == "recvfrom" {
                        call.per_request = recv;
                    }
                }
            }
            ditto_profile::SecondLoadSyscalls {
                offered_rate: 500.0,
                achieved_rate: 500.0,
                duration_s: requests as f64 / 500.0,
                requests,
                connections: Some(8),
                clusters,
            }
        };
        p.syscalls.at_second_load = Some(window(10_000, long));
        p.syscalls.at_second_load_short = shorts.iter().map(|v| window(2_500, *v)).collect();
        p
    }

    fn recv_extra(p: &Profile) -> Extra {
        skeleton(p)
            .extras
            .into_iter()
            .find(|e| e.op == "DITTO_OP_RECV_TOPUP")
            .expect("receives above one a request are a top-up")
    }

    #[test]
    fn short_second_windows_tell_calls_per_connection_from_calls_per_request() {
        let p = with_connection_windows(1.085, [1.114, 1.118]);
        let recv = recv_extra(&p);
        // 1.085 × 10,000 = a × 10,000 + 8 b and (1.114 + 1.118) × 2,500 = a × 5,000 + 16 b.
        let b =
            (10_000.0 * 2_500.0 * 2.232 - 5_000.0 * 10_850.0) / (10_000.0 * 16.0 - 5_000.0 * 8.0);
        assert!(
            (recv.per_connection - b).abs() < 1e-9,
            "{}",
            recv.per_connection
        );
        assert!((b - 12.92).abs() < 0.01, "{b}");
        // Both loads' counts lose their windows' connections' share.
        let second = recv.per_request_second.expect("a count at the second load");
        assert!(
            (second - (1.085 - 8.0 * b / 10_000.0)).abs() < 1e-9,
            "{second}"
        );
        let profiled = p
            .syscalls
            .clusters
            .iter()
            .flat_map(|c| &c.calls)
            .filter(|c| c.name == "recvfrom")
            .map(|c| c.per_request)
            .sum::<f64>();
        let first_out = 8.0 * b / p.conditions.requests as f64;
        assert!(
            (recv.per_request - (profiled - first_out)).abs() < 1e-9,
            "{} vs {}",
            recv.per_request,
            profiled - first_out
        );
        // A call made as often in every window has none per connection.
        let s = skeleton(&p);
        let mprotect = s
            .extras
            .iter()
            .find(|e| e.op == "DITTO_OP_MPROTECT")
            .expect("mprotect");
        assert_eq!(mprotect.per_connection, 0.0);
    }

    #[test]
    fn no_calls_per_connection_where_the_short_windows_disagree_or_made_fewer() {
        // The same mean as above, but the short windows 0.052 apart: more than the 0.041 a request
        // that 12.9 calls per connection add to one of them.
        assert_eq!(
            recv_extra(&with_connection_windows(1.085, [1.09, 1.142])).per_connection,
            0.0
        );
        assert_eq!(
            recv_extra(&with_connection_windows(1.116, [1.085, 1.086])).per_connection,
            0.0
        );
    }

    #[test]
    fn no_calls_per_connection_without_every_window_or_with_parallel_ones() {
        let mut one_short = with_connection_windows(1.085, [1.114, 1.118]);
        one_short.syscalls.at_second_load_short.pop();
        assert!(ConnectionWindows::of(&one_short).is_none());
        assert_eq!(recv_extra(&one_short).per_connection, 0.0);

        let mut unknown = with_connection_windows(1.085, [1.114, 1.118]);
        unknown.syscalls.at_second_load_short[1].connections = None;
        assert!(ConnectionWindows::of(&unknown).is_none());

        // Windows with as many requests per connection cannot tell the two apart.
        let mut parallel = with_connection_windows(1.085, [1.114, 1.118]);
        for s in &mut parallel.syscalls.at_second_load_short {
            s.connections = Some(2);
        }
        assert!(ConnectionWindows::of(&parallel).is_none());
        assert_eq!(recv_extra(&parallel).per_connection, 0.0);
    }

    #[test]
    fn a_second_load_gives_each_extra_and_timer_its_count_there() {
        let mut p = example("memcached");
        p.syscalls.at_second_load = None;
        let one = skeleton(&p);
        assert_eq!(one.second_rate, 0.0);
        assert!(one.extras.iter().all(|e| e.per_request_second.is_none()));
        assert!(one.clusters.iter().all(|c| c.period_us_second == 0));

        let two_p = with_second_load(&p);
        let two = skeleton(&two_p);
        let second = two_p.syscalls.at_second_load.as_ref().expect("second load");
        assert_eq!(two.second_rate, second.achieved_rate);
        // The profiled counts are what they were without a second load.
        for e in &one.extras {
            let same = two
                .extras
                .iter()
                .find(|x| x.op == e.op)
                .expect("same extras");
            assert_eq!(same.per_request, e.per_request, "{}", e.op);
        }
        // An op the workers made only at the second load is an extra at 0 per request there.
        let yields = two
            .extras
            .iter()
            .find(|e| e.op == "DITTO_OP_SCHED_YIELD")
            .expect("the second load's yields");
        assert_eq!(yields.per_request, 0.0);
        assert_eq!(yields.per_request_second, Some(0.2));
        // memcached's workers made 1 epoll_wait a request or fewer at the profiled load; at 1.5
        // times that the second load tops them up.
        let profiled_waits = per_request(
            p.syscalls.clusters.iter().find(|c| c.cluster == "c1"),
            &["epoll_wait"],
        );
        let waits = two.extras.iter().find(|e| e.op == "DITTO_OP_WAKEUP_TOPUP");
        if profiled_waits * 1.5 > 1.0 + TOPUP_MIN {
            let waits = waits.expect("a wakeup top-up at the second load");
            assert!((waits.per_request_second.unwrap_or(0.0) - profiled_waits * 1.5).abs() < 1e-9);
        }
        // The timer's period at the second load: three times the wakeups per request at a fifth
        // of the rate, so 3/5 of the wakeups a second, a period 5/3 as long.
        for (a, b) in one.clusters.iter().zip(&two.clusters) {
            if a.role == "DITTO_ROLE_BACKGROUND" && a.period_us > 0 {
                let want = f64::from(a.period_us) * 5.0 / 3.0;
                assert!(
                    (f64::from(b.period_us_second) - want).abs() <= 1.0 + want * 1e-3,
                    "{}: {} µs at the second load, want {want:.0}",
                    b.id,
                    b.period_us_second
                );
            } else {
                assert_eq!(b.period_us_second, 0, "{}", b.id);
            }
        }
        assert!(two.clusters.iter().any(|c| c.period_us_second > 0));
    }

    #[test]
    fn per_connection_calls_are_counted_per_accept_not_per_request() {
        // Pix's workers look up both addresses and shut each connection down: once per accept.
        assert_eq!(
            skeleton(&example("pix-baseline")).conn_calls,
            ConnCalls {
                peer_names: 1,
                sock_names: 1,
                shutdowns: 1
            }
        );
        // nginx makes none of them.
        assert_eq!(skeleton(&example("nginx")).conn_calls, ConnCalls::default());
        // Without accepts there is nothing to count them by.
        let mut p = example("pix-baseline");
        for c in &mut p.syscalls.clusters {
            c.calls.retain(|call| !call.name.starts_with("accept"));
        }
        assert_eq!(conn_calls(&p), ConnCalls::default());
    }

    #[test]
    fn nginx_is_prefork_with_file_extras() {
        let s = skeleton(&example("nginx"));
        assert_eq!(s.net_model, "DITTO_NET_PREFORK");
        assert_eq!(s.processes, 1);
        assert_eq!(s.framing, "DITTO_FRAME_HTTP1");
        assert_eq!(s.recv_call, "DITTO_IO_RECVFROM");
        assert_eq!(s.send_call, "DITTO_IO_WRITEV");
        let ops: Vec<&str> = s.extras.iter().map(|e| e.op).collect();
        assert!(ops.contains(&"DITTO_OP_OPEN_FSTAT_CLOSE"), "{ops:?}");
        assert!(ops.contains(&"DITTO_OP_SENDFILE"));
        assert!(ops.contains(&"DITTO_OP_CORK"));
        // The profile recorded each size bin's sum: the clone sends the site's exact file sizes
        // (index.html, style.css, app.js, photo.bin), and its data files hold the largest.
        let sendfile = s.extras.iter().find(|e| e.op == "DITTO_OP_SENDFILE");
        let sizes: Vec<u64> = sendfile
            .map(|e| e.bytes.iter().map(|b| b.0).collect())
            .unwrap_or_default();
        assert_eq!(sizes, vec![3_155, 12_311, 49_220, 131_072]);
        assert!(s.data_files > 0 && s.data_file_bytes >= 131_072);
        // the master's idle cluster is the runtime's own master
        assert_eq!(s.clusters.len(), 1);
    }

    #[test]
    fn nodelay_set_after_accept_is_taken_from_the_connections_not_only_the_listener() {
        let mut p = example("nginx");
        for l in &mut p.network.listen {
            l.options.nodelay = Some(false);
        }
        p.network.connection_options = None;
        assert!(!skeleton(&p).tcp_nodelay);
        p.network.connection_options = Some(ditto_profile::SocketOptions {
            nodelay: Some(true),
            ..Default::default()
        });
        assert!(skeleton(&p).tcp_nodelay);
    }

    #[test]
    fn pix_speaks_grpc_over_http2() {
        let s = skeleton(&example("pix-baseline"));
        assert_eq!(s.framing, "DITTO_FRAME_GRPC");
        assert_eq!(s.net_model, "DITTO_NET_EPOLL_DISPATCH");
        let ops: Vec<&str> = s.extras.iter().map(|e| e.op).collect();
        assert!(ops.contains(&"DITTO_OP_MPROTECT"), "{ops:?}");
        assert!(ops.contains(&"DITTO_OP_EVENTFD_WRITE"));
    }

    #[test]
    fn payloads_are_scaled_so_framing_plus_payload_gives_the_profiled_bytes_out() {
        // Length-prefixed: 4 bytes of prefix per response.
        let sent = |bytes_out: f64, file_bytes: f64| Sent {
            bytes_out,
            file_bytes,
            sends_per_request: 1.0,
        };
        let (b, _) = calibrate_payload(
            &vec![(64, 128, 10)],
            "DITTO_FRAME_LENGTH_PREFIXED",
            &Bins::new(),
            sent(72.0, 0.0),
        )
        .expect("calibrated");
        let mean = bins_mean(&b).expect("mean");
        assert!((mean + 4.0 - 72.0).abs() < 1.0, "{b:?}: mean {mean}");
        // gRPC: 35 bytes of HTTP/2 framing per response (Pix: 72.8 bytes out per request).
        let (b, _) = calibrate_payload(
            &vec![(64, 128, 10)],
            "DITTO_FRAME_GRPC",
            &Bins::new(),
            sent(72.8, 0.0),
        )
        .expect("calibrated");
        let mean = bins_mean(&b).expect("mean");
        assert!((mean + 35.0 - 72.8).abs() < 1.0, "{b:?}: mean {mean}");
        // memcached: 90% value responses of 4 KiB in a log2 bin, 10% "STORED\r\n"; 30-byte keys.
        let bytes_out = 0.9 * (4096.0 + 18.0 + 30.0 + 4.0) + 0.1 * 8.0;
        let (b, _) = calibrate_payload(
            &vec![(8, 16, 10), (4096, 8192, 90)],
            "DITTO_FRAME_MEMCACHED_TEXT",
            &vec![(32, 40, 90), (4096, 8192, 10)],
            sent(bytes_out, 0.0),
        )
        .expect("calibrated");
        assert!(
            b.iter().all(|x| x.0 > 32),
            "short replies are not payloads: {b:?}"
        );
        let value = bins_mean(&b).expect("mean");
        assert!(
            (value - 4096.0).abs() < 4096.0 * 0.01,
            "{b:?}: value mean {value}"
        );
        // HTTP with the body in a file (nginx): a 237-byte header written, 3,155 bytes sent from the
        // file. The clone's own header ("...Content-Length: 3392\r\n\r\n", 41 bytes) leaves 196
        // bytes of payload.
        let (b, _) = calibrate_payload(
            &vec![(237, 238, 10)],
            "DITTO_FRAME_HTTP1",
            &Bins::new(),
            sent(237.0 + 3155.0, 3155.0),
        )
        .expect("calibrated");
        assert_eq!(b, vec![(196, 197, 10)]);
        // Files alone larger than bytes out (an inconsistent profile): left as it is.
        assert!(calibrate_payload(
            &vec![(237, 238, 10)],
            "DITTO_FRAME_HTTP1",
            &Bins::new(),
            sent(100.0, 3155.0),
        )
        .is_none());
    }
}
