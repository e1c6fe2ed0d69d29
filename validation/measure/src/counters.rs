//! CPU counter backends behind one interface: `perf` (hardware counters through `perf_event_open`, on
//! the target's threads during a native run) and `sim` (Valgrind's cachegrind with an explicit platform
//! geometry, in runs of their own). Both produce [`CounterFigures`]: per-request and rate figures, each
//! `None` where the backend cannot measure it, and a `source` naming the backend (`"perf"` or
//! `"sim:cachegrind:<platform>"`), so every reported number says where it came from.
//!
//! Design trade-offs:
//!
//! - **Perf is chosen only when it works.** [`CounterBackend::select`] with [`BackendChoice::Auto`] opens
//!   a hardware instructions counter on the calling thread; on machines without a PMU (the VMs ditto is
//!   developed on) that fails and the simulated backend is used. Asking for `perf` where it does not work
//!   is an error, never a silent fallback.
//! - **The simulated differential keeps the lifetime fixed and varies the rate.** A server's timer and
//!   maintenance threads do work per second, not per request (the memcached clone's background cluster
//!   wakes about a thousand times a second). Differencing runs of N and 2N requests at one rate (what
//!   `ditto compare --sim` once did) makes the longer run last longer, and that per-second work lands
//!   in the per-request figures, inflated by how much slower the simulated rate is than the native
//!   one. [`measure_sim`] instead loads for the same duration at ½ and 1½ times the rate, and stops every run the same number
//!   of seconds after its spawn (the first run's lifetime plus a margin; later runs idle until then), so
//!   start-up, warm-up, shutdown and per-second work cancel and what remains is the marginal cost of the
//!   extra requests, with the server on average at the intended rate. Per-second work still shows
//!   natively (CPU time per request). The fixed part of a run varies by a few percent with thread
//!   interleaving (memcached's warm-up: ~1e5 D1 misses), so the differential needs thousands of requests.
//! - **L2 takes a second geometry.** Cachegrind simulates two levels (I1/D1 and LL). The LLC figures come
//!   from runs with LL = the platform's LLC; the L2 figures from runs with LL = its L2. The LLC miss rate is
//!   LLC misses over LLC accesses, and LLC accesses are the L2 misses (the hierarchy is treated as
//!   inclusive, so an L1→LLC run misses the LLC where an L1→L2→LLC hierarchy would). Without the L2 runs the
//!   LLC's accesses are the L1 misses, and the figure says so in its notes.

use std::time::Duration;

use ditto_load::Progress;
use ditto_target::{LaunchOptions, Level, ResolvedLevel, TargetSpec};
use serde::{Deserialize, Serialize};

use crate::cachegrind::{self, CachegrindTotals};
use crate::callgrind;
use crate::platform::{CacheGeometry, Platform};
use crate::{check_alive, load_config, prepare_and_warm_up, start_warm, MeasureError, RunOptions};

/// Which backend the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendChoice {
    /// `perf` when a hardware instructions counter opens, otherwise `sim`.
    Auto,
    Perf,
    Sim,
}

impl std::str::FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "perf" => Ok(BackendChoice::Perf),
            "sim" => Ok(BackendChoice::Sim),
            other => Err(format!(
                "unknown counter backend '{other}': use auto, perf or sim"
            )),
        }
    }
}

/// The counter backend in use.
#[derive(Debug, Clone, PartialEq)]
pub enum CounterBackend {
    /// Hardware counters on the target's threads during the native run.
    Perf,
    /// Cachegrind with this platform's geometry, in runs of their own.
    Sim(Platform),
}

impl CounterBackend {
    /// Picks the backend. `platform` is the geometry for `sim` (and for `auto` when perf does not work).
    pub fn select(
        choice: BackendChoice,
        platform: &Platform,
    ) -> Result<CounterBackend, MeasureError> {
        match choice {
            BackendChoice::Sim => Ok(CounterBackend::Sim(platform.clone())),
            BackendChoice::Perf => match probe_hardware() {
                Ok(()) => Ok(CounterBackend::Perf),
                Err(why) => Err(MeasureError::Counters(format!(
                    "the perf backend needs hardware counters, and this machine has none ({why}): use --counters sim or auto"
                ))),
            },
            BackendChoice::Auto => Ok(match probe_hardware() {
                Ok(()) => CounterBackend::Perf,
                Err(_) => CounterBackend::Sim(platform.clone()),
            }),
        }
    }

    /// `"perf"` or `"sim:<simulator>:<platform>"` (the simulator `method` uses): the source every
    /// figure of this backend carries.
    pub fn source(&self, method: SimMethod) -> String {
        match self {
            CounterBackend::Perf => "perf".to_string(),
            CounterBackend::Sim(p) => sim_source(method.simulator(), &p.name),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            CounterBackend::Perf => "perf",
            CounterBackend::Sim(_) => "sim",
        }
    }
}

/// The source string of simulated figures on `platform` by `simulator` (`cachegrind` for the
/// differential, `callgrind` for the window: the same cache and branch model).
pub fn sim_source(simulator: &str, platform: &str) -> String {
    format!("sim:{simulator}:{platform}")
}

/// Whether a hardware instructions counter can be opened on the calling thread, and why not.
pub fn probe_hardware() -> Result<(), String> {
    use perf_event::events::Hardware;
    perf_event::Builder::new(Hardware::INSTRUCTIONS)
        .observe_self()
        .any_cpu()
        .build()
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// CPU counter figures of one target at one load, per request or as rates. `None` where the backend
/// cannot measure the figure (IPC under simulation, L2 under perf's generic events).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CounterFigures {
    /// `"perf"` or `"sim:cachegrind:<platform>"`.
    pub source: String,
    pub instructions_per_request: Option<f64>,
    pub cycles_per_request: Option<f64>,
    /// Instructions per cycle (perf only: a simulator has no cycles).
    pub ipc: Option<f64>,
    /// Mispredicted / executed branches (sim: conditional and indirect; perf: the kernel's generic event).
    pub branch_mispredict_rate: Option<f64>,
    /// Mispredicted / executed conditional branches (sim only: no generic perf event splits them).
    #[serde(default)]
    pub conditional_mispredict_rate: Option<f64>,
    /// Mispredicted / executed indirect jumps and calls (sim only).
    #[serde(default)]
    pub indirect_mispredict_rate: Option<f64>,
    /// Indirect jumps and calls / all branches executed (sim only): the indirect rate's weight in
    /// the total.
    #[serde(default)]
    pub indirect_branch_share: Option<f64>,
    /// L1i misses per instruction.
    pub l1i_miss_rate: Option<f64>,
    /// L1d misses per data access (sim: reads and writes; perf: loads).
    pub l1d_miss_rate: Option<f64>,
    /// L2 misses per L2 access (= L1 misses). Sim only.
    pub l2_miss_rate: Option<f64>,
    /// LLC misses per LLC access (sim: = L2 misses; perf: LLC loads).
    pub llc_miss_rate: Option<f64>,
    /// iTLB misses per request (perf only).
    pub itlb_misses_per_request: Option<f64>,
    /// Requests the figures are averaged over.
    pub requests: f64,
    /// Caveats: clamped noise, missing events, approximations.
    #[serde(default)]
    pub notes: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// perf

/// The hardware events the perf backend counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum HwEvent {
    Cycles,
    Instructions,
    Branches,
    BranchMisses,
    L1iMisses,
    L1dLoads,
    L1dMisses,
    LlcLoads,
    LlcMisses,
    ItlbMisses,
}

