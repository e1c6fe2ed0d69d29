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
}

impl Histogram {
    /// Builds a histogram from power-of-two buckets: bucket 0 holds the value 0, bucket `k > 0` holds
    /// `[2^(k-1), 2^k)`. This is how the collectors aggregate in the kernel.
    pub fn from_log2_buckets(
        unit: &str,
        buckets: impl IntoIterator<Item = (u32, u64)>,
    ) -> Histogram {
        let mut bins: Vec<Bin> = buckets
            .into_iter()
            .filter(|&(_, count)| count > 0)
            .map(|(k, count)| {
                let (lo, hi) = match k {
                    0 => (0, 1),
                    k if k >= 64 => (1u64 << 63, u64::MAX),
                    k => (1u64 << (k - 1), 1u64 << k),
                };
                Bin { lo, hi, count }
            })
            .collect();
        bins.sort_by_key(|b| b.lo);
        // Merge duplicates (the same bucket given twice).
        let mut merged: Vec<Bin> = Vec::with_capacity(bins.len());
        for b in bins {
            match merged.last_mut() {
                Some(last) if last.lo == b.lo => last.count += b.count,
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

    /// Mean, taking each value at the middle of its bin (the lower bound for the `[0, 1)` bin).
    pub fn mean_estimate(&self) -> Option<f64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let sum: f64 = self
            .bins
            .iter()
            .map(|b| b.count as f64 * (b.lo as f64 + (b.hi - b.lo) as f64 / 2.0).max(b.lo as f64))
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
                Some(x) => x.count += b.count,
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
                Bin {
                    lo: 0,
                    hi: 1,
                    count: 2
                },
                Bin {
                    lo: 1,
                    hi: 2,
                    count: 3
                },
                Bin {
                    lo: 4096,
                    hi: 8192,
                    count: 6
                },
            ]
        );
        assert_eq!(h.total(), 11);
        h.check().expect("valid");
    }

    #[test]
    fn overlapping_bins_are_invalid() {
        let h = Histogram {
            unit: "bytes".into(),
            bins: vec![
                Bin {
                    lo: 0,
                    hi: 10,
                    count: 1,
                },
                Bin {
                    lo: 5,
                    hi: 20,
                    count: 1,
                },
            ],
        };
        assert!(h.check().unwrap_err().contains("overlaps"));
    }

    #[test]
    fn mean_estimate_uses_bin_middles() {
        let h = Histogram::from_log2_buckets("bytes", [(13, 1)]);
        assert_eq!(h.mean_estimate(), Some(6144.0));
        assert_eq!(Histogram::default().mean_estimate(), None);
    }
}
