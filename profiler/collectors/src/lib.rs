//! OS collectors for attach-mode profiling. Each module observes a running process tree from the
//! outside and returns raw, per-thread observations; turning them into a profile is the analyzer's job
//! (crate `ditto-profiler`), so that collectors can be replaced (bpftrace, or ptrace where BPF is
//! unavailable) without touching analysis.

pub mod bpftrace;
pub mod error;
pub mod perf;
pub mod procfs;
pub mod ptrace;
pub mod syscalls;
