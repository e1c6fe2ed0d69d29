//! Errors shared by the collectors. Every variant carries the context a user needs to act on it (the
//! pid or tid, the file or call that failed), because attach-mode profiling fails mostly for reasons
//! outside our control: a wrong pid, missing privileges, a process that exited meanwhile.

use std::io;
use std::path::PathBuf;

/// An error from one of the collectors.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// The process does not exist (or exited before it could be observed).
    #[error("no process {pid}: check the pid")]
    NoSuchProcess { pid: u32 },

    /// The id is a thread of another process, not a process.
    #[error("{tid} is a thread of process {tgid}, not a process: pass the process id")]
    NotAProcess { tid: u32, tgid: u32 },

    /// The kernel refused access to a file of the process; attaching needs root, or the same user
    /// as the target and ptrace access (see `/proc/sys/kernel/yama/ptrace_scope`).
    #[error(
        "permission denied on {path} (process {pid}): run as root or as the target's user with ptrace access"
    )]
    PermissionDenied { pid: u32, path: PathBuf },

    /// Any other I/O error on a file.
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// A file had an unexpected format.
    #[error("parsing {path}: {detail}")]
    Parse { path: PathBuf, detail: String },

    /// A system call on behalf of a process failed.
    #[error("{call} for process {pid}: {source}")]
    Syscall {
        pid: u32,
        call: &'static str,
        #[source]
        source: io::Error,
    },

    /// The file descriptor does not exist in the process.
    #[error("process {pid} has no file descriptor {fd}")]
    NoSuchFd { pid: u32, fd: i32 },

    /// The file descriptor exists but is not a socket.
    #[error("file descriptor {fd} of process {pid} is not a socket")]
    NotASocket { pid: u32, fd: i32 },

    /// perf_event_open failed for a thread.
    #[error("perf_event_open({event}) on thread {tid}: {source}")]
    Perf {
        tid: u32,
        event: &'static str,
        #[source]
        source: io::Error,
    },
}
