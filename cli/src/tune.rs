//! `ditto tune`: adjust a clone's generator knobs until its CPU counters match the original's under the
//! same load (paper §4.5). The work is in `ditto_validate::tune`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use ditto_measure::SimSettings;
use ditto_target::{Level, TargetSpec};
use ditto_validate::tune::{default_tuned_metrics, TuneHistory, TuneSettings, HISTORY_SCHEMA};
use ditto_validate::validate::{resolve, CloneTuneBackend};
use ditto_validate::CloneDir;

use crate::ui::outln;
use crate::validate::SimFlags;

pub const EXAMPLES: &str = "Examples:\n  \
    ditto tune clones/memcached --target targets/memcached.toml\n  \
    ditto tune clones/nginx --target targets/nginx.toml --max-iterations 8 --tolerance 0.1\n  \
    ditto tune clones/memcached --target targets/memcached.toml --seed-trials 3\n  \
    ditto tune clones/pix-baseline --target targets/pix-baseline.toml --metrics instructions_per_request,l1d_miss_rate\n\n\
    Each iteration regenerates the clone in place (same profile and seed, new knobs), rebuilds it and measures it;\n\
    the history of every iteration is written to CLONE/tune-history.json, which `ditto validate` shows.\n\
    With the simulated counters an iteration takes about a minute (two cachegrind runs).";

#[derive(Debug, Args)]
pub struct TuneArgs {
    /// The clone directory (from `ditto generate`); regenerated in place.
    #[arg(value_name = "CLONE_DIR")]
    pub clone: PathBuf,
    /// The original's target spec.
    #[arg(long, value_name = "SPEC")]
    pub target: PathBuf,
    /// Most clone measurements (the first is the clone as it is).
    #[arg(long, default_value_t = 5)]
    pub max_iterations: usize,
    /// Measurements after the knob iterations when they did not converge: the best knobs
    /// regenerated with the next generator seeds (the clone's seed + 1, + 2, …); the clone is left
    /// with the best knobs and seed of every measurement. A regeneration redraws the layout's
    /// random choices, which can move a simulated figure more than a knob step near the target.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub seed_trials: usize,
    /// Largest relative error accepted for every tuned metric (0.05 = 5%, the bar the validation
    /// holds the simulated cache and branch metrics to; widened per metric to the original's own
    /// spread, see --original-runs).
    #[arg(long, default_value_t = 0.05)]
    pub tolerance: f64,
    /// Metrics that must be within tolerance, comma-separated (default: those a knob group drives:
    /// instructions_per_request, l1i_miss_rate, l1d_miss_rate, l2_miss_rate (simulated, without
    /// --no-l2), llc_miss_rate, branch_mispredict_rate, plus ipc with perf).
    #[arg(long, value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// Runs of the original: the reference is their mean, and a metric whose runs spread by more than
    /// --tolerance is matched within that spread (simulated L1d and L1i can move by tens of percent
    /// between runs).
    #[arg(long, default_value_t = 2)]
    pub original_runs: usize,
    /// Load level of the original's spec to tune at.
    #[arg(long, default_value = "medium")]
    pub level: String,
    #[command(flatten)]
    pub sim: SimFlags,
    /// Skip the L2-geometry cachegrind runs (half the time per iteration): the L2 miss rate is then
    /// not measured and not tuned, and the LLC miss rate is of the L1's misses, not the L2's as
    /// `ditto validate` reports it.
    #[arg(long)]
    pub no_l2: bool,
    /// Seconds of load before counting (perf backend).
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Measured seconds (perf backend).
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Seed of the request mix and arrivals.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

pub fn run(args: TuneArgs) -> Result<()> {
    let level: Level = args.level.parse().map_err(anyhow::Error::msg)?;
    let original = TargetSpec::load(&args.target)?;
    let clone = CloneDir::open(&args.clone)?;
    let instructions_per_request = clone.profiled_instructions_per_request();
    let backend = args.sim.backend()?;
    let perf = matches!(backend, ditto_measure::CounterBackend::Perf);
    let settings = TuneSettings {
        tolerance: args.tolerance,
        max_iterations: args.max_iterations,
        tuned_metrics: if args.metrics.is_empty() {
            default_tuned_metrics(perf, !args.no_l2)
        } else {
            args.metrics.iter().map(|m| m.trim().to_string()).collect()
        },
        original_runs: args.original_runs,
        seed_trials: args.seed_trials,
    };
    settings.check()?;
    let history = TuneHistory {
        schema: HISTORY_SCHEMA.into(),
        clone: clone.name().to_string(),
        clone_dir: clone.dir.display().to_string(),
        target: args.target.display().to_string(),
        level: level.name().into(),
        counters: backend.source(args.sim.method()),
        tolerance: settings.tolerance,
        max_iterations: settings.max_iterations,
        tuned_metrics: settings.tuned_metrics.clone(),
        original: None,
        original_runs: Vec::new(),
        tolerances: Default::default(),
        iterations: Vec::new(),
        converged: false,
        best_iteration: None,
        final_knobs: None,
        seed: None,
        final_seed: None,
        stop_reason: String::new(),
        complete: false,
    };
    eprintln!(
        "ditto: tuning {} against {} at {} load (counters {}), tolerance {:.1}%, at most {} iterations and {} seed trials",
        clone.dir.display(),
        original.name,
        level.name(),
        backend.source(args.sim.method()),
        100.0 * settings.tolerance,
        settings.max_iterations,
        settings.seed_trials
    );
    let initial = clone.knobs.clone();
    let history_path = clone.history_path();
    let mut b = CloneTuneBackend {
        level: resolve(&original, level, args.duration, args.warmup),
        original,
        clone,
        backend,
        sim: SimSettings {
            instructions_per_request,
            ..args.sim.settings(!args.no_l2)
        },
        seed: args.seed,
        request_timeout: Duration::from_secs(2),
    };
    let mut status = |m: &str| eprintln!("ditto: {m}");
    let h = ditto_validate::tune::tune(&settings, initial, history, &mut b, &mut status)
        .with_context(|| {
            format!(
                "tuning stopped; the history so far is in {}",
                history_path.display()
            )
        })?;
    outln!(
        "{} after {} iteration{}: {}; best iteration {}",
        if h.converged {
            "converged"
        } else {
            "not converged"
        },
        h.iterations.len(),
        if h.iterations.len() == 1 { "" } else { "s" },
        h.stop_reason,
        h.best_iteration
            .map(|n| n.to_string())
            .unwrap_or("-".into())
    );
    for it in &h.iterations {
        let seed = it.seed.map(|s| format!(" (seed {s})")).unwrap_or_default();
        let errs: Vec<String> = h
            .tuned_metrics
            .iter()
            .map(|k| {
                format!(
                    "{k} {}",
                    it.errors
                        .get(k)
                        .copied()
                        .flatten()
                        .map(|e| format!("{:.1}%", 100.0 * e))
                        .unwrap_or("n/a".into())
                )
            })
            .collect();
        outln!("  iteration {}{seed}: {}", it.iteration, errs.join(", "));
    }
    eprintln!("ditto: wrote {}", history_path.display());
    Ok(())
}
