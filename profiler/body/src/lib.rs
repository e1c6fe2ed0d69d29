//! Body profiler: what the target's user-space code does per request, in one instrumented pass.
//!
//! The trade-off that shapes this crate: the paper profiles the body with one Valgrind run per cache
//! size (about 23 runs) plus a separate instruction-mix tool. Here one custom Valgrind tool (`tool/`)
//! streams superblock executions, side exits and data addresses (docs/body-trace.md), and this crate
//! derives every body feature from that single stream while the target runs: instruction mix from the
//! class table (`data/classes.tsv`), branch taken and transition rates, register dependency distances,
//! hit curves for every cache size at once (`cache`), shared/private and strided/irregular data, and
//! pointer chasing. Static facts are decoded once per instruction; the per-execution path only counts.

pub mod analysis;
pub mod cache;
pub mod classes;
pub mod decode;
pub mod report;
pub mod session;
pub mod stream;
pub mod tool;
