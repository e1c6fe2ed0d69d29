//! Saturation throughput by an open-loop rate sweep.
//!
//! One target start; short runs at geometrically rising offered rates until the target (or the load
//! generator) no longer keeps up, then a few bisection steps between the last rate kept up with and the
//! first one not. The saturation throughput is the highest achieved rate. The points double as the
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
    /// Bisection steps between the last rate kept up with and the first one not.
    #[serde(default = "default_refine_steps")]
    pub refine_steps: usize,
    pub connections: usize,
}

fn default_refine_steps() -> usize {
    2
}

/// One step of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    pub offered_rate: f64,
    pub achieved_rate: f64,
    /// `ditto-load`'s verdict, which also fails when its own send lag grows (on a small machine the
    /// load generator falls behind its schedule before the server does).
    pub kept_up: bool,
    /// The server answered at least 95% of the offered rate: what the sweep steps on.
    #[serde(default)]
    pub kept_pace: bool,
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

/// Whether a step's server kept pace: answered at least 95% of the offered rate. The send-lag part of
/// `ditto-load`'s `kept_up` is left out on purpose: it measures the load generator (measured on memcached:
/// 56,235 of 56,250 req/s answered, yet "not kept up" for a 32 ms send lag p99).
pub fn kept_pace(offered: f64, achieved: f64) -> bool {
    achieved >= 0.95 * offered
}

/// Highest achieved rate, and whether the sweep saw saturation (pure, for tests).
pub fn summarise(points: &[SweepPoint]) -> (f64, bool) {
    let best = points
        .iter()
        .map(|p| p.achieved_rate)
        .fold(0.0_f64, f64::max);
    (best, points.iter().any(|p| !p.kept_pace))
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
    let mut result = Ok(());
    {
        let mut step = |rate: f64, what: &str, status: &mut dyn FnMut(&str)| {
            let lvl = ResolvedLevel {
                rate,
                connections: s.connections,
                warmup_s: s.warmup_s,
                duration_s: s.step_s,
                ..level.clone()
            };
            let cfg = ditto_measure::load_config(spec, &lvl, target.addr(), opts);
            status(&format!("saturation sweep, {what}: {rate:.0} req/s"));
            let r = ditto_load::run(&cfg, progress)?;
            if let Some(st) = target.try_exit_status() {
                return Err(ValidateError::TargetDied {
                    name: spec.name.clone(),
                    status: st.to_string(),
                    log_tail: target.log_tail(),
                });
            }
            let f = crate::native::LoadFigures::from_report(&r);
            let p = SweepPoint {
                offered_rate: rate,
                achieved_rate: f.achieved_rate,
                kept_up: f.kept_up,
                kept_pace: kept_pace(rate, f.achieved_rate),
                p50_us: f.p50_us,
                p95_us: f.p95_us,
                p99_us: f.p99_us,
            };
            Ok((p, f.kept_up_problem.unwrap_or_default()))
        };
        // Geometric steps until one falls behind, then bisection between the last kept-up rate and the
        // first failed one: the step grid alone resolves saturation only to a factor of 1.5.
        let mut good: Option<f64> = None;
        let mut bad: Option<f64> = None;
        for n in 0..s.max_steps {
            if rate > ditto_load::MAX_RATE {
                stopped_because = "reached the load generator's rate limit".into();
                break;
            }
            match step(rate, &format!("step {}/{}", n + 1, s.max_steps), status) {
                Ok((p, problem)) => {
                    let kept_up = p.kept_pace;
                    points.push(p);
                    if kept_up {
                        good = Some(rate);
                        rate *= s.factor;
                    } else {
                        stopped_because = format!(
                            "fell behind at {rate:.0} req/s (answered {:.0} req/s){}",
                            points.last().map(|p| p.achieved_rate).unwrap_or(0.0),
                            if problem.is_empty() {
                                String::new()
                            } else {
                                format!(": {problem}")
                            }
                        );
                        bad = Some(rate);
                        break;
                    }
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if let (Some(mut lo), Some(mut hi), true) = (good, bad, result.is_ok()) {
            for n in 0..s.refine_steps {
                let mid = (lo * hi).sqrt();
                match step(
                    mid,
                    &format!("refinement {}/{}", n + 1, s.refine_steps),
                    status,
                ) {
                    Ok((p, _)) => {
                        if p.kept_pace {
                            lo = mid;
                        } else {
                            hi = mid;
                        }
                        points.push(p);
                    }
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            stopped_because.push_str(&format!(
                "; kept up at {lo:.0}, fell behind at {hi:.0} req/s after refinement"
            ));
        }
    }
    points.sort_by(|a, b| a.offered_rate.total_cmp(&b.offered_rate));
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
            kept_pace: kept_up,
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
        assert!(kept_pace(56_250.0, 56_235.0));
        assert!(!kept_pace(45_928.0, 40_000.0));
    }
}
