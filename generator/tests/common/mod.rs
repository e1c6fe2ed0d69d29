//! Shared helpers of the generator's integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use ditto_generator::plan::{plan, BodyPlan, PlanInput};
use ditto_generator::synth::{synthesize, ClusterAsm};
use ditto_generator::{render_clone, CloneFiles, Knobs};
use ditto_profile::{ClusterBody, Profile};

pub fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixture_path(name: &str) -> PathBuf {
    manifest().join("tests/fixtures").join(name)
}

pub fn example_path(name: &str) -> PathBuf {
    manifest().join("../profiles").join(format!("{name}.json"))
}

/// Cluster `cluster`'s body in the committed profile `profiles/NAME.json`.
pub fn committed_body(name: &str, cluster: &str) -> ClusterBody {
    let p = Profile::load(&example_path(name)).expect("committed profile loads");
    p.body
        .expect("body")
        .clusters
        .into_iter()
        .find(|c| c.cluster == cluster)
        .unwrap_or_else(|| panic!("{name} has no cluster {cluster}"))
}

/// `body` planned as a request worker's: cluster c1, one call per request, no skeleton subtracted.
pub fn worker_plan(body: &ClusterBody, knobs: &Knobs) -> BodyPlan {
    plan(
        &PlanInput {
            body: Some(body),
            calls_per_request: 1.0,
            cluster: "c1",
            skeleton_instructions: 0.0,
            background: false,
        },
        knobs,
    )
}

/// `body` planned as a request worker's (`worker_plan`) and synthesised as cluster c1.
pub fn synth_seeded(body: &ClusterBody, knobs: &Knobs, seed: u64) -> ClusterAsm {
    synthesize("c1", &worker_plan(body, knobs), knobs, seed).expect("synthesises")
}

pub fn render(path: &Path, name: &str, seed: u64, knobs: &Knobs) -> CloneFiles {
    let profile = Profile::load(path).expect("profile loads");
    let bytes = std::fs::read(path).expect("profile bytes");
    render_clone(&profile, &bytes, name, seed, knobs, None, false).expect("clone renders")
}

pub fn text(c: &CloneFiles, file: &str) -> String {
    String::from_utf8(c.files.get(file).cloned().unwrap_or_default()).expect("utf-8")
}

/// Runs a command, failing the test with its output if it fails.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}
