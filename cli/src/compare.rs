//! `ditto compare`: several targets under the same load, side by side.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use ditto_load::LoadReport;
use ditto_measure::{NativeMeasurement, Platform, SimMeasurement, SimOptions};
use ditto_target::{ResolvedLevel, TargetSpec};
use serde::Serialize;

use crate::args::CompareArgs;
use crate::load::{load_spec, resolve_level, run_options};
use crate::ui::ProgressLine;

#[derive(Debug, Serialize)]
struct Comparison {
    /// The spec's level name, or `custom` when flags changed its rate or connections.
    label: String,
    level: ResolvedLevel,
    targets: Vec<TargetResult>,
}

#[derive(Debug, Serialize)]
struct TargetResult {
    name: String,
    spec: PathBuf,
    /// Throughput and latency from the native run (source: ditto-load).
    native: LoadReport,
    /// On-CPU time per request in the native run (source: schedstat).
    on_cpu_us_per_request: Option<f64>,
    /// Per-request simulated counters (source: callgrind), with `--sim`.
    sim: Option<SimMeasurement>,
}

pub fn run(args: CompareArgs) -> Result<()> {
    if args.targets.len() < 2 {
        anyhow::bail!("compare needs at least two --target specs");
    }
    let specs: Vec<TargetSpec> = args
        .targets
        .iter()
        .map(|p| load_spec(p))
        .collect::<Result<_>>()?;
    let level = resolve_level(&specs[0], &args.load);
    let opts = run_options(&args.load, None)?;
    let platform = if args.sim {
        if !(args.sim_rate.is_finite() && args.sim_rate > 0.0) || args.sim_requests == 0 {
            anyhow::bail!("--sim-rate and --sim-requests must be positive");
        }
        Some(Platform::by_name_or_path(&args.platform)?)
    } else {
        None
    };
    let mut ui = ProgressLine::new();
    let mut results = Vec::new();
    for (spec, path) in specs.iter().zip(&args.targets) {
        let native = {
            let mut status = |m: &str| eprintln!("ditto: {m}");
            let mut progress = ProgressLine::new();
            let r = ditto_measure::run_native(spec, &level, &opts, &mut status, &mut |p| {
                progress.update(p)
            });
            progress.finish();
            r.with_context(|| format!("native run of {}", spec.name))?
        };
        let NativeMeasurement {
            load: native,
            on_cpu_us_per_request,
        } = native;
        let sim = match &platform {
            Some(platform) => {
                let sim_opts = SimOptions {
                    platform: platform.clone(),
                    rate: args.sim_rate,
                    requests: args.sim_requests,
                    connections: level.connections,
                    with_l2: args.l2,
                };
                let mut status = |m: &str| eprintln!("ditto: {m}");
                let r = ditto_measure::run_sim(spec, &sim_opts, &opts, &mut status, &mut |p| {
                    ui.update(p)
                });
                ui.finish();
                Some(r.with_context(|| format!("simulated run of {}", spec.name))?)
            }
            None => None,
        };
        results.push(TargetResult {
            name: spec.name.clone(),
            spec: path.clone(),
            native,
            on_cpu_us_per_request,
            sim,
        });
    }
    let label = if args.load.rate.is_some() || args.load.connections.is_some() {
        "custom".to_string()
    } else {
        level.level.name().to_string()
    };
    let comparison = Comparison {
        label,
        level,
        targets: results,
    };
    print!("{}", table(&comparison));
    if let Some(path) = &args.json {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let text = serde_json::to_string_pretty(&comparison)?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("ditto: wrote {}", path.display());
    }
    Ok(())
}

fn table(c: &Comparison) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} load: {} req/s offered, {} connections, {} arrivals, {} s measured",
        c.label,
        c.level.rate,
        c.level.connections,
        c.level.arrival.as_str(),
        c.level.duration_s
    );
    let _ = write!(s, "{:<34}", "metric (source)");
    for t in &c.targets {
        let _ = write!(s, "{:>18}", t.name);
    }
    s.push('\n');
    // The L2 and LLC rows only where --l2 measured them (the LL data row is the one-geometry figure).
    let with_l2 = c
        .targets
        .iter()
        .any(|t| t.sim.as_ref().is_some_and(|m| m.figures.is_some()));
    let mut row = |label: &str, f: &dyn Fn(&TargetResult) -> Option<String>| {
        let _ = write!(s, "{label:<34}");
        for t in &c.targets {
            let _ = write!(s, "{:>18}", f(t).unwrap_or_else(|| "-".into()));
        }
        s.push('\n');
    };
    row("throughput req/s (ditto-load)", &|t| {
        Some(format!("{:.1}", t.native.achieved_rate))
    });
    row("p50 latency µs (ditto-load)", &|t| {
        Some(format!("{:.1}", t.native.latency_us.p50))
    });
    row("p99 latency µs (ditto-load)", &|t| {
        Some(format!("{:.1}", t.native.latency_us.p99))
    });
    row("on-CPU µs/request (schedstat)", &|t| {
        t.on_cpu_us_per_request.map(|us| format!("{us:.1}"))
    });
    row("kept up (ditto-load)", &|t| {
        Some(if t.native.kept_up { "yes" } else { "no" }.into())
    });
    row("instructions/request (callgrind)", &|t| {
        t.sim
            .as_ref()
            .map(|m| format!("{:.0}", m.rates.instructions_per_request))
    });
    row("L1d miss rate (callgrind)", &|t| {
        t.sim
            .as_ref()
            .map(|m| format!("{:.2}%", 100.0 * m.rates.l1d_miss_rate))
    });
    row("L1i miss rate (callgrind)", &|t| {
        t.sim
            .as_ref()
            .map(|m| format!("{:.2}%", 100.0 * m.rates.l1i_miss_rate))
    });
    row("LL data miss rate (callgrind)", &|t| {
        t.sim
            .as_ref()
            .map(|m| format!("{:.3}%", 100.0 * m.rates.ll_data_miss_rate))
    });
    if with_l2 {
        row("L2 miss rate (callgrind)", &|t| {
            let figures = t.sim.as_ref()?.figures.as_ref()?;
            figures.l2_miss_rate.map(|r| format!("{:.3}%", 100.0 * r))
        });
        row("LLC miss rate (callgrind)", &|t| {
            let figures = t.sim.as_ref()?.figures.as_ref()?;
            figures.llc_miss_rate.map(|r| format!("{:.3}%", 100.0 * r))
        });
    }
    row("branch mispredict (callgrind)", &|t| {
        t.sim
            .as_ref()
            .map(|m| format!("{:.2}%", 100.0 * m.rates.branch_mispredict_rate))
    });
    s
}
