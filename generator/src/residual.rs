//! Skeleton subtraction for the whole body, not only its instruction count.
//!
//! A clone's request workers run the runtime skeleton (event loop, parsing, replies) and the synthetic
//! body. Profiling the clone measures both together, so a body made from the original's distributions
//! adds its mix, branches, dependencies and hit curves on top of the skeleton's and the sum drifts
//! towards the skeleton's. For memcached the skeleton executes about 80 % of the original's
//! instructions per request, so it dominates. The body's target is the *residual* instead: every
//! distribution of the original minus the skeleton's, each weighted by what it counts (instructions
//! for the mix, dependencies and instruction fetches; conditional branches for the branch bins; data
//! accesses for the access fractions).
//!
//! Hit rates are not additive (the two streams share the caches): the instruction curve's residual
//! is a first-order target. The data curve's residual counts misses, not hits: the skeleton is
//! charged what it misses in its share of the cache beside the body, at most the original's rate
//! (`data_curve`), so the body makes nearly every far miss of the original, the skeleton making
//! almost none. Bins that
//! would go negative are clamped to zero and said in a warning. The instruction count itself is still subtracted by the plan from
//! `instructions.skeleton_instructions`, so the instruction knobs keep their meaning.

use ditto_profile::{ClusterBody, HitCurve, HitPoint, MixShare};

/// Shares below this are rounding noise of the subtraction, not a bin the original has.
const NEGLIGIBLE: f64 = 1e-9;
/// The residual is only meaningful while the body keeps a real part of the original.
const MIN_BODY_SHARE: f64 = 0.02;

