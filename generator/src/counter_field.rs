//! Counter-field compares: branch conditions on a chunk's execution count whose taken and
//! transition rates fall inside their rate bins instead of on an edge.
//!
//! Why: a pattern branch's `test ebx, MASK` is taken when all M mask bits of the count are clear,
//! 2^−M of the time, and 2^−M is the upper edge of its taken-rate bin (bin i holds
//! (2^−(i+2), 2^−(i+1)]); its transition rate is a power of two as well. Measured over a window that
//! starts at an arbitrary phase, such a rate reads a little above or below its edge, and above it
//! lands one bin up. Spread over hundreds of rarely run sites the error is a share of each bin;
//! concentrated on a few hot sites it moves bins whole (memcached's worker clone: three sites run 14
//! times a call carried its taken bins 1–4, and all three read one bin up in the round trip).
//!
//! Comparing a masked field of the count below a threshold gives any rate K / 2^m, but not any
//! transition rate: over a power-of-two period, the runs of any `count & MASK < K` number a power of
//! two (checked over every mask of bits 0–9), so the transition rate still sits on an edge. The
//! field of a *multiple* of the count does not: `lea t, [rbx + rbx*(a−1)]` (a = 3 or 5), then bits
//! s..s+m of t, compared below K. The field steps by a every execution of the chunk, a rotation of
//! Z/2^m that wraps a times a period; each wrap lands on one of 0..a−1, so there are min(K, a) runs:
//! a minority rate of K / 2^m and a transition rate of 2·min(K, a) / 2^m, which is 6 or 10 / 2^m —
//! 2^0.58 and 2^0.32 inside a bin. The bits of the count below s (the chunk's ring position) add a
//! constant to the field, a phase, so the rates hold for any chunk of a ring. The cost is two
//! instructions and a scratch register a branch (`lea`, `and`, `cmp`, `jcc` against `test`, `jcc`),
//! all ALU but the jump, which is why the composer uses it at hot sites only.

use std::sync::OnceLock;

use ditto_profile::Branches;

use crate::plan::BINS;
/// `lea` scales: the count is multiplied by 3 or 5.
const MULTIPLIERS: [u32; 2] = [3, 5];
const MIN_FIELD_BITS: u32 = 2;
/// The widest field: a period of 2^14 executions, transition rates down to 6 / 2^14 (bin 10).
const MAX_FIELD_BITS: u32 = 14;
/// A candidate's rates must be at least this far (log2 units) inside their bins' edges.
const EDGE_MARGIN: f64 = 0.25;
/// Candidates scoring within this of a pair's best are equally good; the caller draws among them,
/// so that hot sites of one pair do not all compare the same field.
const SCORE_SLACK: f64 = 0.15;
/// At most this many candidates are kept per (taken bin, transition bin) pair.
const KEEP: usize = 8;

/// Taken in the minority when `((count · multiplier) >> shift) mod 2^bits < below`, `shift` being
/// the chunk's ring bits (`Composer::pattern`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FieldCompare {
    pub multiplier: u32,
    pub bits: u32,
    pub below: u32,
    /// Minority (taken) rate and transition rate over the period, exact.
    pub rate: f64,
    pub transition: f64,
}

impl FieldCompare {
    /// The mask and threshold for a chunk whose own count starts at bit `shift` of the counter:
    /// `and` by the first, `cmp` (`jb` in the minority) with the second.
    pub fn at(&self, shift: u32) -> (u32, u32) {
        (((1u32 << self.bits) - 1) << shift, self.below << shift)
    }

    /// The highest counter bit the field uses at `shift`.
    pub fn top_bit(&self, shift: u32) -> u32 {
        shift + self.bits - 1
    }
}

/// log2 distance of `r` from the middle of bin `b`, or `None` when it is within `EDGE_MARGIN` of
/// an edge of its bin, in another bin, or in the "never" bin.
fn mid_distance(r: f64, b: usize) -> Option<f64> {
    if Branches::bin(r) != b || b >= BINS - 1 {
        return None;
    }
    let x = -r.log2();
    let (lo, hi) = (b as f64 + 1.0, b as f64 + 2.0);
    (x - lo >= EDGE_MARGIN && hi - x >= EDGE_MARGIN).then(|| (x - (lo + 0.5)).abs())
}

/// The rates of a field compare by its closed form (module docs): K / 2^m and 2·min(K, a) / 2^m.
fn rates(multiplier: u32, bits: u32, below: u32) -> (f64, f64) {
    let period = f64::from(1u32 << bits);
    (
        f64::from(below) / period,
        2.0 * f64::from(below.min(multiplier)) / period,
    )
}

