//! What the collectors saw during one attach-mode window: the analyzer's whole input.
//!
//! Kept as one serialisable value so that a real run can be recorded as a fixture and the analysis
//! re-run on it deterministically (snapshot tests), without the target or the collectors.

use std::collections::BTreeMap;

use ditto_collect::bpftrace::SyscallTrace;
use ditto_collect::perf::SoftwareCounts;
use ditto_collect::procfs::{ListeningSocket, ProcSnapshot, SocketOptions};
use ditto_profile::{Collector, Framing, LoadConditions, Overhead};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Observations {
    /// Which syscall collector produced `trace`.
    pub collector: Collector,
    /// Name of the target spec, if one was given.
    pub target: Option<String>,
    /// Length of the traced window, seconds.
    pub duration_s: f64,
    /// /proc at the start and the end of the window.
    pub before: ProcSnapshot,
    pub after: ProcSnapshot,
    /// Per-thread syscalls, scheduler events, forks and exits.
    pub trace: SyscallTrace,
    /// perf software counters per thread over the window, when perf_event_open worked.
    pub perf: Option<BTreeMap<u32, SoftwareCounts>>,
    /// Bytes of pages referenced in the window over all processes (clear_refs + smaps_rollup).
    pub referenced_bytes: u64,
    /// Listening sockets with their options and backlog.
    pub listeners: Vec<ListeningSocket>,
    /// Options of a few accepted connections, read during the window (the load generator closes
    /// its connections before the end snapshot). Empty in recordings that predate it.
    #[serde(default)]
    pub connections: Vec<SocketOptions>,
    /// Requests counted by ditto's load generator, when it drove the load.
    pub requests_from_load: Option<u64>,
    /// The load ditto drove.
    pub load: Option<LoadConditions>,
    /// Per request class, the answered requests and their response bytes, as ditto's load
    /// generator counted them. Empty without ditto's load and in recordings that predate it.
    #[serde(default)]
    pub request_classes: Vec<ObservedRequestClass>,
    /// Framing known from the target spec's protocol.
    pub framing_hint: Option<Framing>,
    /// Why the window was cut short, if it was.
    pub partial: Option<String>,
    /// Measured cost of profiling, if measured.
    pub overhead: Option<Overhead>,
    /// Collector and orchestration warnings.
    pub warnings: Vec<String>,
}

/// One request class as the load generator counted it (`ditto_load::RequestClassStats`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObservedRequestClass {
    /// The key, e.g. an HTTP request target.
    pub key: String,
    pub responses: u64,
    pub response_bytes: u64,
}
