//! The ground-truth suite: programs with known body characteristics (profiler/body/ground-truth), run
//! under the real ditto-body tool; the profiler must recover each figure of `expected.toml` within its
//! stated tolerance, and its hit curves must agree with cachegrind runs of the same program at four
//! sizes (same geometry) within 2 points of hit rate.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use ditto_body::report::build_body;
use ditto_body::session::BodySession;
use ditto_profile::{ClusterBody, HitCurve};
use toml::Value;

fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ground-truth")
}

/// Builds the programs once per test binary.
fn programs() -> &'static Path {
    static OUT: OnceLock<PathBuf> = OnceLock::new();
    OUT.get_or_init(|| {
        let out = std::env::temp_dir().join(format!("ditto-ground-truth-{}", std::process::id()));
        let status = Command::new("make")
            .arg("-s")
            .arg("-C")
            .arg(suite_dir())
            .arg(format!("OUT={}", out.display()))
            .status()
            .expect("make not found: install build-essential");
        assert!(
            status.success(),
            "building the ground-truth programs failed"
        );
        out
    })
}

fn expected() -> &'static toml::Table {
    static T: OnceLock<toml::Table> = OnceLock::new();
    T.get_or_init(|| {
        let text =
            std::fs::read_to_string(suite_dir().join("expected.toml")).expect("expected.toml");
        text.parse::<toml::Table>().expect("expected.toml parses")
    })
}

fn case(name: &str) -> &'static toml::Table {
    expected()
        .get(name)
        .and_then(Value::as_table)
        .unwrap_or_else(|| panic!("no [{name}] in expected.toml"))
}

/// Runs one case's command under the tool; the whole run is one window.
fn profile(name: &str) -> ClusterBody {
    let cmd: Vec<String> = case(name)["cmd"]
        .as_array()
        .expect("cmd")
        .iter()
        .map(|v| v.as_str().expect("cmd word").to_string())
        .collect();
    let mut argv = vec![programs().join(&cmd[0]).display().to_string()];
    argv.extend(cmd[1..].iter().cloned());
    let tool =
        ditto_body::tool::ensure_tool().expect("ditto-body tool builds (install valgrind, gcc)");
    let session = BodySession::listen().expect("listen");
    let status = tool
        .command(session.addr(), &[], &argv)
        .stdout(Stdio::null())
        .status()
        .expect("valgrind runs (install valgrind)");
    assert!(
        status.success(),
        "{name}: {argv:?} under the tool exited with {status}"
    );
    session
        .wait_closed(Duration::from_secs(30))
        .expect("stream closes");
    assert_eq!(session.error(), None, "{name}");
    let body = build_body(&session.snapshot(), &[], &ditto_body::report::no_names, 1);
    assert_eq!(body.clusters.len(), 1, "{name}");
    body.clusters.into_iter().next().expect("one cluster")
}

fn num(v: &Value) -> f64 {
    v.as_float()
        .or_else(|| v.as_integer().map(|i| i as f64))
        .expect("number")
}

fn within(name: &str, what: &str, got: f64, want: f64, tol: f64) {
    assert!(
        (got - want).abs() <= tol,
        "{name}: {what} = {got:.4}, expected {want:.4} ± {tol}"
    );
}

fn hit_at(curve: &HitCurve, size: u64) -> f64 {
    curve
        .points
        .iter()
        .find(|p| p.size == size)
        .map(|p| p.hit_rate)
        // Beyond the footprint every access but the first touches hits.
        .unwrap_or_else(|| curve.points.last().map_or(0.0, |p| p.hit_rate))
}

