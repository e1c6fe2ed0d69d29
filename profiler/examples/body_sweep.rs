//! Benchmark: ditto's one-pass body profile against a Ditto-style sweep (one cachegrind run per cache
//! size, 64 B–256 MiB), on the same target under the same load and duration each.
//!
//! Every run does the same thing: start the target under the instrument, warm it as its spec says, send
//! `--requests` requests at `--rate`, stop. The curves compared are whole-run (cachegrind cannot start
//! counting mid-run), so ditto's pass reports its whole-run curve here too.
//!
//! Usage: cargo run --release -p ditto-profiler --example body_sweep -- \
//!          [--target targets/memcached.toml] [--requests 2000] [--rate 200] [--out DIR] [--ditto-only]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ditto_body::session::BodySession;
use ditto_load::LoadConfig;
use ditto_measure::CachegrindTotals;
use ditto_target::{LaunchOptions, Level, TargetSpec};
use serde::Serialize;

struct Args {
    target: PathBuf,
    requests: u64,
    rate: f64,
    out: PathBuf,
    ditto_only: bool,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        target: PathBuf::from("targets/memcached.toml"),
        requests: 2000,
        rate: 200.0,
        out: PathBuf::from("validation/bench/results"),
        ditto_only: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--ditto-only" {
            a.ditto_only = true;
            continue;
        }
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--target" => a.target = value.into(),
            "--requests" => a.requests = value.parse().context("--requests")?,
            "--rate" => a.rate = value.parse().context("--rate")?,
            "--out" => a.out = value.into(),
            _ => bail!("unknown flag {flag}"),
        }
    }
    Ok(a)
}

#[derive(Serialize)]
struct Point {
    size: u64,
    ditto_i: f64,
    ditto_d: f64,
    cachegrind_i: Option<f64>,
    cachegrind_d: Option<f64>,
    cachegrind_seconds: f64,
}

#[derive(Serialize)]
struct Report {
    target: String,
    requests: u64,
    rate: f64,
    ditto_seconds: f64,
    ditto_requests: u64,
    sweep_seconds: f64,
    sweep_requests_per_run: Vec<u64>,
    ditto_s_per_1000: f64,
    sweep_s_per_1000: f64,
    speedup: f64,
    max_abs_diff_i: f64,
    max_abs_diff_d: f64,
    points: Vec<Point>,
}

/// Starts under `wrapper`, warms, loads, stops; returns wall seconds, requests answered, run folder.
fn one_run(
    spec: &TargetSpec,
    wrapper: Vec<String>,
    args: &Args,
    keep: bool,
    during: &mut dyn FnMut(SocketAddr),
) -> Result<(f64, u64, PathBuf)> {
    let t = Instant::now();
    let launch = LaunchOptions {
        wrapper,
        ready_timeout: Some(Duration::from_secs(180)),
        keep_run_dir: keep,
        ..LaunchOptions::default()
    };
    let (mut target, _) = ditto_measure::start_warm(spec, &launch, &mut |m| {
        eprintln!("    {:5.1} s {m}", t.elapsed().as_secs_f64())
    })?;
    eprintln!("    {:5.1} s warm done", t.elapsed().as_secs_f64());
    let level = spec.load.resolve(Level::Low);
    let mut cfg = LoadConfig::new(target.addr(), spec.workload.clone(), args.rate);
    cfg.connections = level.connections;
    cfg.arrival = level.arrival;
    cfg.warmup = Duration::ZERO;
    cfg.duration = Duration::from_secs_f64(args.requests as f64 / args.rate);
    cfg.max_requests = Some(args.requests);
    cfg.request_timeout = Duration::from_secs(30);
    let report = ditto_load::run(&cfg, &mut |_| {})?;
    eprintln!("    {:5.1} s load done", t.elapsed().as_secs_f64());
    during(target.addr());
    target.stop(Duration::from_secs(120))?;
    eprintln!("    {:5.1} s stopped", t.elapsed().as_secs_f64());
    Ok((
        t.elapsed().as_secs_f64(),
        report.requests_completed,
        target.run_dir().to_path_buf(),
    ))
}

