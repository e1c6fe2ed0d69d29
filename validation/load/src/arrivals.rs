//! Intended send times.
//!
//! Every connection owns an independent schedule at `rate / connections`, the way wrk2 splits its
//! rate. Fixed-rate schedules are staggered by connection index so that their union is evenly spaced
//! at the full rate; Poisson schedules draw exponential gaps, and the superposition of independent
//! Poisson processes is itself Poisson at the summed rate.

use std::fmt;
use std::str::FromStr;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// How intended send times are spaced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arrival {
    /// Constant gaps of exactly `1 / rate` (wrk2's model).
    Fixed,
    /// Exponentially distributed gaps with mean `1 / rate` (independent arrivals, as from many users).
    #[default]
    Poisson,
}

impl Arrival {
    /// The name used in configuration files and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Arrival::Fixed => "fixed",
            Arrival::Poisson => "poisson",
        }
    }
}

impl fmt::Display for Arrival {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Arrival {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "fixed" | "constant" => Ok(Arrival::Fixed),
            "poisson" | "exponential" => Ok(Arrival::Poisson),
            other => Err(format!(
                "unknown arrival process {other:?} (expected \"fixed\" or \"poisson\")"
            )),
        }
    }
}

/// One connection's infinite sequence of intended send times, as nanoseconds after the run start.
#[derive(Debug)]
pub struct Schedule {
    arrival: Arrival,
    gap_ns: f64,
    offset_ns: f64,
    index: u64,
    last_ns: f64,
    rng: SmallRng,
}

impl Schedule {
    /// Schedule of connection `index` out of `connections` sharing `total_rate` requests per second.
    ///
    /// `seed` only matters for Poisson arrivals; the same seed gives the same times.
    pub fn new(
        arrival: Arrival,
        total_rate: f64,
        connections: usize,
        index: usize,
        seed: u64,
    ) -> Schedule {
        let connections = connections.max(1) as f64;
        let gap_ns = 1e9 * connections / total_rate;
        Schedule {
            arrival,
            gap_ns,
            // Stagger fixed schedules so connection i fires i/rate after connection 0.
            offset_ns: gap_ns * index as f64 / connections,
            index: 0,
            last_ns: 0.0,
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// Mean gap between two sends of this connection, in nanoseconds.
    pub fn mean_gap_ns(&self) -> f64 {
        self.gap_ns
    }
}

impl Iterator for Schedule {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let t = match self.arrival {
            // Computed from the index, not accumulated, so rounding never drifts.
            Arrival::Fixed => self.offset_ns + self.index as f64 * self.gap_ns,
            Arrival::Poisson => {
                // 1 - u lies in (0, 1], so the logarithm is finite.
                let u: f64 = self.rng.gen();
                self.last_ns + -(1.0 - u).ln() * self.gap_ns
            }
        };
        self.index += 1;
        self.last_ns = t;
        Some(t as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_schedule_spacing_is_exact() {
        let times: Vec<u64> = Schedule::new(Arrival::Fixed, 1000.0, 1, 0, 1)
            .take(10_001)
            .collect();
        assert_eq!(times[0], 0);
        for w in times.windows(2) {
            assert_eq!(w[1] - w[0], 1_000_000);
        }
        assert_eq!(times[10_000], 10_000_000_000);
    }

    #[test]
    fn fixed_schedules_of_all_connections_interleave_evenly() {
        // 4 connections at 4000/s total: each sends every 1 ms, offset by 250 µs from the previous.
        let mut all: Vec<u64> = (0..4)
            .flat_map(|i| Schedule::new(Arrival::Fixed, 4000.0, 4, i, 7).take(100))
            .collect();
        all.sort_unstable();
        for w in all.windows(2) {
            assert_eq!(w[1] - w[0], 250_000);
        }
    }

    #[test]
    fn poisson_mean_gap_is_within_one_percent() {
        let n = 200_000;
        let times: Vec<u64> = Schedule::new(Arrival::Poisson, 500.0, 1, 0, 42)
            .take(n)
            .collect();
        let mean_gap = times[n - 1] as f64 / n as f64;
        let expected = 2_000_000.0;
        assert!(
            (mean_gap - expected).abs() / expected < 0.01,
            "mean gap {mean_gap} ns, expected {expected} ns"
        );
        // Exponential gaps: the standard deviation equals the mean.
        let gaps: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        assert!(
            (var.sqrt() - mean).abs() / mean < 0.02,
            "sd {} mean {mean}",
            var.sqrt()
        );
    }

    #[test]
    fn poisson_schedule_is_deterministic_per_seed() {
        let a: Vec<u64> = Schedule::new(Arrival::Poisson, 100.0, 2, 1, 9)
            .take(50)
            .collect();
        let b: Vec<u64> = Schedule::new(Arrival::Poisson, 100.0, 2, 1, 9)
            .take(50)
            .collect();
        let c: Vec<u64> = Schedule::new(Arrival::Poisson, 100.0, 2, 1, 10)
            .take(50)
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn arrival_names_parse_and_print() {
        assert_eq!("fixed".parse::<Arrival>(), Ok(Arrival::Fixed));
        assert_eq!("Poisson".parse::<Arrival>(), Ok(Arrival::Poisson));
        assert!("uniform".parse::<Arrival>().is_err());
        assert_eq!(Arrival::Fixed.to_string(), "fixed");
    }
}