impl HwEvent {
    const ALL: [HwEvent; 10] = [
        HwEvent::Cycles,
        HwEvent::Instructions,
        HwEvent::Branches,
        HwEvent::BranchMisses,
        HwEvent::L1iMisses,
        HwEvent::L1dLoads,
        HwEvent::L1dMisses,
        HwEvent::LlcLoads,
        HwEvent::LlcMisses,
        HwEvent::ItlbMisses,
    ];

    fn builder(self) -> perf_event::Builder<'static> {
        use perf_event::events::{Cache, CacheId, CacheOp, CacheResult, Hardware};
        let cache = |which, result| Cache {
            which,
            operation: CacheOp::READ,
            result,
        };
        match self {
            HwEvent::Cycles => perf_event::Builder::new(Hardware::CPU_CYCLES),
            HwEvent::Instructions => perf_event::Builder::new(Hardware::INSTRUCTIONS),
            HwEvent::Branches => perf_event::Builder::new(Hardware::BRANCH_INSTRUCTIONS),
            HwEvent::BranchMisses => perf_event::Builder::new(Hardware::BRANCH_MISSES),
            HwEvent::L1iMisses => perf_event::Builder::new(cache(CacheId::L1I, CacheResult::MISS)),
            HwEvent::L1dLoads => perf_event::Builder::new(cache(CacheId::L1D, CacheResult::ACCESS)),
            HwEvent::L1dMisses => perf_event::Builder::new(cache(CacheId::L1D, CacheResult::MISS)),
            HwEvent::LlcLoads => perf_event::Builder::new(cache(CacheId::LL, CacheResult::ACCESS)),
            HwEvent::LlcMisses => perf_event::Builder::new(cache(CacheId::LL, CacheResult::MISS)),
            HwEvent::ItlbMisses => {
                perf_event::Builder::new(cache(CacheId::ITLB, CacheResult::MISS))
            }
        }
    }
}

/// Event totals of a perf session, scaled for multiplexing; `None` for events no thread could count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct HwTotals {
    pub cycles: Option<f64>,
    pub instructions: Option<f64>,
    pub branches: Option<f64>,
    pub branch_misses: Option<f64>,
    pub l1i_misses: Option<f64>,
    pub l1d_loads: Option<f64>,
    pub l1d_misses: Option<f64>,
    pub llc_loads: Option<f64>,
    pub llc_misses: Option<f64>,
    pub itlb_misses: Option<f64>,
}

impl HwTotals {
    fn slot(&mut self, e: HwEvent) -> &mut Option<f64> {
        match e {
            HwEvent::Cycles => &mut self.cycles,
            HwEvent::Instructions => &mut self.instructions,
            HwEvent::Branches => &mut self.branches,
            HwEvent::BranchMisses => &mut self.branch_misses,
            HwEvent::L1iMisses => &mut self.l1i_misses,
            HwEvent::L1dLoads => &mut self.l1d_loads,
            HwEvent::L1dMisses => &mut self.l1d_misses,
            HwEvent::LlcLoads => &mut self.llc_loads,
            HwEvent::LlcMisses => &mut self.llc_misses,
            HwEvent::ItlbMisses => &mut self.itlb_misses,
        }
    }

    /// Figures per request and rates, from totals over `requests` requests.
    pub fn figures(&self, requests: f64, kernel_included: bool) -> CounterFigures {
        let per = |v: Option<f64>| v.filter(|_| requests > 0.0).map(|v| v / requests);
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        let mut notes = vec![if kernel_included {
            "perf counted user and kernel mode".to_string()
        } else {
            "perf counted user mode only (perf_event_paranoid or privileges exclude the kernel)"
                .to_string()
        }];
        notes.push("L2 has no generic perf event: not measured by perf".to_string());
        CounterFigures {
            source: "perf".to_string(),
            instructions_per_request: per(self.instructions),
            cycles_per_request: per(self.cycles),
            ipc: ratio(self.instructions, self.cycles),
            branch_mispredict_rate: ratio(self.branch_misses, self.branches),
            // Generic events count all branches together.
            conditional_mispredict_rate: None,
            indirect_mispredict_rate: None,
            indirect_branch_share: None,
            l1i_miss_rate: ratio(self.l1i_misses, self.instructions),
            l1d_miss_rate: ratio(self.l1d_misses, self.l1d_loads),
            l2_miss_rate: None,
            llc_miss_rate: ratio(self.llc_misses, self.llc_loads),
            itlb_misses_per_request: per(self.itlb_misses),
            requests,
            notes,
        }
    }
}

/// Hardware counters on every thread of a process tree, opened before a native load and read after.
///
/// One counter per thread and event, with `inherit` so threads the counted threads create are counted
/// too (perf cannot follow a whole process from outside otherwise). Counters are not grouped: a PMU has
/// fewer counters than events, so the kernel multiplexes them and each total is scaled by
/// enabled/running time.
pub struct PerfSession {
    counters: Vec<(HwEvent, perf_event::Counter)>,
    kernel_included: bool,
    threads: usize,
}

impl std::fmt::Debug for PerfSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfSession")
            .field("counters", &self.counters.len())
            .field("threads", &self.threads)
            .finish()
    }
}