fn main() -> Result<()> {
    let args = parse_args()?;
    let spec = TargetSpec::load(&args.target)?;
    let sizes: Vec<u64> = (6..=28).map(|k| 1u64 << k).collect();

    // ditto: one pass.
    let tool = ditto_body::tool::ensure_tool()?;
    let session = BodySession::listen()?;
    let wrapper = ditto_profiler::launch::tool_wrapper(&tool, session.addr())?;
    eprintln!("ditto one pass ...");
    // The whole run is compared, so the pass ends when the target has stopped and its stream closed.
    let (mut ditto_seconds, ditto_requests, _) =
        one_run(&spec, wrapper, &args, false, &mut |_| {})?;
    let closing = Instant::now();
    session.wait_closed(Duration::from_secs(60))?;
    ditto_seconds += closing.elapsed().as_secs_f64();
    let counts = session.snapshot();
    let mut icache = counts[0].icache.clone();
    let mut dcache = counts[0].dcache.clone();
    for c in &counts[1..] {
        icache.absorb_counts(&c.icache);
        dcache.absorb_counts(&c.dcache);
    }
    eprintln!("  {ditto_seconds:.1} s, {ditto_requests} requests");
    if args.ditto_only {
        return Ok(());
    }

    // The sweep: one cachegrind run per size.
    let mut points = Vec::new();
    let mut sweep_seconds = 0.0;
    let mut sweep_requests = Vec::new();
    for &size in &sizes {
        // Cachegrind needs a cache larger than its line: the 64 B cache uses 32-byte lines.
        let line = if size <= 64 { 32 } else { 64 };
        let ways = if size < 1 << 20 { 8 } else { 16 }.min(size / line);
        let geometry = format!("{size},{ways},{line}");
        let wrapper = vec![
            "valgrind".to_string(),
            "--tool=cachegrind".into(),
            "--cache-sim=yes".into(),
            "--branch-sim=yes".into(),
            format!("--I1={geometry}"),
            format!("--D1={geometry}"),
            "--LL=268435456,16,64".into(),
            "--fair-sched=yes".into(),
            "--cachegrind-out-file=cachegrind.out".into(),
        ];
        let (secs, reqs, run_dir) = one_run(&spec, wrapper, &args, true, &mut |_| {})?;
        let out = run_dir.join("cachegrind.out");
        let totals = CachegrindTotals::read(&out);
        let _ = std::fs::remove_dir_all(&run_dir);
        let t = totals?;
        sweep_seconds += secs;
        sweep_requests.push(reqs);
        let (cg_i, cg_d) = (1.0 - t.i1mr / t.ir, 1.0 - (t.d1mr + t.d1mw) / (t.dr + t.dw));
        let di = icache.hit_rate(size).map_or(f64::NAN, |h| h.0);
        let dd = dcache.hit_rate(size).map_or(f64::NAN, |h| h.0);
        eprintln!(
            "  {size:>10} B: {secs:5.1} s  I ditto {di:.4} cachegrind {cg_i:.4}   D ditto {dd:.4} cachegrind {cg_d:.4}"
        );
        let comparable = line == 64;
        points.push(Point {
            size,
            ditto_i: di,
            ditto_d: dd,
            cachegrind_i: comparable.then_some(cg_i),
            cachegrind_d: comparable.then_some(cg_d),
            cachegrind_seconds: secs,
        });
    }
    let max_diff = |f: &dyn Fn(&Point) -> Option<f64>, g: &dyn Fn(&Point) -> f64| {
        points
            .iter()
            .filter_map(|p| f(p).map(|c| (c - g(p)).abs()))
            .fold(0.0, f64::max)
    };
    let sweep_total_requests: u64 = sweep_requests.iter().sum();
    let per_run = sweep_total_requests as f64 / sizes.len() as f64;
    let report = Report {
        target: spec.name.clone(),
        requests: args.requests,
        rate: args.rate,
        ditto_seconds,
        ditto_requests,
        sweep_seconds,
        sweep_requests_per_run: sweep_requests.clone(),
        ditto_s_per_1000: ditto_seconds / ditto_requests as f64 * 1000.0,
        // A complete curve needs all runs; each run profiles `per_run` requests.
        sweep_s_per_1000: sweep_seconds / per_run * 1000.0,
        speedup: (sweep_seconds / per_run) / (ditto_seconds / ditto_requests as f64),
        max_abs_diff_i: max_diff(&|p| p.cachegrind_i, &|p| p.ditto_i),
        max_abs_diff_d: max_diff(&|p| p.cachegrind_d, &|p| p.ditto_d),
        points,
    };
    std::fs::create_dir_all(&args.out)?;
    let path = args.out.join(format!("body-sweep-{}.json", spec.name));
    std::fs::write(&path, serde_json::to_string_pretty(&report)? + "\n")?;
    println!(
        "{}: ditto {:.1} s per 1000 requests, sweep {:.1} s per 1000 requests: {:.1}x; \
         curves differ by at most {:.2} (I) and {:.2} (D) points of hit rate; wrote {}",
        report.target,
        report.ditto_s_per_1000,
        report.sweep_s_per_1000,
        report.speedup,
        100.0 * report.max_abs_diff_i,
        100.0 * report.max_abs_diff_d,
        path.display()
    );
    Ok(())
}