/// The body's target: `original` minus `skeleton`, or the original itself (with a warning) when the
/// skeleton leaves no body to speak of.
///
/// `scale` is `instructions.per_request_scale`: the original does `scale` times its profiled work
/// per request in the same shape (every count × `scale`, every distribution as profiled), while the
/// skeleton's part stays what it is. So the residual is taken from the scaled original, and a larger
/// scale moves it towards the original's own distributions instead of multiplying the body's
/// residual shape: with memcached's first tuning step (×1.27) the body grew ×1.8, and a residual
/// taken at ×1 gave it ~24 % more far misses than the original's rates allow.
pub fn subtract(
    original: &ClusterBody,
    skeleton: &ClusterBody,
    scale: f64,
) -> (ClusterBody, Vec<String>) {
    let mut warnings = Vec::new();
    let cluster = &original.cluster;
    let scale = if scale.is_finite() && scale > 0.0 {
        scale
    } else {
        1.0
    };
    let n_o = original.instructions_per_request * scale;
    let n_s = skeleton.instructions_per_request;
    if !(n_o.is_finite() && n_s.is_finite() && n_s >= 0.0 && n_o - n_s > MIN_BODY_SHARE * n_o) {
        warnings.push(format!(
            "{cluster}: the skeleton executes {n_s:.0} of the original's {n_o:.0} instructions per \
             request; its distributions are not subtracted"
        ));
        return (original.clone(), warnings);
    }
    let mut clamped: Vec<&str> = Vec::new();
    let mut out = original.clone();

    // Mix, by instructions.
    let mut pairs: Vec<(String, String)> = original
        .instruction_mix
        .iter()
        .chain(&skeleton.instruction_mix)
        .map(|m| (m.class.clone(), m.operand.clone()))
        .collect();
    pairs.sort();
    pairs.dedup();
    let share_of = |b: &ClusterBody, c: &str, o: &str| -> f64 {
        b.instruction_mix
            .iter()
            .filter(|m| m.class == c && m.operand == o && m.share.is_finite())
            .map(|m| m.share)
            .sum()
    };
    let mut mix = Vec::new();
    let mut mix_clamped = false;
    for (c, o) in pairs {
        let r = share_of(original, &c, &o) * n_o - share_of(skeleton, &c, &o) * n_s;
        if r < -NEGLIGIBLE * n_o {
            mix_clamped = true;
        }
        mix.push(MixShare {
            class: c,
            operand: o,
            share: r.max(0.0),
        });
    }
    if normalise(mix.iter_mut().map(|m| &mut m.share)) {
        out.instruction_mix = mix;
        if mix_clamped {
            clamped.push("instruction mix");
        }
    } else {
        clamped.push("instruction mix (kept the original's)");
    }

    // Mean instruction length, by instructions.
    let len = (original.mean_instruction_bytes * n_o - skeleton.mean_instruction_bytes * n_s)
        / (n_o - n_s);
    if len.is_finite() && (1.0..=15.0).contains(&len) {
        out.mean_instruction_bytes = len;
    }

    // Branch bins, by conditional branches executed.
    let (b_o, b_s) = (
        original.branches.per_request * scale,
        skeleton.branches.per_request,
    );
    if b_o.is_finite() && b_s.is_finite() && b_o - b_s > MIN_BODY_SHARE * b_o {
        // The plan places per_request / instructions_per_request of them per body instruction:
        // the residual's density, (b_o − b_s) / (n_o − n_s), over the profiled (unscaled) count
        // the plan divides by, as for the indirect jumps below. With the original's density the
        // body ran fewer than the skeleton left it (memcached's worker: 0.153 against 0.165 per
        // instruction, the skeleton's parsing and replies branching less than the rest).
        out.branches.per_request = (b_o - b_s) * original.instructions_per_request / (n_o - n_s);
        for (name, o, s, dst) in [
            (
                "taken-rate bins",
                &original.branches.taken_rate,
                &skeleton.branches.taken_rate,
                &mut out.branches.taken_rate,
            ),
            (
                "transition-rate bins",
                &original.branches.transition_rate,
                &skeleton.branches.transition_rate,
                &mut out.branches.transition_rate,
            ),
        ] {
            if let Some((v, was_clamped)) = ordered_bins(o, b_o, s, b_s) {
                *dst = v;
                if was_clamped {
                    clamped.push(name);
                }
            }
        }
    }

    // Static conditional branches: the skeleton's sites run beside the body's, so the body brings
    // only the rest. The plan concentrates the body's pattern branches on its hottest code until
    // their static count meets this (`synth::branch_densities`); with the original's whole count,
    // memcached's worker body spread 545 static branches for the 158 its skeleton leaves (614 less
    // 456), most of them in rings run less than once a call, whose predictor counters the other
    // branches overwrite in between (docs/generator.md, "Where the branches go").
    let (st_o, st_s) = (
        original.branches.static_count,
        skeleton.branches.static_count,
    );
    if st_o > 0 && st_s > 0 {
        // At least one: 0 means "unknown" to the plan, which then spreads the branches evenly.
        out.branches.static_count = st_o.saturating_sub(st_s).max(1);
        if st_s >= st_o {
            warnings.push(format!(
                "{cluster}: the skeleton runs {st_s} static conditional branches, the original \
                 {st_o}: the body's are concentrated on its hottest code"
            ));
        }
    }

    // Indirect jumps' target-change bins and mean, by indirect jumps executed.
    if let (Some(o), Some(s), Some(dst)) = (
        &original.branches.indirect,
        &skeleton.branches.indirect,
        out.branches.indirect.as_mut(),
    ) {
        let (i_o, i_s) = (o.per_request * scale, s.per_request);
        if i_o.is_finite() && i_s.is_finite() && i_o - i_s > MIN_BODY_SHARE * i_o {
            if let Some((v, was_clamped)) =
                weighted_bins(&o.target_change_rate, i_o, &s.target_change_rate, i_s)
            {
                dst.target_change_rate = v;
                let mean = (o.mean_target_change_rate * i_o - s.mean_target_change_rate * i_s)
                    / (i_o - i_s);
                dst.mean_target_change_rate = mean.clamp(0.0, 1.0);
                // The plan places per_request / instructions_per_request of them per body
                // instruction: the residual's density, (i_o − i_s) / (n_o − n_s), over the
                // profiled (unscaled) count the plan divides by.
                dst.per_request = (i_o - i_s) * original.instructions_per_request / (n_o - n_s);
                if was_clamped || !(0.0..=1.0).contains(&mean) {
                    clamped.push("indirect target-change bins");
                }
            }
        }
    }

    // Dependencies, by instructions.
    for (name, o, s, dst) in [
        (
            "RAW bins",
            &original.dependencies.raw,
            &skeleton.dependencies.raw,
            &mut out.dependencies.raw,
        ),
        (
            "WAR bins",
            &original.dependencies.war,
            &skeleton.dependencies.war,
            &mut out.dependencies.war,
        ),
        (
            "WAW bins",
            &original.dependencies.waw,
            &skeleton.dependencies.waw,
            &mut out.dependencies.waw,
        ),
    ] {
        if let Some((v, was_clamped)) = weighted_bins(o, n_o, s, n_s) {
            *dst = v;
            if was_clamped {
                clamped.push(name);
            }
        }
    }

    // Instruction fetches: one per instruction.
    let (curve, was_clamped) = weighted_curve(
        &original.instruction_working_set,
        n_o,
        &skeleton.instruction_working_set,
        n_s,
    );
    out.instruction_working_set = curve;
    if was_clamped {
        clamped.push("instruction hit curve");
    }

    // Data accesses: one per load or store operand, two per read-modify-write.
    let a_o = n_o * accesses_per_instruction(original);
    let a_s = n_s * accesses_per_instruction(skeleton);
    if a_o - a_s > MIN_BODY_SHARE * a_o {
        out.data_working_set = data_curve(
            &original.data_working_set,
            a_o,
            &skeleton.data_working_set,
            a_s,
        );
        let frac = |o: f64, s: f64| -> f64 {
            if o.is_finite() && s.is_finite() {
                ((o * a_o - s * a_s) / (a_o - a_s)).clamp(0.0, 1.0)
            } else {
                o
            }
        };
        out.shared_data_fraction =
            frac(original.shared_data_fraction, skeleton.shared_data_fraction);
        out.regular_access_fraction = frac(
            original.regular_access_fraction,
            skeleton.regular_access_fraction,
        );
        // Chasing is a share of loads; loads are close enough to proportional to accesses here.
        out.pointer_chase_fraction = frac(
            original.pointer_chase_fraction,
            skeleton.pointer_chase_fraction,
        );
    } else {
        clamped.push(
            "data access fractions (the skeleton makes nearly all accesses; kept the original's)",
        );
    }

    if !clamped.is_empty() {
        warnings.push(format!(
            "{cluster}: after subtracting the skeleton, some bins of the {} would be negative \
             (the skeleton alone exceeds the original there); they were set to 0",
            clamped.join(", ")
        ));
    }
    (out, warnings)
}

