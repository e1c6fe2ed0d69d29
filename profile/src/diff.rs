//! Field-by-field comparison of two body profiles (an original and its clone): the round-trip check
//! profile(generate(P)) ≈ P, and what the tuner reads.

use serde::Serialize;

use crate::{ClusterBody, HitCurve, Syscalls};

/// How a field's error is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// |clone − original| / original.
    Relative,
    /// |clone − original| of shares or rates, in points (1 point = 0.01).
    Points,
}

/// One compared field.
#[derive(Debug, Clone, Serialize)]
pub struct FieldDiff {
    pub field: String,
    pub original: f64,
    pub clone: f64,
    pub kind: ErrorKind,
    /// Relative error, or absolute difference in points.
    pub error: f64,
    /// The tolerance of the round-trip check for this field.
    pub tolerance: f64,
}

impl FieldDiff {
    pub fn within(&self) -> bool {
        self.error <= self.tolerance
    }

    /// Error as a multiple of the tolerance (what "worst" means across fields of different kinds).
    pub fn severity(&self) -> f64 {
        if self.tolerance > 0.0 {
            self.error / self.tolerance
        } else {
            f64::INFINITY
        }
    }
}

/// Round-trip tolerances: instructions 3 %, mix shares 2 points, hit curves 3 points, histograms and
/// fractions 5 points.
pub const INSTRUCTIONS_TOL: f64 = 0.03;
pub const MIX_TOL: f64 = 2.0;
pub const CURVE_TOL: f64 = 3.0;
pub const HISTOGRAM_TOL: f64 = 5.0;
/// Indirect jumps and calls per request: 10 % (a site is a few instructions of dispatch; the clone
/// places at most one per chunk).
pub const INDIRECT_TOL: f64 = 0.10;
/// Indirect jumps are compared only where the original makes at least this many per request: below
/// it they are start-up and exit (a plain program's few PLT jumps over a long run), while a clone's
/// own frame adds about one per call (its ring entries, the harness's call).
pub const INDIRECT_MIN_PER_REQUEST: f64 = 1.0;
/// Syscalls per request by name: 2 % (issue bar for a clone's skeleton).
pub const SYSCALL_TOL: f64 = 0.02;
/// Calls rarer than this per request in the original are connection set-up or noise, not compared.
pub const SYSCALL_MIN_PER_REQUEST: f64 = 0.01;

fn points(field: String, original: f64, clone: f64, tolerance: f64) -> FieldDiff {
    FieldDiff {
        field,
        original,
        clone,
        kind: ErrorKind::Points,
        error: 100.0 * (clone - original).abs(),
        tolerance,
    }
}

fn relative(field: String, original: f64, clone: f64, tolerance: f64) -> FieldDiff {
    FieldDiff {
        field,
        original,
        clone,
        kind: ErrorKind::Relative,
        error: if original > 0.0 {
            (clone - original).abs() / original
        } else {
            clone.abs()
        },
        tolerance,
    }
}

fn histogram(out: &mut Vec<FieldDiff>, name: &str, a: &[f64], b: &[f64]) {
    for i in 0..a.len().max(b.len()) {
        let (x, y) = (
            a.get(i).copied().unwrap_or(0.0),
            b.get(i).copied().unwrap_or(0.0),
        );
        out.push(points(format!("{name}[{i}]"), x, y, HISTOGRAM_TOL));
    }
}

fn curve(out: &mut Vec<FieldDiff>, name: &str, a: &HitCurve, b: &HitCurve) {
    let last = |c: &HitCurve| c.points.last().map_or(0.0, |p| p.hit_rate);
    for p in &a.points {
        // Beyond a curve's footprint its last point holds.
        let other = b
            .points
            .iter()
            .find(|q| q.size == p.size)
            .map_or(last(b), |q| q.hit_rate);
        out.push(points(
            format!("{name}@{}", p.size),
            p.hit_rate,
            other,
            CURVE_TOL,
        ));
    }
}