impl PerfSession {
    /// Opens and enables the counters on every thread of `pids`.
    pub fn start(pids: &[u32]) -> Result<PerfSession, MeasureError> {
        let mut tids = Vec::new();
        for &pid in pids {
            let dir = format!("/proc/{pid}/task");
            let entries = std::fs::read_dir(&dir).map_err(|cause| MeasureError::Read {
                path: dir.clone().into(),
                cause,
            })?;
            tids.extend(
                entries
                    .flatten()
                    .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok())),
            );
        }
        // Kernel mode too where allowed: a network service spends much of a request there.
        let mut kernel_included = true;
        let mut counters = Vec::new();
        for &tid in &tids {
            for e in HwEvent::ALL {
                let open = |kernel: bool| {
                    let mut b = e.builder();
                    b.observe_pid(tid)
                        .any_cpu()
                        .inherit(true)
                        .exclude_kernel(!kernel)
                        .exclude_hv(true)
                        .enabled(true);
                    b.build()
                };
                let c = match open(kernel_included) {
                    Ok(c) => Ok(c),
                    Err(_) if kernel_included => {
                        kernel_included = false;
                        open(false)
                    }
                    Err(err) => Err(err),
                };
                // An event this PMU lacks (e.g. no iTLB event) is left out; its figure stays `None`.
                if let Ok(c) = c {
                    counters.push((e, c));
                }
            }
        }
        if !counters.iter().any(|(e, _)| *e == HwEvent::Instructions) {
            return Err(MeasureError::Counters(
                "no hardware instructions counter could be opened on the target's threads: use --counters sim".into(),
            ));
        }
        Ok(PerfSession {
            counters,
            kernel_included,
            threads: tids.len(),
        })
    }

    /// Whether kernel mode is counted.
    pub fn kernel_included(&self) -> bool {
        self.kernel_included
    }

    /// Reads every counter, scaled for multiplexing, and sums per event.
    pub fn read(&mut self) -> HwTotals {
        let mut t = HwTotals::default();
        for (e, c) in &mut self.counters {
            let Ok(cat) = c.read_count_and_time() else {
                continue;
            };
            let value = if cat.time_running == 0 {
                0.0
            } else {
                cat.count as f64 * cat.time_enabled as f64 / cat.time_running as f64
            };
            let slot = t.slot(*e);
            *slot = Some(slot.unwrap_or(0.0) + value);
        }
        t
    }
}

// ---------------------------------------------------------------------------------------------
// sim

/// How the simulated backend isolates the measured requests' work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SimMethod {
    /// One callgrind run per geometry, counters zeroed when the measured load begins and dumped
    /// when it ends, minus an idle window as long (the per-second work): `crate::callgrind`.
    Window,
    /// Two cachegrind runs per geometry at ½ and 1½ times the rate, equally long, differenced.
    Differential,
}

impl SimMethod {
    pub fn name(self) -> &'static str {
        match self {
            SimMethod::Window => "window",
            SimMethod::Differential => "differential",
        }
    }

    /// The Valgrind tool it runs.
    pub fn simulator(self) -> &'static str {
        match self {
            SimMethod::Window => "callgrind",
            SimMethod::Differential => "cachegrind",
        }
    }

    /// Reports written before the window existed measured by the differential.
    fn before_the_window() -> SimMethod {
        SimMethod::Differential
    }
}

/// How to measure a target under simulation: a window per geometry, or the equal-duration,
/// two-rate differential.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimPlan {
    #[serde(skip)]
    pub platform: Platform,
    pub method: SimMethod,
    /// The window's rate, or the rate the differential's two runs are centred on (½ and 1½ times
    /// it), requests per second.
    pub rate: f64,
    /// Measured seconds of each run.
    pub duration_s: f64,
    pub connections: usize,
    /// Also run with LL = the platform's L2, for L2 miss rates and the LLC's true access count.
    pub with_l2: bool,
}

impl SimPlan {
    /// The plan for a native load level: the rate scaled by `rate_scale` (cachegrind runs a server
    /// tens of times slower, so the same utilisation needs a proportionally lower rate) but at least
    /// `min_rate`, and long enough that the differential covers `min_requests` requests (within
    /// `[min_duration_s, max_duration_s]`).
    pub fn for_level(
        platform: &Platform,
        level: &ResolvedLevel,
        s: &SimSettings,
    ) -> Result<SimPlan, MeasureError> {
        s.check()?;
        // The differential needs many requests: the fixed part of a run (start-up, warm-up) varies by a
        // few percent between runs with thread interleaving, and must be small against the signal.
        let mut rate = (level.rate * s.rate_scale)
            .max(s.min_rate)
            .max(s.min_requests as f64 / s.max_duration_s);
        // A heavy server (Pix: 115k instructions per request) at the rate `min_requests` asks for
        // saturates under cachegrind and batches its work, so its instructions per request fall
        // (60k at 1,465 req/s against 107–115k at 200) and no longer describe the profiled regime.
        // Then fewer requests, at a rate the simulation sustains: the faster run is 1.5 × `rate`.
        if let Some(ipr) = s
            .instructions_per_request
            .filter(|v| v.is_finite() && *v > 0.0)
        {
            let cap = s.max_simulated_instructions_per_s / (1.5 * ipr);
            rate = rate.min(cap.max(1.0));
        }
        let duration_s = (s.min_requests as f64 / rate).clamp(s.min_duration_s, s.max_duration_s);
        Ok(SimPlan {
            platform: platform.clone(),
            method: s.method,
            rate,
            duration_s,
            connections: level.connections,
            with_l2: s.with_l2,
        })
    }

    /// The rates of the two measurements differenced: the differential's two runs, or the window's
    /// idle and loaded windows.
    pub fn rates(&self) -> (f64, f64) {
        match self.method {
            SimMethod::Window => (0.0, self.rate),
            SimMethod::Differential => (0.5 * self.rate, 1.5 * self.rate),
        }
    }
}

/// User-facing settings of the simulated backend (defaults documented in docs/validation.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimSettings {
    pub rate_scale: f64,
    pub min_rate: f64,
    /// Requests the differential should cover (the difference between the two runs).
    pub min_requests: u64,
    pub min_duration_s: f64,
    pub max_duration_s: f64,
    pub with_l2: bool,
    /// Instructions per request of the target, from its profile, when known: the rate is then capped
    /// so that the faster run asks at most `max_simulated_instructions_per_s` of cachegrind. (Both
    /// fields are newer than the report schema's first version: reports without them still load.)
    #[serde(default)]
    pub instructions_per_request: Option<f64>,
    /// What cachegrind can run of one server without saturating it (Valgrind runs one guest thread at
    /// a time). Measured: Pix's original under cachegrind completed 1,465 of 2,000 req/s offered at
    /// 60k instructions per request, about 90 M instructions per second, batching its work as a
    /// saturated server does. Half of that keeps a server in the regime its profile was taken in.
    #[serde(default = "default_max_simulated_instructions_per_s")]
    pub max_simulated_instructions_per_s: f64,
    #[serde(default = "SimMethod::before_the_window")]
    pub method: SimMethod,
}

fn default_max_simulated_instructions_per_s() -> f64 {
    45e6
}

