//! Shared helpers of the generator's integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use ditto_generator::{render_clone, CloneFiles, Knobs};
use ditto_profile::Profile;

pub fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixture_path(name: &str) -> PathBuf {
    manifest().join("tests/fixtures").join(name)
}

pub fn example_path(name: &str) -> PathBuf {
    manifest().join("../profiles").join(format!("{name}.json"))
}

pub fn render(path: &Path, name: &str, seed: u64, knobs: &Knobs) -> CloneFiles {
    let profile = Profile::load(path).expect("profile loads");
    let bytes = std::fs::read(path).expect("profile bytes");
    render_clone(&profile, &bytes, name, seed, knobs, None).expect("clone renders")
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
