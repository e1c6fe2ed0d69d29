//! `ditto load`: drive one target with open-loop load.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use ditto_load::LoadReport;
use ditto_measure::RunOptions;
use ditto_target::{ResolvedLevel, TargetSpec};

use crate::args::{LoadArgs, LoadFlags};
use crate::ui::ProgressLine;

/// The spec's level with the command line's overrides applied.
pub fn resolve_level(spec: &TargetSpec, flags: &LoadFlags) -> ResolvedLevel {
    let mut level = spec.load.resolve(flags.level);
    if let Some(rate) = flags.rate {
        level.rate = rate;
    }
    if let Some(c) = flags.connections {
        level.connections = c;
    }
    if let Some(d) = flags.duration {
        level.duration_s = d;
    }
    if let Some(w) = flags.warmup {
        level.warmup_s = w;
    }
    if let Some(a) = flags.arrival {
        level.arrival = a.into();
    }
    level
}

pub fn run_options(flags: &LoadFlags, port: Option<u16>) -> Result<RunOptions> {
    if !(flags.request_timeout.is_finite() && flags.request_timeout > 0.0) {
        anyhow::bail!("--request-timeout must be a positive number of seconds");
    }
    Ok(RunOptions {
        port,
        seed: flags.seed,
        request_timeout: Duration::from_secs_f64(flags.request_timeout),
    })
}

pub fn load_spec(path: &Path) -> Result<TargetSpec> {
    Ok(TargetSpec::load(path)?)
}

pub fn run(args: LoadArgs) -> Result<()> {
    let spec = load_spec(&args.target)?;
    let level = resolve_level(&spec, &args.load);
    check_durations(&level)?;
    let opts = run_options(&args.load, args.port)?;
    let mut ui = ProgressLine::new();
    let report = match args.addr {
        Some(addr) => {
            if args.warm {
                ui.status(&format!("warming {addr}"));
                ditto_load::warm(addr, &spec.workload, args.allow_non_loopback)?;
            }
            let mut cfg = ditto_measure::load_config(&spec, &level, addr, &opts);
            cfg.allow_non_loopback = args.allow_non_loopback;
            ui.status(&format!(
                "loading {addr} ({}) at {} req/s over {} connections for {} s",
                spec.workload.protocol(),
                level.rate,
                level.connections,
                level.duration_s
            ));
            let report = ditto_load::run(&cfg, &mut |p| ui.update(p));
            ui.finish();
            report?
        }
        None => {
            let mut status = |m: &str| eprintln!("ditto: {m}");
            let mut progress = ProgressLine::new();
            let report = ditto_measure::run_native(&spec, &level, &opts, &mut status, &mut |p| {
                progress.update(p)
            });
            progress.finish();
            report?
        }
    };
    print!("{}", report.to_summary());
    if let Some(path) = &args.json {
        write_report(&report, path)?;
    }
    Ok(())
}

fn check_durations(level: &ResolvedLevel) -> Result<()> {
    if !(level.duration_s.is_finite() && level.duration_s > 0.0) {
        anyhow::bail!("--duration must be a positive number of seconds");
    }
    if !(level.warmup_s.is_finite() && level.warmup_s >= 0.0) {
        anyhow::bail!("--warmup must be zero or a positive number of seconds");
    }
    Ok(())
}

/// Writes the JSON report and, beside it, the HdrHistogram interval log (`.hlog`).
pub fn write_report(report: &LoadReport, path: &Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    report.write_json(path)?;
    let hlog = path.with_extension("hlog");
    report.write_histogram_log(&hlog)?;
    eprintln!("ditto: wrote {} and {}", path.display(), hlog.display());
    Ok(())
}