/// Checks every expectation a case states that the profile has a field for.
fn check(name: &str) -> ClusterBody {
    let b = profile(name);
    let c = case(name);
    if let Some(v) = c.get("instructions") {
        let want = num(v);
        within(
            name,
            "instructions (relative)",
            b.instructions_per_request / want,
            1.0,
            0.01,
        );
    }
    for key in [
        "pointer_chase_fraction",
        "regular_access_fraction",
        "shared_data_fraction",
    ] {
        if let Some(t) = c.get(key).and_then(Value::as_table) {
            let got = match key {
                "pointer_chase_fraction" => b.pointer_chase_fraction,
                "regular_access_fraction" => b.regular_access_fraction,
                _ => b.shared_data_fraction,
            };
            within(name, key, got, num(&t["value"]), num(&t["tol"]));
        }
    }
    for (key, tol_key, curve) in [
        ("data_hit", "data_hit_tol", &b.data_working_set),
        (
            "instruction_hit",
            "instruction_hit_tol",
            &b.instruction_working_set,
        ),
    ] {
        if let Some(points) = c.get(key).and_then(Value::as_array) {
            let tol = num(&c[tol_key]);
            for p in points {
                let p = p.as_array().expect("[size, hit]");
                let size = num(&p[0]) as u64;
                within(
                    name,
                    &format!("{key} at {size} B"),
                    hit_at(curve, size),
                    num(&p[1]),
                    tol,
                );
            }
        }
    }
    for (key, got) in [
        ("taken_rate", &b.branches.taken_rate),
        ("transition_rate", &b.branches.transition_rate),
    ] {
        if let Some(t) = c.get(key).and_then(Value::as_table) {
            let tol = num(&t["tol"]);
            for (i, want) in t["value"].as_array().expect("bins").iter().enumerate() {
                within(name, &format!("{key} bin {i}"), got[i], num(want), tol);
            }
        }
    }
    if let Some(t) = c.get("majority_taken").and_then(Value::as_table) {
        let got = b
            .branches
            .majority_taken
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: no majority_taken in the profile"));
        let tol = num(&t["tol"]);
        for pair in t["bins"].as_array().expect("bins") {
            let pair = pair.as_array().expect("[bin, share]");
            let bin = pair[0].as_integer().expect("bin") as usize;
            within(
                name,
                &format!("majority_taken bin {bin}"),
                got[bin],
                num(&pair[1]),
                tol,
            );
        }
    }
    if let Some(bin) = c.get("dominant_raw_bin") {
        let raw = &b.dependencies.raw;
        let top = (0..raw.len())
            .max_by(|&a, &z| raw[a].total_cmp(&raw[z]))
            .expect("bins");
        assert_eq!(
            top as i64,
            bin.as_integer().expect("bin"),
            "{name}: RAW bins {raw:?}"
        );
    }
    if let Some(t) = c.get("raw").and_then(Value::as_table) {
        let tol = num(&t["tol"]);
        for (i, want) in t["value"].as_array().expect("bins").iter().enumerate() {
            within(
                name,
                &format!("RAW bin {i}"),
                b.dependencies.raw[i],
                num(want),
                tol,
            );
        }
    }
    if let Some(t) = c.get("mean_instruction_bytes").and_then(Value::as_table) {
        within(
            name,
            "mean instruction bytes",
            b.mean_instruction_bytes,
            num(&t["value"]),
            num(&t["tol"]),
        );
    }
    b
}

#[test]
fn data_working_sets_of_4k_64k_1m_8m_are_recovered() {
    for n in ["ws_data_4k", "ws_data_64k", "ws_data_1m", "ws_data_8m"] {
        check(n);
    }
}

#[test]
fn branch_taken_and_transition_rates_are_recovered() {
    check("branches_next");
    for n in ["branches_mid", "branches_classic"] {
        let b = check(n);
        let c = case(n);
        within(
            n,
            "static branches",
            b.branches.static_count as f64,
            num(&c["static_count"]),
            30.0,
        );
    }
}

#[test]
fn dependency_chains_are_recovered() {
    for n in [
        "depchain_1",
        "depchain_2",
        "depchain_3",
        "depchain_4",
        "depchain_6",
        "depchain_8",
        "depchain_12",
    ] {
        check(n);
    }
}

#[test]
fn shared_and_private_split_is_recovered() {
    for n in ["shared_0", "shared_1", "shared_2", "shared_3", "shared_4"] {
        check(n);
    }
}

#[test]
fn strided_and_random_access_split_is_recovered() {
    for n in ["stride_0", "stride_1", "stride_2", "stride_3", "stride_4"] {
        check(n);
    }
}

#[test]
fn pointer_chasing_is_recovered() {
    for n in [
        "ptrchase_chase",
        "ptrchase_index",
        "ptrchase_array",
        "ptrchase_mixed",
    ] {
        check(n);
    }
}

#[test]
fn instruction_working_sets_are_recovered() {
    for n in [
        "icache_dense_16k",
        "icache_dense_64k",
        "icache_dense_256k",
        "icache_dense_1m",
        "icache_sparse_16k",
        "icache_sparse_64k",
        "icache_sparse_256k",
        "icache_sparse_1m",
    ] {
        check(n);
    }
}

#[test]
fn instruction_mix_and_rep_counts_are_recovered() {
    let b = check("mix");
    let c = case("mix");
    let tol = num(&c["mix_tol"]);
    for row in c["mix"].as_array().expect("mix rows") {
        let row = row.as_array().expect("row");
        let (class, operand) = (
            row[0].as_str().expect("class"),
            row[1].as_str().expect("op"),
        );
        let got: f64 = b
            .instruction_mix
            .iter()
            .filter(|m| m.class == class && m.operand == operand)
            .map(|m| m.share)
            .sum();
        within("mix", &format!("{class}/{operand}"), got, num(&row[2]), tol);
    }
    let want = num(&c["instructions_architectural"]);
    within(
        "mix",
        "architectural instructions (relative)",
        b.instructions_per_request / want,
        1.0,
        0.01,
    );
    let reps = b.rep_counts.expect("rep counts");
    let total: u64 = reps.bins.iter().map(|x| x.count).sum();
    let at16: u64 = reps
        .bins
        .iter()
        .filter(|x| x.lo <= 16 && 16 < x.hi)
        .map(|x| x.count)
        .sum();
    assert!(at16 as f64 >= 0.99 * total as f64, "rep counts {reps:?}");
    // The loop's `rep movsb` copies (rmw); start-up's fills, if any, are stores.
    let by = b.rep_counts_by_operand.expect("rep counts by operand");
    let kinds: u64 = by.values().flat_map(|h| &h.bins).map(|x| x.count).sum();
    assert_eq!(kinds, total, "by operand {by:?} against all {reps:?}");
    let copies: u64 = by
        .get("rmw")
        .expect("the copies' counts")
        .bins
        .iter()
        .map(|x| x.count)
        .sum();
    assert!(copies as f64 >= 0.99 * total as f64, "by operand {by:?}");
}