/// Every compared field of `clone` against `original`.
pub fn body_diff(original: &ClusterBody, clone: &ClusterBody) -> Vec<FieldDiff> {
    let mut out = Vec::new();
    out.push(relative(
        "instructions_per_request".into(),
        original.instructions_per_request,
        clone.instructions_per_request,
        INSTRUCTIONS_TOL,
    ));
    let mut keys: Vec<(String, String)> = original
        .instruction_mix
        .iter()
        .chain(&clone.instruction_mix)
        .map(|m| (m.class.clone(), m.operand.clone()))
        .collect();
    keys.sort();
    keys.dedup();
    let share = |body: &ClusterBody, k: &(String, String)| -> f64 {
        body.instruction_mix
            .iter()
            .filter(|m| m.class == k.0 && m.operand == k.1)
            .map(|m| m.share)
            .sum()
    };
    for k in &keys {
        out.push(points(
            format!("mix.{}/{}", k.0, k.1),
            share(original, k),
            share(clone, k),
            MIX_TOL,
        ));
    }
    histogram(
        &mut out,
        "taken_rate",
        &original.branches.taken_rate,
        &clone.branches.taken_rate,
    );
    histogram(
        &mut out,
        "transition_rate",
        &original.branches.transition_rate,
        &clone.branches.transition_rate,
    );
    if let (Some(a), Some(b)) = (
        original.branches.majority_taken_share(),
        clone.branches.majority_taken_share(),
    ) {
        out.push(points("majority_taken".into(), a, b, HISTOGRAM_TOL));
    }
    let indirect = (&original.branches.indirect, &clone.branches.indirect);
    if let (Some(a), Some(b)) = indirect {
        if a.per_request >= INDIRECT_MIN_PER_REQUEST {
            out.push(relative(
                "indirect.per_request".into(),
                a.per_request,
                b.per_request,
                INDIRECT_TOL,
            ));
            out.push(points(
                "indirect.mean_target_change_rate".into(),
                a.mean_target_change_rate,
                b.mean_target_change_rate,
                HISTOGRAM_TOL,
            ));
        }
    }
    curve(
        &mut out,
        "instruction_hit",
        &original.instruction_working_set,
        &clone.instruction_working_set,
    );
    curve(
        &mut out,
        "data_hit",
        &original.data_working_set,
        &clone.data_working_set,
    );
    histogram(
        &mut out,
        "raw",
        &original.dependencies.raw,
        &clone.dependencies.raw,
    );
    histogram(
        &mut out,
        "war",
        &original.dependencies.war,
        &clone.dependencies.war,
    );
    histogram(
        &mut out,
        "waw",
        &original.dependencies.waw,
        &clone.dependencies.waw,
    );
    for (name, x, y) in [
        (
            "shared_data_fraction",
            original.shared_data_fraction,
            clone.shared_data_fraction,
        ),
        (
            "regular_access_fraction",
            original.regular_access_fraction,
            clone.regular_access_fraction,
        ),
        (
            "pointer_chase_fraction",
            original.pointer_chase_fraction,
            clone.pointer_chase_fraction,
        ),
    ] {
        out.push(points(name.into(), x, y, HISTOGRAM_TOL));
    }
    out
}

/// Syscalls per request by name over the whole process (all clusters added up, so the comparison
/// does not depend on how each side's threads were clustered): every call the original makes at
/// least `SYSCALL_MIN_PER_REQUEST` times per request, relative error, and calls only the clone makes
/// that often (original 0, error 1).
pub fn syscall_diff(original: &Syscalls, clone: &Syscalls) -> Vec<FieldDiff> {
    let a = original.per_request_by_name();
    let b = clone.per_request_by_name();
    let mut names: Vec<&str> = a
        .iter()
        .chain(b.iter())
        .filter(|(_, &v)| v >= SYSCALL_MIN_PER_REQUEST)
        .map(|(n, _)| *n)
        .collect();
    names.sort_unstable();
    names.dedup();
    // Busiest in the original first, as the profile lists them.
    names.sort_by(|x, y| {
        let (vx, vy) = (
            a.get(x).copied().unwrap_or(0.0),
            a.get(y).copied().unwrap_or(0.0),
        );
        vy.total_cmp(&vx)
    });
    names
        .into_iter()
        .map(|n| {
            let o = a.get(n).copied().unwrap_or(0.0);
            let c = b.get(n).copied().unwrap_or(0.0);
            FieldDiff {
                field: format!("syscalls.{n}"),
                original: o,
                clone: c,
                kind: ErrorKind::Relative,
                error: if o > 0.0 { (c - o).abs() / o } else { 1.0 },
                tolerance: SYSCALL_TOL,
            }
        })
        .collect()
}

