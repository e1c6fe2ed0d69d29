//! The simulated counter backend: Valgrind's cachegrind with an explicit geometry and branch simulation.
//!
//! Cachegrind 3.19 cannot start and stop counting mid-run, so per-request figures are taken as the
//! difference of two runs that differ only in how many requests they serve: start-up, warm-up and shutdown
//! cancel out, leaving the marginal cost of the extra requests.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::platform::Platform;
use crate::MeasureError;

/// The simulation options cachegrind and callgrind share: cache and branch simulation with
/// `platform`'s geometry, and fair scheduling.
pub fn simulation_args(platform: &Platform) -> Vec<String> {
    vec![
        "--cache-sim=yes".into(),
        "--branch-sim=yes".into(),
        format!("--I1={}", platform.l1i.cachegrind_arg()),
        format!("--D1={}", platform.l1d.cachegrind_arg()),
        format!("--LL={}", platform.llc.cachegrind_arg()),
        // Valgrind runs one guest thread at a time; fair scheduling keeps a multi-threaded server's threads
        // progressing in turn as on real cores.
        "--fair-sched=yes".into(),
    ]
}

/// Arguments that put a server command under cachegrind writing to `out_file`.
pub fn wrapper(platform: &Platform, out_file: &Path) -> Vec<String> {
    let mut args = vec!["valgrind".into(), "--tool=cachegrind".into()];
    args.extend(simulation_args(platform));
    args.push("--trace-children=no".into());
    args.push(format!("--cachegrind-out-file={}", out_file.display()));
    args
}

/// A world-writable folder for a Valgrind run's output, one file per process (`cachegrind.out.PID`;
/// callgrind's sessions keep their dumps and vgdb FIFOs in one too); removed when dropped.
///
/// Why not the run folder: a server that forks workers under another user (nginx's master runs as root,
/// its worker as www-data) has every process simulated by Valgrind, each writing its own file, and the
/// workers cannot write into the master's folder; with one file name the last process to exit
/// overwrote the others, so nginx's simulated work was only its master's.
#[derive(Debug)]
pub struct OutDir {
    path: PathBuf,
}

impl OutDir {
    pub fn new() -> Result<OutDir, MeasureError> {
        use std::os::unix::fs::PermissionsExt;
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("ditto-valgrind-{}-{n}", std::process::id()));
        let io = |cause| MeasureError::Read {
            path: path.clone(),
            cause,
        };
        std::fs::create_dir_all(&path).map_err(io)?;
        // Sticky and writable by all: every process of the server may write its file, none another's.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o1777)).map_err(io)?;
        Ok(OutDir { path })
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `--cachegrind-out-file` pattern.
    pub fn pattern(&self) -> PathBuf {
        self.path.join("cachegrind.out.%p")
    }

    /// The totals of every process, summed.
    pub fn read_sum(&self) -> Result<CachegrindTotals, MeasureError> {
        let entries = std::fs::read_dir(&self.path).map_err(|cause| MeasureError::Read {
            path: self.path.clone(),
            cause,
        })?;
        let mut files: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("cachegrind.out."))
            })
            .collect();
        files.sort();
        let mut total: Option<CachegrindTotals> = None;
        for f in &files {
            let t = CachegrindTotals::read(f)?;
            total = Some(match total {
                Some(sum) => sum.plus(&t),
                None => t,
            });
        }
        total.ok_or_else(|| MeasureError::CachegrindOutput {
            path: self.path.clone(),
            message: "no cachegrind output was written (did the server start under Valgrind?)"
                .into(),
        })
    }
}

