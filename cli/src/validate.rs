//! `ditto validate`: the original and its clone under the same load at each level, compared metric by
//! metric, written as report.json and a static HTML dashboard. The work is in `ditto-validate`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use ditto_measure::{BackendChoice, CounterBackend, Platform, SimMethod, SimSettings};
use ditto_profiler::CollectorChoice;
use ditto_target::{Level, TargetSpec};
use ditto_validate::metrics::Format;
use ditto_validate::saturation::SweepSettings;
use ditto_validate::{CloneDir, Report, ValidateOptions};

use crate::ui::ProgressLine;

pub const EXAMPLES: &str = "Examples:\n  \
    ditto validate --target targets/memcached.toml --clone clones/memcached\n  \
    ditto validate --target targets/nginx.toml --clone clones/nginx --levels medium --out out/validate/nginx\n  \
    ditto validate --target targets/pix-baseline.toml --clone clones/pix-baseline --platform paper-a\n  \
    ditto validate --target targets/memcached.toml --clone clones/memcached --levels medium --original-runs 1 \\\n      --no-l2 --no-saturation      # a quick look (about 3 minutes)\n\n\
    Writes OUT/report.json (schema: docs/validation.md) and OUT/index.html (open it in a browser; no network needed).\n\
    Default cost with the simulated counters, three levels: about 20 minutes for memcached.";

/// Counter backend flag.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CountersFlag {
    /// perf when hardware counters work, otherwise sim.
    Auto,
    /// Hardware counters (perf_event_open); an error where there is no PMU.
    Perf,
    /// Cachegrind with the --platform geometry.
    Sim,
}

impl From<CountersFlag> for BackendChoice {
    fn from(c: CountersFlag) -> Self {
        match c {
            CountersFlag::Auto => BackendChoice::Auto,
            CountersFlag::Perf => BackendChoice::Perf,
            CountersFlag::Sim => BackendChoice::Sim,
        }
    }
}

/// Syscall collector of the attach profiler.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CollectorArg {
    Auto,
    Bpftrace,
    Ptrace,
}

impl From<CollectorArg> for CollectorChoice {
    fn from(c: CollectorArg) -> Self {
        match c {
            CollectorArg::Auto => CollectorChoice::Auto,
            CollectorArg::Bpftrace => CollectorChoice::Bpftrace,
            CollectorArg::Ptrace => CollectorChoice::Ptrace,
        }
    }
}

/// Settings of the simulated counter backend, shared with `ditto tune`.
#[derive(Debug, Args, Clone)]
pub struct SimFlags {
    /// Counter backend.
    #[arg(long, value_enum, default_value = "auto")]
    pub counters: CountersFlag,
    /// Cache geometry for the sim backend: a bundled platform (epyc-host, paper-a, paper-b, paper-c)
    /// or a platform file.
    #[arg(long, default_value = "epyc-host")]
    pub platform: String,
    /// Simulated rate as a fraction of the level's native rate (Valgrind's simulation is ~40×
    /// slower); raised where needed to fit --sim-requests into a run of --sim-seconds.
    #[arg(long, default_value_t = SimSettings::default().rate_scale)]
    pub sim_rate_scale: f64,
    /// Requests each simulated measurement covers (the window's measured load, or the difference
    /// between the differential's two runs; each lasts 5 s to --sim-seconds accordingly).
    #[arg(long, default_value_t = SimSettings::default().min_requests)]
    pub sim_requests: u64,
    /// Longest measured seconds of one simulated run. More requests at the same rate: a server that
    /// cachegrind cannot run faster (memcached keeps up with about 2,000 req/s) is measured with less
    /// noise by raising this together with --sim-requests (docs/validation.md).
    #[arg(long, default_value_t = SimSettings::default().max_duration_s)]
    pub sim_seconds: f64,
    /// How the simulated backend isolates the measured requests: `window` (callgrind, counters
    /// zeroed and dumped around the measured load, minus an idle window as long) or `differential`
    /// (two cachegrind runs at ½ and 1½ times the rate, differenced).
    #[arg(long, value_enum, default_value = "window")]
    pub sim_method: SimMethodFlag,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SimMethodFlag {
    Window,
    Differential,
}

impl SimFlags {
    pub fn backend(&self) -> Result<CounterBackend> {
        let platform = Platform::by_name_or_path(&self.platform).with_context(|| {
            let mut bundled: Vec<String> = std::fs::read_dir(Platform::bundled_dir())
                .map(|d| {
                    d.flatten()
                        .filter_map(|e| {
                            let p = e.path();
                            (p.extension()? == "toml")
                                .then(|| p.file_stem()?.to_str().map(String::from))
                                .flatten()
                        })
                        .collect()
                })
                .unwrap_or_default();
            bundled.sort();
            format!(
                "--platform {}: use a bundled platform ({}) or the path of a platform file",
                self.platform,
                bundled.join(", ")
            )
        })?;
        Ok(CounterBackend::select(self.counters.into(), &platform)?)
    }

    pub fn method(&self) -> SimMethod {
        match self.sim_method {
            SimMethodFlag::Window => SimMethod::Window,
            SimMethodFlag::Differential => SimMethod::Differential,
        }
    }

