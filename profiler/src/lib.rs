//! Profiling a service: collectors observe it (crate `ditto-collect`), this crate turns what they saw
//! into a `ditto-profile` profile.
//!
//! Design trade-off: analysis is a pure function of recorded [`Observations`], apart from the
//! orchestration that gathers them (`attach`). The cost is one more type between collectors and
//! profile; the gain is that thread clustering, network-model inference and per-request normalisation
//! are tested deterministically on recordings of real runs, and a profile can be re-derived from saved
//! observations when the analysis improves, without touching the target again.

pub mod analyze;
pub mod attach;
pub mod launch;
mod observations;

pub use attach::{profile_attach, AttachLoad, AttachOptions, AttachResult, CollectorChoice};
pub use observations::Observations;

/// Why a profiling run failed. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum ProfileRunError {
    #[error("{0}")]
    Collect(String),
    #[error("syscall tracer: {0}")]
    Trace(String),
    #[error(transparent)]
    Load(#[from] ditto_load::LoadError),
}

impl ProfileRunError {
    pub(crate) fn collect(e: impl std::fmt::Display) -> ProfileRunError {
        ProfileRunError::Collect(e.to_string())
    }

    pub(crate) fn trace(e: impl std::fmt::Display) -> ProfileRunError {
        ProfileRunError::Trace(e.to_string())
    }
}
