//! The committed clones in `clones/` as a user gets them: each builds with plain `make`, serves the
//! load its own `target.toml` describes, and runs memcheck-clean under that load (runtime and
//! synthetic body together, every process of a multi-process clone), with no request lost.
//!
//! They also make their original's system calls: per request and by name, within 2% of the profile
//! they were generated from, measured by the attach profiler at the profile's own load. One
//! exception: an event loop's wakeups below one per request (`epoll_wait` 0.84 for nginx) are set by
//! how many events are ready at each wakeup, that is by timing, not by the calls the clone makes
//! (the runtime tops wakeups up, it cannot take them away without adding latency). Those are checked
//! on the side the top-up controls, to 2%: at most one per request when the original wakes less, no
//! fewer than the original when it wakes more; on the other side only against a loop that stopped
//! waiting (half the original's count below one, 1.5 times above). Measured: nginx 0.62–0.81 against
//! 0.81, memcached 0.83–0.95 against 0.95, Pix baseline 1.047–1.068 against 1.047.
//!
//! A missing tool (cc, make, valgrind, bpftrace) fails the test with the package to install.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{repo, require};
use ditto_load::LoadConfig;
use ditto_profile::diff::syscall_diff;
use ditto_profile::Profile;
use ditto_profiler::{AttachLoad, AttachOptions, CollectorChoice};
use ditto_target::{LaunchOptions, Level, RunningTarget, TargetSpec};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Copies a committed clone without build outputs, as a fresh checkout has it.
fn fresh_copy(name: &str, into: &Path) -> PathBuf {
    let out = into.join(name);
    let status = Command::new("cp")
        .arg("-r")
        .arg(repo().join("clones").join(name))
        .arg(&out)
        .status()
        .expect("cp");
    assert!(status.success(), "copying clones/{name}");
    let _ = std::fs::remove_file(out.join("clone"));
    let _ = std::fs::remove_file(out.join("clone-asan"));
    out
}

#[test]
fn committed_clones_build_serve_their_load_and_run_memcheck_clean() {
    require("cc", "build-essential");
    require("make", "build-essential");
    require("valgrind", "valgrind");
    let _turn = common::one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["memcached", "nginx", "pix-baseline", "pix-optimized"] {
        let clone = fresh_copy(name, dir.path());
        let spec = TargetSpec::load(&clone.join("target.toml")).expect("the clone's target.toml");
        let opts = LaunchOptions {
            port: Some(free_port()),
            wrapper: [
                "valgrind",
                "--tool=memcheck",
                "--error-exitcode=99",
                "--trace-children=yes",
                "--child-silent-after-fork=no",
            ]
            .map(String::from)
            .to_vec(),
            keep_run_dir: true,
            skip_build: false,
            ready_timeout: Some(Duration::from_secs(300)),
        };
        // The spec's build step is the plain `make`.
        let mut target = RunningTarget::start(&spec, &opts)
            .unwrap_or_else(|e| panic!("{name}: the clone did not build or start: {e}"));
        let mut cfg = LoadConfig::new(target.addr(), spec.workload.clone(), 50.0);
        cfg.connections = 2;
        cfg.warmup = Duration::ZERO;
        cfg.duration = Duration::from_secs(2);
        // The first requests wait for the bodies' buffers to be set up under memcheck.
        cfg.request_timeout = Duration::from_secs(240);
        let report = ditto_load::run(&cfg, &mut |_| {}).expect("load runs");
        let status = target.stop(Duration::from_secs(120)).expect("stops");
        let log = std::fs::read_to_string(target.run_dir().join("target.log")).unwrap_or_default();
        assert!(
            report.requests_completed > 0
                && report.requests_completed == report.requests_sent
                && report.outcomes.errors_total == 0,
            "{name}: {} of {} requests answered, errors {:?}; log:\n{log}",
            report.requests_completed,
            report.requests_sent,
            report.outcomes.errors
        );
        // One summary per process (nginx's clone: the master and each worker).
        let summaries: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("ERROR SUMMARY:"))
            .collect();
        assert!(
            !summaries.is_empty()
                && summaries
                    .iter()
                    .all(|l| l.contains("ERROR SUMMARY: 0 errors")),
            "{name}: memcheck reported errors (exit {status}):\n{log}"
        );
        assert_ne!(
            status.code(),
            Some(99),
            "{name}: memcheck's error exit:\n{log}"
        );
    }
}