impl Drop for OutDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Whole-program event totals from one cachegrind run (names as cachegrind prints them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CachegrindTotals {
    /// Instructions executed.
    pub ir: f64,
    pub i1mr: f64,
    pub ilmr: f64,
    pub dr: f64,
    pub d1mr: f64,
    pub dlmr: f64,
    pub dw: f64,
    pub d1mw: f64,
    pub dlmw: f64,
    /// Conditional branches and their mispredictions.
    pub bc: f64,
    pub bcm: f64,
    /// Indirect branches and their mispredictions.
    pub bi: f64,
    pub bim: f64,
}

impl CachegrindTotals {
    /// Reads the `events:` and `summary:` lines of a cachegrind output file.
    pub fn parse(text: &str, origin: &Path) -> Result<CachegrindTotals, MeasureError> {
        let t = Self::parse_counts(text, origin)?;
        let bad = |message: &str| MeasureError::CachegrindOutput {
            path: origin.to_path_buf(),
            message: message.to_string(),
        };
        if t.ir <= 0.0 {
            return Err(bad("no instructions counted"));
        }
        if t.dr + t.dw <= 0.0 || t.bc <= 0.0 {
            return Err(bad("cache or branch simulation was off"));
        }
        Ok(t)
    }

    /// The `events:` and `summary:` lines of a cachegrind or callgrind output, which may count
    /// nothing (a callgrind dump of a process that was idle in its window).
    pub fn parse_counts(text: &str, origin: &Path) -> Result<CachegrindTotals, MeasureError> {
        let bad = |message: String| MeasureError::CachegrindOutput {
            path: origin.to_path_buf(),
            message,
        };
        let events: Vec<&str> = text
            .lines()
            .find_map(|l| l.strip_prefix("events:"))
            .ok_or_else(|| bad("no 'events:' line".into()))?
            .split_whitespace()
            .collect();
        let values: Vec<f64> = text
            .lines()
            .find_map(|l| l.strip_prefix("summary:"))
            .ok_or_else(|| bad("no 'summary:' line (did the server exit cleanly?)".into()))?
            .split_whitespace()
            .map(|v| {
                v.parse::<f64>()
                    .map_err(|_| bad(format!("summary value '{v}' is not a number")))
            })
            .collect::<Result<_, _>>()?;
        // The format lets trailing zeros go unwritten (callgrind does: an idle window's summary
        // ends before its last, zero, event).
        if values.len() > events.len() {
            return Err(bad(format!(
                "{} events but {} summary values",
                events.len(),
                values.len()
            )));
        }
        let mut t = CachegrindTotals::default();
        for (name, value) in events.iter().zip(values) {
            let slot = match *name {
                "Ir" => &mut t.ir,
                "I1mr" => &mut t.i1mr,
                "ILmr" => &mut t.ilmr,
                "Dr" => &mut t.dr,
                "D1mr" => &mut t.d1mr,
                "DLmr" => &mut t.dlmr,
                "Dw" => &mut t.dw,
                "D1mw" => &mut t.d1mw,
                "DLmw" => &mut t.dlmw,
                "Bc" => &mut t.bc,
                "Bcm" => &mut t.bcm,
                "Bi" => &mut t.bi,
                "Bim" => &mut t.bim,
                _ => continue,
            };
            *slot = value;
        }
        Ok(t)
    }

    pub fn read(path: &Path) -> Result<CachegrindTotals, MeasureError> {
        let text = std::fs::read_to_string(path).map_err(|cause| MeasureError::Read {
            path: path.to_path_buf(),
            cause,
        })?;
        Self::parse(&text, path)
    }

    /// Event-wise `self + other`.
    pub fn plus(&self, o: &CachegrindTotals) -> CachegrindTotals {
        CachegrindTotals {
            ir: self.ir + o.ir,
            i1mr: self.i1mr + o.i1mr,
            ilmr: self.ilmr + o.ilmr,
            dr: self.dr + o.dr,
            d1mr: self.d1mr + o.d1mr,
            dlmr: self.dlmr + o.dlmr,
            dw: self.dw + o.dw,
            d1mw: self.d1mw + o.d1mw,
            dlmw: self.dlmw + o.dlmw,
            bc: self.bc + o.bc,
            bcm: self.bcm + o.bcm,
            bi: self.bi + o.bi,
            bim: self.bim + o.bim,
        }
    }

    /// Event-wise `self − other`.
    pub fn minus(&self, o: &CachegrindTotals) -> CachegrindTotals {
        CachegrindTotals {
            ir: self.ir - o.ir,
            i1mr: self.i1mr - o.i1mr,
            ilmr: self.ilmr - o.ilmr,
            dr: self.dr - o.dr,
            d1mr: self.d1mr - o.d1mr,
            dlmr: self.dlmr - o.dlmr,
            dw: self.dw - o.dw,
            d1mw: self.d1mw - o.d1mw,
            dlmw: self.dlmw - o.dlmw,
            bc: self.bc - o.bc,
            bcm: self.bcm - o.bcm,
            bi: self.bi - o.bi,
            bim: self.bim - o.bim,
        }
    }
}

/// Rates derived from cachegrind totals. Every figure here comes from simulation (`source = "cachegrind"`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SimRates {
    pub instructions_per_request: f64,
    /// L1d misses / (data reads + writes).
    pub l1d_miss_rate: f64,
    /// L1i misses / instructions.
    pub l1i_miss_rate: f64,
    /// LL misses / (data reads + writes), data side.
    pub ll_data_miss_rate: f64,
    /// Mispredicted / executed, conditional and indirect branches together.
    pub branch_mispredict_rate: f64,
    pub requests: f64,
}