impl Default for SimSettings {
    fn default() -> Self {
        SimSettings {
            // Cachegrind with cache and branch simulation costs ~38× (DESIGN.md §9).
            rate_scale: 1.0 / 40.0,
            min_rate: 20.0,
            // Measured on memcached: the fixed part of a run (start-up, the 10k-item warm-up, periodic
            // maintenance threads) varies between runs by ~2e5 D1 and ~1.5e4 I1 misses, against ~90 and
            // ~4 per request; 20,000 requests bring that to about ±10% and ±20% (more costs minutes).
            min_requests: 20000,
            min_duration_s: 5.0,
            max_duration_s: 15.0,
            with_l2: true,
            instructions_per_request: None,
            max_simulated_instructions_per_s: default_max_simulated_instructions_per_s(),
            method: SimMethod::Window,
        }
    }
}

impl SimSettings {
    pub fn check(&self) -> Result<(), MeasureError> {
        let bad = |m: &str| Err(MeasureError::Counters(m.to_string()));
        if !(self.rate_scale.is_finite() && self.rate_scale > 0.0 && self.rate_scale <= 1.0) {
            return bad("the simulated rate scale must be in (0, 1]");
        }
        if !(self.min_rate.is_finite() && self.min_rate > 0.0) {
            return bad("the simulated minimum rate must be positive");
        }
        if self.min_requests == 0 {
            return bad("the simulated request count must be positive");
        }
        if !(self.min_duration_s.is_finite()
            && self.min_duration_s > 0.0
            && self.max_duration_s >= self.min_duration_s)
        {
            return Err(MeasureError::Counters(format!(
                "the longest simulated run (--sim-seconds, {} s) must be at least the shortest ({} s)",
                self.max_duration_s, self.min_duration_s
            )));
        }
        if !(self.max_simulated_instructions_per_s.is_finite()
            && self.max_simulated_instructions_per_s > 0.0)
        {
            return bad("the simulated instruction throughput must be positive");
        }
        Ok(())
    }
}

/// One cachegrind run of the differential, or one callgrind window (the idle one at rate 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimRunRecord {
    /// `"llc"` or `"l2"`: which platform level played cachegrind's LL.
    pub ll_as: String,
    /// `cachegrind` (a whole run) or `callgrind` (a window of a run).
    #[serde(default = "cachegrind_name")]
    pub simulator: String,
    pub offered_rate: f64,
    pub duration_s: f64,
    pub requests_completed: u64,
    /// Seconds from spawn until the load began (start-up and warm-up under the simulator).
    #[serde(default)]
    pub startup_s: f64,
    /// Seconds from spawn until the server was told to stop (the same in every run of a differential
    /// unless a start-up took longer than the first run's margin).
    #[serde(default)]
    pub lifetime_s: f64,
    pub totals: CachegrindTotals,
}

/// A simulated measurement: the figures and every run they came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimDifferential {
    pub figures: CounterFigures,
    pub runs: Vec<SimRunRecord>,
}

fn cachegrind_name() -> String {
    SimMethod::Differential.simulator().into()
}

/// The platform with `level` playing cachegrind's LL.
fn with_ll(platform: &Platform, ll: CacheGeometry) -> Platform {
    Platform {
        llc: ll,
        ..platform.clone()
    }
}

/// Measures the target under simulation by `plan.method` and derives per-request figures: a window
/// per geometry (two runs; one without the L2), or the differential (four runs; two without).
pub fn measure_sim(
    spec: &TargetSpec,
    plan: &SimPlan,
    opts: &RunOptions,
    status: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&Progress),
) -> Result<SimDifferential, MeasureError> {
    match plan.method {
        SimMethod::Window => measure_windows(spec, plan, opts, status, progress),
        SimMethod::Differential => measure_differential(spec, plan, opts, status, progress),
    }
}

/// The geometries a plan runs: the LLC as LL, and the L2 as LL when asked.
fn geometries(plan: &SimPlan) -> Vec<(&'static str, CacheGeometry)> {
    let mut g = vec![("llc", plan.platform.llc)];
    if plan.with_l2 {
        g.push(("l2", plan.platform.l2));
    }
    g
}

/// One callgrind run per geometry: start and warm the server, prepare the load and warm it up for
/// [`WINDOW_WARMUP_S`], then a loaded window (zero, the measured load, dump) and an idle window as
/// long (zero, wait, dump). Each becomes a [`SimRunRecord`], the idle one at rate 0 with no
/// requests, so that [`sim_figures`] differences them as it does the differential's runs: what the
/// server does per second (timer threads) cancels, and what remains is the measured requests'.
fn measure_windows(
    spec: &TargetSpec,
    plan: &SimPlan,
    opts: &RunOptions,
    status: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&Progress),
) -> Result<SimDifferential, MeasureError> {
    let mut runs = Vec::new();
    for (name, geometry) in geometries(plan) {
        let platform = with_ll(&plan.platform, geometry);
        status(&format!(
            "callgrind ({}, LL = {name}): {} at {:.1} req/s for {:.1} s",
            plan.platform.name, spec.name, plan.rate, plan.duration_s
        ));
        let [idle, loaded] = window_run(spec, &platform, plan, opts, status, progress)?;
        let achieved = loaded.requests_completed as f64 / plan.duration_s;
        if achieved < 0.9 * plan.rate {
            status(&format!(
                "the simulated server achieved {achieved:.1} of {:.1} req/s: it is saturated under the simulator",
                plan.rate
            ));
        }
        for r in [idle, loaded] {
            runs.push(SimRunRecord {
                ll_as: name.to_string(),
                ..r
            });
        }
    }
    let figures = sim_figures(&runs, &plan.platform.name)?;
    Ok(SimDifferential { figures, runs })
}

/// Seconds of load at the window's rate before it opens: connections, caches and the server's
/// lazily built state settle, as in the native runs' warm-up.
const WINDOW_WARMUP_S: f64 = 1.0;

/// One callgrind window of `plan` on its platform as it is (no second geometry): [idle, loaded]
/// records, for `ditto compare --sim` ([`crate::run_sim`]).
pub fn measure_window(
    spec: &TargetSpec,
    plan: &SimPlan,
    opts: &RunOptions,
    status: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&Progress),
) -> Result<[SimRunRecord; 2], MeasureError> {
    window_run(spec, &plan.platform, plan, opts, status, progress)
}

