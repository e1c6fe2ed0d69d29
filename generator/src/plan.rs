//! From a cluster's body profile (plus knobs) to synthesis targets: the instruction blocks of
//! equation 2, the data working-set classes of equation 1, the folded instruction mix, and the branch,
//! dependency and access-pattern distributions. Pure arithmetic; `synth.rs` turns it into code.

use ditto_profile::{ClusterBody, HitCurve, IndirectBranches};

use crate::deficit::shift_bins;
use crate::isa::{fold, Class, Opnd};
use crate::knobs::Knobs;

/// Number of bins of the branch-rate and dependency-distance distributions.
pub const BINS: usize = 11;
pub const LINE: u64 = 64;

/// One instruction block: straight-line code of `bytes` bytes, executing `share` of the body's
/// dynamic instructions (equation 2).
#[derive(Debug, Clone, PartialEq)]
pub struct BlockPlan {
    pub bytes: u64,
    pub share: f64,
    /// The instruction cache size this block's line fetches are meant to hit in (equation 2's
    /// 2^j); `fit_blocks` then sizes `bytes` for the clone's interleaving.
    pub target: u64,
}

/// One data working-set class: accesses confined to region [lo, lo + size) of a buffer, cycling over
/// it, so that each access hits in caches of at least `target` bytes and misses in smaller ones
/// (equation 1 and Figure 4 of the paper). `share` is the share of data accesses. Equation 1 nests
/// the regions ([S/2, S) for target S); `fit_data` then sizes them for the clone's interleaving.
#[derive(Debug, Clone, PartialEq)]
pub struct DataClass {
    pub lo: u64,
    pub size: u64,
    pub share: f64,
    /// The cache size this class is meant to hit in.
    pub target: u64,
    /// The first-touch stream of `add_cold_class`: every access goes to a line not touched before
    /// (within the buffer), so its region is never fitted and it adds a new line per access to
    /// every other class's reuse distance.
    pub first_touch: bool,
}

impl DataClass {
    /// The cache size this class is meant to hit in.
    pub fn working_set(&self) -> u64 {
        self.target
    }
}

/// A rep-string count distribution with a short and a long mode: memcached's worker repeats 1–7
/// times in two thirds of its executions and 128–255 times in the rest (its copies and its fills,
/// which the profile's counts by kind now tell apart, `RepModes`; a profile without them, or one
/// kind with both modes, still has the two in one histogram). A clone
/// instruction with one count, the mean, repeats ~70 times every time, and under cachegrind, which
/// counts each repetition as a conditional branch, every execution then mispredicts its exit: a
/// short repeat's exit is within the predictor's 7 bits of history, a long one's is not. So a rep
/// instruction takes the long count on one execution in 2^k (`long_share` rounded to a power of
/// two) and the short mean on the others, keeping its mean per execution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RepSplit {
    /// Mean repetitions of the short executions.
    pub short_count: u64,
    /// Share of executions in the long mode.
    pub long_share: f64,
}

/// Counts at most this are the short mode: an exit after fewer repetitions than cachegrind's
/// predictor keeps history bits (7) is predictable from the history itself.
pub const REP_SHORT_MAX: u64 = 8;

/// The two modes of a rep-count histogram ((lo, hi, count) bins, `[lo, hi)`), when it has both.
pub fn rep_split(bins: &[(u64, u64, f64)]) -> Option<RepSplit> {
    let mid = |lo: u64, hi: u64| 0.5 * (lo + hi.saturating_sub(1).max(lo)) as f64;
    let short = || bins.iter().filter(|b| b.1 <= REP_SHORT_MAX);
    let n_short: f64 = short().map(|b| b.2).sum();
    let n_long: f64 = bins.iter().map(|b| b.2).sum::<f64>() - n_short;
    if n_short <= 0.0 || n_long <= 0.0 {
        return None;
    }
    let short_mean = short().map(|b| b.2 * mid(b.0, b.1)).sum::<f64>() / n_short;
    Some(RepSplit {
        short_count: (short_mean.round() as u64).max(1),
        long_share: n_long / (n_short + n_long),
    })
}

/// How a rep-string instruction of one kind repeats: its mean count per execution and, when the
/// profile's counts have a short and a long mode, the split (`RepSplit`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RepModes {
    pub mean: f64,
    pub split: Option<RepSplit>,
}

impl RepModes {
    /// From a rep-count histogram ((lo, hi, count) bins, `[lo, hi)`, counts positive), each bin
    /// standing for its midpoint.
    pub fn of(bins: &[(u64, u64, f64)]) -> RepModes {
        let n: f64 = bins.iter().map(|b| b.2).sum();
        let sum: f64 = bins
            .iter()
            .map(|&(lo, hi, count)| count * 0.5 * (lo + hi.saturating_sub(1).max(lo)) as f64)
            .sum();
        RepModes {
            mean: if n > 0.0 { sum / n } else { 1.0 },
            split: rep_split(bins),
        }
    }
}

#[derive(Debug, Clone)]
pub struct BodyPlan {
    /// Dynamic instructions per call the body should execute.
    pub instructions: f64,
    /// Mean encoded instruction length of the original, bytes (equation 2's instructions per line).
    pub mean_instruction_bytes: f64,
    /// Folded (class, operand) pairs with their shares, summing to 1, in a fixed order.
    pub mix: Vec<((Class, Opnd), f64)>,
    /// How the fills (`rep stos`, the mix's rep/store) repeat: the profile's
    /// `rep_counts_by_operand.store`, or its `rep_counts` where it has no counts by kind.
    pub rep_fills: RepModes,
    /// How the copies (`rep movs`, rep/rmw) repeat: `rep_counts_by_operand.rmw`, or `rep_counts`.
    pub rep_copies: RepModes,
    /// Conditional branches per dynamic instruction.
    pub cond_branch_ratio: f64,
    /// Static conditional branches the profile saw in this cluster (`branches.static_count`), which
    /// the body's pattern branches are concentrated to approach (`synth::branch_densities`); 0 when
    /// unknown.
    pub static_branches: u64,
    pub taken_bins: Vec<f64>,
    /// Per taken-rate bin, the share of its executions whose branch is taken more often than not
    /// (the profile's `branches.majority_taken`, moved with the bins); `None` when the profile does
    /// not record it, and then each branch's direction is a coin toss.
    pub majority_taken_bins: Option<Vec<f64>>,
    pub transition_bins: Vec<f64>,
    /// Instructions per call and transition-rate bins as the profile has them, before the tuner's
    /// `instructions.per_request_scale` and `branches.transition_rate_scale`: what decides whether
    /// the body's rings take fine windows (`synth::fine_windows`). Decided on the scaled figures,
    /// the scheme flipped while the tuner moved those knobs, and with it a ring's share by a factor
    /// of two: Pix optimized's worker predicted 565 mispredictions a call at one iteration's knobs
    /// and 379 at the next (count ×0.53, transition rates ×0.63), below its five swept rings' 500,
    /// and its L1i read 0.0417 where the same far share with the earlier branch knobs read 0.0467.
    pub profiled_instructions: f64,
    pub profiled_transition_bins: Vec<f64>,
    /// Indirect jumps and calls per dynamic instruction (the profile's `branches.indirect`); 0 when
    /// the profile does not record them.
    pub indirect_ratio: f64,
    /// Calls, each with its return, per dynamic instruction: the smaller of the mix's calls
    /// (branch/store and branch/rmw: a call pushes, through memory it also loads) and its returns
    /// (branch/load: a return pops, and so does a jump through memory). The mix folds every branch
    /// onto branch/reg; the dispatches that `call` their target take these from it.
    pub call_ratio: f64,
    /// Their target-change rates in the profile's 11 bins (`IndirectBranches::target_change_rate`),
    /// scaled by `branches.indirect_change_scale` (`scale_change_bins`).
    pub indirect_change_bins: Vec<f64>,
    /// Their mean target-change rate (`IndirectBranches::mean_target_change_rate`; with
    /// `branches.indirect_change_scale` ≠ 1, the mean of the scaled bins).
    pub indirect_mean_change: f64,
    pub blocks: Vec<BlockPlan>,
    pub data_classes: Vec<DataClass>,
    pub shared_fraction: f64,
    pub regular_fraction: f64,
    pub chase_fraction: f64,
    /// Size of the chase chain's own region (`fit_data`); a one-line chase class shares its line.
    pub chase_bytes: u64,
    pub raw: Vec<f64>,
    pub war: Vec<f64>,
    pub waw: Vec<f64>,
    pub instruction_pages: u64,
    /// Things the generator had to approximate or assume, for the README and the CLI.
    pub warnings: Vec<String>,
    /// The profile had no body for this cluster: everything above is the documented default.
    pub default_body: bool,
}

/// The kind a rep-string instruction of operand `opnd` repeats as: a fill (store) or a copy
/// (anything else, as rmw).
pub fn rep_kind(opnd: Opnd) -> Opnd {
    if opnd == Opnd::Store {
        Opnd::Store
    } else {
        Opnd::Rmw
    }
}

impl BodyPlan {
    /// How a rep-string instruction of operand kind `opnd` repeats (`rep_kind`).
    pub fn rep_modes(&self, opnd: Opnd) -> &RepModes {
        match rep_kind(opnd) {
            Opnd::Store => &self.rep_fills,
            _ => &self.rep_copies,
        }
    }
}

/// A hit curve resampled on sizes 64·2^k, k = 0..=K, after the size-scale knob: H'(s) = H(s / scale).
/// Returns (size, hit rate) pairs; the top size is the smallest power of two at or above the scaled
/// footprint, capped at `cap`.
pub fn grid_curve(curve: &[(u64, f64)], scale: f64, cap: u64) -> Vec<(u64, f64)> {
    let mut pts: Vec<(f64, f64)> = curve
        .iter()
        .filter(|(s, h)| *s > 0 && h.is_finite())
        .map(|&(s, h)| ((s as f64).log2(), h.clamp(0.0, 1.0)))
        .collect();
    pts.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
    // Hit rates of LRU caches never fall as the cache grows; a sampled curve can wobble.
    let mut best = 0.0f64;
    for p in &mut pts {
        best = best.max(p.1);
        p.1 = best;
    }
    let footprint = pts
        .last()
        .map(|p| p.0.exp2() * scale)
        .unwrap_or(LINE as f64);
    let mut top = LINE;
    while (top as f64) < footprint && top < cap {
        top *= 2;
    }
    let mut out = Vec::new();
    let mut s = LINE;
    while s <= top {
        out.push((s, hit_at(&pts, (s as f64).log2() - scale.log2())));
        s *= 2;
    }
    if footprint > top as f64 {
        keep_reuses_at_the_cap(&mut out, &pts);
    }
    out
}

/// A stretch the buffer cap cut short leaves the accesses whose reuse it moved past the cap
/// missing at the curve's last point, where they would read as first touches (`add_cold_class`):
/// a stream of lines never touched again, which misses every cache. They are reuses, so they stay
/// at the cap: the last point keeps the uncut curve's top hit rate, and only the original's own
/// cold share is left beyond it. (memcached's tuning moved `mid_scale` to ×4.4 with the data
/// footprint at the cap; 0.3 % of its worker body's accesses became first touches through a
/// 32 MiB region, 2.5 of the clone's 3.3 LLC misses a request, and `tail_scale` could not bring
/// them back, since shrinking the curve only moved more of them past its new top.)
fn keep_reuses_at_the_cap(out: &mut [(u64, f64)], uncut: &[(f64, f64)]) {
    if let (Some(last), Some(top)) = (out.last_mut(), uncut.last()) {
        last.1 = last.1.max(top.1);
    }
}

/// The hit rate at log2 size `x` of a curve given as (log2 size, hit rate) points in increasing
/// size: linear between points, the end values beyond them, 1 for an empty curve.
fn hit_at(pts: &[(f64, f64)], x: f64) -> f64 {
    let (Some(first), Some(last)) = (pts.first(), pts.last()) else {
        return 1.0;
    };
    if x <= first.0 {
        return first.1;
    }
    for w in pts.windows(2) {
        if x <= w[1].0 {
            let t = (x - w[0].0) / (w[1].0 - w[0].0).max(1e-12);
            return w[0].1 + t * (w[1].1 - w[0].1);
        }
    }
    last.1
}

