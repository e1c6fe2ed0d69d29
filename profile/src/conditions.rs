//! `conditions`: how, when and under what load the profile was taken.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How and under what load the profile was taken. Everything per request in the profile is divided by
/// `requests`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Conditions {
    /// `attach` (a running process, nothing restarted) or `launch` (started under instrumentation).
    pub mode: ProfileMode,
    /// Which syscall collector observed the target.
    pub collector: Collector,
    /// Name of the target spec used, if any (a user-chosen label, not taken from the binary).
    pub target: Option<String>,
    /// Length of the observation window, seconds.
    pub duration_s: f64,
    /// Requests served in the window; the divisor of every per-request figure.
    pub requests: u64,
    /// Where `requests` comes from.
    pub requests_source: RequestsSource,
    /// The load ditto drove during the window, when it drove one.
    pub load: Option<LoadConditions>,
    /// Processes observed (a master and its workers count separately).
    pub processes: u32,
    /// Threads observed over all processes.
    pub threads: u32,
    /// Set when the window was cut short (e.g. the target exited); the profile holds what was seen.
    pub partial: Option<String>,
    /// What profiling cost the target, when it was measured.
    pub overhead: Option<Overhead>,
    /// Things the collectors could not see or had to approximate.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ProfileMode {
    Attach,
    Launch,
}

/// The syscall collector: BPF tracepoints, or ptrace where BPF is unavailable (much slower for the target).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Collector {
    Bpftrace,
    Ptrace,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RequestsSource {
    /// Answers counted by ditto's own load generator.
    LoadGenerator,
    /// Read-then-write cycles on the target's sockets.
    NetworkSyscalls,
}

/// The load ditto drove while profiling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoadConditions {
    /// Protocol of the load (`memcached`, `http`, `pix-grpc`).
    pub protocol: String,
    /// Offered requests per second.
    pub offered_rate: f64,
    /// Answered requests per second.
    pub achieved_rate: f64,
    /// Connections the load generator kept open.
    pub connections: u32,
    /// `fixed` or `poisson`.
    pub arrival: String,
    /// Median latency, microseconds.
    pub latency_p50_us: f64,
    /// 99th percentile latency, microseconds.
    pub latency_p99_us: f64,
}

/// The target's cost of being profiled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Overhead {
    /// Target CPU seconds per request while profiled divided by the same without profiling, minus one.
    pub cpu_per_request: Option<f64>,
    /// Relative loss of achieved throughput at the same offered load.
    pub throughput_loss: Option<f64>,
    /// Relative increase of median latency.
    pub p50_increase: Option<f64>,
}
