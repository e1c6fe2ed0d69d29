//! `syscalls`: per thread cluster, per request, every syscall with its argument distributions.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Histogram;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Syscalls {
    /// Syscalls per request over all clusters.
    pub per_request: f64,
    /// Per cluster, each syscall it made.
    pub clusters: Vec<ClusterSyscalls>,
    /// The same counts under a second load on the same running server, where the profiler ran one
    /// (`ditto profile --second-level`). With the profiled load's they give each call's response to
    /// load, which a clone follows at other loads: a timer thread that wakes more often when busy,
    /// an event loop woken more than once per request when requests arrive alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_second_load: Option<SecondLoadSyscalls>,
    /// The second load again over half its window, right before and right after it (schema 1.2).
    /// Each window's load opens its own connections, as many in a short window as in the long one,
    /// so what the windows' counts differ by tells calls per connection from calls per request, and
    /// the two short windows around the long one cancel a count that drifts steadily over the three
    /// (their difference says how far it drifted). Pix's workers made 3 writes per HTTP/2
    /// connection besides their calls per request, which a window of 2,500 requests over 8
    /// connections counts as 0.0095 a request and one of 20,000 as 0.0012.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub at_second_load_short: Vec<SecondLoadSyscalls>,
}

/// Syscall counts under the second load ([`Syscalls::at_second_load`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SecondLoadSyscalls {
    /// Requests per second the load offered.
    pub offered_rate: f64,
    /// Requests per second completed: the rate the counts below hold at.
    pub achieved_rate: f64,
    /// Seconds of the window.
    pub duration_s: f64,
    /// Requests completed in the window.
    pub requests: u64,
    /// Connections the window's load opened (schema 1.2; absent in older profiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<u32>,
    /// Per cluster of `threads.clusters` (threads mapped to the cluster they belong to in the
    /// profiled window), each syscall it made: counts and shares only, no histograms.
    pub clusters: Vec<ClusterSyscalls>,
}

impl Syscalls {
    /// Calls per request by name over the whole process: every cluster's calls added up.
    pub fn per_request_by_name(&self) -> BTreeMap<&str, f64> {
        let mut m = BTreeMap::new();
        for c in &self.clusters {
            for call in &c.calls {
                *m.entry(call.name.as_str()).or_insert(0.0) += call.per_request;
            }
        }
        m
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterSyscalls {
    /// Thread cluster id.
    pub cluster: String,
    /// Its syscalls, most frequent first.
    pub calls: Vec<SyscallStat>,
}

/// One syscall of one cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SyscallStat {
    /// Kernel name of the syscall (`read`, `sendmsg`, `epoll_wait`).
    pub name: String,
    /// Calls per request.
    pub per_request: f64,
    /// Calls in the window.
    pub count: u64,
    /// Share of calls that returned an error.
    pub error_fraction: f64,
    /// Share of calls that returned `EAGAIN` (non-blocking I/O with nothing to do).
    pub eagain_fraction: f64,
    /// Share of calls by kind of file descriptor (`socket`, `file`, `pipe`, `anon`, `char-dev`, `other`),
    /// for syscalls that take one.
    pub fd_kinds: BTreeMap<String, f64>,
    /// Bytes moved by calls that moved data (positive return values).
    pub bytes: Option<Histogram>,
    /// The size argument (count, length), where there is one.
    pub size_arg: Option<Histogram>,
    /// File offsets (`pread64`, `pwrite64`, `lseek`).
    pub offsets: Option<Histogram>,
    /// Flag argument values and how often each was seen (as hexadecimal strings).
    pub flags: BTreeMap<String, u64>,
    /// Time from entry to return, nanoseconds: long times are blocking waits.
    pub duration: Option<Histogram>,
}