fn window_run(
    spec: &TargetSpec,
    platform: &Platform,
    plan: &SimPlan,
    opts: &RunOptions,
    status: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&Progress),
) -> Result<[SimRunRecord; 2], MeasureError> {
    let spawned = std::time::Instant::now();
    let session = callgrind::Session::new()?;
    let launch = LaunchOptions {
        port: opts.port,
        wrapper: session.wrapper(platform),
        ready_timeout: Some(Duration::from_secs(180)),
        ..LaunchOptions::default()
    };
    let (mut target, _warm) = start_warm(spec, &launch, status)?;
    let level = ResolvedLevel {
        rate: plan.rate,
        connections: plan.connections,
        warmup_s: WINDOW_WARMUP_S,
        duration_s: plan.duration_s,
        ..spec.load.resolve(Level::Medium)
    };
    let (mut cfg, prepared) =
        prepare_and_warm_up(spec, &level, target.addr(), opts, status, progress)?;
    // Under simulation a response can take a hundred times longer than natively.
    cfg.request_timeout = Duration::from_secs(30);
    let startup_s = spawned.elapsed().as_secs_f64();
    session.zero()?;
    let opened = std::time::Instant::now();
    let report = ditto_load::run_prepared(&cfg, &prepared, progress);
    check_alive(&mut target, &spec.name)?;
    let loaded_totals = session.dump()?;
    let window_s = opened.elapsed().as_secs_f64();
    let report = report?;
    status(&format!(
        "idle window: {window_s:.1} s, for the work the server does per second"
    ));
    session.zero()?;
    std::thread::sleep(Duration::from_secs_f64(window_s));
    check_alive(&mut target, &spec.name)?;
    let idle_totals = session.dump()?;
    let lifetime_s = spawned.elapsed().as_secs_f64();
    target.stop(Duration::from_secs(60))?;
    let record = |rate: f64, requests: u64, totals: CachegrindTotals| SimRunRecord {
        ll_as: String::new(),
        simulator: SimMethod::Window.simulator().into(),
        offered_rate: rate,
        duration_s: window_s,
        requests_completed: requests,
        startup_s,
        lifetime_s,
        totals,
    };
    Ok([
        record(0.0, 0, idle_totals),
        record(plan.rate, report.requests_completed, loaded_totals),
    ])
}

/// Runs the target under cachegrind four times (two without the L2 runs) and derives per-request figures.
fn measure_differential(
    spec: &TargetSpec,
    plan: &SimPlan,
    opts: &RunOptions,
    status: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&Progress),
) -> Result<SimDifferential, MeasureError> {
    let (mut lo, hi) = plan.rates();
    let mut runs = Vec::new();
    // Every run is stopped at the same time after its spawn (set by the first run), so work a server
    // does per second (timer threads) is the same in every run and cancels in the differential.
    let mut stop_at_s = None;
    for (name, geometry) in geometries(plan) {
        let platform = with_ll(&plan.platform, geometry);
        // The faster run first: if the simulated server cannot keep up with it, what it achieved is its
        // capacity under the simulator, and the slower run is lowered to a third of that so the two
        // still differ by many requests (a slow server, e.g. gRPC under Valgrind, would otherwise
        // saturate in both runs and the difference would be noise).
        for fast in [true, false] {
            let rate = if fast { hi } else { lo };
            status(&format!(
                "cachegrind ({}, LL = {name}): {} at {rate:.1} req/s for {:.1} s",
                plan.platform.name, spec.name, plan.duration_s
            ));
            let r = sim_run(
                spec,
                &platform,
                rate,
                plan.duration_s,
                plan.connections,
                &mut stop_at_s,
                opts,
                status,
                progress,
            )?;
            let achieved = r.requests_completed as f64 / plan.duration_s;
            if fast && achieved < 0.9 * rate && achieved / 3.0 < lo {
                lo = achieved / 3.0;
                status(&format!(
                    "the simulated server achieved {achieved:.1} of {rate:.1} req/s; the slower run offers {lo:.1} req/s"
                ));
            }
            runs.push(SimRunRecord {
                ll_as: name.to_string(),
                ..r
            });
        }
    }
    let figures = sim_figures(&runs, &plan.platform.name)?;
    Ok(SimDifferential { figures, runs })
}

#[allow(clippy::too_many_arguments)]
fn sim_run(
    spec: &TargetSpec,
    platform: &Platform,
    rate: f64,
    duration_s: f64,
    connections: usize,
    stop_at_s: &mut Option<f64>,
    opts: &RunOptions,
    status: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&Progress),
) -> Result<SimRunRecord, MeasureError> {
    let spawned = std::time::Instant::now();
    let out = cachegrind::OutDir::new()?;
    let launch = LaunchOptions {
        port: opts.port,
        wrapper: cachegrind::wrapper(platform, &out.pattern()),
        ready_timeout: Some(Duration::from_secs(180)),
        ..LaunchOptions::default()
    };
    let (mut target, _warm) = start_warm(spec, &launch, status)?;
    let mut cfg = load_config(
        spec,
        &ResolvedLevel {
            rate,
            connections,
            warmup_s: 0.0,
            duration_s,
            ..spec.load.resolve(Level::Medium)
        },
        target.addr(),
        opts,
    );
    // Under simulation a response can take a hundred times longer than natively.
    cfg.request_timeout = Duration::from_secs(30);
    let startup_s = spawned.elapsed().as_secs_f64();
    let report = ditto_load::run(&cfg, progress);
    check_alive(&mut target, &spec.name)?;
    // The first run sets the common lifetime: its own plus a margin for slower start-ups later.
    let stop_at = *stop_at_s
        .get_or_insert_with(|| spawned.elapsed().as_secs_f64() + (0.5 * startup_s).max(3.0));
    let idle = stop_at - spawned.elapsed().as_secs_f64();
    if idle > 0.0 {
        status(&format!(
            "idling {idle:.1} s so every simulated run lives equally long"
        ));
        std::thread::sleep(Duration::from_secs_f64(idle));
        check_alive(&mut target, &spec.name)?;
    }
    let lifetime_s = spawned.elapsed().as_secs_f64();
    // Valgrind writes its output when the guest exits; give it time.
    target.stop(Duration::from_secs(60))?;
    let totals = out.read_sum();
    let report = report?;
    Ok(SimRunRecord {
        ll_as: String::new(),
        simulator: cachegrind_name(),
        offered_rate: rate,
        duration_s,
        requests_completed: report.requests_completed,
        startup_s,
        lifetime_s,
        totals: totals?,
    })
}

/// Fewest accesses a simulated rate is taken from. Below it the rate is a handful of events, not a
/// measurement: nginx's L2 missed 4 times in a 20,000-request differential and all 4 missed the LLC,
/// an LLC miss rate of 1.0 against its clone's 0.0096 (9 of 933).
pub const MIN_RATE_ACCESSES: f64 = 100.0;

/// `num / den` as a rate, `den` resting on `den_events` accesses in the differential. A rate outside
/// [0, 1] is noise larger than the signal: it is clamped, and the note says so. A rate on fewer than
/// [`MIN_RATE_ACCESSES`] accesses is undefined, and the note says on how many.
fn rate(notes: &mut Vec<String>, what: &str, num: f64, den: f64, den_events: f64) -> Option<f64> {
    if den <= 0.0 {
        notes.push(format!("{what}: no accesses in the differential"));
        return None;
    }
    if den_events < MIN_RATE_ACCESSES {
        notes.push(format!(
            "{what}: {den_events:.0} accesses in the differential, fewer than {MIN_RATE_ACCESSES:.0}: too few for a rate"
        ));
        return None;
    }
    let r = num / den;
    if !(0.0..=1.0).contains(&r) {
        notes.push(format!(
            "{what}: differential gave {r:.4}, clamped to [0, 1] (noise exceeds the signal: raise --sim-requests)"
        ));
    }
    Some(r.clamp(0.0, 1.0))
}

