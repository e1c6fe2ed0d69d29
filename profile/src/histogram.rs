//! Histograms with explicit bins: every distribution in a profile is one of these.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A distribution as explicit bins. Bins are sorted, non-overlapping, and each covers `[lo, hi)`.
/// Empty bins are left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Histogram {
    /// Unit of the binned values (`bytes`, `ns`, `count`).
    pub unit: String,
    /// The bins, in increasing order of `lo`.
    pub bins: Vec<Bin>,
}

/// One bin: `count` values fell in `[lo, hi)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Bin {
    /// Inclusive lower bound.
    pub lo: u64,
    /// Exclusive upper bound.
    pub hi: u64,
    /// Number of values in the bin.
    pub count: u64,
    /// Sum of the values in the bin, where the collector records it (the bytes a call returned):
    /// `sum / count` is the exact mean inside the bin, which a power-of-two bin only bounds within a
    /// factor of two. Absent in profiles whose collector did not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum: Option<u64>,
}

impl Bin {
    /// A bin without a recorded sum.
    pub fn new(lo: u64, hi: u64, count: u64) -> Bin {
        Bin {
            lo,
            hi,
            count,
            sum: None,
        }
    }

    /// The exact mean of the bin's values when its sum was recorded, kept inside `[lo, hi)`.
    pub fn mean(&self) -> Option<f64> {
        let sum = self.sum?;
        (self.count > 0).then(|| {
            (sum as f64 / self.count as f64)
                .clamp(self.lo as f64, (self.hi - 1).max(self.lo) as f64)
        })
    }

    /// Adds another bin of the same bounds. The sum stays known only if both sides knew it.
    fn add(&mut self, other: &Bin) {
        self.count += other.count;
        self.sum = self.sum.zip(other.sum).map(|(a, b)| a.saturating_add(b));
    }
}

impl Histogram {
    /// Builds a histogram from power-of-two buckets: bucket 0 holds the value 0, bucket `k > 0` holds
    /// `[2^(k-1), 2^k)`. This is how the collectors aggregate in the kernel.
    pub fn from_log2_buckets(
        unit: &str,
        buckets: impl IntoIterator<Item = (u32, u64)>,
    ) -> Histogram {
        Self::from_log2_buckets_summed(unit, buckets.into_iter().map(|(k, n)| (k, n, None)))
    }

    /// As [`Histogram::from_log2_buckets`], with each bucket's sum of values where it is known.
    pub fn from_log2_buckets_summed(
        unit: &str,
        buckets: impl IntoIterator<Item = (u32, u64, Option<u64>)>,
    ) -> Histogram {
        let mut bins: Vec<Bin> = buckets
            .into_iter()
            .filter(|&(_, count, _)| count > 0)
            .map(|(k, count, sum)| {
                let (lo, hi) = match k {
                    0 => (0, 1),
                    k if k >= 64 => (1u64 << 63, u64::MAX),
                    k => (1u64 << (k - 1), 1u64 << k),
                };
                Bin { lo, hi, count, sum }
            })
            .collect();
        bins.sort_by_key(|b| b.lo);
        // Merge duplicates (the same bucket given twice).
        let mut merged: Vec<Bin> = Vec::with_capacity(bins.len());
        for b in bins {
            match merged.last_mut() {
                Some(last) if last.lo == b.lo => last.add(&b),
                _ => merged.push(b),
            }
        }
        Histogram {
            unit: unit.to_string(),
            bins: merged,
        }
    }

    /// Number of values.
    pub fn total(&self) -> u64 {
        self.bins.iter().map(|b| b.count).sum()
    }

    /// Mean: a bin's recorded mean where it has one, otherwise the middle of the bin (the lower bound
    /// for the `[0, 1)` bin).
    pub fn mean_estimate(&self) -> Option<f64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let sum: f64 = self
            .bins
            .iter()
            .map(|b| {
                let middle = (b.lo as f64 + (b.hi - b.lo) as f64 / 2.0).max(b.lo as f64);
                b.count as f64 * b.mean().unwrap_or(middle)
            })
            .map(|v| if v.is_finite() { v } else { 0.0 })
            .sum();
        Some(sum / total as f64)
    }

    /// Checks the bin invariants; used when a profile is loaded.
    pub fn check(&self) -> Result<(), String> {
        let mut previous_hi = 0u64;
        for (i, b) in self.bins.iter().enumerate() {
            if b.hi <= b.lo {
                return Err(format!("bin {i} has hi ({}) not above lo ({})", b.hi, b.lo));
            }
            if i > 0 && b.lo < previous_hi {
                return Err(format!("bin {i} overlaps or precedes the bin before it"));
            }
            previous_hi = b.hi;
        }
        Ok(())
    }

    /// Adds another histogram's counts (units must agree; bins are merged by exact bounds).
    pub fn absorb(&mut self, other: &Histogram) {
        if self.unit.is_empty() {
            self.unit = other.unit.clone();
        }
        for b in &other.bins {
            match self.bins.iter_mut().find(|x| x.lo == b.lo && x.hi == b.hi) {
                Some(x) => x.add(b),
                None => self.bins.push(*b),
            }
        }
        self.bins.sort_by_key(|b| b.lo);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_buckets_become_explicit_bins() {
        let h = Histogram::from_log2_buckets("bytes", [(0, 2), (1, 3), (13, 5), (13, 1)]);
        assert_eq!(
            h.bins,
            vec![
                Bin::new(0, 1, 2),
                Bin::new(1, 2, 3),
                Bin::new(4096, 8192, 6),
            ]
        );
        assert_eq!(h.total(), 11);
        h.check().expect("valid");
    }

    #[test]
    fn overlapping_bins_are_invalid() {
        let h = Histogram {
            unit: "bytes".into(),
            bins: vec![Bin::new(0, 10, 1), Bin::new(5, 20, 1)],
        };
        assert!(h.check().unwrap_err().contains("overlaps"));
    }

    #[test]
    fn mean_estimate_uses_bin_middles() {
        let h = Histogram::from_log2_buckets("bytes", [(13, 1)]);
        assert_eq!(h.mean_estimate(), Some(6144.0));
        assert_eq!(Histogram::default().mean_estimate(), None);
    }

    #[test]
    fn a_recorded_bin_sum_gives_the_exact_mean_and_survives_merging_only_when_both_sides_have_it() {
        // Two files of 131072 bytes land in [131072, 262144): the middle would say 196608.
        let h = Histogram::from_log2_buckets_summed("bytes", [(18, 2, Some(262_144))]);
        assert_eq!(h.bins[0].mean(), Some(131_072.0));
        assert_eq!(h.mean_estimate(), Some(131_072.0));
        let mut both = h.clone();
        both.absorb(&Histogram::from_log2_buckets_summed(
            "bytes",
            [(18, 1, Some(200_000))],
        ));
        assert_eq!(both.bins[0].count, 3);
        assert_eq!(both.bins[0].sum, Some(462_144));
        let mut one_unknown = h.clone();
        one_unknown.absorb(&Histogram::from_log2_buckets("bytes", [(18, 1)]));
        assert_eq!(one_unknown.bins[0].count, 3);
        assert_eq!(one_unknown.bins[0].sum, None);
        // A sum outside the bin (a corrupt profile) is clamped into it.
        let odd = Bin {
            sum: Some(10),
            ..Bin::new(4096, 8192, 1)
        };
        assert_eq!(odd.mean(), Some(4096.0));
    }
}
