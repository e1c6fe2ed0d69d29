//! `body`: user-space behaviour per request, from the instrumented (launch) profiler.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Histogram;

/// User-space behaviour, per thread cluster where clusters differ.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Body {
    /// Instrumentation engine that observed the body.
    pub engine: String,
    /// Requests in the traced window: the divisor of every per-request body figure.
    #[serde(default)]
    pub requests: u64,
    /// Per cluster.
    pub clusters: Vec<ClusterBody>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterBody {
    /// Thread cluster id (`threads.clusters[].id`).
    pub cluster: String,
    /// Dynamic user-space instructions per request (a rep-prefixed string instruction counts once).
    pub instructions_per_request: f64,
    /// System calls per request of the same cluster (from the skeleton run), beside the instructions.
    #[serde(default)]
    pub syscalls_per_request: f64,
    /// Mean encoded instruction length, bytes.
    pub mean_instruction_bytes: f64,
    /// Share of dynamic instructions per class and operand kind; shares sum to 1.
    pub instruction_mix: Vec<MixShare>,
    /// Repeat counts of rep-prefixed string instructions.
    pub rep_counts: Option<Histogram>,
    /// `rep_counts` per operand kind of the string instruction, by the names of the instruction
    /// mix: `store` for a fill (`rep stos`), `rmw` for a copy or compare (`rep movs`, `rep cmps`),
    /// which reads memory and writes or compares it. A service's copies and fills repeat
    /// differently (memcached's workers copy 1-7 bytes at a time and fill 146), and a copy
    /// touches two lines in turn where a fill touches one. Absent in profiles whose collector did
    /// not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rep_counts_by_operand: Option<BTreeMap<String, Histogram>>,
    /// Conditional branch behaviour.
    pub branches: Branches,
    /// Instruction-side hit curve (equation 2 of the Ditto paper): the cluster's own fetches, in the
    /// cache its process's threads share.
    pub instruction_working_set: HitCurve,
    /// Data-side hit curve (equation 1 of the Ditto paper): the cluster's own accesses, in the cache
    /// its process's threads share.
    pub data_working_set: HitCurve,
    /// Register dependency distances.
    pub dependencies: Dependencies,
    /// Share of data accesses to memory other threads also touch.
    pub shared_data_fraction: f64,
    /// Share of data accesses that follow a constant stride.
    pub regular_access_fraction: f64,
    /// Share of loads whose address depends on the previous load (pointer chasing).
    pub pointer_chase_fraction: f64,
    /// Distinct 4 KiB instruction pages touched per request window (iTLB footprint).
    pub instruction_pages: u64,
}

/// A share of dynamic instructions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MixShare {
    /// Instruction class from the class table (`mov`, `alu`, `mul`, `div`, `fp`, `simd128`, `branch`, …).
    pub class: String,
    /// `reg`, `load`, `store` or `rmw`.
    pub operand: String,
    /// Share of all dynamic instructions.
    pub share: f64,
}

impl MixShare {
    /// Operand kinds: no memory operand, memory read, memory write, read and write of the same
    /// location.
    pub const OPERANDS: [&'static str; 4] = ["reg", "load", "store", "rmw"];
}

/// Distributions over static conditional branches, weighted by executions, in log2 bins: index `i` holds
/// rates in `(2^-(i+2), 2^-(i+1)]` for `i` in 0..9 (2^-1 down to 2^-10), and index 10 holds rates below 2^-10.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Branches {
    /// Conditional branches executed per request.
    pub per_request: f64,
    /// Static conditional branches seen.
    pub static_count: u64,
    /// Taken-or-not-taken rate (the rarer direction's share), 11 bins.
    pub taken_rate: Vec<f64>,
    /// Transition rate (share of executions that change direction), 11 bins.
    pub transition_rate: Vec<f64>,
    /// Per `taken_rate` bin, the share of its executions that come from branches taken more often
    /// than not (0 for an empty bin). `taken_rate` holds the rarer direction's rate, which leaves a
    /// branch's majority direction out, and in a predictor whose tables alias (cachegrind's indexes
    /// 16k counters by 7 address bits and 7 history bits) branches of opposite majorities that share a
    /// counter mispredict each other. Compiled code is far from half-and-half. Absent in profiles
    /// whose collector did not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub majority_taken: Option<Vec<f64>>,
    /// Indirect jumps and calls. Absent in profiles whose collector did not record them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub indirect: Option<IndirectBranches>,
}