/// The field furthest outside (or closest to) its tolerance.
pub fn worst(diffs: &[FieldDiff]) -> Option<&FieldDiff> {
    diffs
        .iter()
        .max_by(|a, b| a.severity().total_cmp(&b.severity()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Branches, Dependencies, HitPoint, MixShare};

    fn body(ipr: f64, alu: f64, hit: f64) -> ClusterBody {
        ClusterBody {
            cluster: "c1".into(),
            instructions_per_request: ipr,
            instruction_mix: vec![
                MixShare {
                    class: "alu".into(),
                    operand: "reg".into(),
                    share: alu,
                },
                MixShare {
                    class: "mov".into(),
                    operand: "load".into(),
                    share: 1.0 - alu,
                },
            ],
            branches: Branches {
                taken_rate: vec![0.5, 0.5],
                transition_rate: vec![1.0],
                ..Branches::default()
            },
            data_working_set: HitCurve {
                points: vec![HitPoint {
                    size: 4096,
                    hit_rate: hit,
                }],
                ..HitCurve::default()
            },
            dependencies: Dependencies::default(),
            ..ClusterBody::default()
        }
    }

    fn syscalls(calls: &[(&str, &str, f64)]) -> Syscalls {
        let mut s = Syscalls::default();
        for &(cluster, name, per_request) in calls {
            let stat = crate::SyscallStat {
                name: name.into(),
                per_request,
                ..Default::default()
            };
            match s.clusters.iter_mut().find(|c| c.cluster == cluster) {
                Some(c) => c.calls.push(stat),
                None => s.clusters.push(crate::ClusterSyscalls {
                    cluster: cluster.into(),
                    calls: vec![stat],
                }),
            }
        }
        s
    }

    #[test]
    fn majority_taken_is_compared_in_points_only_when_both_sides_record_it() {
        let mut a = body(1000.0, 0.5, 0.9);
        let mut b = a.clone();
        let field = |a: &ClusterBody, b: &ClusterBody| {
            body_diff(a, b)
                .into_iter()
                .find(|f| f.field == "majority_taken")
        };
        a.branches.majority_taken = Some(vec![0.2, 0.6]);
        assert!(field(&a, &b).is_none(), "the clone did not record it");
        // Bins weighted by the taken-rate shares: 0.5 × 0.2 + 0.5 × 0.6 = 0.4 against 0.5.
        b.branches.majority_taken = Some(vec![0.5, 0.5]);
        let f = field(&a, &b).expect("compared");
        assert!((f.original - 0.4).abs() < 1e-12 && (f.clone - 0.5).abs() < 1e-12);
        assert_eq!(f.kind, ErrorKind::Points);
        assert!((f.error - 10.0).abs() < 1e-9 && !f.within());
    }

    #[test]
    fn indirect_branches_are_compared_where_both_record_them_and_the_original_makes_one_per_request(
    ) {
        let mut a = body(1000.0, 0.5, 0.9);
        let mut b = a.clone();
        let fields = |a: &ClusterBody, b: &ClusterBody| -> Vec<FieldDiff> {
            body_diff(a, b)
                .into_iter()
                .filter(|f| f.field.starts_with("indirect."))
                .collect()
        };
        let indirect = |per_request: f64, mean: f64| crate::IndirectBranches {
            per_request,
            static_count: 3,
            target_change_rate: vec![0.0; 11],
            mean_target_change_rate: mean,
        };
        a.branches.indirect = Some(indirect(10.0, 0.30));
        assert!(fields(&a, &b).is_empty(), "the clone did not record them");
        b.branches.indirect = Some(indirect(10.5, 0.20));
        let f = fields(&a, &b);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].field, "indirect.per_request");
        assert!((f[0].error - 0.05).abs() < 1e-9 && f[0].within());
        assert_eq!(f[1].kind, ErrorKind::Points);
        assert!((f[1].error - 10.0).abs() < 1e-9 && !f[1].within());
        // A plain program's start-up jumps over a long run are not compared.
        a.branches.indirect = Some(indirect(0.03, 0.30));
        assert!(fields(&a, &b).is_empty(), "below one per request");
    }

    #[test]
    fn syscalls_are_compared_per_process_and_rare_calls_are_skipped() {
        // The original's reads are split over two clusters, the clone's are in one.
        let a = syscalls(&[
            ("c1", "recvfrom", 0.6),
            ("c2", "recvfrom", 0.5),
            ("c1", "accept4", 0.001),
        ]);
        let b = syscalls(&[("w", "recvfrom", 1.1), ("w", "futex", 0.2)]);
        let d = syscall_diff(&a, &b);
        let fields: Vec<&str> = d.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["syscalls.recvfrom", "syscalls.futex"]);
        assert!(d[0].within() && d[0].error < 1e-9);
        // A call only the clone makes is outside its limit.
        assert!(!d[1].within());
    }

    #[test]
    fn identical_bodies_have_no_error() {
        let a = body(1000.0, 0.4, 0.9);
        let d = body_diff(&a, &a);
        assert!(d.iter().all(|f| f.error == 0.0 && f.within()));
    }

    #[test]
    fn errors_use_relative_for_counts_and_points_for_shares() {
        let d = body_diff(&body(1000.0, 0.40, 0.90), &body(1050.0, 0.43, 0.80));
        let get = |n: &str| d.iter().find(|f| f.field == n).expect(n);
        assert!((get("instructions_per_request").error - 0.05).abs() < 1e-9);
        assert!((get("mix.alu/reg").error - 3.0).abs() < 1e-9);
        assert!((get("data_hit@4096").error - 10.0).abs() < 1e-9);
        // 10 points over a 3-point tolerance is the worst.
        assert_eq!(worst(&d).expect("fields").field, "data_hit@4096");
    }
}
