//! An open-loop load generator in the style of wrk2, speaking memcached text, HTTP/1.1, the Pix
//! ledger gRPC API and the ditto clones' length-prefixed protocol, built so that the original
//! service and its clone see identical traffic.
//!
//! # Design
//!
//! **Open loop, latency from the intended send time.** Every connection has a schedule of
//! intended send times (fixed-rate or Poisson, see [`Arrival`]) computed independently of
//! responses. When a slow response delays the next send on its connection, the delayed request's
//! latency counts from its intended time: the wait is charged to the request that waited. With
//! one request in flight per connection this is wrk2's correction for coordinated omission. When
//! the connection was free at the intended time, latency counts from the actual send, so the
//! generator's own timer wake-up delay (a median of tens of µs on a VM, comparable to a loopback
//! round trip) is not charged to the server. The report gives that delay separately as the *send
//! lag* (actual minus intended send time) and flags runs where it grows (see [`LoadReport`]).
//!
//! **One OS thread per connection, blocking sockets.** Loopback round trips on the targets are
//! 50–100 µs, so send times must be accurate to tens of microseconds. An async runtime's timer
//! wheel ticks in milliseconds; instead each connection thread lowers its timer slack to 1 ns and
//! sleeps with `clock_nanosleep(TIMER_ABSTIME)` on the monotonic clock, then does one blocking
//! write and blocking reads (with `TCP_NODELAY`). The cost is a thread per connection, hence the
//! cap of [`MAX_CONNECTIONS`]. An optional busy-wait ([`LoadConfig::spin`]) can sharpen wake-ups
//! further, but it is off by default because on a 2-core machine it takes CPU from the server.
//! gRPC keeps the same model: each thread drives its own tonic channel (one HTTP/2 connection)
//! with a current-thread tokio runtime, used only for the duration of each call.
//!
//! **No shared state in the hot path.** Each thread records into its own HdrHistograms and
//! counters; they are merged when the run ends.
//!
//! # Use
//!
//! ```no_run
//! use ditto_load::{run, LoadConfig, MemcachedWorkload, Workload};
//! let cfg = LoadConfig::new(
//!     "127.0.0.1:11211".parse().unwrap(),
//!     Workload::Memcached(MemcachedWorkload::default()),
//!     20_000.0,
//! );
//! let report = run(&cfg, &mut |p| eprintln!("{p}")).unwrap();
//! print!("{}", report.to_summary());
//! ```
//!
//! Adding a protocol: implement [`Protocol`] and [`Connection`] (send one request, wait for its
//! full response) and add a [`Workload`] variant.

mod arrivals;
pub mod clock;
mod config;
mod error;
mod outcome;
pub mod protocols;
mod report;
mod runner;
mod warm;
mod wire;
mod workload;

pub use arrivals::{Arrival, Schedule};
pub use config::{
    check_target, LoadConfig, MAX_CONNECTIONS, MAX_PERIOD, MAX_RATE, MAX_REQUEST_TIMEOUT, MAX_SPIN,
    MIN_REQUEST_TIMEOUT,
};
pub use error::LoadError;
pub use outcome::{ErrorKind, Outcome};
pub use protocols::{Connection, Protocol};
pub use report::{
    LagSummary, LatencySummary, LoadReport, Outcomes, PercentilePoint, RequestClassStats,
    KEPT_UP_MAX_LAG_P99_US, KEPT_UP_MIN_ANSWERED,
};
pub use runner::{prepare, run, run_prepared, Phase, Prepared, Progress};
pub use warm::{warm, WarmReport};
pub use workload::{
    HttpWorkload, LengthPrefixedWorkload, MemcachedWorkload, PixWorkload, WeightedPath, Workload,
    LENGTH_PREFIXED_MAX_REQUEST, LENGTH_PREFIXED_MAX_RESPONSE, MEMCACHED_MAX_KEY,
    MEMCACHED_MAX_VALUE, PIX_MAX_ACCOUNTS,
};
