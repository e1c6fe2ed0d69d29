//! Saturation throughput by an open-loop rate sweep.
//!
//! One target start; short runs at geometrically rising offered rates until the target (or the load
//! generator) no longer keeps up. The saturation throughput is the highest achieved rate: once a run
//! falls behind, what it achieved is what the server could serve. The points double as the
//! latency-versus-load curve of the dashboard. An open-loop sweep is used rather than a closed loop
//! because ditto's load generator is open-loop, so the same generator and arrival process drive both
//! the levels and the sweep.
//!
//! On a 2-core machine the load generator itself saturates around 35–40k req/s of memcached traffic
//! (validation/bench/README.md); a sweep that ends there measures the machine, for original and clone
//! alike, and the report says which run stopped it.

use std::time::Duration;

use ditto_load::Progress;
use ditto_measure::RunOptions;
use ditto_target::{LaunchOptions, ResolvedLevel, TargetSpec};
use serde::{Deserialize, Serialize};

use crate::native::free_port;
use crate::ValidateError;

/// How to sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepSettings {
    /// First offered rate (the spec's high level by default).
    pub start_rate: f64,
    /// Each step multiplies the rate by this.
    pub factor: f64,
    pub step_s: f64,
    pub warmup_s: f64,
    pub max_steps: usize,
    pub connections: usize,
}

/// One step of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    pub offered_rate: f64,
    pub achieved_rate: f64,
    pub kept_up: bool,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
}

/// The outcome of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saturation {
    /// Highest achieved rate, requests per second.
    pub throughput: f64,
    /// Whether some step fell behind; if not, `throughput` is only a lower bound.
    pub saturated: bool,
    pub points: Vec<SweepPoint>,
    /// Why the sweep ended.
    pub stopped_because: String,
}

/// Highest achieved rate, and whether the sweep saw saturation (pure, for tests).
pub fn summarise(points: &[SweepPoint]) -> (f64, bool) {
    let best = points
        .iter()
        .map(|p| p.achieved_rate)
        .fold(0.0_f64, f64::max);
    (best, points.iter().any(|p| !p.kept_up))
}

/// Sweeps `spec` from `s.start_rate` upwards.
pub fn sweep(
    spec: &TargetSpec,
    level: &ResolvedLevel,
    s: &SweepSettings,
    opts: &RunOptions,
    status: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&Progress),
) -> Result<Saturation, ValidateError> {
    if !(s.start_rate > 0.0 && s.factor > 1.0 && s.step_s > 0.0 && s.max_steps > 0) {
        return Err(ValidateError::Settings(
            "the saturation sweep needs a positive start rate and step, and a factor above 1"
                .into(),
        ));
    }
    let launch = LaunchOptions {
        port: Some(free_port()?),
        ..LaunchOptions::default()
    };
    let (mut target, _warm) = ditto_measure::start_warm(spec, &launch, status)?;
    let mut points = Vec::new();
    let mut rate = s.start_rate;
    let mut stopped_because = format!("reached the step limit ({})", s.max_steps);
    let result = (|| -> Result<(), ValidateError> {
        for step in 0..s.max_steps {
            if rate > ditto_load::MAX_RATE {
                stopped_because = "reached the load generator's rate limit".into();
                break;
            }
            let lvl = ResolvedLevel {
                rate,
                connections: s.connections,
                warmup_s: s.warmup_s,
                duration_s: s.step_s,
                ..level.clone()
            };
            let cfg = ditto_measure::load_config(spec, &lvl, target.addr(), opts);
            status(&format!(
                "saturation sweep step {}/{}: {rate:.0} req/s",
                step + 1,
                s.max_steps
            ));
            let r = ditto_load::run(&cfg, progress)?;
            if let Some(st) = target.try_exit_status() {
                return Err(ValidateError::TargetDied {
                    name: spec.name.clone(),
                    status: st.to_string(),
                    log_tail: target.log_tail(),
                });
            }
            let f = crate::native::LoadFigures::from_report(&r);
            points.push(SweepPoint {
                offered_rate: rate,
                achieved_rate: f.achieved_rate,
                kept_up: f.kept_up,
                p50_us: f.p50_us,
                p95_us: f.p95_us,
                p99_us: f.p99_us,
            });
            if !f.kept_up {
                stopped_because = format!(
                    "fell behind at {rate:.0} req/s: {}",
                    f.kept_up_problem.unwrap_or_default()
                );
                break;
            }
            rate *= s.factor;
        }
        Ok(())
    })();
    let stopped = target.stop(Duration::from_secs(10));
    result?;
    stopped?;
    let (throughput, saturated) = summarise(&points);
    Ok(Saturation {
        throughput,
        saturated,
        points,
        stopped_because,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(offered: f64, achieved: f64, kept_up: bool) -> SweepPoint {
        SweepPoint {
            offered_rate: offered,
            achieved_rate: achieved,
            kept_up,
            p50_us: 0.0,
            p95_us: 0.0,
            p99_us: 0.0,
        }
    }

    #[test]
    fn saturation_is_the_highest_achieved_rate() {
        let pts = [
            pt(1000.0, 1000.0, true),
            pt(1500.0, 1490.0, true),
            pt(2250.0, 1700.0, false),
        ];
        assert_eq!(summarise(&pts), (1700.0, true));
        assert_eq!(summarise(&pts[..2]), (1490.0, false));
        assert_eq!(summarise(&[]), (0.0, false));
    }
}