#[test]
fn indirect_calls_and_their_target_changes_are_recovered_and_counted_as_cachegrind_counts_them() {
    let name = "indirect";
    let b = profile(name);
    let c = case(name);
    let i = b.branches.indirect.expect("indirect jumps recorded");
    let tol = num(&c["indirect_change_rate_tol"]);
    for (k, want) in c["indirect_change_rate"]
        .as_array()
        .expect("bins")
        .iter()
        .enumerate()
    {
        within(
            name,
            &format!("target-change bin {k}"),
            i.target_change_rate[k],
            num(want),
            tol,
        );
    }
    let mean = c["mean_target_change_rate"].as_table().expect("mean");
    within(
        name,
        "mean target-change rate",
        i.mean_target_change_rate,
        num(&mean["value"]),
        num(&mean["tol"]),
    );
    // The whole run is one request: the count is cachegrind's Bi (indirect jumps and calls, no
    // returns), start-up and exit included.
    let argv = vec![programs().join("indirect").display().to_string()];
    let bi = cachegrind_totals(&argv, &["--cache-sim=no", "--branch-sim=yes"])["Bi"];
    within(
        name,
        "indirect calls against cachegrind's Bi (relative)",
        i.per_request / bi,
        1.0,
        0.001,
    );
}

/// The event totals (`summary:`) of a cachegrind run of `argv` with `options`, by event name.
fn cachegrind_totals(argv: &[String], options: &[impl AsRef<OsStr>]) -> HashMap<String, f64> {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let out = std::env::temp_dir().join(format!(
        "ditto-gt-cg-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
    let status = Command::new("valgrind")
        .args(["--tool=cachegrind", "-q"])
        .args(options)
        .arg(format!("--cachegrind-out-file={}", out.display()))
        .args(argv)
        .stdout(Stdio::null())
        .status()
        .expect("valgrind runs (install valgrind)");
    assert!(status.success());
    let text = std::fs::read_to_string(&out).expect("cachegrind output");
    let _ = std::fs::remove_file(&out);
    let line = |prefix: &str| -> Vec<String> {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no '{prefix}' line"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    line("events: ")
        .into_iter()
        .zip(line("summary: "))
        .map(|(e, v)| (e, v.parse().expect("count")))
        .collect()
}

/// Miss rates cachegrind reports for one program with I1 = D1 = `size` bytes.
fn cachegrind(argv: &[String], size: u64) -> (f64, f64) {
    let ways = if size < 1 << 20 { 8 } else { 16 };
    let geometry = format!("{size},{ways},64");
    let options = [
        "--cache-sim=yes".to_string(),
        "--branch-sim=no".to_string(),
        format!("--I1={geometry}"),
        format!("--D1={geometry}"),
        "--LL=268435456,16,64".to_string(),
    ];
    let t = cachegrind_totals(argv, &options);
    let i_miss = t["I1mr"] / t["Ir"];
    let d_miss = (t["D1mr"] + t["D1mw"]) / (t["Dr"] + t["Dw"]);
    (1.0 - i_miss, 1.0 - d_miss)
}

#[test]
fn hit_curves_agree_with_cachegrind_at_four_sizes() {
    for name in [
        "ws_data_64k",
        "ws_data_1m",
        "icache_dense_16k",
        "icache_sparse_64k",
        "mix",
    ] {
        let b = profile(name);
        let cmd: Vec<String> = case(name)["cmd"]
            .as_array()
            .expect("cmd")
            .iter()
            .map(|v| v.as_str().expect("word").to_string())
            .collect();
        let mut argv = vec![programs().join(&cmd[0]).display().to_string()];
        argv.extend(cmd[1..].iter().cloned());
        for size in [4096u64, 32768, 262144, 2097152] {
            let (i_hit, d_hit) = cachegrind(&argv, size);
            let ours_i = hit_at(&b.instruction_working_set, size);
            let ours_d = hit_at(&b.data_working_set, size);
            eprintln!(
                "{name} {size:>8} B: I {ours_i:.4} vs cachegrind {i_hit:.4}, D {ours_d:.4} vs {d_hit:.4}"
            );
            within(
                name,
                &format!("I-side hit at {size} B vs cachegrind"),
                ours_i,
                i_hit,
                0.02,
            );
            within(
                name,
                &format!("D-side hit at {size} B vs cachegrind"),
                ours_d,
                d_hit,
                0.02,
            );
        }
    }
}
