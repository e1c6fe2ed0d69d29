//! `threads`: the thread model — processes, and threads clustered by behaviour.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Processes and thread clusters. Threads are grouped by behaviour (syscall mix, wakeup sources,
/// lifetime), never by name: a profile carries no strings of the original.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Threads {
    /// Groups of processes with the same role (a single process, or a master and its workers).
    pub processes: Vec<ProcessGroup>,
    /// Thread clusters over all processes.
    pub clusters: Vec<ThreadCluster>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessGroup {
    /// Identifier used by clusters (`p0`, `p1`, …).
    pub id: String,
    /// `single`, `master` or `worker`.
    pub role: ProcessRole,
    /// Processes in the group.
    pub count: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ProcessRole {
    /// The only process of the service.
    Single,
    /// Parent of worker processes that serve requests; does not serve itself.
    Master,
    /// A child process that serves requests.
    Worker,
}

/// Threads that behave alike.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadCluster {
    /// Identifier used across the profile (`c0`, `c1`, …).
    pub id: String,
    /// Process group the threads belong to.
    pub process: String,
    /// What the threads do.
    pub role: ThreadRole,
    /// Threads in the cluster (per process of its group).
    pub threads: u32,
    /// Whether the count is fixed or grows with connections.
    pub scaling: ThreadScaling,
    /// Long-lived (started before the window and still alive) or short-lived (created and ended in it).
    pub lifetime: Lifetime,
    /// What wakes the threads up, most frequent first.
    pub triggers: Vec<Trigger>,
    /// Share of the cluster's wakeups by waker: another cluster's id, or `external` (the kernel on behalf of
    /// the network, timers, or other processes).
    pub woken_by: BTreeMap<String, f64>,
    /// CPU time per request, user and system, seconds (procfs, clock-tick resolution).
    pub cpu_user_s_per_request: f64,
    /// See `cpu_user_s_per_request`.
    pub cpu_sys_s_per_request: f64,
    /// Syscalls per request over the whole cluster.
    pub syscalls_per_request: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ThreadRole {
    /// Accepts connections and hands them to other threads.
    Acceptor,
    /// Accepts connections and serves them itself.
    AcceptorWorker,
    /// Serves requests on connections it was given.
    NetworkWorker,
    /// Wakes on timers to do periodic work.
    Timer,
    /// Other work without network I/O (housekeeping, queues).
    Background,
    /// Made no syscalls in the window.
    Idle,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ThreadScaling {
    Fixed,
    PerConnection,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Lifetime {
    LongLived,
    ShortLived,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// Blocks in `epoll_wait`/`epoll_pwait`.
    Epoll,
    /// Blocks in `poll`/`ppoll`.
    Poll,
    /// Blocks in `select`/`pselect6`.
    Select,
    /// Blocks in `accept`/`accept4`.
    Accept,
    /// Blocks in a read of a socket or pipe.
    BlockingRead,
    /// Blocks on a futex (condition variable, lock, channel).
    Futex,
    /// Sleeps for a time (`nanosleep`, `clock_nanosleep`, timed waits).
    Timer,
    /// Waits for a signal.
    Signal,
}
