//! The generated clone builds with plain `make` (and -Werror), its ASan build links, and its bodies run
//! clean: called many times on buffers of exactly the configured sizes, natively with a guard page
//! after every buffer and under Valgrind memcheck; the instructions they execute per call (counted by
//! Valgrind, as the body profiler counts) match the generator's estimate.

mod common;

use std::path::Path;
use std::process::Command;

use ditto_generator::{generate, Knobs, Options};

fn harness(clone: &Path) -> std::path::PathBuf {
    let bin = clone.join("body-harness");
    common::run(
        Command::new("cc")
            .current_dir(clone)
            .args([
                "-O1",
                "-g",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-Iruntime/include",
                "-o",
            ])
            .arg(&bin)
            .arg(common::manifest().join("tests/harness/body_harness.c"))
            .args(["src/config.c", "src/body.S"]),
    );
    bin
}

/// Instructions per harness iteration (all bodies once), from two cachegrind runs of N and 2N calls.
fn instructions_per_iteration(bin: &Path, n: u64) -> f64 {
    let count = |iters: u64| -> f64 {
        let out = common::run(
            Command::new("valgrind")
                .args([
                    "--tool=cachegrind",
                    "--cache-sim=no",
                    "--cachegrind-out-file=/dev/null",
                ])
                .arg(bin)
                .arg(iters.to_string()),
        );
        let line = out
            .lines()
            .find(|l| l.contains("I   refs:") || l.contains("I refs:"))
            .unwrap_or_else(|| panic!("no I refs in {out}"));
        line.rsplit(':')
            .next()
            .unwrap_or_default()
            .trim()
            .replace(',', "")
            .parse()
            .expect("count")
    };
    (count(2 * n) - count(n)) / n as f64
}

#[test]
fn clone_builds_and_bodies_run_clean() {
    assert!(
        common::have("cc") && common::have("make"),
        "gcc and make are required"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("kv");
    let clone = generate(&Options {
        profile: common::fixture_path("kv.json"),
        out: out.clone(),
        seed: 1,
        knobs: Knobs::default(),
    })
    .expect("generate");
    common::run(
        Command::new("make")
            .args(["-s", "EXTRA_CFLAGS=-Werror"])
            .current_dir(&out),
    );
    assert!(out.join("clone").is_file());
    let help = common::run(Command::new(out.join("clone")).arg("--help"));
    assert!(help.contains("--port"), "{help}");
    common::run(
        Command::new("make")
            .args(["-s", "asan", "EXTRA_CFLAGS=-Werror"])
            .current_dir(&out),
    );
    assert!(out.join("clone-asan").is_file());

    let h = harness(&out);
    let native = common::run(Command::new(&h).args(["20000", "guard"]));
    assert!(native.contains("ok: 2 bodies"), "{native}");

    assert!(
        common::have("valgrind"),
        "valgrind is required (scripts/setup.sh installs it)"
    );
    common::run(
        Command::new("valgrind")
            .args(["-q", "--tool=memcheck", "--error-exitcode=99"])
            .arg(&h)
            .arg("300"),
    );

    let measured = instructions_per_iteration(&h, 200);
    let estimated: f64 = clone
        .bodies
        .iter()
        .map(|b| b.stats.dynamic_instructions)
        .sum();
    let target: f64 = clone
        .bodies
        .iter()
        .map(|b| b.stats.target_instructions)
        .sum();
    assert!(
        (measured - estimated).abs() / estimated < 0.03,
        "measured {measured:.0} instructions per iteration, estimated {estimated:.0}"
    );
    assert!(
        (measured - target).abs() / target < 0.05,
        "measured {measured:.0} instructions per iteration, target {target:.0}"
    );
}

#[test]
fn example_profiles_build_and_run_clean() {
    // The four bundled profiles have no body: default bodies, and the skeletons of four services.
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["memcached", "nginx", "pix-baseline"] {
        let out = dir.path().join(name);
        generate(&Options {
            profile: common::example_path(name),
            out: out.clone(),
            seed: 3,
            knobs: Knobs::default(),
        })
        .expect("generate");
        common::run(
            Command::new("make")
                .args(["-s", "EXTRA_CFLAGS=-Werror"])
                .current_dir(&out),
        );
        let h = harness(&out);
        let native = common::run(Command::new(&h).args(["2000", "guard"]));
        assert!(native.starts_with("ok: 1 bodies"), "{name}: {native}");
    }
}