/// The hit curve `grid` (hit rate at each power-of-two size from 64 B) with its part above `from`
/// stretched along the size axis by `scale`: H'(s) = H(s / scale) for s > from, H'(s) = H(s) up to
/// it, made monotone (a stretch leaves H' flat just above `from`, a shrink steps up there). The
/// accesses that hit within `from` keep their classes; those beyond move out (or in) together, so
/// the caches past `from` see more (or fewer) misses while the smaller ones see the same.
/// `data_working_set.size_scale` moves every class, and with it the L1d miss rate the tuner
/// matches first; this, from the L1d's size (`mid_scale`), moves what the L2 sees, and from the
/// L2's (`tail_scale`) only what the last level sees. The tuner matched memcached's LLC misses per
/// L1 miss with `tail_scale` alone, and its clone then missed the L2 on 7 % of its L1 misses
/// against the original's 22 %, and the LLC on 54 % of its L2 misses against 16 %: the product
/// was right, the split between the levels was not.
pub fn stretch_above(grid: &[(u64, f64)], from: u64, scale: f64, cap: u64) -> Vec<(u64, f64)> {
    let Some(&(top, _)) = grid.last() else {
        return Vec::new();
    };
    if (scale - 1.0).abs() < 1e-12 || top <= from || !(scale.is_finite() && scale > 0.0) {
        return grid.to_vec();
    }
    let pts: Vec<(f64, f64)> = grid.iter().map(|&(s, h)| ((s as f64).log2(), h)).collect();
    let new_top = ((top as f64 * scale).max(from as f64 * 2.0) as u64)
        .next_power_of_two()
        .min(cap.max(LINE));
    let mut out = Vec::new();
    let mut best = 0.0f64;
    let mut s = LINE;
    while s <= new_top {
        let shift = if s <= from { 0.0 } else { scale.log2() };
        let h = hit_at(&pts, (s as f64).log2() - shift);
        best = best.max(h);
        out.push((s, best));
        s *= 2;
    }
    if top as f64 * scale > new_top as f64 {
        keep_reuses_at_the_cap(&mut out, &pts);
    }
    out
}

/// The hit curve `grid` with its misses at `from` and beyond multiplied by `scale`:
/// H'(s) = 1 − scale·(1 − H(s)) for s ≥ from (the curve's last point when it ends below `from`:
/// what misses there are first touches, which miss at `from` too), and below `from` H(s) capped at
/// H'(from), so the curve stays monotone. A cache of `from` bytes then misses `scale` times as
/// often, and each larger one still misses the same share of what the smaller ones miss, since
/// every miss beyond `from` is scaled alike.
///
/// Why a lever besides `data_working_set.size_scale`: a size scale moves accesses across a size
/// only where the curve has mass near it. memcached's timer body reuses its data at 256 KiB–1 MiB,
/// past the L1d whatever the scale, and its clone's L1d miss rate read 0.0318, 0.0332 and 0.0298 at
/// size ×0.61, ×0.46 and ×0.33 (original 0.0239). The tuner does not move it (see its L1d group).
pub fn scale_misses_from(grid: &[(u64, f64)], from: u64, scale: f64) -> Vec<(u64, f64)> {
    scale_misses_with(grid, from, scale, |h, _, cap| h.min(cap))
}

/// The hit curve `grid` with H'(s) = 1 − scale·(1 − H(s)) (within [0, 1]) from the first point at or
/// past `from` (the last point when none is), and `below(H(s), H(from), H'(from))` before it; the
/// curve itself when `scale` is 1 or not a finite non-negative number. The two miss-share levers
/// differ only in where the hits they add or take below `from` come from.
fn scale_misses_with(
    grid: &[(u64, f64)],
    from: u64,
    scale: f64,
    below: impl Fn(f64, f64, f64) -> f64,
) -> Vec<(u64, f64)> {
    if (scale - 1.0).abs() < 1e-12 || !(scale.is_finite() && scale >= 0.0) || grid.is_empty() {
        return grid.to_vec();
    }
    let start = grid
        .iter()
        .position(|&(s, _)| s >= from)
        .unwrap_or(grid.len() - 1);
    let scaled = |h: f64| (1.0 - scale * (1.0 - h)).clamp(0.0, 1.0);
    let (at, scaled_at) = (grid[start].1, scaled(grid[start].1));
    grid.iter()
        .enumerate()
        .map(|(i, &(s, h))| {
            let h2 = if i >= start {
                scaled(h)
            } else {
                below(h, at, scaled_at)
            };
            (s, h2)
        })
        .collect()
}

/// The hit curve `grid` with its misses at `from` and beyond multiplied by `scale`, the difference
/// given to (or taken from) the reuses within a line: H'(s) = 1 − scale·(1 − H(s)) for s ≥ `from`
/// and H'(s) = H(s) + H'(from) − H(from) below it (not below 0). Every class between the first line
/// and `from` keeps its share and each class past `from` is scaled alike, so a cache of `from`
/// bytes misses `scale` times as often and the larger ones keep their share of its misses.
///
/// The instruction side's lever besides `instruction_working_set.size_scale`: where the hit curve
/// is flat around the L1i's size, a stretch moves few fetches across it. Pix baseline's request
/// curve gains 0.6 points from 32 to 64 KiB, and its clone's L1i read 0.0488, 0.0496, 0.0453,
/// 0.0453, 0.0527 and 0.0531 at code size ×0.7, 0.8, 0.9, 1.0, 1.1 and 1.25 (original 0.0409):
/// which blocks' powers of two cross the cache moved it, not the curve
/// (`validation/bench/code-size-sweep.sh`). What the one-line loop gains or gives up hits in every
/// cache.
pub fn scale_misses_past(grid: &[(u64, f64)], from: u64, scale: f64) -> Vec<(u64, f64)> {
    scale_misses_with(grid, from, scale, |h, at, scaled_at| {
        (h + scaled_at - at).clamp(0.0, 1.0)
    })
}

/// Equation 1: the share of data accesses per working-set class. A_d(64) = H(64),
/// A_d(2^i) = H(2^i) − H(2^(i−1)); accesses that miss even at the footprint (1 − H(top)) go to the
/// largest class. Class i ≥ 1 covers [2^(i−1), 2^i) so that, nested with the smaller ones, it is
/// touched as a 2^i-byte working set.
pub fn data_classes(grid: &[(u64, f64)]) -> Vec<DataClass> {
    let mut out = Vec::new();
    let mut prev = 0.0;
    for (i, &(size, h)) in grid.iter().enumerate() {
        let a = (h - prev).max(0.0);
        prev = h.max(prev);
        let (lo, sz) = if i == 0 {
            (0, size)
        } else {
            (size / 2, size / 2)
        };
        out.push(DataClass {
            lo,
            size: sz,
            share: a,
            target: size,
            first_touch: false,
        });
    }
    if let Some(last) = out.last_mut() {
        last.share += (1.0 - prev).max(0.0);
    }
    normalise_classes(&mut out);
    out
}

/// Accesses that miss even in a cache as large as the footprint are first touches (a service's growing
/// data). Left in the largest class they would hit once the clone has touched it, and with the region
/// scale that class fits the last-level cache: the clone would have no LLC misses at all (Pix: 0 against
/// the original's 6 %). They get a class of their own, a stream through the upper half of the largest
/// buffer, which misses in every cache up to that size.
pub fn add_cold_class(classes: &mut Vec<DataClass>, grid: &[(u64, f64)], cap: u64) {
    let Some(&(top, hit)) = grid.last() else {
        return;
    };
    let cold = (1.0 - hit).max(0.0);
    // `limits.max_buffer_bytes` is a power of two (checked with the knobs), so half of it is too.
    let half = cap / 2;
    if cold < 1e-5 || top > half || half < 2 * LINE {
        return;
    }
    let Some(last) = classes.last_mut() else {
        return;
    };
    let moved = cold.min(last.share);
    last.share -= moved;
    classes.push(DataClass {
        lo: half,
        size: half,
        share: moved,
        target: cap,
        first_touch: true,
    });
}

/// The first-touch class's share multiplied by `scale` (`data_working_set.first_touch_scale`).
/// Below 1 the difference goes to the reuse class just past `tail_from` (the one whose target is
/// twice it, else the largest reuse class): accesses the second level still misses and the last
/// holds. Above 1 it comes from the same reuses past `tail_from`, nearest first, so that the second
/// level keeps its misses, and what they do not hold from the smallest class, whose accesses hit
/// every level. Nothing changes without a first-touch class.
///
/// Why: the first-touch stream is what a profile window saw touched once, and the last level misses
/// it all (a stream through half the buffer). Pix's bodies reuse almost nothing past 1 MiB within
/// the window (its optimized worker: 0.004 % of accesses between 1 and 2 MiB, 0.027 % first touches),
/// so the stream made most of the clone's L2 misses and its LLC missed 0.56 of them against the
/// original's 0.42, whose "first touches" over a longer run are partly reuses the LLC holds. The
/// tail's stretch moved nothing there (the LLC read 0.27 and then 0.22 as it went ×0.87 → ×1.37).
/// Taken from the smallest class alone, a scale above 1 added L2 misses with every LLC miss: Pix
/// optimized's L2 read 0.0038 and 0.0046 (original 0.0033) as it went ×1.62 → ×2.25 and the LLC
/// 0.31 → 0.47 (0.43), and the second-level group pulled the tail share the other way.
pub fn scale_first_touch(classes: &mut [DataClass], scale: f64, tail_from: u64) {
    if let Some(cold) = classes.iter().position(|c| c.first_touch) {
        scale_class_share(classes, cold, scale, tail_from);
    }
}

/// The share of the largest reuse class whose target is past twice `tail_from` multiplied by
/// `scale` (`data_working_set.top_share_scale`), the difference given to or taken from the same
/// classes as [`scale_first_touch`]'s. Nothing changes where no reuse class reaches past twice
/// `tail_from` (the class the difference would go to is the top class itself).
///
/// Why: where a body has no first-touch stream, its last-level misses are its largest reuses', and
/// a cache of the LLC's size holds or misses them by their region's size: a cliff. memcached's
/// clone read an LLC miss rate (of its L2 misses) of 0.30–0.38 with the tail at ×0.437 and 0.0002
/// at ×0.22–0.245 (original 0.18), the L2 unmoved; 2.9 of its 3.9 LLC misses a request were the
/// accesses of its 32 MiB class's regions, 1.0 the 16 MiB class's
/// (`validation/bench/miss-attribution.sh`). Their share moves those misses without a cliff: the
/// clone's LLC read 0.318, 0.259, 0.268 and 0.177 at ×1, ×0.6, ×0.35 and ×0.2 (about 0.5 in the odds;
/// docs/validation.md, "the top share as the LLC's lever").
pub fn scale_top_class(classes: &mut [DataClass], scale: f64, tail_from: u64) {
    let top = (0..classes.len())
        .filter(|&i| reuses_past_twice_the_tail(&classes[i], tail_from))
        .max_by_key(|&i| classes[i].target);
    if let Some(top) = top {
        scale_class_share(classes, top, scale, tail_from);
    }
}

/// Whether `class` reuses its data past twice `tail_from`: the classes [`scale_top_class`] takes
/// the largest of.
pub fn reuses_past_twice_the_tail(class: &DataClass, tail_from: u64) -> bool {
    !class.first_touch && class.target > tail_from.saturating_mul(2)
}

/// Class `at`'s share multiplied by `scale`. Below 1 the difference goes to the reuse class just
/// past `tail_from` (target twice it, else the largest reuse class other than `at`); above 1 it comes
/// from the reuse classes past `tail_from` other than `at`, nearest first, then from the smallest
/// class.
fn scale_class_share(classes: &mut [DataClass], at: usize, scale: f64, tail_from: u64) {
    if (scale - 1.0).abs() < 1e-12 || !(scale.is_finite() && scale >= 0.0) {
        return;
    }
    let share = classes[at].share;
    let reuse = |i: usize| i != at && !classes[i].first_touch;
    if scale < 1.0 {
        let to = (0..classes.len())
            .find(|&i| reuse(i) && classes[i].target == 2 * tail_from)
            .or_else(|| (0..classes.len()).rev().find(|&i| reuse(i)));
        let Some(to) = to else {
            return;
        };
        let moved = share * (1.0 - scale);
        classes[at].share -= moved;
        classes[to].share += moved;
    } else {
        // First from the reuses past `tail_from`, nearest first (the inverse of a scale below 1:
        // the L2 keeps its misses), then from the smallest class.
        let mut owed = share * (scale - 1.0);
        let mut donors: Vec<usize> = (0..classes.len())
            .filter(|&i| reuse(i) && classes[i].target > tail_from)
            .collect();
        donors.sort_by_key(|&i| classes[i].target);
        donors.extend((0..classes.len()).find(|&i| reuse(i)));
        for i in donors {
            let moved = owed.min(classes[i].share);
            classes[i].share -= moved;
            classes[at].share += moved;
            owed -= moved;
            if owed <= 0.0 {
                break;
            }
        }
    }
}

