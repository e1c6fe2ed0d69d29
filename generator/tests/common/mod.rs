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

/// The instructions `synth.rs` writes itself (loop control, windows, patterns, dispatches, rep
/// set-up, prologue and epilogue), one of each form.
pub const FIXED: &[&str] = &[
    "dec r13",
    "jnz 1f\n1:",
    "jz 1f\n1:",
    "jmp 1f\n1:",
    "call 1f\n1:",
    "ret",
    "test ebx, 1073741824",
    "test bl, 3",
    "test dword ptr [r15 + 64], 3",
    "cmp dword ptr [r15 + 64], 0x5a82799a",
    // Counter-field compares (`BranchSource::Field`), short and long immediates, with and
    // without REX.
    "lea ecx, [rbx + rbx*2]",
    "lea r9d, [rbx + rbx*4]",
    "and eax, 63",
    "and ebp, 16320",
    "and r8d, 1040384",
    "cmp eax, 10",
    "cmp esi, 1664",
    "cmp r9d, 81920",
    "jb 1f\n1:",
    "jae 1f\n1:",
    "inc rbx",
    "add r11, 64",
    "add r10, r11",
    "and r8, 65472",
    "lea r8, [r11 + r11*1]",
    "mov rbp, r11",
    "mov r12, qword ptr [r15 + r12 + 64]",
    "mov rbx, qword ptr [r15 + 64]",
    "lea rcx, [rbx + 1]",
    "mov r13d, 169",
    "xor eax, eax",
    "setz al",
    "and eax, 7",
    "mov eax, dword ptr [r15 + 64]",
    "lea rcx, [rcx + rax*8]",
    "or ecx, 1",
    "or dword ptr [r15 + 64], 1",
    "xor edx, edx",
    "mov ecx, 5",
    "lea rdi, [r15 + 64]",
    "push rbx",
    "pop rbx",
    "sub rsp, 8",
    "add rsp, 8",
    "stmxcsr dword ptr [rsp]",
    "ldmxcsr dword ptr [rsp + 4]",
    "or eax, 0x8040",
    "vzeroupper",
    "fldz",
    "fstp st(0)",
];
