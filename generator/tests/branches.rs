//! Branch placement and direction over a recorded profile (nginx's, `profiles/nginx.json`): pattern
//! branches take the majority direction the profile records, and they are concentrated in hot code so
//! that the body's static conditional branches approach the profile's count.

use std::path::Path;

use ditto_generator::knobs::Knobs;
use ditto_generator::plan::{plan, PlanInput};
use ditto_generator::synth::{synthesize, ClusterAsm};
use ditto_profile::{ClusterBody, Profile};

fn nginx_body() -> ClusterBody {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles/nginx.json");
    let p = Profile::load(&path).expect("committed nginx profile loads");
    p.body
        .expect("body")
        .clusters
        .into_iter()
        .next()
        .expect("c1")
}

fn synth(body: &ClusterBody) -> ClusterAsm {
    let knobs = Knobs::default();
    let p = plan(
        &PlanInput {
            body: Some(body),
            calls_per_request: 1.0,
            cluster: "c1",
            skeleton_instructions: 0.0,
        },
        &knobs,
    );
    synthesize("c1", &p, &knobs, 1).expect("synthesises")
}

/// (mask, jz) of every pattern branch: `test ebx|bl, MASK` followed by `jz`/`jnz 1f`.
fn patterns(asm: &ClusterAsm) -> Vec<(u64, bool)> {
    let lines: Vec<&str> = asm.text.lines().map(str::trim).collect();
    lines
        .windows(2)
        .filter_map(|w| {
            let mask = w[0]
                .strip_prefix("test ebx, ")
                .or_else(|| w[0].strip_prefix("test bl, "))?;
            let jz = match w[1] {
                "jz 1f" => true,
                "jnz 1f" => false,
                _ => return None,
            };
            Some((mask.parse().expect("mask"), jz))
        })
        .collect()
}

#[test]
fn pattern_branches_take_the_recorded_majority_direction() {
    // `test` sets ZF when every mask bit is clear: rarely for a pattern mask (`jz` is the minority,
    // so `jnz` is taken more often than not), always for the "never" mask, bit 30 (`jz` always taken).
    const NEVER: u64 = 1 << 30;
    for all_taken in [true, false] {
        let mut body = nginx_body();
        body.branches.majority_taken = Some(vec![f64::from(u8::from(all_taken)); 11]);
        let asm = synth(&body);
        let p = patterns(&asm);
        assert!(p.len() > 100, "{} pattern branches", p.len());
        for (mask, jz) in p {
            let taken = if mask == NEVER { jz } else { !jz };
            assert_eq!(taken, all_taken, "mask {mask:#x}, jz {jz}");
        }
    }
    // As recorded (36 % of nginx's executions are majority-taken), within 5 points.
    let body = nginx_body();
    let want = body.branches.majority_taken_share().expect("recorded");
    let (target, got) = synth(&body).stats.majority_taken.expect("reported");
    assert!((target - want).abs() < 0.02, "{target} against {want}");
    assert!((got - want).abs() < 0.05, "{got} against {want}");
}

#[test]
fn static_branches_approach_the_profiles_count_without_losing_dynamic_ones() {
    let body = nginx_body();
    let want_static = body.branches.static_count as f64;
    let asm = synth(&body);
    let st = &asm.stats;
    let got = st.static_conditional_branches as f64;
    // Spread evenly over the code this body had 2,898 static branches for nginx's 1,080. Every
    // chunk's loop branch counts (1,025 chunks here), which puts a floor under the count.
    assert!(
        (got - want_static).abs() <= 0.3 * want_static,
        "{got} static conditional branches against {want_static}"
    );
    let mut spread = body.clone();
    spread.branches.static_count = 0;
    let even = synth(&spread).stats;
    assert!(
        even.static_conditional_branches as f64 > 2.0 * got,
        "even spread: {}",
        even.static_conditional_branches
    );
    // The dynamic count stays near the profile's per request (one call per request here): 5.3 %
    // over when concentrated, 6.9 % under when spread evenly.
    let want = body.branches.per_request;
    for (what, per_call) in [
        ("concentrated", st.conditional_branches_per_call),
        ("even", even.conditional_branches_per_call),
    ] {
        assert!(
            (per_call - want).abs() <= 0.08 * want,
            "{what}: {per_call} against {want} per call"
        );
    }
}