/// Memory accesses per instruction from the mix.
pub(crate) fn accesses_per_instruction(b: &ClusterBody) -> f64 {
    b.instruction_mix
        .iter()
        .filter(|m| m.share.is_finite())
        .map(|m| match m.operand.as_str() {
            "load" | "store" => m.share,
            "rmw" => 2.0 * m.share,
            _ => 0.0,
        })
        .sum()
}

/// Scales shares to sum to 1; false when they sum to nothing.
fn normalise<'a>(shares: impl Iterator<Item = &'a mut f64>) -> bool {
    let v: Vec<&mut f64> = shares.collect();
    let sum: f64 = v.iter().map(|x| **x).sum();
    if sum.is_nan() || sum <= NEGLIGIBLE {
        return false;
    }
    for x in v {
        *x /= sum;
    }
    true
}

/// (o·wo − s·ws) per bin, clamped at 0 and normalised; `None` when the bins do not line up or nothing
/// is left. The flag says whether a bin had to be clamped.
fn weighted_bins(o: &[f64], wo: f64, s: &[f64], ws: f64) -> Option<(Vec<f64>, bool)> {
    if o.len() != s.len() || o.is_empty() {
        return None;
    }
    let mut was_clamped = false;
    let mut v: Vec<f64> = o
        .iter()
        .zip(s)
        .map(|(&a, &b)| {
            let r = a * wo - b * ws;
            if r < -NEGLIGIBLE * wo.max(1.0) && a.is_finite() && b.is_finite() {
                was_clamped = true;
            }
            if r.is_finite() {
                r.max(0.0)
            } else {
                0.0
            }
        })
        .collect();
    normalise(v.iter_mut()).then_some((v, was_clamped))
}