impl SimRates {
    pub fn from_totals(t: &CachegrindTotals, requests: f64) -> Result<SimRates, MeasureError> {
        let data = t.dr + t.dw;
        if requests <= 0.0 || t.ir <= 0.0 || data <= 0.0 || t.bc + t.bi <= 0.0 {
            return Err(MeasureError::Differential(format!(
                "the longer run did not add work ({requests} requests, {} instructions): raise --sim-requests",
                t.ir
            )));
        }
        Ok(SimRates {
            instructions_per_request: t.ir / requests,
            l1d_miss_rate: (t.d1mr + t.d1mw) / data,
            l1i_miss_rate: t.i1mr / t.ir,
            ll_data_miss_rate: (t.dlmr + t.dlmw) / data,
            branch_mispredict_rate: (t.bcm + t.bim) / (t.bc + t.bi),
            requests,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Header and summary of a real cachegrind 3.19 run (`valgrind --tool=cachegrind --cache-sim=yes
    /// --branch-sim=yes --I1=32768,8,64 --D1=32768,8,64 --LL=33554432,16,64 /bin/true`), cut to its header and
    /// summary lines.
    const FIXTURE: &str = "desc: I1 cache:         32768 B, 64 B, 8-way associative\n\
desc: D1 cache:         32768 B, 64 B, 8-way associative\n\
desc: LL cache:         33554432 B, 64 B, 16-way associative\n\
cmd: /bin/true\n\
events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw Bc Bcm Bi Bim\n\
summary: 127757 1091 1072 29401 1224 1013 10266 343 311 25341 3164 279 150\n";

    #[test]
    fn summary_line_is_read_by_event_name() {
        let t = CachegrindTotals::parse(FIXTURE, Path::new("fixture")).expect("fixture parses");
        assert_eq!(t.ir, 127757.0);
        assert_eq!(t.d1mw, 343.0);
        assert_eq!(t.bim, 150.0);
    }

    #[test]
    fn every_process_file_is_summed_and_the_folder_removed() {
        let out = OutDir::new().expect("out dir");
        let dir = out.pattern().parent().expect("folder").to_path_buf();
        assert!(out.read_sum().is_err(), "no files yet");
        std::fs::write(dir.join("cachegrind.out.100"), FIXTURE).expect("write");
        std::fs::write(dir.join("cachegrind.out.101"), FIXTURE).expect("write");
        let t = out.read_sum().expect("sum");
        assert_eq!(t.ir, 2.0 * 127757.0);
        assert_eq!(t.bim, 300.0);
        drop(out);
        assert!(!dir.exists());
    }

    #[test]
    fn output_without_cache_simulation_is_refused() {
        let text = "events: Ir\nsummary: 1000\n";
        let err = CachegrindTotals::parse(text, Path::new("x"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("simulation was off"), "{err}");
    }

    #[test]
    fn truncated_output_is_refused() {
        let text = "events: Ir I1mr\nfl=a\n";
        assert!(CachegrindTotals::parse(text, Path::new("x")).is_err());
    }

    #[test]
    fn differential_rates_cancel_fixed_costs() {
        let fixed = CachegrindTotals {
            ir: 1e6,
            dr: 3e5,
            dw: 1e5,
            d1mr: 4e4,
            bc: 1e5,
            bcm: 1e4,
            ..Default::default()
        };
        let per_req = CachegrindTotals {
            ir: 1e4,
            dr: 3e3,
            dw: 1e3,
            d1mr: 200.0,
            d1mw: 200.0,
            bc: 1e3,
            bcm: 10.0,
            ..Default::default()
        };
        let mut long = fixed;
        for _ in 0..100 {
            long = CachegrindTotals {
                ir: long.ir + per_req.ir,
                dr: long.dr + per_req.dr,
                dw: long.dw + per_req.dw,
                d1mr: long.d1mr + per_req.d1mr,
                d1mw: long.d1mw + per_req.d1mw,
                bc: long.bc + per_req.bc,
                bcm: long.bcm + per_req.bcm,
                ..long
            };
        }
        let rates = SimRates::from_totals(&long.minus(&fixed), 100.0).expect("rates");
        assert!((rates.instructions_per_request - 1e4).abs() < 1e-6);
        assert!((rates.l1d_miss_rate - 0.1).abs() < 1e-9);
        assert!((rates.branch_mispredict_rate - 0.01).abs() < 1e-9);
    }
}