/// Figures from the runs of [`measure_sim`] (pure, for tests).
pub fn sim_figures(runs: &[SimRunRecord], platform: &str) -> Result<CounterFigures, MeasureError> {
    let pair = |name: &str| -> Option<(CachegrindTotals, f64)> {
        let mut rs: Vec<&SimRunRecord> = runs.iter().filter(|r| r.ll_as == name).collect();
        if rs.len() != 2 {
            return None;
        }
        rs.sort_by(|a, b| a.offered_rate.total_cmp(&b.offered_rate));
        let d = rs[1].totals.minus(&rs[0].totals);
        let n = rs[1].requests_completed as f64 - rs[0].requests_completed as f64;
        Some((d, n))
    };
    let Some((d, n)) = pair("llc") else {
        return Err(MeasureError::Differential(
            "the two LLC-geometry runs are missing".into(),
        ));
    };
    if n <= 0.0 || d.ir <= 0.0 {
        return Err(MeasureError::Differential(format!(
            "the faster run did not add work ({n} more requests, {} more instructions): raise the simulated duration or rate",
            d.ir
        )));
    }
    let mut notes = Vec::new();
    // A differential's runs must live equally long; a window's idle window is as long as its loaded
    // one by construction, and its runs' lifetimes do not enter the figures.
    let lifetimes: Vec<f64> = runs
        .iter()
        .filter(|r| r.simulator == SimMethod::Differential.simulator())
        .map(|r| r.lifetime_s)
        .collect();
    let spread = lifetimes.iter().copied().fold(f64::MIN, f64::max)
        - lifetimes.iter().copied().fold(f64::MAX, f64::min);
    if !lifetimes.is_empty() && spread > 1.0 {
        notes.push(format!(
            "the simulated runs lived {spread:.1} s apart (a start-up overran the margin): per-second background work does not fully cancel"
        ));
    }
    // The L1 simulation does not depend on which level plays LL, so with the L2 runs there are two
    // independent estimates of the L1, branch and instruction figures: pool them (sum the pairs'
    // differences), halving the variance and damping one disturbed run.
    let l2_pair = pair("l2").filter(|(d2, n2)| *n2 > 0.0 && d2.ir > 0.0);
    let (p, pn) = match &l2_pair {
        Some((d2, n2)) => (d.plus(d2), n + n2),
        None => (d, n),
    };
    let data = p.dr + p.dw;
    let l1_misses = p.i1mr + p.d1mr + p.d1mw;
    let l1_misses_per_request = l1_misses / pn;
    let llc_misses = d.ilmr + d.dlmr + d.dlmw;
    let instructions_per_request = p.ir / pn;
    let l1i = rate(&mut notes, "L1i miss rate", p.i1mr, p.ir, p.ir);
    let l1d = rate(&mut notes, "L1d miss rate", p.d1mr + p.d1mw, data, data);
    let branches = p.bc + p.bi;
    let branch = rate(
        &mut notes,
        "branch misprediction rate",
        p.bcm + p.bim,
        branches,
        branches,
    );
    // The two kinds apart, as cachegrind predicts them apart (a table of counters for conditional
    // branches, a buffer of last targets for indirect ones): the tuner moves each with its own
    // knobs. A run with no indirect jumps has no indirect rate, and that is no caveat.
    let mut kind_rate = |what: &str, num: f64, den: f64| {
        (den > 0.0)
            .then(|| rate(&mut notes, what, num, den, den))
            .flatten()
    };
    let conditional = kind_rate("conditional misprediction rate", p.bcm, p.bc);
    let indirect = kind_rate("indirect misprediction rate", p.bim, p.bi);
    let indirect_share = (branches > 0.0).then(|| p.bi / branches);
    let (l2, llc) = match l2_pair {
        Some((d2, n2)) => {
            let l2_misses = d2.ilmr + d2.dlmr + d2.dlmw;
            let l2_misses_per_request = l2_misses / n2;
            let l2_accesses = d2.i1mr + d2.d1mr + d2.d1mw;
            // L2 accesses are the L1 misses of the same runs: a run that missed more in L1 also sent
            // more to L2, and that correlated noise cancels in the ratio (pooled L1 misses gave 17%
            // run-to-run variation on memcached, the same pair's 2%). LLC accesses are L2 misses.
            let l2 = rate(
                &mut notes,
                "L2 miss rate",
                l2_misses,
                l2_accesses,
                l2_accesses,
            );
            let llc = rate(
                &mut notes,
                "LLC miss rate",
                llc_misses / n,
                l2_misses_per_request,
                l2_misses,
            );
            (l2, llc)
        }
        None => {
            notes.push(
                "no L2 runs: the LLC miss rate is LLC misses over L1 misses (a two-level hierarchy)"
                    .to_string(),
            );
            (
                None,
                rate(
                    &mut notes,
                    "LLC miss rate",
                    llc_misses / n,
                    l1_misses_per_request,
                    l1_misses,
                ),
            )
        }
    };
    Ok(CounterFigures {
        source: sim_source(
            runs.first()
                .map_or(SimMethod::Differential.simulator(), |r| {
                    r.simulator.as_str()
                }),
            platform,
        ),
        instructions_per_request: Some(instructions_per_request),
        cycles_per_request: None,
        ipc: None,
        branch_mispredict_rate: branch,
        conditional_mispredict_rate: conditional,
        indirect_mispredict_rate: indirect,
        indirect_branch_share: indirect_share,
        l1i_miss_rate: l1i,
        l1d_miss_rate: l1d,
        l2_miss_rate: l2,
        llc_miss_rate: llc,
        itlb_misses_per_request: None,
        requests: pn,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(ll: &str, rate: f64, n: u64, t: CachegrindTotals) -> SimRunRecord {
        SimRunRecord {
            ll_as: ll.into(),
            simulator: cachegrind_name(),
            offered_rate: rate,
            duration_s: 4.0,
            requests_completed: n,
            startup_s: 10.0,
            lifetime_s: 15.0,
            totals: t,
        }
    }

    /// Totals of a server with fixed costs, per-second background work and per-request work.
    fn totals(requests: f64, seconds: f64, ll_miss_per_req: f64) -> CachegrindTotals {
        let fixed = 1e6;
        let per_s = 5e5;
        CachegrindTotals {
            ir: fixed + per_s * seconds + 1e4 * requests,
            i1mr: 10.0 * requests + 50.0 * seconds,
            ilmr: 1.0 * requests,
            dr: 3e3 * requests + 1e5,
            d1mr: 100.0 * requests + 1e3,
            dlmr: ll_miss_per_req * requests,
            dw: 1e3 * requests,
            d1mw: 20.0 * requests,
            dlmw: 0.0,
            bc: 2e3 * requests + 1e4 * seconds,
            bcm: 40.0 * requests,
            bi: 100.0 * requests,
            bim: 25.0 * requests,
        }
    }

    /// A callgrind window of `seconds` with `requests` measured: no start-up, only the window's work.
    fn window(
        ll: &str,
        requests: u64,
        seconds: f64,
        lifetime_s: f64,
        ll_miss: f64,
    ) -> SimRunRecord {
        let n = requests as f64;
        let fixed = totals(0.0, 0.0, ll_miss);
        SimRunRecord {
            simulator: "callgrind".into(),
            offered_rate: if requests == 0 { 0.0 } else { 100.0 },
            duration_s: seconds,
            lifetime_s,
            ..run(ll, 0.0, requests, totals(n, seconds, ll_miss).minus(&fixed))
        }
    }

    #[test]
    fn a_window_minus_an_idle_window_as_long_is_the_measured_requests_work() {
        // The LLC and L2 runs are separate processes with their own lifetimes: no caveat for that.
        let runs = vec![
            window("llc", 0, 6.0, 40.0, 1.0),
            window("llc", 500, 6.0, 40.0, 1.0),
            window("l2", 0, 6.0, 52.0, 13.0),
            window("l2", 500, 6.0, 52.0, 13.0),
        ];
        let f = sim_figures(&runs, "epyc-host").expect("figures");
        assert_eq!(f.source, "sim:callgrind:epyc-host");
        assert!((f.instructions_per_request.unwrap() - 1e4).abs() < 1e-6);
        assert!((f.l1i_miss_rate.unwrap() - 10.0 / 1e4).abs() < 1e-12);
        assert!((f.conditional_mispredict_rate.unwrap() - 40.0 / 2e3).abs() < 1e-12);
        assert!((f.l2_miss_rate.unwrap() - 14.0 / 130.0).abs() < 1e-12);
        assert!((f.llc_miss_rate.unwrap() - 2.0 / 14.0).abs() < 1e-12);
        assert_eq!(f.requests, 1000.0);
        assert!(f.notes.is_empty(), "{:?}", f.notes);
    }

    /// A load level at 2,000 req/s over 8 connections, 10 s after 1 s of warm-up.
    fn level_at_2000(level: Level) -> ResolvedLevel {
        ResolvedLevel {
            level,
            rate: 2000.0,
            connections: 8,
            warmup_s: 1.0,
            duration_s: 10.0,
            arrival: ditto_load::Arrival::Poisson,
        }
    }

    #[test]
    fn a_window_plan_differences_an_idle_window_with_the_loaded_one() {
        let platform = Platform::by_name_or_path("epyc-host").expect("platform");
        let level = level_at_2000(Level::Medium);
        let window = SimPlan::for_level(&platform, &level, &SimSettings::default()).expect("plan");
        assert_eq!(window.method, SimMethod::Window);
        assert_eq!(window.rates(), (0.0, window.rate));
        let differential = SimPlan::for_level(
            &platform,
            &level,
            &SimSettings {
                method: SimMethod::Differential,
                ..SimSettings::default()
            },
        )
        .expect("plan");
        assert_eq!(
            differential.rates(),
            (0.5 * differential.rate, 1.5 * differential.rate)
        );
    }

    #[test]
    fn equal_duration_differential_cancels_per_second_work() {
        let runs = vec![
            run("llc", 50.0, 200, totals(200.0, 4.0, 1.0)),
            run("llc", 150.0, 600, totals(600.0, 4.0, 1.0)),
            run("l2", 50.0, 200, totals(200.0, 4.0, 13.0)),
            run("l2", 150.0, 600, totals(600.0, 4.0, 13.0)),
        ];
        let f = sim_figures(&runs, "epyc-host").expect("figures");
        assert_eq!(f.source, "sim:cachegrind:epyc-host");
        assert!((f.instructions_per_request.unwrap() - 1e4).abs() < 1e-6);
        assert!((f.l1i_miss_rate.unwrap() - 10.0 / 1e4).abs() < 1e-12);
        assert!((f.l1d_miss_rate.unwrap() - 120.0 / 4e3).abs() < 1e-12);
        assert!((f.branch_mispredict_rate.unwrap() - 65.0 / 2.1e3).abs() < 1e-12);
        assert!((f.conditional_mispredict_rate.unwrap() - 40.0 / 2e3).abs() < 1e-12);
        assert!((f.indirect_mispredict_rate.unwrap() - 25.0 / 100.0).abs() < 1e-12);
        assert!((f.indirect_branch_share.unwrap() - 100.0 / 2.1e3).abs() < 1e-12);
        // L2: (1 + 13) misses per request over 130 L1 misses; LLC: 2 misses over those 14.
        assert!((f.l2_miss_rate.unwrap() - 14.0 / 130.0).abs() < 1e-12);
        assert!((f.llc_miss_rate.unwrap() - 2.0 / 14.0).abs() < 1e-12);
        assert!(f.ipc.is_none());
        assert!(f.notes.is_empty(), "{:?}", f.notes);
    }

    #[test]
    fn a_rate_on_a_handful_of_accesses_is_undefined_and_says_on_how_many() {
        // nginx: its L2 missed 4 times in the differential, and all 4 missed the LLC.
        let with_ll_misses = |requests: f64, ll: f64| CachegrindTotals {
            ilmr: 0.0,
            dlmr: ll,
            ..totals(requests, 4.0, 0.0)
        };
        let figures = |ll: f64| {
            let runs = vec![
                run("llc", 50.0, 200, with_ll_misses(200.0, 0.0)),
                run("llc", 150.0, 600, with_ll_misses(600.0, ll)),
                run("l2", 50.0, 200, with_ll_misses(200.0, 0.0)),
                run("l2", 150.0, 600, with_ll_misses(600.0, ll)),
            ];
            sim_figures(&runs, "p").expect("figures")
        };
        let f = figures(4.0);
        assert!(
            f.l2_miss_rate.is_some(),
            "the L2 rate rests on the L1's misses"
        );
        assert_eq!(f.llc_miss_rate, None);
        assert!(
            f.notes
                .iter()
                .any(|n| n.starts_with("LLC miss rate: 4 accesses")),
            "{:?}",
            f.notes
        );
        // On 100 accesses the rate is defined.
        assert_eq!(figures(100.0).llc_miss_rate, Some(1.0));
    }

    #[test]
    fn l1_figures_pool_both_geometry_pairs() {
        // The L2 pair's faster run missed 20 more D1 lines per request than the LLC pair's.
        let mut noisy = totals(600.0, 4.0, 13.0);
        noisy.d1mr += 20.0 * 400.0;
        let runs = vec![
            run("llc", 50.0, 200, totals(200.0, 4.0, 1.0)),
            run("llc", 150.0, 600, totals(600.0, 4.0, 1.0)),
            run("l2", 50.0, 200, totals(200.0, 4.0, 13.0)),
            run("l2", 150.0, 600, noisy),
        ];
        let f = sim_figures(&runs, "p").expect("figures");
        // (120 + 140) / 2 misses over 4000 accesses per request.
        assert!((f.l1d_miss_rate.unwrap() - 130.0 / 4e3).abs() < 1e-12);
        assert_eq!(f.requests, 800.0);
    }

    #[test]
    fn noise_is_clamped_and_reported() {
        let mut slow = totals(200.0, 4.0, 1.0);
        slow.i1mr += 1e5; // the slower run missed more: noise
        let runs = vec![
            run("llc", 50.0, 200, slow),
            run("llc", 150.0, 600, totals(600.0, 4.0, 1.0)),
        ];
        let f = sim_figures(&runs, "p").expect("figures");
        assert_eq!(f.l1i_miss_rate, Some(0.0));
        assert!(f.notes.iter().any(|n| n.contains("L1i")), "{:?}", f.notes);
        assert!(f.l2_miss_rate.is_none());
        assert!(f.notes.iter().any(|n| n.contains("no L2 runs")));
    }

    #[test]
    fn no_extra_work_is_an_error() {
        let t = totals(200.0, 4.0, 1.0);
        let runs = vec![run("llc", 50.0, 200, t), run("llc", 150.0, 200, t)];
        let err = sim_figures(&runs, "p").unwrap_err().to_string();
        assert!(err.contains("did not add work"), "{err}");
    }

    #[test]
    fn plan_scales_the_rate_and_covers_enough_requests() {
        let p = Platform::by_name_or_path("epyc-host").expect("platform");
        let level = level_at_2000(Level::Low);
        let s = SimSettings {
            min_requests: 500,
            min_duration_s: 3.0,
            max_duration_s: 20.0,
            method: SimMethod::Differential,
            ..SimSettings::default()
        };
        let plan = SimPlan::for_level(&p, &level, &s).expect("plan");
        assert_eq!(plan.rate, 50.0);
        assert_eq!(plan.duration_s, 10.0);
        assert_eq!(plan.rates(), (25.0, 75.0));
        // Too few requests at the scaled rate within the longest run: the rate rises instead.
        let plan = SimPlan::for_level(&p, &level, &SimSettings::default()).expect("plan");
        assert!((plan.rate - 20000.0 / 15.0).abs() < 1e-9);
        assert_eq!(plan.duration_s, 15.0);
        // A heavy server: the rate stays where cachegrind sustains the faster run (45 M
        // instructions per second at 1.5 × the rate), and the runs take the longest duration.
        let heavy = SimSettings {
            instructions_per_request: Some(100_000.0),
            ..SimSettings::default()
        };
        let plan = SimPlan::for_level(&p, &level, &heavy).expect("plan");
        assert!((plan.rate - 300.0).abs() < 1e-9, "{}", plan.rate);
        assert_eq!(plan.duration_s, 15.0);
        // A light one is not capped.
        let light = SimSettings {
            instructions_per_request: Some(5_000.0),
            ..SimSettings::default()
        };
        let plan = SimPlan::for_level(&p, &level, &light).expect("plan");
        assert!((plan.rate - 20000.0 / 15.0).abs() < 1e-9);
        let bad = SimSettings {
            rate_scale: 0.0,
            ..SimSettings::default()
        };
        assert!(SimPlan::for_level(&p, &level, &bad).is_err());
    }

    #[test]
    fn longer_simulated_runs_cover_more_requests_at_the_same_rate() {
        // memcached's differential at 60,000 requests: in 15 s runs the rate would be 4,000 req/s
        // (6,000 in the faster run, more than cachegrind keeps up with); with 45 s it stays at the
        // 1,333 of the default 20,000 in 15 s.
        let p = Platform::by_name_or_path("epyc-host").expect("platform");
        let level = level_at_2000(Level::Low);
        let longer = SimSettings {
            min_requests: 60_000,
            max_duration_s: 45.0,
            ..SimSettings::default()
        };
        let plan = SimPlan::for_level(&p, &level, &longer).expect("plan");
        assert!((plan.rate - 20000.0 / 15.0).abs() < 1e-9, "{}", plan.rate);
        assert!((plan.duration_s - 45.0).abs() < 1e-9, "{}", plan.duration_s);
        let too_short = SimSettings {
            max_duration_s: 2.0,
            ..SimSettings::default()
        };
        let err = SimPlan::for_level(&p, &level, &too_short)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--sim-seconds"), "{err}");
    }

    #[test]
    fn backend_choice_parses_and_perf_figures_are_ratios() {
        assert_eq!("sim".parse::<BackendChoice>(), Ok(BackendChoice::Sim));
        assert!("pmu".parse::<BackendChoice>().is_err());
        let t = HwTotals {
            cycles: Some(2e6),
            instructions: Some(3e6),
            branches: Some(5e5),
            branch_misses: Some(5e3),
            l1i_misses: Some(3e3),
            l1d_loads: Some(1e6),
            l1d_misses: Some(2e4),
            llc_loads: Some(1e3),
            llc_misses: Some(1e2),
            itlb_misses: None,
        };
        let f = t.figures(100.0, true);
        assert_eq!(f.source, "perf");
        assert_eq!(f.ipc, Some(1.5));
        assert_eq!(f.instructions_per_request, Some(3e4));
        assert_eq!(f.branch_mispredict_rate, Some(0.01));
        assert_eq!(f.llc_miss_rate, Some(0.1));
        assert_eq!(f.l2_miss_rate, None);
        assert_eq!(f.itlb_misses_per_request, None);
    }

    #[test]
    fn auto_selects_a_backend_and_names_its_source() {
        let p = Platform::by_name_or_path("epyc-host").expect("platform");
        let b = CounterBackend::select(BackendChoice::Auto, &p).expect("auto never fails");
        match probe_hardware() {
            Ok(()) => assert_eq!(b.source(SimMethod::Window), "perf"),
            Err(_) => {
                assert_eq!(b.source(SimMethod::Window), "sim:callgrind:epyc-host");
                assert_eq!(
                    b.source(SimMethod::Differential),
                    "sim:cachegrind:epyc-host"
                );
                let err = CounterBackend::select(BackendChoice::Perf, &p)
                    .unwrap_err()
                    .to_string();
                assert!(err.contains("--counters sim"), "{err}");
            }
        }
    }
}