/// The residual of bins ordered from the hardest outcome to the easiest (the branch bins: bin 0
/// holds the rates nearest one half), subtracted cumulatively: the body keeps, at every rate, the
/// original's executions at that rate or above less the skeleton's. Bin by bin, a skeleton that
/// runs more near-random branches than the original (memcached's runtime: 21 executions a request
/// in bin 0 against the original's 3.4, in its replies, flushes and libc calls) loses only that
/// bin, clamped to 0, and the body still brings the original's next-hardest bins in full: its
/// minority outcomes came to 5.0 a request where the original's whole worker, skeleton included,
/// has 7.5 and the skeleton alone 8.8. Here the skeleton's excess is set against the next bins
/// first, so what is left for the body is easier (2.5 minority outcomes a request). Cumulative
/// counts are made non-decreasing and at most the total, so every bin is non-negative and they sum
/// to the total.
fn ordered_bins(o: &[f64], wo: f64, s: &[f64], ws: f64) -> Option<(Vec<f64>, bool)> {
    if o.len() != s.len() || o.is_empty() || !(wo - ws).is_finite() || wo <= ws {
        return None;
    }
    let total = wo - ws;
    let (mut c_o, mut c_s, mut kept) = (0.0, 0.0, 0.0f64);
    let mut was_clamped = false;
    let mut v = Vec::with_capacity(o.len());
    for (i, (&a, &b)) in o.iter().zip(s).enumerate() {
        let (a, b) = (
            if a.is_finite() { a.max(0.0) } else { 0.0 },
            if b.is_finite() { b.max(0.0) } else { 0.0 },
        );
        c_o += a * wo;
        c_s += b * ws;
        if a * wo - b * ws < -NEGLIGIBLE * wo.max(1.0) {
            was_clamped = true;
        }
        // The last bin takes whatever the total leaves (the shares may not sum to exactly 1).
        let reach = if i + 1 == o.len() {
            total
        } else {
            (c_o - c_s).clamp(kept, total)
        };
        // `reach` is never below `kept`: the clamp above, and the total on the last bin.
        v.push(reach - kept);
        kept = reach;
    }
    normalise(v.iter_mut()).then_some((v, was_clamped))
}

/// The hit rate of `c` at `size`: linear in log2(size) between points, flat beyond the ends (the
/// curve is at its top value from the footprint on).
fn hit_at(c: &HitCurve, size: f64) -> Option<f64> {
    let pts: Vec<(f64, f64)> = c
        .points
        .iter()
        .filter(|p| p.size > 0 && p.hit_rate.is_finite())
        .map(|p| ((p.size as f64).log2(), p.hit_rate))
        .collect();
    let x = size.max(1.0).log2();
    let first = pts.first()?;
    if x <= first.0 {
        return Some(first.1);
    }
    for w in pts.windows(2) {
        if x <= w[1].0 {
            let t = (x - w[0].0) / (w[1].0 - w[0].0).max(1e-12);
            return Some(w[0].1 + t * (w[1].1 - w[0].1));
        }
    }
    pts.last().map(|p| p.1)
}

/// The body's data hit curve: at each of the original's sizes C, the original's misses per request
/// M_o less the skeleton's beside the body, which is the lesser of two estimates:
///
/// * its share of the cache: in one LRU cache two streams hold lines in proportion to the lines they
///   bring in, their misses, so the skeleton keeps a share φ of the C lines with φ · M_o = its misses
///   alone at φ · C (its own curve). The root is unique (the left side grows with φ, the right one
///   falls), found by bisection. This holds where the two interleave finely, as far reuses do;
/// * the original's miss rate on its accesses. Within a request the skeleton runs in a burst with the
///   small caches to itself, where the share overstates what it loses (memcached's round trip: the
///   64-byte hit rate 11 points low, against 4 with the original's rate).
///
/// Why not the plain difference of hits, nor the original's curve as it stands (the second estimate
/// alone): the plain difference charges the skeleton only what it misses alone, but the body's
/// accesses evict its hot lines from the small caches, and memcached's round trip came out 6–10
/// points low from 64 B to 64 KiB. The original's curve gives the body the original's *rate* of far
/// misses, but the skeleton makes almost none of its own (memcached: 0.01 % of its accesses miss
/// 1 MiB against the original's 0.67 %), so the body, with 53 % of the accesses, made about 53 % of
/// the L2 misses.
fn data_curve(o: &HitCurve, a_o: f64, s: &HitCurve, a_s: f64) -> HitCurve {
    let a_b = a_o - a_s;
    let mut out = o.clone();
    if o.points.is_empty() || s.points.is_empty() || !(a_b > 0.0 && a_s >= 0.0) {
        return out;
    }
    let skeleton_misses =
        |cache: f64| -> f64 { hit_at(s, cache).map_or(0.0, |h| (1.0 - h).clamp(0.0, 1.0) * a_s) };
    for p in &mut out.points {
        let size = p.size as f64;
        let Some(h_o) = hit_at(o, size) else {
            continue;
        };
        let rate = (1.0 - h_o).clamp(0.0, 1.0);
        let m_o = rate * a_o;
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        for _ in 0..60 {
            let phi = 0.5 * (lo + hi);
            if skeleton_misses(phi * size) > phi * m_o {
                lo = phi;
            } else {
                hi = phi;
            }
        }
        let beside_body = skeleton_misses(0.5 * (lo + hi) * size).min(rate * a_s);
        p.hit_rate = (1.0 - (m_o - beside_body) / a_b).clamp(0.0, 1.0);
    }
    out
}

