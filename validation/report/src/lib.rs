//! Validation and tuning of clones: the original and its clone under the same load generator and
//! traffic, compared metric by metric (CPU counters from the `perf` or `sim` backend, syscalls and bytes
//! from the attach profiler, CPU time and context switches from /proc, latency and saturation from
//! `ditto-load`), written as `report.json` and a static HTML dashboard; and the tuner that adjusts a
//! clone's knobs until its CPU figures match (paper §4.5, §6).
//!
//! Layout: [`metrics`] (catalogue, error), [`native`] and [`saturation`] (native measurements),
//! [`report`] (the JSON), [`dashboard`] (the HTML), [`validate`] (the orchestration), [`tune`] (the
//! feedback heuristic and loop), [`clone_dir`] (reading and regenerating a clone). Docs:
//! docs/validation.md.

pub mod clone_dir;
pub mod dashboard;
pub mod metrics;
pub mod native;
pub mod report;
pub mod saturation;
pub mod tune;
pub mod validate;

use std::path::PathBuf;

pub use clone_dir::CloneDir;
pub use report::Report;
pub use validate::{validate, ValidateOptions};

/// Why validation or tuning failed. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    #[error(transparent)]
    Measure(#[from] ditto_measure::MeasureError),
    #[error(transparent)]
    Target(#[from] ditto_target::SpecError),
    #[error(transparent)]
    Load(#[from] ditto_load::LoadError),
    #[error("attach profiler: {0}")]
    Profile(String),
    #[error("clone {}: {message}", dir.display())]
    Clone { dir: PathBuf, message: String },
    #[error("regenerating the clone: {0}")]
    Generate(String),
    #[error("{0}")]
    Settings(String),
    #[error("{0}")]
    Io(String),
    #[error("target '{name}' died during the load run ({status}); its last output:\n{log_tail}")]
    TargetDied {
        name: String,
        status: String,
        log_tail: String,
    },
}
