//! Errors that stop a run before or instead of producing a report.
//!
//! Misbehaving servers never produce a `LoadError` once a run is under way: their failures are
//! counted per request (see [`crate::ErrorKind`]). These errors are about configuration, the initial
//! connections and the output files.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Why a load run, a warm-up or writing its results failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A [`crate::LoadConfig`] field is out of range.
    #[error("invalid load configuration: {0}")]
    InvalidConfig(String),

    /// A workload field is out of range.
    #[error("invalid {protocol} workload: {reason}")]
    InvalidWorkload {
        protocol: &'static str,
        reason: String,
    },

    /// The target is not on the loopback network and that was not explicitly allowed.
    #[error(
        "refusing to send load to {addr}: it is not a loopback address (127.0.0.0/8 or ::1); \
         allow non-loopback targets explicitly to load another host"
    )]
    NonLoopback { addr: SocketAddr },

    /// The server could not be reached when the run started.
    #[error("cannot connect to the {protocol} server at {addr}: {reason}")]
    Connect {
        addr: SocketAddr,
        protocol: &'static str,
        reason: String,
    },

    /// The unmeasured preparation step (e.g. creating the Pix account population) failed.
    #[error("preparing the {protocol} server at {addr} failed: {reason}")]
    Prepare {
        addr: SocketAddr,
        protocol: &'static str,
        reason: String,
    },

    /// The operating system refused a load thread.
    #[error("cannot start a load thread: {0}")]
    Thread(#[source] std::io::Error),

    /// A load thread failed unexpectedly (a bug, not a server problem).
    #[error("load thread {index} failed: {reason}")]
    Internal { index: usize, reason: String },

    /// Writing the histogram log or the JSON report failed.
    #[error("cannot write {what} to {path}: {reason}")]
    Output {
        what: &'static str,
        path: PathBuf,
        reason: String,
    },
}
