//! Rep-string instructions over a recorded profile (memcached's worker, `profiles/memcached.json`):
//! whatever the seed, the body's repetitions per call are the plan's, read back from the rendered
//! assembly (each `mov ecx, N` before a `rep` instruction, times its block's chunk runs per call).

mod common;

use ditto_generator::knobs::Knobs;

/// One rendered rep instruction: its short count (`mov ecx, N`), and in two modes its long count
/// (`mov esi, L`) and the counter mask whose all-clear executions take it (`test ebx, M` before
/// `cmovz ecx, esi`).
#[derive(Debug, Default, Clone, Copy)]
struct RenderedRep {
    count: f64,
    long: Option<(f64, u32)>,
    runs_per_chunk: f64,
}

impl RenderedRep {
    /// Mean repetitions per execution: the long count on one execution in 2^(mask's bits).
    fn mean(&self) -> f64 {
        match self.long {
            Some((long, mask)) => {
                let period = f64::from(1u32 << mask.count_ones());
                (long + (period - 1.0) * self.count) / period
            }
            None => self.count,
        }
    }
}

/// Every `rep` instruction of the rendered body, with the runs per call of its block's chunks
/// (`x / ring`, from the block comment "// block B: BYTES bytes, RING chunk(s), X chunk executions
/// per call").
fn rendered_reps(text: &str) -> Vec<RenderedRep> {
    let mut runs_per_chunk = 0.0;
    let mut cur = RenderedRep::default();
    let mut long = None;
    let mut mask = None;
    let mut reps = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("// block ") {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let ring: f64 = words[3].parse().expect("ring");
            let x: f64 = words[5].parse().expect("chunk executions");
            runs_per_chunk = x / ring;
        } else if let Some(n) = line.strip_prefix("mov ecx, ") {
            // The last immediate count before the rep (the mix has its own `mov ecx, …`).
            if let Ok(n) = n.parse::<f64>() {
                cur.count = n;
            }
        } else if let Some(n) = line.strip_prefix("mov esi, ") {
            long = n.parse::<f64>().ok();
        } else if let Some(m) = line.strip_prefix("test ebx, ") {
            mask = m.parse::<u32>().ok();
        } else if line == "cmovz ecx, esi" {
            cur.long = Some((long.expect("a long count"), mask.expect("a counter mask")));
        } else if line.starts_with("rep ") {
            assert!(cur.count > 0.0, "a count before every rep instruction");
            cur.runs_per_chunk = runs_per_chunk;
            reps.push(cur);
            cur = RenderedRep::default();
            (long, mask) = (None, None);
        }
    }
    reps
}

/// Repetitions per call of the rendered body, and its rep instructions.
fn rendered_rep_iterations(text: &str) -> (f64, usize) {
    let reps = rendered_reps(text);
    let total = reps.iter().map(|r| r.runs_per_chunk * r.mean()).sum();
    (total, reps.len())
}

/// memcached's worker repeats 1–7 times in two thirds of its rep executions and 128–255 times in
/// the rest (`plan::RepSplit`): every rep instruction takes the short mean, and its long count on
/// one execution in four, so cachegrind sees a long exit as often as the profile has one.
#[test]
fn rep_instructions_take_the_profiles_short_count_and_its_long_count_one_time_in_four() {
    let mut body = common::committed_body("memcached", "c1");
    // The two modes of one histogram for both kinds, as a profile without counts by kind has it.
    body.rep_counts_by_operand = None;
    for seed in 1..=3 {
        let asm = common::synth_seeded(&body, &Knobs::default(), seed);
        let reps = rendered_reps(&asm.text);
        assert!(!reps.is_empty(), "seed {seed}: no rep instruction");
        for r in &reps {
            let (long, mask) = r.long.expect("memcached's reps have two modes");
            assert_eq!(mask.count_ones(), 2, "seed {seed}: {r:?}");
            assert!(
                (3.0..=5.0).contains(&r.count) && long >= 64.0,
                "seed {seed}: short {} and long {long}",
                r.count
            );
        }
    }
}

/// Rep instructions land in chunks run 0.5 or 1 times per call, so the executions per call the mix
/// realises vary by seed (memcached's worker: 1.5 or 2.5 against 2.9), and with them, before the
/// counts were settled on the plan's total, the repetitions per call (103 against 171.5) that
/// cachegrind counts as instructions and branches.
#[test]
fn every_seed_renders_the_planned_rep_string_repetitions_per_call() {
    let body = common::committed_body("memcached", "c1");
    for seed in 1..=5 {
        let asm = common::synth_seeded(&body, &Knobs::default(), seed);
        let (target, reported) = asm.stats.rep_iterations_per_call;
        let (rendered, instructions) = rendered_rep_iterations(&asm.text);
        assert!(instructions > 0, "seed {seed}: no rep instruction");
        assert!(
            target > 100.0,
            "seed {seed}: plan owes {target:.1} repetitions per call"
        );
        assert!(
            (rendered - target).abs() <= 0.01 * target,
            "seed {seed}: rendered {rendered:.1} repetitions per call, plan {target:.1}"
        );
        assert!(
            (rendered - reported).abs() < 1e-6,
            "seed {seed}: README reports {reported:.1}, body renders {rendered:.1}"
        );
    }
}