    pub fn settings(&self, with_l2: bool) -> SimSettings {
        SimSettings {
            method: self.method(),
            rate_scale: self.sim_rate_scale,
            min_requests: self.sim_requests,
            max_duration_s: self.sim_seconds,
            with_l2,
            ..SimSettings::default()
        }
    }
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The original's target spec.
    #[arg(long, value_name = "SPEC")]
    pub target: PathBuf,
    /// The clone directory (from `ditto generate`); its target.toml gives the clone's workload.
    #[arg(long, value_name = "DIR")]
    pub clone: PathBuf,
    /// Load levels of the original's spec, comma-separated.
    #[arg(long, default_value = "low,medium,high", value_delimiter = ',')]
    pub levels: Vec<String>,
    #[command(flatten)]
    pub sim: SimFlags,
    /// Skip the L2-geometry cachegrind runs (halves simulation time; no L2 miss rate).
    #[arg(long)]
    pub no_l2: bool,
    /// Where to write report.json and index.html (default: out/validate/CLONE-NAME).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Measured seconds of each native load run.
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Seconds of load before each measured native run.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Runs of the original per level; 2 or more report its run-to-run variation.
    #[arg(long, default_value_t = 2)]
    pub original_runs: usize,
    /// Skip the saturation sweep.
    #[arg(long)]
    pub no_saturation: bool,
    /// Seconds per saturation sweep step.
    #[arg(long, default_value_t = 2.0)]
    pub sweep_step: f64,
    /// Most steps of the saturation sweep (each ×1.5 the rate, from the high level's).
    #[arg(long, default_value_t = 8)]
    pub sweep_steps: usize,
    /// Seed of the request mix and arrivals (the same for original and clone).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Syscall collector of the attach profiler.
    #[arg(long, value_enum, default_value = "auto")]
    pub collector: CollectorArg,
    /// Seconds before an unanswered request counts as a timeout.
    #[arg(long, default_value_t = 2.0)]
    pub request_timeout: f64,
}

pub fn parse_levels(names: &[String]) -> Result<Vec<Level>> {
    names
        .iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse::<Level>().map_err(anyhow::Error::msg))
        .collect()
}

pub fn run(args: ValidateArgs) -> Result<()> {
    let levels = parse_levels(&args.levels)?;
    if !(args.request_timeout.is_finite() && args.request_timeout > 0.0) {
        anyhow::bail!("--request-timeout must be a positive number of seconds");
    }
    let original = TargetSpec::load(&args.target)?;
    let clone = CloneDir::open(&args.clone)?;
    // The original's profiled cost per request sizes the simulated runs (both sides run at the
    // same rates).
    let instructions_per_request = clone.profiled_instructions_per_request();
    let backend = args.sim.backend()?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("out/validate").join(clone.name()));
    let high = original.load.resolve(Level::High);
    let saturation = (!args.no_saturation).then_some(SweepSettings {
        start_rate: high.rate,
        factor: 1.5,
        step_s: args.sweep_step,
        warmup_s: 0.5,
        max_steps: args.sweep_steps,
        refine_steps: 2,
        connections: high.connections,
    });
    eprintln!(
        "ditto: validating clone {} ({}) against {} at {} load; CPU counters: {}",
        clone.name(),
        clone.dir.display(),
        original.name,
        args.levels.join(", "),
        backend.source(args.sim.method())
    );
    let opts = ValidateOptions {
        original_spec_path: args.target.clone(),
        original,
        clone,
        levels,
        backend,
        sim: SimSettings {
            instructions_per_request,
            ..args.sim.settings(!args.no_l2)
        },
        duration_s: args.duration,
        warmup_s: args.warmup,
        original_runs: args.original_runs,
        saturation,
        seed: args.seed,
        request_timeout: Duration::from_secs_f64(args.request_timeout),
        collector: args.collector.into(),
        out: out.clone(),
    };
    let mut ui = ProgressLine::new();
    let mut status = |m: &str| eprintln!("ditto: {m}");
    let report = ditto_validate::validate(&opts, &mut status, &mut |p| ui.update(p));
    ui.finish();
    let report = report.with_context(|| {
        format!(
            "validation stopped; what was measured so far is in {}",
            out.join("report.json").display()
        )
    })?;
    print!("{}", table(&report));
    eprintln!(
        "ditto: wrote {} and {}",
        out.join("report.json").display(),
        out.join("index.html").display()
    );
    Ok(())
}

fn fmt_value(v: Option<f64>, format: Format) -> String {
    match (v, format) {
        (None, _) => "n/a".into(),
        (Some(v), Format::Percent) => format!("{:.3}%", 100.0 * v),
        (Some(v), Format::Number) if v.abs() >= 100.0 => format!("{v:.0}"),
        (Some(v), Format::Number) => format!("{v:.3}"),
    }
}

fn fmt_err(e: Option<f64>) -> String {
    e.map(|e| format!("{:.1}%", 100.0 * e))
        .unwrap_or_else(|| "n/a".into())
}

/// The comparison as a text table per level.
pub fn table(r: &Report) -> String {
    let mut s = String::new();
    for l in &r.levels {
        let _ = writeln!(
            s,
            "\n{} load: {} req/s, {} connections ({} s)",
            l.level, l.load.rate, l.load.connections, l.load.duration_s
        );
        let _ = writeln!(
            s,
            "{:<30} {:>14} {:>14} {:>9} {:>11}  source",
            "metric", "original", "clone", "error", "orig. var."
        );
        for m in &l.metrics {
            let _ = writeln!(
                s,
                "{:<30} {:>14} {:>14} {:>9} {:>11}  {}",
                m.label,
                fmt_value(m.original, m.format),
                fmt_value(m.clone, m.format),
                fmt_err(m.error),
                fmt_err(m.original_variation),
                m.source
            );
        }
    }
    if let Some(sat) = &r.saturation {
        let m = &sat.metric;
        let _ = writeln!(
            s,
            "\n{:<30} {:>14} {:>14} {:>9} {:>11}  {}",
            m.label,
            fmt_value(m.original, m.format),
            fmt_value(m.clone, m.format),
            fmt_err(m.error),
            fmt_err(m.original_variation),
            m.source
        );
    }
    s
}