fn normalise_classes(v: &mut [DataClass]) {
    let sum: f64 = v.iter().map(|c| c.share).sum();
    if sum > 0.0 {
        for c in v.iter_mut() {
            c.share /= sum;
        }
    } else if let Some(first) = v.first_mut() {
        first.share = 1.0;
    }
}

/// Equation 2 with the measured mean instruction length L: a block of 2^j bytes executes
/// E(2^j) = (64 / L) · [H(2^j) − H(2^(j−1))] of the dynamic instructions (only the first instruction of
/// each 64-byte line misses in smaller caches; the other 64/L − 1 hit even in a one-line cache). Fetches
/// that miss at the footprint go to the largest block. The 64-byte block gets what is left. Returns
/// the blocks and a warning when the curve asks for more than all instructions (then shares are scaled).
pub fn instruction_blocks(grid: &[(u64, f64)], mean_len: f64) -> (Vec<BlockPlan>, Option<String>) {
    let per_line = LINE as f64 / mean_len;
    let mut blocks: Vec<BlockPlan> = Vec::new();
    let mut prev = grid.first().map(|g| g.1).unwrap_or(1.0);
    for &(size, h) in grid.iter().skip(1) {
        let d = (h - prev).max(0.0);
        prev = h.max(prev);
        blocks.push(BlockPlan {
            bytes: size,
            share: per_line * d,
            target: size,
        });
    }
    let miss = (1.0 - prev).max(0.0);
    // (No blocks: a one-line footprint, everything is the 64-byte block.)
    if let Some(b) = blocks.last_mut() {
        b.share += per_line * miss;
    }
    let upper: f64 = blocks.iter().map(|b| b.share).sum();
    let mut warning = None;
    if upper > 1.0 {
        warning = Some(format!(
            "the instruction hit curve needs {:.0}% of instructions outside the 64-byte block \
             (64/L = {per_line:.1} instructions per line); shares were scaled to fit",
            upper * 100.0
        ));
        for b in &mut blocks {
            b.share /= upper;
        }
    }
    let rest = (1.0 - blocks.iter().map(|b| b.share).sum::<f64>()).max(0.0);
    let mut all = vec![BlockPlan {
        bytes: LINE,
        share: rest,
        target: LINE,
    }];
    all.extend(blocks.into_iter().filter(|b| b.share > 0.0));
    all.retain(|b| b.share > 0.0);
    (all, warning)
}

/// Curve points as (size, hit rate).
fn points(c: &HitCurve) -> Vec<(u64, f64)> {
    c.points.iter().map(|p| (p.size, p.hit_rate)).collect()
}

/// An 11-bin distribution, or `default` when the profile left it empty or all zero.
fn bins_or(v: &[f64], default: &[f64; BINS]) -> Vec<f64> {
    let clean: Vec<f64> = v
        .iter()
        .map(|x| if x.is_finite() && *x > 0.0 { *x } else { 0.0 })
        .collect();
    if clean.len() == BINS && clean.iter().sum::<f64>() > 0.0 {
        clean
    } else {
        default.to_vec()
    }
}

// Defaults for a cluster without a body profile: typical of compiled server code (mostly predictable
// branches, short dependency chains, an L1-resident working set with a tail).
const DEFAULT_TAKEN: [f64; BINS] = [
    0.20, 0.15, 0.12, 0.10, 0.08, 0.07, 0.06, 0.05, 0.04, 0.03, 0.10,
];
const DEFAULT_TRANSITION: [f64; BINS] = [
    0.10, 0.12, 0.12, 0.11, 0.10, 0.09, 0.08, 0.07, 0.06, 0.05, 0.10,
];
const DEFAULT_RAW: [f64; BINS] = [
    0.25, 0.15, 0.15, 0.13, 0.10, 0.07, 0.05, 0.04, 0.02, 0.02, 0.02,
];
const DEFAULT_WAR: [f64; BINS] = [
    0.05, 0.08, 0.12, 0.15, 0.15, 0.13, 0.10, 0.08, 0.06, 0.04, 0.04,
];
const DEFAULT_WAW: [f64; BINS] = [
    0.04, 0.06, 0.10, 0.14, 0.16, 0.14, 0.11, 0.09, 0.07, 0.05, 0.04,
];
const DEFAULT_MIX: [(Class, Opnd, f64); 12] = [
    (Class::Mov, Opnd::Reg, 0.10),
    (Class::Mov, Opnd::Load, 0.20),
    (Class::Mov, Opnd::Store, 0.10),
    (Class::Alu, Opnd::Reg, 0.28),
    (Class::Alu, Opnd::Load, 0.05),
    (Class::Alu, Opnd::Rmw, 0.02),
    (Class::Branch, Opnd::Reg, 0.17),
    (Class::Mul, Opnd::Reg, 0.01),
    (Class::Other, Opnd::Reg, 0.03),
    (Class::Nop, Opnd::Reg, 0.01),
    (Class::Simd128, Opnd::Load, 0.02),
    (Class::Simd128, Opnd::Reg, 0.01),
];
const DEFAULT_ICURVE: [(u64, f64); 8] = [
    (64, 0.90),
    (128, 0.93),
    (256, 0.95),
    (512, 0.965),
    (1024, 0.975),
    (2048, 0.985),
    (4096, 0.993),
    (8192, 1.0),
];
const DEFAULT_DCURVE: [(u64, f64); 10] = [
    (64, 0.55),
    (128, 0.62),
    (256, 0.70),
    (512, 0.78),
    (1024, 0.84),
    (2048, 0.89),
    (4096, 0.93),
    (8192, 0.96),
    (16384, 0.98),
    (32768, 1.0),
];

/// The share of the mix's instructions with a memory operand.
pub fn memory_share(mix: &[((Class, Opnd), f64)]) -> f64 {
    mix.iter()
        .filter(|m| m.0 .1.touches_memory())
        .map(|m| m.1)
        .sum()
}

/// The share of data accesses that chase pointers, for the region fit: the chase replaces plain
/// 64-bit loads, and its deficit runs over loads and read-modify-writes (synth.rs), so it is the
/// chase fraction of those, bounded by the plain loads there are.
fn chase_access_share(mix: &[((Class, Opnd), f64)], chase_fraction: f64) -> f64 {
    let mem = memory_share(mix);
    if mem <= 0.0 {
        return 0.0;
    }
    let loads: f64 = mix
        .iter()
        .filter(|m| matches!(m.0 .1, Opnd::Load | Opnd::Rmw))
        .map(|m| m.1)
        .sum();
    let movs: f64 = mix
        .iter()
        .filter(|m| m.0 == (Class::Mov, Opnd::Load))
        .map(|m| m.1)
        .sum();
    (chase_fraction * loads).min(movs) / mem
}

/// The class the pointer chase goes through: the one with the largest share. The chase's accesses
/// are accounted to it, so it must be a class that can absorb them (memcached: 35% of loads chase,
/// mostly through hot structures; forced onto a big region they would push the whole curve down).
pub fn chase_class(classes: &[DataClass]) -> usize {
    (0..classes.len())
        .rev()
        .max_by(|&a, &b| classes[a].share.total_cmp(&classes[b].share))
        .unwrap_or(0)
}

/// Bounds the floor's doubling in `fit_blocks` (a block's lines per call never reach it in practice).
const MAX_FLOOR_LINES: f64 = (1u64 << 40) as f64;

/// One access stream of the reuse-distance model: `share` of the accesses sweep `lines` lines in
/// order, or (`first_touch`) touch a new line every time. `call`: the stream belongs to one call of a
/// body in one thread (the process-wide fit, `fit_data`); streams without it are interleaved evenly
/// with everything else.
#[derive(Debug, Clone, Copy)]
struct Stream {
    first_touch: bool,
    share: f64,
    lines: f64,
    call: Option<CallScope>,
}

impl Stream {
    fn new(first_touch: bool, share: f64, lines: f64) -> Stream {
        Stream {
            first_touch,
            share,
            lines,
            call: None,
        }
    }

    /// Distinct lines this stream touches in `accesses` of its own: new ones every time for a
    /// first-touch stream, at most its lines otherwise.
    fn lines_touched(&self, accesses: f64) -> f64 {
        if self.first_touch {
            accesses
        } else {
            self.lines.min(accesses)
        }
    }
}

/// Where a stream runs: a call of cluster `cluster`'s body, in thread `copy` (`None`: the cluster's
/// shared buffer, touched by all its threads), with `per_call` accesses per call.
#[derive(Debug, Clone, Copy, PartialEq)]
struct CallScope {
    cluster: usize,
    copy: Option<u32>,
    per_call: f64,
}

impl CallScope {
    /// Whether `other` runs in the same call as `self` (one thread's call sees its own private
    /// streams and its cluster's shared ones).
    fn same_call(&self, other: &CallScope) -> bool {
        self.cluster == other.cluster
            && match (self.copy, other.copy) {
                (Some(a), Some(b)) => a == b,
                (None, Some(b)) => b == 0,
                (_, None) => true,
            }
    }
}

/// The LRU reuse distance, in lines, of stream `own`'s lines: a line comes back after R / a accesses
/// (R its lines, a its share), and in between every other stream j touches min(R_j, a_j · R / a)
/// distinct lines, a first-touch stream a_j · R / a new ones. An access hits in a cache of C lines
/// exactly when this is at most C.
///
/// A stream whose lines come back within one call of its body (R at most its accesses per call) is
/// only interleaved with the streams of that call: the process's other threads do not run in
/// between (a time-shared core, and cachegrind, run a call's thread until it blocks).
fn reuse_distance(streams: &[Stream], own: usize) -> f64 {
    let Some(me) = streams.get(own) else {
        return 0.0;
    };
    if let Some(scope) = me.call {
        if scope.per_call > 0.0 && me.lines <= scope.per_call {
            let calls = me.lines / scope.per_call;
            return streams
                .iter()
                .filter_map(|s| {
                    let c = s.call?;
                    scope
                        .same_call(&c)
                        .then(|| s.lines_touched(c.per_call * calls))
                })
                .sum();
        }
    }
    if me.share <= 0.0 {
        return 0.0;
    }
    let t = me.lines / me.share;
    streams.iter().map(|s| s.lines_touched(s.share * t)).sum()
}

/// The largest power of two R in [floor, target] for the lines of the streams `members` (sized
/// together: one region's copies) whose reuse distance stays within `target` for all of them (2 %
/// slack: a line or two of the 64-byte class does not push a stream that fills its cache out of it
/// in the profiler's curve either); `floor` when none does. `smallest`: instead the smallest one that
/// also misses at half the target, when there is one.
fn fit_stream(
    streams: &[Stream],
    members: &[usize],
    floor: f64,
    target: f64,
    smallest: bool,
) -> f64 {
    let mut best = floor;
    let mut r = floor;
    let mut trial = streams.to_vec();
    while r <= target {
        for &i in members {
            trial[i].lines = r;
        }
        let d = members
            .iter()
            .filter(|&&i| trial[i].share > 0.0)
            .map(|&i| reuse_distance(&trial, i))
            .fold(0.0f64, f64::max);
        if d <= 1.02 * target {
            best = r;
            // The same slack below: a chain of S/2 lines plus a line of another class still hits
            // at S/2 in the profiler's curve.
            if smallest && d > 1.02 * target / 2.0 {
                return r;
            }
        }
        r *= 2.0;
    }
    best
}

/// How `settle` may size a group of streams: powers of two from `floor` to `target` lines
/// (`fit_stream`), the same for every member.
#[derive(Debug, Clone)]
struct Fit {
    members: Vec<usize>,
    floor: f64,
    target: f64,
    smallest: bool,
}

impl Fit {
    fn one(stream: usize, floor: f64, target: f64, smallest: bool) -> Fit {
        Fit {
            members: vec![stream],
            floor,
            target,
            smallest,
        }
    }
}

/// Fits every group in turn, a few rounds of fixed-point iteration: each stream's reuse distance
/// grows with every other stream's lines, so one pass is not enough.
fn settle(streams: &mut [Stream], fits: &[Fit]) {
    for _round in 0..8 {
        let mut changed = false;
        for f in fits {
            let r = fit_stream(streams, &f.members, f.floor, f.target, f.smallest);
            for &k in &f.members {
                changed |= r != streams[k].lines;
                streams[k].lines = r;
            }
        }
        if !changed {
            break;
        }
    }
}