/// Per (taken bin × BINS + transition bin), the best candidates (nearest both middles first).
fn table() -> &'static [Vec<FieldCompare>] {
    static TABLE: OnceLock<Vec<Vec<FieldCompare>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut scored: Vec<Vec<(f64, FieldCompare)>> = vec![Vec::new(); BINS * BINS];
        for multiplier in MULTIPLIERS {
            for bits in MIN_FIELD_BITS..=MAX_FIELD_BITS {
                for below in 1..(1u32 << (bits - 1)) {
                    let (rate, transition) = rates(multiplier, bits, below);
                    let (t, r) = (Branches::bin(rate), Branches::bin(transition));
                    let (Some(dt), Some(dr)) = (mid_distance(rate, t), mid_distance(transition, r))
                    else {
                        continue;
                    };
                    scored[t * BINS + r].push((
                        dt + dr,
                        FieldCompare {
                            multiplier,
                            bits,
                            below,
                            rate,
                            transition,
                        },
                    ));
                }
            }
        }
        scored
            .into_iter()
            .map(|mut v| {
                // Ties: the narrower field (a shorter period), then the smaller multiplier.
                v.sort_by(|a, b| {
                    (a.0.total_cmp(&b.0))
                        .then(a.1.bits.cmp(&b.1.bits))
                        .then(a.1.multiplier.cmp(&b.1.multiplier))
                        .then(a.1.below.cmp(&b.1.below))
                });
                let best = v.first().map_or(0.0, |c| c.0);
                v.into_iter()
                    .take_while(|c| c.0 <= best + SCORE_SLACK)
                    .take(KEEP)
                    .map(|c| c.1)
                    .collect()
            })
            .collect()
    })
}

/// The candidates for taken-rate bin `taken` and transition-rate bin `transition`, best first;
/// empty where no field puts both rates inside their bins with margin (the "never" bins, a
/// transition rate above twice the taken rate).
pub fn candidates(taken: usize, transition: usize) -> &'static [FieldCompare] {
    if taken >= BINS || transition >= BINS {
        return &[];
    }
    &table()[taken * BINS + transition]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rates of `c` by walking one period (ring position 0, phase 0), transitions counted
    /// cyclically: the reference the closed form is checked against.
    fn simulate(c: &FieldCompare) -> (f64, f64) {
        let period = 1u64 << c.bits;
        let holds = |l: u64| (l * u64::from(c.multiplier)) % period < u64::from(c.below);
        let mut taken = 0u64;
        let mut changes = 0u64;
        let mut prev = holds(period - 1);
        for l in 0..period {
            let h = holds(l);
            taken += u64::from(h);
            changes += u64::from(h != prev);
            prev = h;
        }
        (taken as f64 / period as f64, changes as f64 / period as f64)
    }

    fn all() -> impl Iterator<Item = &'static FieldCompare> {
        (0..BINS).flat_map(|t| (0..BINS).flat_map(move |r| candidates(t, r)))
    }

    #[test]
    fn every_candidate_sits_inside_both_of_its_bins_by_a_margin() {
        for t in 0..BINS {
            for r in 0..BINS {
                for c in candidates(t, r) {
                    assert_eq!(Branches::bin(c.rate), t, "{c:?}");
                    assert_eq!(Branches::bin(c.transition), r, "{c:?}");
                    for (x, b) in [(-c.rate.log2(), t), (-c.transition.log2(), r)] {
                        assert!(x - (b as f64 + 1.0) >= EDGE_MARGIN, "{c:?}");
                        assert!((b as f64 + 2.0) - x >= EDGE_MARGIN, "{c:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_closed_form_rates_are_the_walked_period_s() {
        let mut n = 0;
        for c in all() {
            let (rate, transition) = simulate(c);
            assert!((rate - c.rate).abs() < 1e-12, "{c:?}: walked rate {rate}");
            assert!(
                (transition - c.transition).abs() < 1e-12,
                "{c:?}: walked transition rate {transition}"
            );
            n += 1;
        }
        assert!(n > 100, "only {n} candidates");
    }

    #[test]
    fn a_ring_position_below_the_field_only_shifts_its_phase() {
        // Chunk j of a ring of 2^s: the counter is j + 2^s·l; the rendered compare masks
        // (counter · a) and compares it with `below << s` (`FieldCompare::at`).
        let c = candidates(3, 3)[0];
        let s = 4;
        let (mask, below) = c.at(s);
        for j in [0u64, 5, 15] {
            let period = 1u64 << c.bits;
            let holds = |l: u64| {
                let counter = j + (l << s);
                ((counter * u64::from(c.multiplier)) as u32 & mask) < below
            };
            let taken = (0..period).filter(|&l| holds(l)).count() as f64;
            let changes = (0..period).filter(|&l| holds(l) != holds(l + 1)).count() as f64;
            assert_eq!(taken / period as f64, c.rate, "ring position {j}");
            assert_eq!(changes / period as f64, c.transition, "ring position {j}");
        }
    }

    #[test]
    fn the_bins_of_hot_pattern_branches_have_mid_bin_candidates() {
        // Taken bins 0–6 with transition bins from one below (a coin toss's) to three above.
        for t in 0..=6usize {
            for r in t.saturating_sub(1)..=(t + 3) {
                let c = candidates(t, r);
                assert!(!c.is_empty(), "taken bin {t}, transition bin {r}");
                assert!(c.len() <= KEEP);
            }
        }
    }

    #[test]
    fn impossible_and_never_pairs_have_none() {
        // A transition rate above twice the minority rate cannot be realised.
        assert!(candidates(5, 2).is_empty());
        assert!(candidates(BINS - 1, 3).is_empty());
        assert!(candidates(3, BINS - 1).is_empty());
    }
}
