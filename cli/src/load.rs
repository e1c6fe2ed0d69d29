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
    let Some(target) = &args.target else {
        return run_workload(&args);
    };
    let mut spec = load_spec(target)?;
    if let Some(workload) = &args.workload {
        spec.workload = workload.clone();
    }
    let level = resolve_level(&spec, &args.load);
    check_durations(&level)?;
    let opts = run_options(&args.load, args.port)?;
    let mut ui = ProgressLine::new();
    let mut on_cpu = None;
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
            let measured = ditto_measure::run_native(&spec, &level, &opts, &mut status, &mut |p| {
                progress.update(p)
            });
            progress.finish();
            let measured = measured?;
            on_cpu = measured.on_cpu_us_per_request;
            measured.load
        }
    };
    print!("{}", report.to_summary());
    if let Some(us) = on_cpu {
        println!(
            "  on-CPU    {us:.1} µs a request (schedstat: the target's threads, user and system)"
        );
    }
    if let Some(path) = &args.json {
        write_report(&report, path)?;
    }
    Ok(())
}

/// `--workload` without `--target`: load a server that is already running (typically a clone)
/// with the workload and the command line's load settings.
fn run_workload(args: &LoadArgs) -> Result<()> {
    let Some(workload) = args.workload.clone() else {
        anyhow::bail!("give --target SPEC, or --workload with --addr and --rate");
    };
    let Some(addr) = args.addr else {
        anyhow::bail!(
            "--workload without --target needs --addr HOST:PORT: without a spec there is no server to start"
        );
    };
    let Some(rate) = args.load.rate else {
        anyhow::bail!(
            "--workload without --target needs --rate (requests per second): without a spec there is no level to take it from"
        );
    };
    let flags = &args.load;
    let level = ResolvedLevel {
        level: flags.level,
        rate,
        connections: flags.connections.unwrap_or(4),
        warmup_s: flags.warmup.unwrap_or(1.0),
        duration_s: flags.duration.unwrap_or(10.0),
        arrival: flags
            .arrival
            .map(Into::into)
            .unwrap_or(ditto_load::Arrival::Poisson),
    };
    check_durations(&level)?;
    let opts = run_options(flags, None)?;
    let mut ui = ProgressLine::new();
    if args.warm {
        ui.status(&format!("warming {addr}"));
        ditto_load::warm(addr, &workload, args.allow_non_loopback)?;
    }
    let mut cfg = ditto_load::LoadConfig::new(addr, workload, level.rate);
    cfg.connections = level.connections;
    cfg.arrival = level.arrival;
    cfg.warmup = Duration::from_secs_f64(level.warmup_s);
    cfg.duration = Duration::from_secs_f64(level.duration_s);
    cfg.seed = opts.seed;
    cfg.request_timeout = opts.request_timeout;
    cfg.allow_non_loopback = args.allow_non_loopback;
    ui.status(&format!(
        "loading {addr} ({}) at {} req/s over {} connections for {} s",
        cfg.workload.protocol(),
        level.rate,
        level.connections,
        level.duration_s
    ));
    let report = ditto_load::run(&cfg, &mut |p| ui.update(p));
    ui.finish();
    let report = report?;
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
