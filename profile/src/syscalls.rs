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
