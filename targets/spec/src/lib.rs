//! Target specs: one TOML file tells ditto how to build, start, warm and load a service.
//!
//! Design trade-off: a target is described by data, not code. Everything ditto does to a target — start it
//! on a loopback port as a given user, render its config, warm it, drive low/medium/high load, stop it and
//! every process it forked — is generic over the spec, so a user clones their own service by writing one
//! file instead of a plugin. The price is that a spec can only say what the format anticipates
//! (a command, templates, a build step, a workload from `ditto-load`); anything stranger belongs in a
//! wrapper script named as the spec's command.
//!
//! The format is documented in `docs/target-spec.md`; the bundled specs are in `targets/*.toml`.

mod launch;
mod spec;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub use launch::{kill_all_running, LaunchOptions, RunningTarget};
pub use spec::{
    CopiedDir, Level, LoadLevel, LoadLevels, Placeholders, RenderedFile, ResolvedLevel, ServerSpec,
    TargetSpec, WarmSpec, PLACEHOLDERS,
};

/// Everything that can go wrong with a spec or a launch. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("cannot read {}: {cause}", path.display())]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{}{}: {message}", path.display(), span.map(|l| format!(" line {l}")).unwrap_or_default())]
    Parse {
        path: PathBuf,
        message: String,
        span: Option<usize>,
    },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
    #[error("port {port} on 127.0.0.1 is already in use: stop what listens there or pass --port")]
    PortBusy { port: u16 },
    #[error("user '{0}' does not exist: create it or change server.user in the spec")]
    NoSuchUser(String),
    #[error("cannot start '{program}': {cause} (is it installed? run ./scripts/setup.sh)")]
    Spawn {
        program: String,
        cause: std::io::Error,
    },
    #[error("build step failed: `{command}`\n{tail}")]
    BuildFailed { command: String, tail: String },
    #[error("target '{name}' exited at start ({status}); its last output:\n{log_tail}")]
    DiedAtStart {
        name: String,
        status: String,
        log_tail: String,
    },
    #[error("target '{name}' did not accept connections on {addr} within {seconds} s; its last output:\n{log_tail}")]
    NotReady {
        name: String,
        addr: SocketAddr,
        seconds: f64,
        log_tail: String,
    },
    #[error("the target was already stopped")]
    AlreadyStopped,
    #[error("cannot {action} {}: {cause}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        cause: std::io::Error,
    },
}

impl SpecError {
    fn io(action: &'static str, path: &Path, cause: std::io::Error) -> SpecError {
        SpecError::Io {
            action,
            path: path.to_path_buf(),
            cause,
        }
    }
}
