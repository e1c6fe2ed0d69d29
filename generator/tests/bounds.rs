//! Bounds proofs over randomised profiles: for many seeds, a random body profile (any classes and
//! operands, random hit curves up to MiB footprints, random branch, dependency and access-pattern
//! distributions) is synthesised; every memory operand the body emits must have been proven inside its
//! buffer, and every memory operand in the text must be one that was proven.

mod common;

use ditto_generator::isa::{CLASSES, OPNDS};
use ditto_generator::knobs::Knobs;
use ditto_generator::rng::Rng;
use ditto_generator::synth::{synthesize, Buffer};
use ditto_profile::{
    Bin, Branches, ClusterBody, Dependencies, Histogram, HitCurve, HitPoint, IndirectBranches,
    MixShare,
};

fn curve(rng: &mut Rng, max_log2: u64) -> HitCurve {
    let top = 6 + rng.below(max_log2 - 5);
    let mut h = rng.f64() * 0.7;
    let points = (6..=top)
        .map(|k| {
            h = (h + rng.f64() * (1.0 - h) * 0.5).min(1.0);
            HitPoint {
                size: 1 << k,
                hit_rate: if k == top { 1.0 - rng.f64() * 0.05 } else { h },
            }
        })
        .collect();
    HitCurve {
        points,
        associativity: "8-way".into(),
        sampling_error: None,
    }
}

fn bins(rng: &mut Rng) -> Vec<f64> {
    (0..11).map(|_| rng.f64().powi(2)).collect()
}

fn random_body(rng: &mut Rng) -> ClusterBody {
    let mut mix = Vec::new();
    for c in CLASSES {
        for o in OPNDS {
            if rng.below(3) == 0 {
                mix.push(MixShare {
                    class: c.name().into(),
                    operand: o.name().into(),
                    share: rng.f64(),
                });
            }
        }
    }
    let ipr = 500.0 + rng.f64() * 30_000.0;
    ClusterBody {
        cluster: "c1".into(),
        syscalls_per_request: 0.0,
        instructions_per_request: ipr,
        mean_instruction_bytes: 2.0 + rng.f64() * 6.0,
        instruction_mix: mix,
        rep_counts: Some(Histogram {
            unit: "count".into(),
            bins: vec![
                Bin::new(1, 16, 1 + rng.below(10)),
                Bin::new(1024, 65536, rng.below(3)),
            ],
        }),
        // Copies short, fills long (as memcached's workers), or the other way round.
        rep_counts_by_operand: Some(
            [("store", rng.below(2) == 0), ("rmw", rng.below(2) == 0)]
                .into_iter()
                .map(|(operand, long)| {
                    let bin = if long {
                        Bin::new(1024, 65536, 1 + rng.below(3))
                    } else {
                        Bin::new(1, 8, 1 + rng.below(10))
                    };
                    (
                        operand.to_string(),
                        Histogram {
                            unit: "count".into(),
                            bins: vec![bin],
                        },
                    )
                })
                .collect(),
        ),
        branches: Branches {
            per_request: ipr * rng.f64() * 0.3,
            static_count: 100,
            taken_rate: bins(rng),
            transition_rate: bins(rng),
            majority_taken: Some(bins(rng)),
            indirect: Some(IndirectBranches {
                per_request: ipr * rng.f64() * 0.05,
                static_count: 50,
                target_change_rate: bins(rng),
                mean_target_change_rate: rng.f64(),
            }),
        },
        instruction_working_set: curve(rng, 17),
        data_working_set: curve(rng, 22),
        dependencies: Dependencies {
            raw: bins(rng),
            war: bins(rng),
            waw: bins(rng),
        },
        shared_data_fraction: rng.f64(),
        regular_access_fraction: rng.f64(),
        pointer_chase_fraction: rng.f64() * 0.5,
        instruction_pages: 10,
    }
}

#[test]
fn every_memory_operand_is_in_range_for_random_profiles() {
    for seed in 0..40u64 {
        let mut rng = Rng::new(seed, 99);
        let body = random_body(&mut rng);
        let mut knobs = Knobs::default();
        knobs.limits.max_rep_count = 1 + rng.below(5000);
        knobs.data_working_set.size_scale = 0.25 + rng.f64() * 4.0;
        let p = common::worker_plan(&body, &knobs);
        let asm =
            synthesize("c1", &p, &knobs, seed).unwrap_or_else(|e| panic!("seed {seed}: {e:#}"));
        assert!(asm.priv_bytes % 64 == 0 && asm.shared_bytes % 64 == 0);
        for pr in &asm.proofs {
            let size = match pr.buffer {
                Buffer::Priv => asm.priv_bytes,
                Buffer::Shared => asm.shared_bytes,
                Buffer::Ctx => 16,
                Buffer::Stack => 8,
            };
            assert!(
                pr.lo < pr.hi && pr.hi <= size,
                "seed {seed}: {pr:?} outside {size}"
            );
        }
        // The body function's text: every `ptr [` operand and every rep-string was proven.
        let body_text = asm
            .text
            .split(&format!("{}:", asm.init_symbol))
            .next()
            .unwrap_or_default();
        let ptr_ops = body_text.matches("ptr [").count();
        let reps =
            body_text.matches("rep movsb").count() * 2 + body_text.matches("rep stosb").count();
        assert_eq!(ptr_ops + reps, asm.proofs.len(), "seed {seed}");
        // Only the bases the proofs know about address memory.
        for line in body_text.lines().filter(|l| l.contains("ptr [")) {
            let inside = &line[line.find("ptr [").unwrap_or(0) + 5..];
            let base = inside.split([' ', ']']).next().unwrap_or_default();
            assert!(
                ["r15", "r14", "rdi", "rsp"].contains(&base),
                "seed {seed}: unexpected base in `{line}`"
            );
        }
    }
}