/// Hits of `o` minus hits of `s`, per access left, at the original's sizes (and up to the skeleton's
/// footprint when it is larger); clamped to [0, 1].
fn weighted_curve(o: &HitCurve, wo: f64, s: &HitCurve, ws: f64) -> (HitCurve, bool) {
    let mut out = o.clone();
    if o.points.is_empty() || s.points.is_empty() || (wo - ws).is_nan() || wo - ws <= 0.0 {
        return (out, false);
    }
    let mut sizes: Vec<u64> = o.points.iter().chain(&s.points).map(|p| p.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut was_clamped = false;
    out.points = sizes
        .into_iter()
        .filter_map(|size| {
            let h = (hit_at(o, size as f64)? * wo - hit_at(s, size as f64)? * ws) / (wo - ws);
            if !(-1e-6..=1.0 + 1e-6).contains(&h) {
                was_clamped = true;
            }
            Some(HitPoint {
                size,
                hit_rate: h.clamp(0.0, 1.0),
            })
        })
        .collect();
    (out, was_clamped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ditto_profile::Branches;

    fn curve(points: &[(u64, f64)]) -> HitCurve {
        HitCurve {
            points: points
                .iter()
                .map(|&(size, hit_rate)| HitPoint { size, hit_rate })
                .collect(),
            associativity: "8-way".into(),
            sampling_error: None,
        }
    }

    fn body(n: f64, loads: f64, taken: Vec<f64>, d: &[(u64, f64)], chase: f64) -> ClusterBody {
        ClusterBody {
            cluster: "c1".into(),
            instructions_per_request: n,
            mean_instruction_bytes: 4.0,
            instruction_mix: vec![
                MixShare {
                    class: "mov".into(),
                    operand: "load".into(),
                    share: loads,
                },
                MixShare {
                    class: "alu".into(),
                    operand: "reg".into(),
                    share: 1.0 - loads,
                },
            ],
            branches: Branches {
                per_request: n / 10.0,
                static_count: (n / 10.0) as u64,
                transition_rate: taken.clone(),
                taken_rate: taken,
                majority_taken: None,
                indirect: None,
            },
            instruction_working_set: curve(&[(64, 0.9), (128, 1.0)]),
            data_working_set: curve(d),
            pointer_chase_fraction: chase,
            ..ClusterBody::default()
        }
    }

    /// Combines two bodies the way a profile of both running together would see them.
    fn combined(a: &ClusterBody, b: &ClusterBody) -> ClusterBody {
        let (na, nb) = (a.instructions_per_request, b.instructions_per_request);
        let loads = |x: &ClusterBody| {
            x.instruction_mix
                .iter()
                .find(|m| m.operand == "load")
                .unwrap()
                .share
        };
        let l = (loads(a) * na + loads(b) * nb) / (na + nb);
        let (aa, ab) = (loads(a) * na, loads(b) * nb);
        let (ba, bb) = (a.branches.per_request, b.branches.per_request);
        let taken: Vec<f64> = (0..a.branches.taken_rate.len())
            .map(|i| (a.branches.taken_rate[i] * ba + b.branches.taken_rate[i] * bb) / (ba + bb))
            .collect();
        let d: Vec<(u64, f64)> = a
            .data_working_set
            .points
            .iter()
            .zip(&b.data_working_set.points)
            .map(|(p, q)| (p.size, (p.hit_rate * aa + q.hit_rate * ab) / (aa + ab)))
            .collect();
        let chase = (a.pointer_chase_fraction * aa + b.pointer_chase_fraction * ab) / (aa + ab);
        let mut c = body(na + nb, l, taken, &d, chase);
        // Two bodies' code: their static branches are apart, their executions add up.
        c.branches.static_count = a.branches.static_count + b.branches.static_count;
        c.branches.per_request = a.branches.per_request + b.branches.per_request;
        c
    }

    #[test]
    fn subtracting_the_skeleton_recovers_the_mix_branches_and_fractions_it_was_combined_with() {
        let skeleton = body(
            800.0,
            0.3,
            vec![0.5, 0.0, 0.5],
            &[(64, 0.6), (128, 0.8), (256, 1.0)],
            0.1,
        );
        let mut wanted = body(
            200.0,
            0.5,
            vec![0.0, 0.25, 0.75],
            &[(64, 0.2), (128, 0.5), (256, 0.9)],
            0.4,
        );
        // Twice the skeleton's density of conditional branches.
        wanted.branches.per_request = 40.0;
        let original = combined(&skeleton, &wanted);
        let (r, warnings) = subtract(&original, &skeleton, 1.0);
        assert!(warnings.is_empty(), "{warnings:?}");
        let loads = r
            .instruction_mix
            .iter()
            .find(|m| m.operand == "load")
            .unwrap();
        assert!((loads.share - 0.5).abs() < 1e-9, "{}", loads.share);
        for (got, want) in r.branches.taken_rate.iter().zip([0.0, 0.25, 0.75]) {
            assert!((got - want).abs() < 1e-9, "{:?}", r.branches.taken_rate);
        }
        assert!((r.pointer_chase_fraction - 0.4).abs() < 1e-9);
        // The body's 40 conditional branches per 200 instructions, as a density over the
        // original's 1,000 (the plan's divisor): 200.
        assert!(
            (r.branches.per_request - 200.0).abs() < 1e-9,
            "{}",
            r.branches.per_request
        );
        // The instruction count is left to the plan's skeleton_instructions.
        assert_eq!(r.instructions_per_request, 1000.0);
    }

    #[test]
    fn the_skeletons_indirect_jumps_are_taken_out_of_the_density_and_the_change_rates() {
        let indirect = |per_request: f64, bins: [f64; 2], mean: f64| {
            Some(ditto_profile::IndirectBranches {
                per_request,
                static_count: 5,
                target_change_rate: bins.to_vec(),
                mean_target_change_rate: mean,
            })
        };
        // Skeleton: 800 instructions, 8 jumps that never change target. Body: 200 instructions,
        // 12 jumps, half of them in bin 1 at rate 0.5. Together: 1,000 and 20, mean 0.15.
        let mut skeleton = body(800.0, 0.3, vec![1.0], &[(64, 1.0)], 0.0);
        skeleton.branches.indirect = indirect(8.0, [1.0, 0.0], 0.0);
        let mut original = body(1000.0, 0.3, vec![1.0], &[(64, 1.0)], 0.0);
        original.branches.indirect = indirect(20.0, [0.7, 0.3], 0.15);
        let (r, warnings) = subtract(&original, &skeleton, 1.0);
        assert!(warnings.is_empty(), "{warnings:?}");
        let i = r.branches.indirect.expect("kept");
        // 12 per 200 body instructions is 60 per the original's 1,000 (the plan's divisor).
        assert!((i.per_request - 60.0).abs() < 1e-9, "{}", i.per_request);
        assert!((i.mean_target_change_rate - 0.25).abs() < 1e-9);
        for (got, want) in i.target_change_rate.iter().zip([0.5, 0.5]) {
            assert!((got - want).abs() < 1e-9, "{:?}", i.target_change_rate);
        }
    }

    #[test]
    fn the_body_brings_only_the_static_branches_the_skeleton_does_not_run() {
        let mut skeleton = body(600.0, 0.3, vec![1.0], &[(64, 1.0)], 0.0);
        let mut original = body(1000.0, 0.3, vec![1.0], &[(64, 1.0)], 0.0);
        // memcached's worker: 614 static conditional branches, 456 of them its skeleton's.
        (
            original.branches.static_count,
            skeleton.branches.static_count,
        ) = (614, 456);
        let (r, warnings) = subtract(&original, &skeleton, 1.0);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(r.branches.static_count, 158);
        // The instruction scale multiplies work per request, not code: the sites stay.
        assert_eq!(
            subtract(&original, &skeleton, 1.5).0.branches.static_count,
            158
        );
        // A skeleton with as many sites as the original leaves the body one, said; an unknown
        // count (0) stays unknown.
        skeleton.branches.static_count = 700;
        let (r, warnings) = subtract(&original, &skeleton, 1.0);
        assert_eq!(r.branches.static_count, 1);
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("700 static conditional branches")),
            "{warnings:?}"
        );
        skeleton.branches.static_count = 0;
        assert_eq!(
            subtract(&original, &skeleton, 1.0).0.branches.static_count,
            614
        );
    }

    #[test]
    fn bins_the_skeleton_overfills_are_clamped_and_said() {
        let skeleton = body(900.0, 0.3, vec![1.0, 0.0], &[(64, 0.9)], 0.0);
        let original = body(1000.0, 0.3, vec![0.5, 0.5], &[(64, 0.9)], 0.0);
        let (r, warnings) = subtract(&original, &skeleton, 1.0);
        assert_eq!(r.branches.taken_rate, vec![0.0, 1.0]);
        assert!(
            warnings.iter().any(|w| w.contains("taken-rate bins")),
            "{warnings:?}"
        );
    }

    #[test]
    fn a_skeletons_excess_of_hard_branches_is_set_against_the_next_easier_bins() {
        // Branches per request are instructions / 10: original 100 (20 in bin 0, 30 in bin 1, 50 in
        // bin 2), skeleton 40 (all 40 in bin 0, the hardest). Bin by bin the body would keep bin 1's
        // 30; cumulatively the skeleton's 20 extra bin-0 executions cover 20 of them.
        let skeleton = body(400.0, 0.3, vec![1.0, 0.0, 0.0], &[(64, 0.9)], 0.0);
        let original = body(1000.0, 0.3, vec![0.2, 0.3, 0.5], &[(64, 0.9)], 0.0);
        let (r, warnings) = subtract(&original, &skeleton, 1.0);
        let bins = &r.branches.taken_rate;
        let want = [0.0, 10.0 / 60.0, 50.0 / 60.0];
        assert!(
            bins.iter().zip(want).all(|(b, w)| (b - w).abs() < 1e-9),
            "{bins:?} against {want:?}"
        );
        assert!(
            warnings.iter().any(|w| w.contains("taken-rate bins")),
            "{warnings:?}"
        );
        // A skeleton that overfills the easiest bin only leaves the harder ones as they were, the
        // easiest taking what the total leaves.
        let skeleton = body(400.0, 0.3, vec![0.0, 0.0, 1.0], &[(64, 0.9)], 0.0);
        let original = body(1000.0, 0.3, vec![0.4, 0.5, 0.1], &[(64, 0.9)], 0.0);
        let (r, _) = subtract(&original, &skeleton, 1.0);
        let bins = &r.branches.taken_rate;
        let want = [40.0 / 60.0, 20.0 / 60.0, 0.0];
        assert!(
            bins.iter().zip(want).all(|(b, w)| (b - w).abs() < 1e-9),
            "{bins:?} against {want:?}"
        );
    }

    #[test]
    fn a_skeleton_as_large_as_the_original_leaves_the_original() {
        let skeleton = body(1000.0, 0.3, vec![1.0, 0.0], &[(64, 0.9)], 0.0);
        let original = body(1000.0, 0.5, vec![0.5, 0.5], &[(64, 0.5)], 0.0);
        let (r, warnings) = subtract(&original, &skeleton, 1.0);
        assert_eq!(r, original);
        assert!(warnings[0].contains("not subtracted"), "{warnings:?}");
    }

    /// Original: 1,000 accesses per request (2,000 instructions × 0.5), 1 % of them missing 1 MiB.
    /// Skeleton: 400 accesses (1,000 × 0.4), all hitting from 256 B on.
    fn far_miss_pair() -> (ClusterBody, ClusterBody) {
        let skeleton = body(
            1000.0,
            0.4,
            vec![1.0],
            &[(64, 0.5), (256, 1.0), (1 << 20, 1.0)],
            0.0,
        );
        let original = body(
            2000.0,
            0.5,
            vec![1.0],
            &[(64, 0.5), (256, 0.9), (1 << 20, 0.99)],
            0.0,
        );
        (skeleton, original)
    }

    /// A skeleton that misses nothing beyond 256 B leaves the body all of the original's far misses:
    /// the body's miss rate there is the original's times a_o / a_b, not the original's rate.
    #[test]
    fn the_body_makes_the_far_misses_the_skeleton_does_not() {
        // The body has 600 accesses to make the original's 10 far misses (less the skeleton's
        // share of the cache, under 256 B of 1 MiB).
        let (skeleton, original) = far_miss_pair();
        let (r, warnings) = subtract(&original, &skeleton, 1.0);
        assert!(warnings.is_empty(), "{warnings:?}");
        let at = |size: f64| hit_at(&r.data_working_set, size).expect("point");
        assert!(
            (at(1048576.0) - (1.0 - 10.0 / 600.0)).abs() < 1e-5,
            "{}",
            at(1048576.0)
        );
        // The original's sizes are kept.
        assert_eq!(r.data_working_set.points.len(), 3);
    }

    /// The tuner's instruction scale multiplies the original's work, not the body's residual: at ×2
    /// the skeleton is a smaller part of the original, so the body's far-miss rate and its mix come
    /// closer to the original's, and its far misses are twice the original's less the skeleton's.
    #[test]
    fn the_instruction_scale_multiplies_the_original_before_the_skeleton_is_subtracted() {
        let (skeleton, original) = far_miss_pair();
        let (r, warnings) = subtract(&original, &skeleton, 2.0);
        assert!(warnings.is_empty(), "{warnings:?}");
        // Scaled original: 4,000 instructions, 2,000 accesses, 20 missing 1 MiB. The body: 3,000
        // instructions and 1,600 accesses to make all 20 (at ×1 it was 10 of 600).
        let far = hit_at(&r.data_working_set, 1048576.0).expect("point");
        assert!((far - (1.0 - 20.0 / 1600.0)).abs() < 1e-5, "{far}");
        let loads = r
            .instruction_mix
            .iter()
            .find(|m| m.operand == "load")
            .expect("loads");
        assert!(
            (loads.share - 1600.0 / 3000.0).abs() < 1e-9,
            "{}",
            loads.share
        );
        // The plan scales the count itself.
        assert_eq!(r.instructions_per_request, 2000.0);
    }

    /// Beside the body, the skeleton holds the share of the cache that its share of the misses buys:
    /// φ · M_o = its misses alone at φ · C. It is charged that, more than it misses alone, and the
    /// body gets the rest.
    #[test]
    fn the_skeleton_is_charged_its_misses_in_its_share_of_the_cache() {
        let skeleton = body(
            1000.0,
            0.4,
            vec![1.0],
            &[(64, 0.9), (128, 0.95), (256, 0.98)],
            0.0,
        );
        let original = body(
            2000.0,
            0.5,
            vec![1.0],
            &[(64, 0.5), (128, 0.6), (256, 0.8)],
            0.0,
        );
        let (r, _) = subtract(&original, &skeleton, 1.0);
        // At 256 B: the original misses 200 of its 1,000 accesses, the skeleton alone 8 of 400.
        let body_misses = (1.0 - hit_at(&r.data_working_set, 256.0).expect("point")) * 600.0;
        let phi = (200.0 - body_misses) / 200.0;
        let alone = |c: f64| (1.0 - hit_at(&skeleton.data_working_set, c).expect("point")) * 400.0;
        assert!((alone(phi * 256.0) - phi * 200.0).abs() < 1e-6, "phi {phi}");
        assert!(body_misses < 200.0 - alone(256.0), "{body_misses}");
        // Below the original's rate (0.2 × 400 = 80), so the share is what counts.
        assert!(body_misses > 200.0 - 80.0, "{body_misses}");
    }

    /// Where the share of the cache would charge the skeleton more than the original's miss rate, it
    /// is charged that rate: the body's curve is the original's there.
    #[test]
    fn the_skeleton_is_charged_at_most_the_originals_rate() {
        let skeleton = body(
            1000.0,
            0.4,
            vec![1.0],
            &[(64, 0.2), (128, 0.5), (256, 0.6)],
            0.0,
        );
        let original = body(
            2000.0,
            0.5,
            vec![1.0],
            &[(64, 0.5), (128, 0.9), (256, 0.95)],
            0.0,
        );
        let (r, warnings) = subtract(&original, &skeleton, 1.0);
        assert!(warnings.is_empty(), "{warnings:?}");
        for size in [128.0, 256.0] {
            let got = hit_at(&r.data_working_set, size).expect("point");
            let want = hit_at(&original.data_working_set, size).expect("point");
            assert!((got - want).abs() < 1e-9, "{size}: {got} against {want}");
        }
    }
}
