//! `counters`: software counters per request, and hardware ones where a PMU exists.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Counters {
    /// Where the software counters come from: `perf-software` (perf_event_open) or `procfs`.
    pub source: String,
    /// Per request, over all threads of the target.
    pub per_request: SoftwareCounters,
    /// Threads the counters covered; threads started during the window are not covered by perf.
    pub threads_covered: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SoftwareCounters {
    /// Context switches (voluntary + involuntary).
    pub context_switches: f64,
    /// Context switches because the thread blocked.
    pub voluntary_switches: f64,
    /// Context switches because the thread was preempted.
    pub involuntary_switches: f64,
    /// Page faults, minor + major.
    pub page_faults: f64,
    /// Major page faults (needed I/O).
    pub major_faults: f64,
    /// Migrations between CPUs.
    pub cpu_migrations: f64,
    /// On-CPU time, seconds (perf task-clock).
    pub task_clock_s: f64,
    /// User CPU time, seconds (procfs).
    pub cpu_user_s: f64,
    /// System CPU time, seconds (procfs).
    pub cpu_sys_s: f64,
}
