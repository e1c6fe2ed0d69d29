//! Putting a server into the state the measurement assumes.
//!
//! - memcached: every key is `set` once, so `get`s measure hits rather than an empty cache;
//! - HTTP: every path is fetched once (file and page caches);
//! - Pix: nothing — [`crate::run`] creates its own account population before its warm-up;
//! - length-prefixed (clones): nothing, they keep no state.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::{duration_ns, now_ns};
use crate::config::check_target;
use crate::error::LoadError;
use crate::outcome::{ErrorKind, Outcome};
use crate::protocols::http::HttpConnection;
use crate::protocols::memcached::MemcachedConnection;
use crate::workload::{HttpWorkload, MemcachedWorkload, Workload};

/// Per-request timeout while warming.
const WARM_TIMEOUT: Duration = Duration::from_secs(5);
/// Parallel connections used to fill memcached.
const WARM_CONNECTIONS: u64 = 4;

/// What warming did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WarmReport {
    pub protocol: String,
    pub target: String,
    pub requests: u64,
    pub ok: u64,
    /// Failures by kind (same labels as [`crate::Outcomes::errors`]).
    pub errors: BTreeMap<String, u64>,
    pub elapsed_s: f64,
    /// Why nothing was sent, when nothing was.
    pub note: Option<String>,
}

impl WarmReport {
    fn count(&mut self, outcome: Outcome) {
        self.requests += 1;
        match outcome {
            Outcome::Ok | Outcome::Miss | Outcome::Rejected => self.ok += 1,
            Outcome::Error(kind) => *self.errors.entry(kind.label()).or_default() += 1,
        }
    }

    fn absorb(&mut self, other: WarmReport) {
        self.requests += other.requests;
        self.ok += other.ok;
        for (k, n) in other.errors {
            *self.errors.entry(k).or_default() += n;
        }
    }
}

/// Puts the server at `addr` into the measured state for `workload` (see the module docs).
/// Refuses non-loopback targets unless `allow_non_loopback`.
pub fn warm(
    addr: SocketAddr,
    workload: &Workload,
    allow_non_loopback: bool,
) -> Result<WarmReport, LoadError> {
    check_target(addr, allow_non_loopback)?;
    workload.validate()?;
    let started = now_ns();
    let mut report = match workload {
        Workload::Memcached(w) => warm_memcached(addr, w)?,
        Workload::Http(w) => warm_http(addr, w)?,
        Workload::PixGrpc(_) => WarmReport {
            note: Some(
                "nothing to warm: the account population is created by the load run itself".into(),
            ),
            ..WarmReport::default()
        },
        Workload::LengthPrefixed(_) => WarmReport {
            note: Some("nothing to warm: a length-prefixed clone keeps no state".into()),
            ..WarmReport::default()
        },
    };
    report.protocol = workload.protocol().to_string();
    report.target = addr.to_string();
    report.elapsed_s = Duration::from_nanos(now_ns() - started).as_secs_f64();
    Ok(report)
}

fn connect_error(addr: SocketAddr, protocol: &'static str, e: std::io::Error) -> LoadError {
    LoadError::Connect {
        addr,
        protocol,
        reason: e.to_string(),
    }
}

fn warm_memcached(addr: SocketAddr, w: &MemcachedWorkload) -> Result<WarmReport, LoadError> {
    let workers = WARM_CONNECTIONS.min(w.keys);
    let timeout_ns = duration_ns(WARM_TIMEOUT);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|worker| {
                scope.spawn(move || -> Result<WarmReport, LoadError> {
                    let connect = || {
                        MemcachedConnection::connect(addr, WARM_TIMEOUT, w)
                            .map_err(|e| connect_error(addr, "memcached", e))
                    };
                    let mut conn = connect()?;
                    let mut report = WarmReport::default();
                    for index in (worker..w.keys).step_by(workers as usize) {
                        let outcome = conn.set(index, now_ns() + timeout_ns);
                        report.count(outcome);
                        if matches!(outcome, Outcome::Error(k) if !k.is_answer()) {
                            conn = connect()?;
                        }
                    }
                    Ok(report)
                })
            })
            .collect();
        let mut total = WarmReport::default();
        for h in handles {
            let part = h.join().map_err(|_| LoadError::Internal {
                index: 0,
                reason: "a memcached warm-up thread panicked".into(),
            })??;
            total.absorb(part);
        }
        Ok(total)
    })
}

fn warm_http(addr: SocketAddr, w: &HttpWorkload) -> Result<WarmReport, LoadError> {
    let timeout_ns = duration_ns(WARM_TIMEOUT);
    let connect = || {
        HttpConnection::connect(addr, WARM_TIMEOUT, w).map_err(|e| connect_error(addr, "http", e))
    };
    let mut conn = connect()?;
    let mut report = WarmReport::default();
    for index in 0..w.paths.len() {
        let outcome = conn.get(index, now_ns() + timeout_ns);
        report.count(outcome);
        if !crate::protocols::Connection::is_open(&conn) && index + 1 < w.paths.len() {
            conn = connect()?;
        }
    }
    if report.requests == 0 {
        report.count(Outcome::Error(ErrorKind::Protocol));
    }
    Ok(report)
}
