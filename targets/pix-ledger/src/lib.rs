//! An in-memory Pix instant-payment ledger served over gRPC, in two variants built from one
//! codebase so their memory behaviour can be compared under the same load.
//!
//! # The trade-off
//!
//! Both variants implement the same rules (open an account with its Pix key, deposit, read a
//! balance, transfer by Pix key, read a transaction record; idempotency keys; no money created
//! or lost, no negative balance). They differ only in how state is laid out and locked:
//!
//! * [`baseline`] is the obvious layered design: a `TransactionProcessor` trait drives a `Ledger`
//!   persistence trait, both as trait objects with `&mut self` methods, so one global `RwLock`
//!   guards everything and every request takes its write lock. Each account carries its full
//!   transfer history as heap records, and a transfer clones both accounts (history included)
//!   out of the map, mutates the copies and writes them back. Simple and obviously atomic, but
//!   every request is serialised and drags large, scattered objects through the cache.
//! * [`optimized`] keeps accounts in a sharded `DashMap` with `&self` methods. An account's hot
//!   state is only a balance and a list of 16-byte transaction ids, mutated in place; transfer
//!   records are stored once, elsewhere. Requests on different accounts run in parallel.
//!
//! # Why transfers are atomic the way they are
//!
//! In the baseline, atomicity comes free with the global write lock. The optimized variant
//! must make a two-account update atomic without one: each account sits behind its own mutex,
//! a transfer takes its two accounts' `Arc`s out of the map (so no shard guard is held while
//! waiting) and locks the two mutexes in ascending account-id order, which rules out deadlock
//! between transfers over the same pair in opposite directions. All checks (funds, overflow)
//! run under both locks before anything is written, so a refused transfer changes nothing.
//!
//! Idempotent requests run at most once per key even when duplicates arrive together: the
//! baseline gets that from its global lock, the optimized variant from a per-key `OnceLock` that
//! one duplicate initialises while the others wait for its outcome.
//!
//! # Entry points
//!
//! * [`serve`] runs the gRPC server on a listener until a shutdown future completes.
//! * [`proto::ledger_client::LedgerClient`] is the generated client.
//! * [`new_backend`] gives a variant as a [`LedgerBackend`] trait object, without gRPC.

pub mod backend;
pub mod baseline;
pub mod model;
pub mod optimized;
pub mod server;
pub mod service;

/// Code generated from `proto/pix.proto` (package `pix.v1`): messages, client and server.
pub mod proto {
    tonic::include_proto!("pix.v1");
}

pub use backend::{new_backend, LedgerBackend, UnknownVariant, Variant};
pub use model::LedgerError;
pub use server::{serve, serve_backend};