/// One body's data side in the reuse-distance model.
struct DataUser<'a> {
    classes: &'a mut [DataClass],
    /// The chase chain's class and its share of the body's accesses.
    chase: Option<(usize, f64)>,
    /// Written: the chain's size.
    chase_bytes: &'a mut u64,
    accesses_per_call: f64,
    calls_per_request: f64,
    threads: u32,
    /// Share of accesses to the cluster's shared buffer; the rest go to each thread's private copy.
    shared_fraction: f64,
}

/// Region sizes from a model of the clone's own access stream (replacing a fixed region scale), the
/// model behind `fit_data`.
///
/// Each class sweeps its region of R lines (windows touch each line once per sweep; the chain visits
/// each node once per cycle), and `reuse_distance` gives the LRU distance of its lines among the
/// other streams. Equation 1 wants class k to hit at its working set S_k and not at S_k / 2, so each
/// region gets the largest power of two 2 ≤ R_k ≤ S_k with D_k ≤ S_k, solved by a few rounds of
/// fixed-point iteration (D_k grows with every R). With one dominant class D ≈ R and R = S; with many
/// interleaved classes R shrinks, which is what a fixed 0.35 region scale used to approximate for
/// memcached. The first-touch class (`DataClass::first_touch`) is not fitted.
///
/// The chase chain (`chase` = its class and its share of accesses) is a stream of its own, sized the
/// same way within its class's target: a chain carrying most accesses spans the whole working set
/// (64 KiB for a 64 KiB linked list), a chain carrying 0.2 % of them needs only a few lines to miss
/// where its class misses, and its one-time set-up stays small. Writes each chain's size.
///
/// With several bodies and threads, every class of every body is a stream per thread (its private
/// copy) plus one for the cluster's shared buffer, all of one class sized together; the chain is a
/// stream per thread; `fixed` (accesses per request, lines) are measured streams.
fn fit_data_users(users: &mut [DataUser<'_>], fixed: &[(f64, f64)], cap: u64) {
    let mut streams: Vec<Stream> = Vec::new();
    let mut fits: Vec<Fit> = Vec::new();
    // Per user: the stream group of each class, then the chain's.
    let mut groups: Vec<(Vec<Vec<usize>>, Vec<usize>)> = Vec::new();
    for (ci, u) in users.iter().enumerate() {
        let n = u.classes.len();
        let threads = u.threads.max(1);
        let calls = if u.calls_per_request.is_finite() && u.calls_per_request > 0.0 {
            u.calls_per_request
        } else {
            1.0
        };
        let per_call = if u.accesses_per_call.is_finite() {
            u.accesses_per_call.max(0.0)
        } else {
            0.0
        };
        let shared = if u.shared_fraction.is_finite() {
            u.shared_fraction.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let (chase_k, chase_x) = match u.chase {
            Some((k, x)) if k < n => (k, x.clamp(0.0, u.classes[k].share)),
            _ => (0, 0.0),
        };
        // `share` of a call's accesses; a thread's private copy gets 1/threads of the process's
        // (one thread's call makes all of them), the shared buffer all of them.
        let push =
            |streams: &mut Vec<Stream>, ft: bool, share: f64, lines: f64, copy: Option<u32>| {
                let copies = if copy.is_some() { threads as f64 } else { 1.0 };
                streams.push(Stream {
                    first_touch: ft,
                    share: share * per_call * calls / copies,
                    lines,
                    call: Some(CallScope {
                        cluster: ci,
                        copy,
                        per_call: share * per_call,
                    }),
                });
                streams.len() - 1
            };
        let mut class_groups = Vec::new();
        for (k, c) in u.classes.iter().enumerate() {
            let a = (c.share - if k == chase_k { chase_x } else { 0.0 }).max(0.0);
            let lines = (c.size / LINE).max(1) as f64;
            let mut members: Vec<usize> = (0..threads)
                .map(|t| {
                    push(
                        &mut streams,
                        c.first_touch,
                        a * (1.0 - shared),
                        lines,
                        Some(t),
                    )
                })
                .collect();
            members.push(push(&mut streams, c.first_touch, a * shared, lines, None));
            let target = (c.working_set() / LINE) as f64;
            // The 64-byte class and the first-touch stream keep their size. The others get at
            // least two lines: a one-line region is a fixed address, whose accesses the synthesis
            // runs back to back (they hit in a 64-byte cache, the smallest class's job).
            if k > 0 && !c.first_touch {
                fits.push(Fit {
                    members: members.clone(),
                    floor: 2.0f64.min(target),
                    target,
                    smallest: false,
                });
            }
            class_groups.push(members);
        }
        let chain_lines = (*u.chase_bytes / LINE).max(1) as f64;
        let chain: Vec<usize> = (0..threads)
            .map(|t| push(&mut streams, false, chase_x, chain_lines, Some(t)))
            .collect();
        let chase_target = u
            .classes
            .get(chase_k)
            .map(|c| (c.working_set() / LINE) as f64)
            .unwrap_or(1.0);
        if n > 0 && chase_x > 0.0 && chase_target > 1.0 {
            fits.push(Fit {
                members: chain.clone(),
                floor: 1.0,
                target: chase_target,
                smallest: true,
            });
        }
        groups.push((class_groups, chain));
    }
    streams.extend(
        fixed
            .iter()
            .map(|&(share, lines)| Stream::new(false, share, lines)),
    );
    settle(&mut streams, &fits);
    // Lay each body's regions out one after the other, below the first-touch stream where there is
    // one: it takes the upper half of the buffer (`add_cold_class`), and a body without one has the
    // whole buffer. A class without accesses gets one line: fitted, its stream's reuse distance is
    // nothing, so it took its whole working set. memcached's timer body has no accesses in its 2-32
    // MiB classes, which took 31 MiB below its 64 MiB class (0.2 % of its accesses) and left that
    // one half a MiB under the half-buffer limit. Held to the lower half regardless, the ground-truth
    // program `stride` (78.6 % of its accesses reused at 32-64 MiB, no first touches) had its largest
    // region halved to 16 MiB to leave room for the smaller ones, and its clone hit a 16 MiB cache on
    // 97 % of its accesses against 12 %.
    for (u, (class_groups, chain)) in users.iter_mut().zip(&groups) {
        let limit = if u.classes.iter().any(|c| c.first_touch) {
            cap / 2
        } else {
            cap
        };
        let mut lo = 0u64;
        for (class, members) in u.classes.iter_mut().zip(class_groups) {
            if class.first_touch {
                continue;
            }
            let lines = if class.share > 0.0 {
                members.first().map(|&m| streams[m].lines).unwrap_or(1.0)
            } else {
                1.0
            };
            let mut size = (lines as u64).max(1) * LINE;
            while lo + size > limit && size > LINE && limit > 0 {
                size /= 2;
            }
            class.lo = lo;
            class.size = size;
            lo += size;
        }
        let lines = chain.first().map(|&m| streams[m].lines).unwrap_or(1.0);
        *u.chase_bytes = ((lines as u64).max(1) * LINE).min(limit.max(LINE));
    }
}

/// Region sizes for all bodies of a process together, the data-side twin of `fit_blocks`.
///
/// Each cluster's data curve is its own accesses in the cache its process's threads share (one
/// cache simulated for all of them), so a line's reuse distance counts the other threads' lines:
/// fitted alone, each body's regions fill its whole curve, a request worker's private regions
/// exist once per thread, and the skeleton's accesses come on top. On
/// memcached's clone (four workers, a timer) cachegrind measured 13 % of the worker body's loads
/// missing a 32 KiB L1d, 8 % with one worker thread, against 3.4 % on the profile's curve. Here every
/// class of every body is a stream per thread plus one for its cluster's shared buffer, the chain a
/// stream per thread, and the skeleton's data (`fixed`, from `curve_streams` on its data curve) a
/// stream per curve step; each class keeps its working set as its target.
///
/// A line that comes back within one call sees only that call's streams (`reuse_distance`), so the
/// small classes keep their sizes; the large ones, whose lines come back across calls, shrink by
/// the other threads' and bodies' lines. `plans` pairs each body with its calls per request and its
/// threads.
pub fn fit_data(plans: &mut [(&mut BodyPlan, f64, u32)], fixed: &[(f64, f64)], cap: u64) {
    let mut users: Vec<DataUser<'_>> = Vec::new();
    for (p, calls, threads) in plans.iter_mut() {
        let mem = memory_share(&p.mix);
        let chase_share = chase_access_share(&p.mix, p.chase_fraction);
        // The synthesis chases only while the chain's class has room (synth.rs).
        let chase = (chase_share > 0.0).then(|| {
            let k = chase_class(&p.data_classes);
            (k, chase_share.min(p.data_classes[k].share))
        });
        let plan: &mut BodyPlan = p;
        users.push(DataUser {
            chase,
            accesses_per_call: plan.instructions * mem,
            calls_per_request: *calls,
            threads: *threads,
            shared_fraction: plan.shared_fraction,
            classes: &mut plan.data_classes,
            chase_bytes: &mut plan.chase_bytes,
        });
    }
    fit_data_users(&mut users, fixed, cap);
}

/// The runtime skeleton's code (or data) as streams of the reuse-distance model: its own hit curve
/// cut by equation 2 (or 1) into (line fetches or accesses per call, lines) pairs, one per curve step,
/// with `instructions` its fetches or accesses per call. The skeleton runs beside the body in every
/// request worker, so it shares the caches with the bodies.
pub fn curve_streams(curve: &HitCurve, instructions: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    if !(instructions.is_finite() && instructions > 0.0) {
        return out;
    }
    let grid = grid_curve(&points(curve), 1.0, 1 << 30);
    let mut prev = 0.0f64;
    for &(size, h) in &grid {
        let d = (h - prev).max(0.0);
        prev = prev.max(h);
        if d > 0.0 {
            out.push((d * instructions, (size / LINE).max(1) as f64));
        }
    }
    if let Some(last) = out.last_mut() {
        last.0 += (1.0 - prev).max(0.0) * instructions;
    }
    out
}

/// Block sizes from the same reuse-distance model as `fit_data`, on the instruction side.
///
/// A block of equation 2 is swept chunk by chunk across calls (or looped within one), so between two
/// fetches of one of its lines the process's other code runs too: the other blocks, the other
/// clusters' bodies and the skeleton (`fixed`, from `curve_streams`, in line fetches per request).
/// Sized at its target 2^j, the blocks of one body add up to about twice the footprint, and the lines
/// of the largest blocks come back after more distinct code than the target: memcached's clone missed
/// 2.1 % of its fetches in a 32 KiB cache where the original missed 0.13 %, 30 times its L1i miss
/// rate. Each block gets the largest power of two of lines whose reuse distance stays within its
/// target; a request worker's block keeps at least the lines it fetches per call, so that it is still
/// swept rather than looped and its count of far fetches is unchanged. `plans` pairs each body with
/// its calls per request; a block's line fetches per request are its share × instructions per call ×
/// calls / (64 / mean instruction length).
pub fn fit_blocks(plans: &mut [(&mut BodyPlan, f64)], fixed: &[(f64, f64)]) {
    let mut streams: Vec<Stream> = Vec::new();
    let mut fits: Vec<Fit> = Vec::new();
    for (p, calls) in plans.iter() {
        let per_line = LINE as f64 / p.mean_instruction_bytes.max(1.0);
        let calls = if calls.is_finite() && *calls > 0.0 {
            *calls
        } else {
            1.0
        };
        for b in &p.blocks {
            let per_call = b.share * p.instructions / per_line;
            streams.push(Stream::new(
                false,
                per_call * calls,
                (b.bytes / LINE).max(1) as f64,
            ));
            // A block that fetches at least as many lines per call as it has loops within the call:
            // all but its first pass come back after its own lines only, and hit in caches far below
            // its target. So a request worker's block is made no smaller than its line fetches per
            // call, and one that loops even at its target keeps equation 2's size. Background
            // clusters (below one call per request) get no floor: they run in bursts, and a timer
            // thread given blocks for the process's whole curve (memcached's, when profiles gave
            // every cluster that curve: 28 KiB of code for 20 % of the instructions, every ten
            // requests) evicted the workers' code and missed 1.4 % of all fetches in a 32 KiB L1i,
            // against the original's 0.09 %.
            let mut floor = 1.0f64;
            while calls >= 1.0 && floor < per_call && floor < MAX_FLOOR_LINES {
                floor *= 2.0;
            }
            let target = (b.target / LINE).max(1) as f64;
            if floor < target {
                fits.push(Fit::one(streams.len() - 1, floor, target, false));
            }
        }
    }
    // The skeleton's streams are measured, not sized: no `Fit`.
    streams.extend(
        fixed
            .iter()
            .map(|&(share, lines)| Stream::new(false, share, lines)),
    );
    settle(&mut streams, &fits);
    let mut k = 0;
    for (p, _) in plans.iter_mut() {
        for b in &mut p.blocks {
            b.bytes = (streams[k].lines as u64).max(1) * LINE;
            k += 1;
        }
    }
}

/// How the plan is built: the cluster's profile (or none) and the per-call instruction target.
pub struct PlanInput<'a> {
    pub body: Option<&'a ClusterBody>,
    /// Body calls per request for this cluster (1 for request workers; wakeups per request for
    /// background threads), so that instructions per call = per request / calls.
    pub calls_per_request: f64,
    pub cluster: &'a str,
    /// Instructions per request the runtime skeleton already executes in this cluster (subtracted).
    pub skeleton_instructions: f64,
    /// A background cluster (timer, housekeeping): `instructions.background_scale` applies too.
    pub background: bool,
}

pub fn plan(input: &PlanInput<'_>, knobs: &Knobs) -> BodyPlan {
    let mut warnings = Vec::new();
    let cluster = input.cluster;
    let calls = if input.calls_per_request.is_finite() && input.calls_per_request > 0.0 {
        input.calls_per_request
    } else {
        1.0
    };
    let (per_request, mean_len, icurve, dcurve, default_body) = match input.body {
        Some(b) => (
            b.instructions_per_request,
            b.mean_instruction_bytes,
            points(&b.instruction_working_set),
            points(&b.data_working_set),
            false,
        ),
        None => (
            knobs.instructions.default_per_request,
            4.0,
            DEFAULT_ICURVE.to_vec(),
            DEFAULT_DCURVE.to_vec(),
            true,
        ),
    };
    let mean_len = if mean_len.is_finite() && (1.0..=15.0).contains(&mean_len) {
        mean_len
    } else {
        warnings.push(format!(
            "{cluster}: mean instruction length {mean_len} is not in 1..=15 bytes; assumed 4"
        ));
        4.0
    };
    let per_request = if per_request.is_finite() && per_request > 0.0 {
        per_request
    } else {
        warnings.push(format!(
            "{cluster}: instructions per request {per_request} is not positive; using {}",
            knobs.instructions.default_per_request
        ));
        knobs.instructions.default_per_request
    };
    let scale = knobs.instructions.per_request_scale
        * if input.background {
            knobs.instructions.background_scale
        } else {
            1.0
        };
    let mut instructions = (per_request * scale - input.skeleton_instructions) / calls;
    const MIN_BODY: f64 = 64.0;
    let profiled_instructions = ((per_request - input.skeleton_instructions) / calls).max(MIN_BODY);
    if instructions < MIN_BODY {
        warnings.push(format!(
            "{cluster}: {instructions:.0} instructions per call after the skeleton is subtracted; \
             the body executes the minimum of {MIN_BODY}"
        ));
        instructions = MIN_BODY;
    }

    // Instruction mix, folded onto realisable (class, operand) pairs.
    let mut mix: Vec<((Class, Opnd), f64)> = Vec::new();
    let mut add = |pair: (Class, Opnd), share: f64| match mix.iter_mut().find(|m| m.0 == pair) {
        Some(m) => m.1 += share,
        None => mix.push((pair, share)),
    };
    match input.body {
        Some(b) if !b.instruction_mix.is_empty() => {
            let mut unknown: Vec<String> = Vec::new();
            for m in &b.instruction_mix {
                if !(m.share.is_finite() && m.share >= 0.0) {
                    warnings.push(format!(
                        "{cluster}: mix share {} of {}/{} ignored",
                        m.share, m.class, m.operand
                    ));
                    continue;
                }
                let class = Class::parse(&m.class).unwrap_or_else(|| {
                    unknown.push(format!("class `{}`", m.class));
                    Class::Other
                });
                let opnd = Opnd::parse(&m.operand).unwrap_or_else(|| {
                    unknown.push(format!("operand `{}`", m.operand));
                    Opnd::Reg
                });
                add(fold(class, opnd), m.share);
            }
            unknown.sort();
            unknown.dedup();
            if !unknown.is_empty() {
                warnings.push(format!(
                    "{cluster}: unknown {} treated as `other`/`reg`",
                    unknown.join(", ")
                ));
            }
        }
        Some(_) => {
            warnings.push(format!(
                "{cluster}: the profile's instruction mix is empty; a default mix is used"
            ));
            for (c, o, s) in DEFAULT_MIX {
                add((c, o), s);
            }
        }
        None => {
            for (c, o, s) in DEFAULT_MIX {
                add((c, o), s);
            }
        }
    }
    let total: f64 = mix.iter().map(|m| m.1).sum();
    if total <= 0.0 {
        warnings.push(format!(
            "{cluster}: instruction mix sums to 0; default mix used"
        ));
        mix = DEFAULT_MIX.iter().map(|(c, o, s)| ((*c, *o), *s)).collect();
    } else {
        if (total - 1.0).abs() > 0.01 {
            warnings.push(format!(
                "{cluster}: instruction mix shares sum to {total:.3}, not 1; normalised"
            ));
        }
        for m in &mut mix {
            m.1 /= total;
        }
    }
    mix.sort_by_key(|a| a.0);
    let call_ratio = input.body.map_or(0.0, call_ratio);

    let rep_bins = |h: Option<&ditto_profile::Histogram>| {
        h.map(|h| {
            h.bins
                .iter()
                .filter(|b| b.count > 0)
                .map(|b| (b.lo.max(1), b.hi.max(b.lo.max(1) + 1), b.count as f64))
                .collect::<Vec<_>>()
        })
        .filter(|v| !v.is_empty())
    };
    let all_reps = rep_bins(input.body.and_then(|b| b.rep_counts.as_ref()))
        .unwrap_or_else(|| vec![(8, 64, 1.0)]);
    let rep_modes_of = |operand: &str| {
        let own = input
            .body
            .and_then(|b| b.rep_counts_by_operand.as_ref())
            .and_then(|m| rep_bins(m.get(operand)));
        RepModes::of(own.as_deref().unwrap_or(&all_reps))
    };
    let rep_fills = rep_modes_of("store");
    let rep_copies = rep_modes_of("rmw");

    let (cond_branch_ratio, taken, transition, raw, war, waw) = match input.body {
        Some(b) => (
            if b.instructions_per_request > 0.0 {
                (b.branches.per_request / b.instructions_per_request).clamp(0.0, 0.5)
            } else {
                0.0
            },
            bins_or(&b.branches.taken_rate, &DEFAULT_TAKEN),
            bins_or(&b.branches.transition_rate, &DEFAULT_TRANSITION),
            bins_or(&b.dependencies.raw, &DEFAULT_RAW),
            bins_or(&b.dependencies.war, &DEFAULT_WAR),
            bins_or(&b.dependencies.waw, &DEFAULT_WAW),
        ),
        None => (
            0.12,
            DEFAULT_TAKEN.to_vec(),
            DEFAULT_TRANSITION.to_vec(),
            DEFAULT_RAW.to_vec(),
            DEFAULT_WAR.to_vec(),
            DEFAULT_WAW.to_vec(),
        ),
    };
    // Rates × s move log2 bins by −log2 s (bin i holds rates near 2^−(i+1)); distances × s by +log2 s.
    let b = &knobs.branches;
    let taken_shift = -b.taken_rate_scale.log2();
    let (taken, unshifted_taken) = (shift_bins(&taken, taken_shift), taken);
    // The majority shares move with their bins: shift the majority-taken weight the same way and
    // divide by the shifted bins.
    let majority_taken_bins = input
        .body
        .and_then(|body| body.branches.majority_taken.as_ref())
        .filter(|m| m.len() == unshifted_taken.len())
        .map(|m| {
            let weights: Vec<f64> = unshifted_taken
                .iter()
                .zip(m)
                .map(|(w, q)| w * q.clamp(0.0, 1.0))
                .collect();
            shift_bins(&weights, taken_shift)
                .iter()
                .zip(&taken)
                .map(|(m, a)| {
                    if *a > 0.0 {
                        (m / a).clamp(0.0, 1.0)
                    } else {
                        0.0
                    }
                })
                .collect()
        });
    let (transition, profiled_transition_bins) = (
        shift_bins(&transition, -b.transition_rate_scale.log2()),
        transition,
    );
    let ds = knobs.dependencies.distance_scale.log2();
    let (raw, war, waw) = (
        shift_bins(&raw, ds),
        shift_bins(&war, ds),
        shift_bins(&waw, ds),
    );

    let indirect = input.body.and_then(|b| {
        let d = b.branches.indirect.as_ref()?;
        (b.instructions_per_request > 0.0 && d.per_request > 0.0).then(|| {
            (
                (d.per_request / b.instructions_per_request).clamp(0.0, 0.1),
                d.target_change_rate.clone(),
                d.mean_target_change_rate,
            )
        })
    });
    let (indirect_ratio, indirect_change_bins, indirect_mean_change) =
        indirect.unwrap_or((0.0, Vec::new(), 0.0));
    let change_scale = b.indirect_change_scale;
    let (indirect_change_bins, indirect_mean_change) = if (change_scale - 1.0).abs() < 1e-12 {
        (indirect_change_bins, indirect_mean_change)
    } else {
        let scaled = scale_change_bins(&indirect_change_bins, change_scale);
        let mean = IndirectBranches::bins_mean(&scaled);
        (scaled, mean)
    };

    let iw = &knobs.instruction_working_set;
    let igrid = scale_misses_past(
        &grid_curve(&icurve, iw.size_scale, knobs.limits.max_code_bytes),
        iw.far_from_bytes,
        iw.far_share_scale,
    );
    if icurve.is_empty() && !default_body {
        warnings.push(format!(
            "{cluster}: empty instruction hit curve; all code is one 64-byte loop"
        ));
    }
    if let Some(last) = icurve.iter().map(|p| p.0).max() {
        if (last as f64 * iw.size_scale) > knobs.limits.max_code_bytes as f64 {
            warnings.push(format!(
                "{cluster}: instruction working set capped at limits.max_code_bytes = {}",
                knobs.limits.max_code_bytes
            ));
        }
    }
    let (blocks, w) = instruction_blocks(&igrid, mean_len);
    if let Some(w) = w {
        warnings.push(format!("{cluster}: {w}"));
    }

    let dw = &knobs.data_working_set;
    let cap = knobs.limits.max_buffer_bytes;
    let dgrid = scale_misses_from(
        &scale_misses_from(
            &stretch_above(
                &stretch_above(
                    &grid_curve(&dcurve, dw.size_scale, cap),
                    dw.mid_from_bytes,
                    dw.mid_scale,
                    cap,
                ),
                dw.tail_from_bytes,
                dw.tail_scale,
                cap,
            ),
            dw.far_from_bytes,
            dw.far_share_scale,
        ),
        dw.tail_from_bytes,
        dw.tail_share_scale,
    );
    if let Some(last) = dcurve.iter().map(|p| p.0).max() {
        let mut stretched = last as f64 * dw.size_scale;
        for (from, scale) in [
            (dw.mid_from_bytes, dw.mid_scale),
            (dw.tail_from_bytes, dw.tail_scale),
        ] {
            if stretched > from as f64 {
                stretched *= scale;
            }
        }
        if stretched > cap as f64 {
            warnings.push(format!(
                "{cluster}: data working set capped at limits.max_buffer_bytes = {}",
                knobs.limits.max_buffer_bytes
            ));
        }
    }
    let mut classes = data_classes(&dgrid);
    add_cold_class(&mut classes, &dgrid, knobs.limits.max_buffer_bytes);
    scale_first_touch(&mut classes, dw.first_touch_scale, dw.tail_from_bytes);
    scale_top_class(&mut classes, dw.top_share_scale, dw.tail_from_bytes);

    let frac = |v: f64, s: f64| {
        if v.is_finite() {
            (v * s).clamp(0.0, 1.0)
        } else {
            0.0
        }
    };
    let (shared, regular, chase, pages) = match input.body {
        Some(b) => (
            b.shared_data_fraction,
            b.regular_access_fraction,
            b.pointer_chase_fraction,
            b.instruction_pages,
        ),
        None => (0.05, 0.6, 0.02, 0),
    };
    let chase_fraction = frac(chase, dw.pointer_chase_scale);
    // Region and chain sizes are the process-wide fit's (`fit_data`), once every body is planned.
    let chase_bytes = LINE;

    BodyPlan {
        instructions,
        mean_instruction_bytes: mean_len,
        mix,
        rep_fills,
        rep_copies,
        cond_branch_ratio,
        static_branches: input.body.map_or(0, |b| b.branches.static_count),
        taken_bins: taken,
        majority_taken_bins,
        transition_bins: transition,
        profiled_instructions,
        profiled_transition_bins,
        indirect_ratio,
        call_ratio,
        indirect_change_bins,
        indirect_mean_change,
        blocks,
        data_classes: classes,
        shared_fraction: frac(shared, dw.shared_fraction_scale),
        regular_fraction: frac(regular, dw.regular_fraction_scale),
        chase_fraction,
        chase_bytes,
        raw,
        war,
        waw,
        instruction_pages: pages,
        warnings,
        default_body,
    }
}

/// Calls per instruction of a body's mix (`BodyPlan::call_ratio`): min(branch/store + branch/rmw,
/// branch/load), of the mix's total.
fn call_ratio(body: &ClusterBody) -> f64 {
    let (mut calls, mut returns, mut total) = (0.0, 0.0, 0.0);
    for m in &body.instruction_mix {
        if !(m.share.is_finite() && m.share >= 0.0) {
            continue;
        }
        total += m.share;
        if m.class == "branch" {
            match m.operand.as_str() {
                "store" | "rmw" => calls += m.share,
                "load" => returns += m.share,
                _ => {}
            }
        }
    }
    if total > 0.0 {
        f64::min(calls, returns) / total
    } else {
        0.0
    }
}

/// Target-change bins with every rate multiplied by `scale` (`branches.indirect_change_scale`),
/// capped at the top bin's rate. Each bin stands for its rate (`IndirectBranches::bin_rate`: 0, then
/// the tenths' midpoints); a scaled rate between two of those is split between their bins in
/// proportion, so that the mean moves by the scale exactly below the cap and a small scale empties
/// the low bins into bin 0 (dispatches with one target) instead of stalling in bin 1, whose rates
/// (0–0.1) a plain re-binning would never leave.
///
/// Above 1, what the cap and the single-target bin (a rate of 0 scales to 0) keep from the mean
/// comes out of bin 0 into the top bin, so the mean is the scale times the profile's while bin 0
/// lasts (and then rises with the scale toward the top bin's rate). Multiplying rates alone saturated: Pix optimized's original mispredicts its indirect
/// jumps far more than their per-site change rates say (cachegrind's 512-entry table aliases them),
/// 80 % of its jumps have one target, and its clone's mispredictions moved from 8.7 to 9.4 % as the
/// scale went from 2.4 to 10, against the original's 11.3 %.
pub fn scale_change_bins(bins: &[f64], scale: f64) -> Vec<f64> {
    let n = bins.len();
    let mut out = vec![0.0; n];
    if n == 0 {
        return out;
    }
    let rate = IndirectBranches::bin_rate;
    let top = rate(n - 1);
    for (i, &w) in bins.iter().enumerate() {
        let r = (rate(i) * scale.max(0.0)).min(top);
        // The highest bin whose rate is at most r, and the share that goes one bin up.
        let lo = (0..n).rev().find(|&j| rate(j) <= r).unwrap_or(0);
        if lo + 1 < n && r > rate(lo) {
            let f = (r - rate(lo)) / (rate(lo + 1) - rate(lo));
            out[lo] += w * (1.0 - f);
            out[lo + 1] += w * f;
        } else {
            out[lo] += w;
        }
    }
    if scale > 1.0 {
        let want = (scale * IndirectBranches::bins_mean(bins)).min(top);
        let short = want - IndirectBranches::bins_mean(&out);
        if short > 0.0 && top > 0.0 {
            let moved = out[0].min(short / top);
            out[0] -= moved;
            out[n - 1] += moved;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rep_counts_split_into_a_short_and_a_long_mode() {
        // memcached's worker (profiles/memcached.json, c1).
        let bins = [
            (1, 2, 202.0),
            (2, 4, 1755.0),
            (4, 8, 1755.0),
            (128, 256, 1957.0),
        ];
        let split = rep_split(&bins).expect("two modes");
        assert_eq!(split.short_count, 4);
        assert!((split.long_share - 1957.0 / 5669.0).abs() < 1e-12);
        // One mode only: no split.
        assert_eq!(rep_split(&bins[..3]), None);
        assert_eq!(rep_split(&bins[3..]), None);
    }

    #[test]
    fn scaled_change_bins_keep_their_weight_and_move_the_mean_by_the_scale() {
        let bins = [0.4, 0.2, 0.1, 0.1, 0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 0.1];
        let mean = IndirectBranches::bins_mean;
        assert_eq!(scale_change_bins(&bins, 1.0), bins.to_vec());
        // Below 1 every rate is multiplied; above 1, single targets give way to the top bin when
        // the other bins' caps (and their rate of 0) fall short. Either way the mean is the scale's
        // while bin 0 lasts.
        for s in [0.0, 0.1, 0.5, 0.9, 1.5, 2.0, 3.0] {
            let out = scale_change_bins(&bins, s);
            assert!(
                (out.iter().sum::<f64>() - 1.0).abs() < 1e-12,
                "weight at ×{s}"
            );
            assert!(
                (mean(&out) - s * mean(&bins)).abs() < 1e-12,
                "mean at ×{s}: {} against {}",
                mean(&out),
                s * mean(&bins)
            );
        }
        // Bin 1 (rates up to 0.1) empties into bin 0 as the scale falls, instead of staying put.
        let low = scale_change_bins(
            &[0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            0.2,
        );
        assert!(
            (low[0] - 0.8).abs() < 1e-12 && (low[1] - 0.2).abs() < 1e-12,
            "{low:?}"
        );
        assert_eq!(scale_change_bins(&bins, 0.0)[0], 1.0);
        for s in [1.5, 2.0, 3.0] {
            let out = scale_change_bins(&bins, s);
            assert!(out[0] < bins[0], "×{s} takes from single targets: {out:?}");
        }
        // Once bin 0 is spent the mean still rises with the scale, toward the top rate.
        let means: Vec<f64> = [3.0, 4.0, 8.0, 100.0]
            .iter()
            .map(|&s| mean(&scale_change_bins(&bins, s)))
            .collect();
        assert!(means.windows(2).all(|w| w[0] < w[1]), "{means:?}");
        // Past the cap nothing is left with one target, and the mean stays below the top rate.
        let high = scale_change_bins(&bins, 100.0);
        assert!(high[0] == 0.0 && (high[10] - 1.0).abs() < 1e-12, "{high:?}");
        assert!(mean(&high) <= IndirectBranches::bin_rate(10) + 1e-12);
    }

    /// `fit_data`'s model for one body in one thread, as the unit tests state their cases.
    fn fit_regions(classes: &mut [DataClass], chase: Option<(usize, f64)>, cap: u64) -> u64 {
        let mut chase_bytes = LINE;
        let mut user = [DataUser {
            classes,
            chase,
            chase_bytes: &mut chase_bytes,
            accesses_per_call: 1.0,
            calls_per_request: 1.0,
            threads: 1,
            shared_fraction: 0.0,
        }];
        fit_data_users(&mut user, &[], cap);
        chase_bytes
    }

    #[test]
    fn first_touches_get_a_stream_class_beyond_every_cache() {
        let grid = vec![(64, 0.5), (128, 0.9), (256, 0.99)];
        let mut classes = data_classes(&grid);
        add_cold_class(&mut classes, &grid, 64 << 20);
        let cold = classes.last().expect("classes");
        assert_eq!((cold.lo, cold.size), (32 << 20, 32 << 20));
        assert!((cold.share - 0.01).abs() < 1e-9, "{classes:?}");
        let total: f64 = classes.iter().map(|c| c.share).sum();
        assert!((total - 1.0).abs() < 1e-9);
        // A curve that reaches 1 has no first touches to stream.
        let full = vec![(64, 0.5), (128, 1.0)];
        let mut classes = data_classes(&full);
        let before = classes.len();
        add_cold_class(&mut classes, &full, 64 << 20);
        assert_eq!(classes.len(), before);
    }

    #[test]
    fn the_first_touch_scale_moves_the_stream_to_the_reuses_past_the_second_level_and_back() {
        // Pix optimized's worker, in shape: nearly nothing reused past 1 MiB, first touches beyond.
        let grid = vec![
            (64, 0.4),
            (1 << 19, 0.999),
            (1 << 20, 0.9997),
            (2 << 20, 0.99973),
        ];
        let classes = || {
            let mut c = data_classes(&grid);
            add_cold_class(&mut c, &grid, 64 << 20);
            c
        };
        let share = |c: &[DataClass], f: &dyn Fn(&DataClass) -> bool| -> f64 {
            c.iter().filter(|x| f(x)).map(|x| x.share).sum()
        };
        let past_l2 = |c: &DataClass| c.target > 1 << 20;
        let cold = |c: &DataClass| c.first_touch;
        let base = classes();
        let (base_cold, base_past) = (share(&base, &cold), share(&base, &past_l2));
        assert!((base_cold - 0.00027).abs() < 1e-9, "{base:?}");
        // Halved: half the stream becomes reuses within 2 MiB; what misses 1 MiB stays.
        let mut half = classes();
        scale_first_touch(&mut half, 0.5, 1 << 20);
        assert!((share(&half, &cold) - 0.5 * base_cold).abs() < 1e-12);
        assert!((share(&half, &past_l2) - base_past).abs() < 1e-12);
        let two_mib = half
            .iter()
            .find(|c| c.target == 2 << 20)
            .expect("a 2 MiB class");
        assert!(
            (two_mib.share - (0.00003 + 0.5 * base_cold)).abs() < 1e-9,
            "{half:?}"
        );
        // Doubled: the 2 MiB reuses go first (0.003 %), the rest comes from the smallest class,
        // whose accesses hit everywhere.
        let mut double = classes();
        scale_first_touch(&mut double, 2.0, 1 << 20);
        assert!((share(&double, &cold) - 2.0 * base_cold).abs() < 1e-12);
        let two_mib = |c: &[DataClass]| c.iter().find(|x| x.target == 2 << 20).map(|x| x.share);
        assert_eq!(two_mib(&double), Some(0.0));
        let from_first = base_cold - two_mib(&base).expect("a 2 MiB class");
        assert!((double[0].share - (base[0].share - from_first)).abs() < 1e-12);
        let total: f64 = double.iter().map(|c| c.share).sum();
        assert!((total - 1.0).abs() < 1e-9);
        // ×1.1 takes less than the 2 MiB reuses hold: the L2's misses stay.
        let mut little = classes();
        scale_first_touch(&mut little, 1.1, 1 << 20);
        assert!((share(&little, &past_l2) - base_past).abs() < 1e-12);
        assert_eq!(little[0].share, base[0].share);
        // Without a stream, nothing moves.
        let full = vec![(64, 0.5), (128, 1.0)];
        let mut plain = data_classes(&full);
        let before = plain.clone();
        scale_first_touch(&mut plain, 0.5, 1 << 20);
        assert_eq!(plain, before);
    }

    #[test]
    fn the_top_share_scale_moves_the_largest_reuses_to_the_second_level_s_misses_and_back() {
        // memcached's worker, in shape: reuses up to 64 MiB, none first-touched.
        let grid = vec![
            (64, 0.44),
            (1 << 20, 0.9934),
            (2 << 20, 0.9936),
            (16 << 20, 0.9942),
            (32 << 20, 0.9975),
            (64 << 20, 1.0),
        ];
        let share_of = |c: &[DataClass], target: u64| {
            c.iter()
                .find(|x| x.target == target)
                .map(|x| x.share)
                .expect("a class of that target")
        };
        let past_l2 = |c: &[DataClass]| -> f64 {
            c.iter()
                .filter(|x| x.target > 1 << 20)
                .map(|x| x.share)
                .sum()
        };
        let base = data_classes(&grid);
        let top = share_of(&base, 64 << 20);
        assert!((top - 0.0025).abs() < 1e-9, "{base:?}");
        // ×0.4: 60 % of the top class's accesses become reuses within 2 MiB; the L2 keeps its misses
        // and the classes between keep their shares.
        let mut less = base.clone();
        scale_top_class(&mut less, 0.4, 1 << 20);
        assert!((share_of(&less, 64 << 20) - 0.4 * top).abs() < 1e-12);
        assert!((share_of(&less, 2 << 20) - (share_of(&base, 2 << 20) + 0.6 * top)).abs() < 1e-12);
        assert_eq!(share_of(&less, 32 << 20), share_of(&base, 32 << 20));
        assert!((past_l2(&less) - past_l2(&base)).abs() < 1e-12);
        // ×1.5: taken from the reuses past 1 MiB, nearest first; the L2 keeps its misses.
        let mut more = base.clone();
        scale_top_class(&mut more, 1.5, 1 << 20);
        assert!((share_of(&more, 64 << 20) - 1.5 * top).abs() < 1e-12);
        assert_eq!(share_of(&more, 2 << 20), 0.0);
        assert!((past_l2(&more) - past_l2(&base)).abs() < 1e-12);
        assert_eq!(more[0].share, base[0].share);
        // ×3 uses them up (0.41 %); the rest comes from the smallest class.
        let mut triple = base.clone();
        scale_top_class(&mut triple, 3.0, 1 << 20);
        assert!((share_of(&triple, 64 << 20) - 3.0 * top).abs() < 1e-12);
        assert_eq!(share_of(&triple, 32 << 20), 0.0);
        let donated = past_l2(&base) - top;
        assert!((triple[0].share - (base[0].share - (2.0 * top - donated))).abs() < 1e-12);
        let total: f64 = triple.iter().map(|c| c.share).sum();
        assert!((total - 1.0).abs() < 1e-9);
        // A first-touch stream is not the top reuse class: only the reuses move.
        let mut streamed = base.clone();
        streamed.push(first_touch_stream(128 << 20, 0.0));
        scale_top_class(&mut streamed, 0.4, 1 << 20);
        assert_eq!(streamed.last().map(|c| c.share), Some(0.0));
        assert!((share_of(&streamed, 64 << 20) - 0.4 * top).abs() < 1e-12);
        // Reuses that end within twice the tail's start have no top class to move.
        let short = vec![(64, 0.5), (1 << 20, 0.9), (2 << 20, 1.0)];
        let mut plain = data_classes(&short);
        let before = plain.clone();
        scale_top_class(&mut plain, 0.5, 1 << 20);
        assert_eq!(plain, before);
    }

    /// The first-touch stream of a buffer capped at `cap` (`add_cold_class`).
    fn first_touch_stream(cap: u64, share: f64) -> DataClass {
        DataClass {
            lo: cap / 2,
            size: cap / 2,
            share,
            target: cap,
            first_touch: true,
        }
    }

    fn class(target: u64, share: f64) -> DataClass {
        DataClass {
            lo: target / 2,
            size: target / 2,
            share,
            target,
            first_touch: false,
        }
    }

    #[test]
    fn a_dominant_class_gets_its_whole_working_set() {
        // One 64 KiB class with all accesses: its lines come back after exactly its own 1024.
        let mut c = vec![class(64, 0.0), class(65536, 1.0)];
        let chain = fit_regions(&mut c, Some((1, 1.0)), 64 << 20);
        assert_eq!(
            chain, 65536,
            "a chain carrying every access spans the working set"
        );
        assert!(c[1].size >= 2 * LINE && c[1].lo + c[1].size <= 32 << 20);
    }

    #[test]
    fn interleaved_classes_get_smaller_regions() {
        // Half the accesses on a 1 KiB class, half on a 64 KiB one: between two touches of a 1 KiB
        // line the big class touches as many lines again, so the small region shrinks to 8 lines
        // (D = 8 + 8 = 16 lines = 1 KiB); the big one keeps all 1024 (D = 1024 + 8, within the
        // 2% slack).
        let mut c = vec![class(64, 0.0), class(1024, 0.5), class(65536, 0.5)];
        fit_regions(&mut c, None, 64 << 20);
        assert_eq!(c[1].size, 8 * LINE, "{c:?}");
        assert_eq!(c[2].size, 1024 * LINE, "{c:?}");
        // Laid out one after another, without overlap.
        assert_eq!(c[1].lo, c[0].lo + c[0].size);
        assert_eq!(c[2].lo, c[1].lo + c[1].size);
    }

    #[test]
    fn a_rare_chase_gets_a_short_chain() {
        // 0.2% of accesses chase through the 64 MiB class: between two visits of a node the class
        // touches ~494 lines per node, so 2048 nodes (128 KiB) already miss at 32 MiB, and the
        // chain's one-time set-up stays small.
        let mut c = vec![class(64, 0.01), class(64 << 20, 0.99)];
        let chain = fit_regions(&mut c, Some((1, 0.002)), 128 << 20);
        assert_eq!(chain, 2048 * LINE);
    }

    #[test]
    fn the_first_touch_class_is_flagged_not_guessed_from_its_geometry() {
        // A footprint that reaches the buffer cap gives the largest ordinary class the stream's
        // geometry, [cap/2, cap): it is still fitted, and laid out after the smaller ones.
        let cap = 1u64 << 20;
        let mut c = vec![class(64, 0.5), class(cap, 0.5)];
        assert_eq!((c[1].lo, c[1].size), (cap / 2, cap / 2));
        fit_regions(&mut c, None, cap);
        assert_eq!(c[1].lo, c[0].lo + c[0].size, "{c:?}");
        assert!(c[1].lo + c[1].size <= cap, "{c:?}");
        // The flagged stream keeps its place.
        let mut c = vec![class(64, 0.5), class(4096, 0.4)];
        c.push(first_touch_stream(cap, 0.1));
        fit_regions(&mut c, None, cap);
        assert_eq!((c[2].lo, c[2].size), (cap / 2, cap / 2));
    }

    #[test]
    fn regions_fill_the_whole_buffer_when_no_first_touch_stream_takes_its_upper_half() {
        // `stride`'s shape: most accesses reused at 32-64 MiB with the buffer capped at 64 MiB.
        // The large class's fitted region (32 MiB: its lines come back after its own 512 Ki and the
        // smaller classes' lines, within 64 MiB) does not fit below 32 MiB after the smaller
        // regions; it was halved to 16 MiB, and the clone hit a 16 MiB cache where the original
        // missed it.
        let cap = 64u64 << 20;
        let mut c = vec![class(64, 0.1), class(2 << 20, 0.1), class(cap, 0.8)];
        fit_regions(&mut c, None, cap);
        assert_eq!(c[2].size, 32 << 20, "{c:?}");
        assert!(c[2].lo + c[2].size <= cap, "{c:?}");
        // With a first-touch stream in the upper half, the regions stay below it.
        let mut c = vec![class(64, 0.1), class(2 << 20, 0.1), class(cap / 2, 0.7)];
        c.push(first_touch_stream(cap, 0.1));
        fit_regions(&mut c, None, cap);
        assert!(c[2].lo + c[2].size <= cap / 2, "{c:?}");
    }

    #[test]
    fn a_class_without_accesses_takes_one_line_and_no_room_from_the_others() {
        // memcached's timer body: nothing in its 2-32 MiB classes, 0.2 % of its accesses in its
        // 64 MiB one. Fitted like the others, the empty classes took their whole working sets
        // (31 MiB) below the large one.
        let cap = 64u64 << 20;
        let mut c = vec![class(64, 0.998)];
        c.extend((21..=25).map(|b| class(1 << b, 0.0)));
        c.push(class(cap, 0.002));
        fit_regions(&mut c, None, cap);
        for empty in &c[1..6] {
            assert_eq!(empty.size, LINE, "{c:?}");
        }
        let big = &c[6];
        assert!(big.lo < 1 << 20, "{c:?}");
        assert!(big.size >= 1 << 20, "{c:?}");
    }

    fn body_with_blocks(instructions: f64, blocks: &[(u64, f64)]) -> BodyPlan {
        let input = PlanInput {
            body: None,
            calls_per_request: 1.0,
            cluster: "c1",
            skeleton_instructions: 0.0,
            background: false,
        };
        let mut p = plan(&input, &Knobs::default());
        p.instructions = instructions;
        p.mean_instruction_bytes = 4.0;
        p.blocks = blocks
            .iter()
            .map(|&(target, share)| BlockPlan {
                bytes: target,
                share,
                target,
            })
            .collect();
        p
    }

    #[test]
    fn swept_blocks_shrink_until_their_lines_come_back_within_their_target() {
        // 2,000 instructions per call, 16 per line. The 32 KiB block's half fetches 62.5 lines per
        // call: at 512 lines they come back every 8.2 calls, after the 16 KiB block's lines and the
        // skeleton's 256 (833 lines in all, above its 512); at 256 lines, after 485. The 16 KiB
        // block (37.5 fetches per call) fits its 256 only at 64 lines (240 in all), its floor.
        let mut p = body_with_blocks(2000.0, &[(64, 0.2), (16384, 0.3), (32768, 0.5)]);
        let skeleton = [(40.0, 256.0)];
        fit_blocks(&mut [(&mut p, 1.0)], &skeleton);
        let bytes: Vec<u64> = p.blocks.iter().map(|b| b.bytes).collect();
        assert_eq!(bytes, vec![64, 4096, 16384], "{:?}", p.blocks);
        // Shares and targets are the plan's: only the code size moves.
        assert_eq!(p.blocks[2].target, 32768);
        assert!((p.blocks[2].share - 0.5).abs() < 1e-12);
    }

    #[test]
    fn a_worker_block_that_loops_within_a_call_keeps_equation_2s_size() {
        // 20,000 instructions per call: the 1 KiB block's 40 % are 500 line fetches per call over
        // its 16 lines, so it loops and its later passes come back after its own lines only.
        let mut p = body_with_blocks(20000.0, &[(64, 0.2), (1024, 0.4), (32768, 0.4)]);
        fit_blocks(&mut [(&mut p, 1.0)], &[(2000.0, 512.0)]);
        assert_eq!(p.blocks[1].bytes, 1024);
        // A background body (0.1 calls per request) has no such floor: it is sized for what runs
        // between its calls.
        let mut bg = body_with_blocks(20000.0, &[(64, 0.2), (1024, 0.4), (32768, 0.4)]);
        fit_blocks(&mut [(&mut bg, 0.1)], &[(2000.0, 512.0)]);
        assert!(bg.blocks[2].bytes < 32768, "{:?}", bg.blocks);
    }

    fn body_with_classes(instructions: f64, classes: &[(u64, f64)]) -> BodyPlan {
        let mut p = body_with_blocks(instructions, &[(64, 1.0)]);
        // Half the instructions are loads: accesses per call = instructions / 2.
        p.mix = vec![
            ((Class::Mov, Opnd::Load), 0.5),
            ((Class::Alu, Opnd::Reg), 0.5),
        ];
        p.shared_fraction = 0.0;
        p.chase_fraction = 0.0;
        p.data_classes = classes
            .iter()
            .map(|&(target, share)| DataClass {
                lo: target / 2,
                size: (target / 2).max(LINE),
                share,
                target,
                first_touch: false,
            })
            .collect();
        p
    }

    #[test]
    fn private_regions_shrink_by_their_threads_only_when_their_lines_come_back_across_calls() {
        // 1,000 accesses per call. The 1 KiB class (300 per call) comes back within a call: at 8
        // lines, after 1 + 8 + 200·8/300 = 14.3 lines of its own call (≤ 16); at 16 lines, 27.7.
        // The 64 KiB class (200 per call) comes back across calls. One thread: at 1,024 lines,
        // after 5.12 requests, 1 + 8 + 1,024 = 1,033 lines (≤ 1,044). Four threads, each serving a
        // quarter of the requests: at 256 lines its copy comes back after 5.12 requests, and the
        // four copies of every class add up to 4 + 32 + 1,024 = 1,060 lines (> 1,044); at 128, 548.
        let classes = [(64, 0.5), (1024, 0.3), (65536, 0.2)];
        let regions = |threads: u32| {
            let mut p = body_with_classes(2000.0, &classes);
            fit_data(&mut [(&mut p, 1.0, threads)], &[], 64 << 20);
            p.data_classes.iter().map(|c| c.size).collect::<Vec<u64>>()
        };
        assert_eq!(regions(1), vec![64, 512, 65536]);
        assert_eq!(regions(4), vec![64, 512, 8192]);
        // One body in one thread is `fit_regions`' model.
        let mut alone = body_with_classes(2000.0, &classes);
        fit_regions(&mut alone.data_classes, None, 64 << 20);
        let sizes: Vec<u64> = alone.data_classes.iter().map(|c| c.size).collect();
        assert_eq!(sizes, regions(1));
        // Regions are laid out one after the other.
        let mut p = body_with_classes(2000.0, &classes);
        fit_data(&mut [(&mut p, 1.0, 4)], &[], 64 << 20);
        let los: Vec<u64> = p.data_classes.iter().map(|c| c.lo).collect();
        assert_eq!(los, vec![0, 64, 576]);
    }

    #[test]
    fn the_skeletons_data_pushes_a_background_bodys_regions_down() {
        // A timer body called once every ten requests: its lines come back after ten requests, in
        // which the skeleton touches its 600 lines (fixed stream) as well.
        let classes = [(64, 0.5), (65536, 0.5)];
        let mut quiet = body_with_classes(2000.0, &classes);
        fit_data(&mut [(&mut quiet, 0.1, 1)], &[], 64 << 20);
        let mut busy = body_with_classes(2000.0, &classes);
        fit_data(&mut [(&mut busy, 0.1, 1)], &[(5000.0, 600.0)], 64 << 20);
        assert_eq!(quiet.data_classes[1].size, 65536);
        assert!(
            busy.data_classes[1].size < quiet.data_classes[1].size,
            "{:?}",
            busy.data_classes
        );
    }

    #[test]
    fn equation_1_shares() {
        let grid = vec![(64, 0.5), (128, 0.7), (256, 0.9)];
        let c = data_classes(&grid);
        let shares: Vec<f64> = c.iter().map(|c| c.share).collect();
        assert!((shares[0] - 0.5).abs() < 1e-9);
        assert!((shares[1] - 0.2).abs() < 1e-9);
        // 0.2 hit in 256 B plus the 0.1 that missed everywhere
        assert!((shares[2] - 0.3).abs() < 1e-9);
        assert_eq!((c[1].lo, c[1].size), (64, 64));
        assert_eq!((c[2].lo, c[2].size), (128, 128));
        assert_eq!(c[2].working_set(), 256);
    }

    #[test]
    fn equation_2_uses_the_measured_length() {
        let grid = vec![(64, 0.95), (128, 0.97), (256, 0.99), (512, 1.0)];
        // L = 4: 16 instructions per line; L = 8: 8 per line.
        let (b4, w4) = instruction_blocks(&grid, 4.0);
        let (b8, _) = instruction_blocks(&grid, 8.0);
        assert!(w4.is_none());
        assert!((b4[1].share - 16.0 * 0.02).abs() < 1e-9, "{b4:?}");
        assert!((b8[1].share - 8.0 * 0.02).abs() < 1e-9);
        let total: f64 = b4.iter().map(|b| b.share).sum();
        assert!((total - 1.0).abs() < 1e-9);
        assert_eq!(b4[0].bytes, 64);
    }

    #[test]
    fn size_scale_stretches_the_curve() {
        let c = vec![(64, 0.5), (128, 1.0)];
        let g1 = grid_curve(&c, 1.0, 1 << 20);
        let g2 = grid_curve(&c, 2.0, 1 << 20);
        assert_eq!(g1, vec![(64, 0.5), (128, 1.0)]);
        assert_eq!(g2, vec![(64, 0.5), (128, 0.5), (256, 1.0)]);
        // capped
        let g3 = grid_curve(&c, 8.0, 256);
        assert_eq!(g3.last().map(|p| p.0), Some(256));
    }

    #[test]
    fn instruction_far_share_scales_the_misses_past_its_size_and_the_first_line_takes_the_balance()
    {
        // 80 % of fetches hit within a line, 95 % within 32 KiB, 99 % within 256 KiB.
        let grid = grid_curve(&[(64, 0.8), (32768, 0.95), (1 << 18, 0.99)], 1.0, 1 << 26);
        let at = |g: &[(u64, f64)], size: u64| g.iter().find(|p| p.0 == size).map(|p| p.1);
        for scale in [0.5, 0.8, 1.5, 3.0] {
            let g = scale_misses_past(&grid, 32768, scale);
            assert_eq!(g.len(), grid.len());
            let miss = |g: &[(u64, f64)], s| 1.0 - at(g, s).expect("grid point");
            // A 32 KiB cache misses `scale` times as often, and so does every larger one.
            for size in [32768, 1 << 17, 1 << 18] {
                assert!(
                    (miss(&g, size) - scale * miss(&grid, size)).abs() < 1e-12,
                    "{scale} at {size}"
                );
            }
            // Every class from 128 B to 32 KiB keeps its share; the first line's takes the rest.
            for w in 1..grid.len() {
                if grid[w].0 > 32768 || grid[w - 1].1 + g[0].1 - grid[0].1 < 0.0 {
                    continue;
                }
                let before = grid[w].1 - grid[w - 1].1;
                let after = g[w].1 - g[w - 1].1;
                assert!(
                    (before - after).abs() < 1e-12,
                    "{scale}: class {}",
                    grid[w].0
                );
            }
            assert!(
                g.windows(2).all(|w| w[0].1 <= w[1].1),
                "monotone at {scale}: {g:?}"
            );
            assert!(g.iter().all(|p| (0.0..=1.0).contains(&p.1)));
        }
        // Twenty times the misses at 32 KiB would take 95 points from the first line's 80: its share
        // goes to 0, and the curve stays monotone.
        let g = scale_misses_past(&grid, 32768, 20.0);
        assert_eq!(at(&g, 64), Some(0.0));
        assert!(g.windows(2).all(|w| w[0].1 <= w[1].1), "{g:?}");
        assert_eq!(scale_misses_past(&grid, 32768, 1.0), grid);
    }

    #[test]
    fn far_share_scales_the_misses_past_its_size_and_keeps_the_larger_levels_ratios() {
        // 40 % hit within 64 B, 90 % within 32 KiB, 97 % within 1 MiB, 99 % within 8 MiB.
        let grid = grid_curve(
            &[(64, 0.4), (32768, 0.9), (1 << 20, 0.97), (1 << 23, 0.99)],
            1.0,
            1 << 26,
        );
        let miss_at = |g: &[(u64, f64)], size: u64| {
            1.0 - g
                .iter()
                .find(|p| p.0 == size)
                .map(|p| p.1)
                .expect("grid point")
        };
        for scale in [0.5, 0.8, 1.5] {
            let g = scale_misses_from(&grid, 32768, scale);
            // The first level misses `scale` times as often.
            assert!(
                (miss_at(&g, 32768) - scale * miss_at(&grid, 32768)).abs() < 1e-12,
                "{scale}"
            );
            // Each larger level misses the same share of the first level's misses.
            for size in [1 << 20, 1 << 23] {
                let before = miss_at(&grid, size) / miss_at(&grid, 32768);
                let after = miss_at(&g, size) / miss_at(&g, 32768);
                assert!((before - after).abs() < 1e-12, "{scale} at {size}");
            }
            // Still a hit curve: monotone, within [0, 1], the same sizes.
            assert_eq!(g.len(), grid.len());
            assert!(
                g.windows(2).all(|w| w[0].1 <= w[1].1 && w[0].0 < w[1].0),
                "{g:?}"
            );
            assert!(g.iter().all(|p| (0.0..=1.0).contains(&p.1)));
            // Below the size, only what would overtake the new value at it moves.
            let small = |g: &[(u64, f64)]| miss_at(g, 64);
            if scale < 1.0 {
                assert_eq!(small(&g), small(&grid));
            } else {
                assert!(small(&g) >= small(&grid));
            }
        }
        // A curve that ends below the size: its first touches are the misses scaled.
        let short = grid_curve(&[(64, 0.5), (4096, 0.9)], 1.0, 1 << 26);
        let g = scale_misses_from(&short, 32768, 0.5);
        assert!((miss_at(&g, 4096) - 0.05).abs() < 1e-12, "{g:?}");
        assert_eq!(scale_misses_from(&grid, 32768, 1.0), grid);
    }

    #[test]
    fn tail_scale_moves_only_the_accesses_beyond_its_size() {
        // 60 % hit within 256 B, 80 % within 1 KiB, 95 % within 4 KiB; the tail starts at 256 B.
        let grid = grid_curve(
            &[(64, 0.2), (256, 0.6), (1024, 0.8), (4096, 0.95)],
            1.0,
            1 << 20,
        );
        let classes = |g: &[(u64, f64)]| data_classes(g);
        let share_within = |g: &[(u64, f64)], size: u64| -> f64 {
            classes(g)
                .iter()
                .filter(|c| c.target <= size)
                .map(|c| c.share)
                .sum()
        };
        assert_eq!(stretch_above(&grid, 256, 1.0, 1 << 20), grid);
        for scale in [0.5, 2.0, 4.0] {
            let g = stretch_above(&grid, 256, scale, 1 << 20);
            assert!(
                g.windows(2).all(|w| w[0].1 <= w[1].1),
                "monotone at ×{scale}: {g:?}"
            );
            assert!(
                (share_within(&g, 256) - share_within(&grid, 256)).abs() < 1e-12,
                "×{scale}: the accesses within 256 B stay"
            );
            assert_eq!(
                g.last().map(|p| p.1),
                grid.last().map(|p| p.1),
                "×{scale}: cold share kept"
            );
        }
        // Stretched ×4, what hit within 1 KiB now needs 4 KiB; shrunk ×0.5, within 512 B.
        let out = stretch_above(&grid, 256, 4.0, 1 << 20);
        assert!((share_within(&out, 1024) - 0.6).abs() < 1e-12, "{out:?}");
        assert!((share_within(&out, 4096) - 0.8).abs() < 1e-12, "{out:?}");
        assert_eq!(out.last().map(|p| p.0), Some(16384));
        let inn = stretch_above(&grid, 256, 0.5, 1 << 20);
        assert!((share_within(&inn, 512) - 0.8).abs() < 1e-12, "{inn:?}");
        // The buffer cap holds.
        assert_eq!(
            stretch_above(&grid, 256, 64.0, 8192).last().map(|p| p.0),
            Some(8192)
        );
    }

    /// A stretch past `limits.max_buffer_bytes` keeps the accesses it moves beyond the cap as
    /// reuses at the cap: only the profile's own cold share becomes first touches, however far
    /// `size_scale` or `mid_scale` stretch and however far `tail_scale` then shrinks.
    #[test]
    fn a_stretch_cut_by_the_buffer_cap_makes_no_first_touches() {
        // 0.01 % of the accesses are cold (miss at the 1 MiB footprint).
        let grid = grid_curve(
            &[(64, 0.4), (256, 0.9), (4096, 0.99), (1 << 20, 0.9999)],
            1.0,
            1 << 20,
        );
        let cold = |g: &[(u64, f64)]| -> f64 {
            let mut classes = data_classes(g);
            add_cold_class(&mut classes, g, 1 << 20);
            classes
                .iter()
                .filter(|c| c.first_touch)
                .map(|c| c.share)
                .sum()
        };
        assert!(
            (cold(&grid) - 0.0).abs() < 1e-12,
            "top at the cap: no cold class"
        );
        let stretched = grid_curve(
            &[(64, 0.4), (256, 0.9), (4096, 0.99), (1 << 20, 0.9999)],
            8.0,
            1 << 20,
        );
        assert_eq!(stretched.last(), Some(&(1 << 20, 0.9999)), "{stretched:?}");
        let mid = stretch_above(&grid, 256, 8.0, 1 << 20);
        assert_eq!(mid.last(), Some(&(1 << 20, 0.9999)), "{mid:?}");
        // The tail brought in after the cut: the footprint falls to 256 KiB and only the 0.01 %
        // is cold.
        let tail = stretch_above(&mid, 4096, 0.25, 1 << 20);
        assert_eq!(tail.last().map(|p| p.0), Some(1 << 18), "{tail:?}");
        assert!((cold(&tail) - 0.0001).abs() < 1e-9, "{}", cold(&tail));
    }

    #[test]
    fn mid_scale_moves_the_second_levels_hits_past_it_and_tail_scale_moves_them_back() {
        // Levels of 256 B and 1 KiB: 60 % hit the first, 20 % more the second, 15 % more by 4 KiB.
        let grid = grid_curve(
            &[(64, 0.2), (256, 0.6), (1024, 0.8), (4096, 0.95)],
            1.0,
            1 << 20,
        );
        let within = |g: &[(u64, f64)], size: u64| -> f64 {
            data_classes(g)
                .iter()
                .filter(|c| c.target <= size)
                .map(|c| c.share)
                .sum()
        };
        let mid = stretch_above(&grid, 256, 4.0, 1 << 20);
        // The first level keeps its hits; the second's move out, so it misses twice as often.
        assert!((within(&mid, 256) - 0.6).abs() < 1e-12, "{mid:?}");
        assert!((within(&mid, 1024) - 0.6).abs() < 1e-12, "{mid:?}");
        assert_eq!(mid.last().map(|p| p.0), Some(16384));
        // The tail brings what the second level now misses back in (the footprint to 4 KiB
        // again), the first and second levels' hits untouched.
        let both = stretch_above(&mid, 1024, 0.25, 1 << 20);
        assert!((within(&both, 1024) - 0.6).abs() < 1e-12, "{both:?}");
        assert!(within(&both, 2048) > 0.85, "{both:?}");
        assert_eq!(both.last().map(|p| p.0), Some(4096));
    }
}