/// The profiler classes `rep stos` as a store and `rep movs` as a read-modify-write (it reads one
/// buffer and writes another), so a body renders each where its profile has that kind. The two
/// were one class, either instruction drawn at random: the ground-truth program `mix`, whose rep
/// instructions all copy, came back from its clone with 3.3 % rep/store and 0.02 % rep/rmw against
/// 0 % and 4.1 % (`validation/bench/roundtrip.sh`).
#[test]
fn rep_strings_render_as_the_profiles_stores_and_copies() {
    let base = common::committed_body("memcached", "c1");
    for (keep, want_stos) in [("rmw", false), ("store", true)] {
        let mut body = base.clone();
        // All rep executions of the profile as one kind.
        let total: f64 = body
            .instruction_mix
            .iter()
            .filter(|m| m.class == "rep")
            .map(|m| m.share)
            .sum();
        assert!(total > 0.0, "memcached's worker runs rep strings");
        for m in body.instruction_mix.iter_mut().filter(|m| m.class == "rep") {
            m.share = if m.operand == keep { total } else { 0.0 };
        }
        for seed in 1..=3 {
            let asm = common::synth_seeded(&body, &Knobs::default(), seed);
            let reps = counts_by_instruction(&asm.text);
            let runs = |fills: bool| -> f64 {
                reps.iter()
                    .filter(|(fill, _)| *fill == fills)
                    .map(|(_, r)| r.runs_per_chunk)
                    .sum()
            };
            let (stos, movs) = (runs(true), runs(false));
            let (own, other) = if want_stos {
                (stos, movs)
            } else {
                (movs, stos)
            };
            assert!(
                own > 0.0 && other == 0.0,
                "rep/{keep} only, seed {seed}: rep stosb {stos:.2} and rep movsb {movs:.2} a call"
            );
        }
    }
}

/// Every rendered rep instruction's count and whether it has a long mode, by instruction.
fn counts_by_instruction(text: &str) -> Vec<(bool, RenderedRep)> {
    let reps = rendered_reps(text);
    let kinds: Vec<bool> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("rep "))
        .map(|l| l == "rep stosb")
        .collect();
    kinds.into_iter().zip(reps).collect()
}

/// A profile with counts by kind (`rep_counts_by_operand`) gives fills and copies their own: here
/// fills of 128-255 bytes and copies of 2-3, as memcached's workers (their fills are 146 bytes,
/// their copies 1-7). With one histogram for both, every copy took the fills' long mode one time in
/// four and a copy loads and stores in turn between two lines: memcached's clone's 64-byte data hit
/// rate read 6.8 points under its original's (`validation/bench/roundtrip.sh`).
#[test]
fn fills_and_copies_repeat_as_the_profile_counts_each_kind() {
    use ditto_profile::{Bin, Histogram};
    let mut body = common::committed_body("memcached", "c1");
    let hist = |lo, hi| Histogram {
        unit: "count".into(),
        bins: vec![Bin::new(lo, hi, 100)],
    };
    body.rep_counts_by_operand = Some(
        [
            ("store".to_string(), hist(128, 256)),
            ("rmw".to_string(), hist(2, 4)),
        ]
        .into_iter()
        .collect(),
    );
    for seed in 1..=3 {
        let asm = common::synth_seeded(&body, &Knobs::default(), seed);
        let reps = counts_by_instruction(&asm.text);
        assert!(
            reps.iter().any(|(fill, _)| *fill) && reps.iter().any(|(fill, _)| !*fill),
            "seed {seed}: both kinds rendered: {reps:?}"
        );
        for (fill, r) in &reps {
            // One mode each: no long count for either.
            assert!(r.long.is_none(), "seed {seed}: {r:?}");
            if *fill {
                assert!(r.count >= 64.0, "seed {seed}: a fill repeats {}", r.count);
            } else {
                assert!(r.count <= 8.0, "seed {seed}: a copy repeats {}", r.count);
            }
        }
        let (target, reported) = asm.stats.rep_iterations_per_call;
        assert!(
            (reported - target).abs() <= 0.02 * target,
            "seed {seed}: {reported:.1} repetitions a call against {target:.1}"
        );
    }
}