/// Indirect jumps and calls (`jmp rax`, `call [rax + 8]`: jump tables, function pointers, virtual
/// and async dispatch). Returns are left out, as a return-stack predictor gets them right and
/// cachegrind does not simulate them. What a branch target buffer mispredicts is a target that
/// differs from the one the same site went to last time, so the profile records how often each
/// site's target changes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IndirectBranches {
    /// Indirect jumps and calls executed per request.
    pub per_request: f64,
    /// Static indirect jump and call sites seen.
    pub static_count: u64,
    /// Target-change rate (share of a site's executions that go elsewhere than its previous one),
    /// weighted by executions, in 11 bins: bin 0 holds sites that never changed target in the window,
    /// bin `i` in 1..=10 holds rates in `((i − 1) / 10, i / 10]`.
    pub target_change_rate: Vec<f64>,
    /// Mean target-change rate over executions: what a last-target predictor without aliasing
    /// mispredicts.
    pub mean_target_change_rate: f64,
}

impl IndirectBranches {
    /// Bins of [`IndirectBranches::target_change_rate`].
    pub const BINS: usize = 11;

    /// The bin of a target-change rate.
    pub fn bin(rate: f64) -> usize {
        if rate.is_nan() || rate <= 0.0 {
            return 0;
        }
        ((rate * 10.0).ceil() as usize).clamp(1, Self::BINS - 1)
    }

    /// The rate a bin stands for: 0 for bin 0, its midpoint otherwise.
    pub fn bin_rate(bin: usize) -> f64 {
        if bin == 0 {
            0.0
        } else {
            (bin as f64 - 0.5) / 10.0
        }
    }

    /// The mean rate of execution-weighted bins, each bin standing for its `bin_rate`.
    pub fn bins_mean(bins: &[f64]) -> f64 {
        bins.iter()
            .enumerate()
            .map(|(i, w)| w * Self::bin_rate(i))
            .sum()
    }
}

impl Branches {
    /// Bins of [`Branches::taken_rate`] and [`Branches::transition_rate`].
    pub const BINS: usize = 11;

    /// The bin of a taken or transition rate: bin `i` holds `(2^-(i+2), 2^-(i+1)]`, the last bin
    /// the rest (rates below 2^-10, and 0).
    pub fn bin(rate: f64) -> usize {
        if rate <= 0.0 || !rate.is_finite() {
            return Self::BINS - 1;
        }
        let k = (-rate.log2()).floor() as i64 - 1;
        k.clamp(0, Self::BINS as i64 - 1) as usize
    }

    /// The share of all conditional branch executions that come from majority-taken branches, when
    /// the profile records majorities.
    pub fn majority_taken_share(&self) -> Option<f64> {
        let m = self.majority_taken.as_ref()?;
        Some(self.taken_rate.iter().zip(m).map(|(w, t)| w * t).sum())
    }
}

/// Hit rate of an LRU cache of each size, from 64 bytes up to the footprint in powers of two.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HitCurve {
    /// Points in increasing size.
    pub points: Vec<HitPoint>,
    /// Associativity model used: e.g. `8-way below 1 MiB, 16-way above`.
    pub associativity: String,
    /// Bound on the error from sampling, in hit-rate points, when the curve was sampled.
    pub sampling_error: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HitPoint {
    /// Cache size, bytes.
    pub size: u64,
    /// Share of accesses that hit.
    pub hit_rate: f64,
}

/// Register dependency distance distributions in 11 bins: distance 1, 2, 3–4, 5–8, …, 513–1024 and beyond.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Dependencies {
    /// Read after write.
    pub raw: Vec<f64>,
    /// Write after read.
    pub war: Vec<f64>,
    /// Write after write.
    pub waw: Vec<f64>,
}

#[cfg(test)]
mod tests {
    use super::{Branches, IndirectBranches};

    #[test]
    fn rate_bins_halve_from_one_half_down_to_the_last_bin() {
        assert_eq!(Branches::bin(0.5), 0);
        assert_eq!(Branches::bin(0.3), 0);
        assert_eq!(Branches::bin(0.25), 1);
        assert_eq!(Branches::bin(1.0 / 1024.0), 9);
        assert_eq!(Branches::bin(1.0 / 4096.0), 10);
        assert_eq!(Branches::bin(0.0), 10);
    }

    #[test]
    fn target_change_bins_hold_never_changing_sites_apart_and_tenths_above() {
        assert_eq!(IndirectBranches::bin(0.0), 0);
        assert_eq!(IndirectBranches::bin(f64::NAN), 0);
        assert_eq!(IndirectBranches::bin(1e-6), 1);
        assert_eq!(IndirectBranches::bin(0.1), 1);
        assert_eq!(IndirectBranches::bin(0.1001), 2);
        assert_eq!(IndirectBranches::bin(0.5), 5);
        assert_eq!(IndirectBranches::bin(1.0), 10);
        assert_eq!(IndirectBranches::bin(3.0), 10);
        assert_eq!(IndirectBranches::bin_rate(0), 0.0);
        assert!((IndirectBranches::bin_rate(5) - 0.45).abs() < 1e-12);
    }
}