#[test]
fn committed_clones_make_their_profiles_syscalls_per_request() {
    require("cc", "build-essential");
    require("make", "build-essential");
    require("bpftrace", "bpftrace");
    let _turn = common::one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut problems = Vec::new();
    for name in ["memcached", "nginx", "pix-baseline", "pix-optimized"] {
        let clone = fresh_copy(name, dir.path());
        let spec = TargetSpec::load(&clone.join("target.toml")).expect("the clone's target.toml");
        let original =
            Profile::load(&clone.join("profile.json")).expect("the clone's profile.json");
        let opts = LaunchOptions {
            port: Some(free_port()),
            ..LaunchOptions::default()
        };
        let mut target = RunningTarget::start(&spec, &opts)
            .unwrap_or_else(|e| panic!("{name}: the clone did not build or start: {e}"));
        // The medium level of a clone's spec is the rate its original was profiled at.
        let level = ditto_validate::validate::resolve(&spec, Level::Medium, 6.0, 1.0);
        let result = ditto_profiler::profile_attach(
            &AttachOptions {
                pid: target.pid(),
                duration: Duration::from_secs(6),
                collector: CollectorChoice::Bpftrace,
                load: Some(AttachLoad {
                    spec: spec.clone(),
                    level,
                    addr: target.addr(),
                    seed: 1,
                }),
                measure_overhead: false,
            },
            &mut |_| {},
        );
        let _ = target.stop(Duration::from_secs(10));
        let result = result.unwrap_or_else(|e| panic!("{name}: profiling the clone failed: {e}"));
        for d in syscall_diff(&original.syscalls, &result.profile.syscalls) {
            eprintln!(
                "{name}: {} original {:.4} clone {:.4} error {:.2}%",
                d.field,
                d.original,
                d.clone,
                100.0 * d.error
            );
            // Wakeups are timing: below one per request, several requests are ready per wakeup,
            // and above it the event loop may wake more often than the original did. The clone
            // controls one side only: the runtime tops wakeups up to the profile's count above 1.01
            // per request (docs/runtime.md), it cannot take any away. So the side the top-up
            // controls is checked to 2% (a topped-up count never falls short, a count below one
            // never gets a top-up) and the other side only for a loop that stopped waiting: below
            // one, runs measured nginx 0.62–0.81 and memcached 0.83–0.95 against 0.81 and 0.95;
            // above, Pix baseline 1.047–1.068 against 1.047.
            let wakeup = matches!(d.field.as_str(), "syscalls.epoll_wait" | "syscalls.poll");
            let ok = if !wakeup {
                d.within()
            } else if d.original < 1.0 {
                d.clone > 0.5 * d.original && d.clone <= 1.01
            } else {
                d.clone < 1.5 * d.original && (d.original <= 1.01 || d.clone >= 0.98 * d.original)
            };
            if !ok {
                problems.push(format!(
                    "{name}: {} {:.4} per request, original {:.4} ({:.1}%)",
                    d.field,
                    d.clone,
                    d.original,
                    100.0 * d.error
                ));
            }
        }
    }
    // The load client runs in this test's process: unoptimised, tonic writes a request's frames far
    // enough apart that the Pix clones read them in two (1.5 recvfrom per request against 1.12,
    // measured; 1.16 in release, as the test command runs it).
    let hint = if cfg!(debug_assertions) {
        "\n(a debug build: run with --release, as scripts/test.sh does; the unoptimised load client \
         splits the Pix requests' frames)"
    } else {
        ""
    };
    assert!(
        problems.is_empty(),
        "syscalls per request differ from the profiles (2%; wakeups see the doc):\n{}{hint}",
        problems.join("\n")
    );
}
