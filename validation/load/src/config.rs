//! Run parameters and their bounds.

use std::net::SocketAddr;
use std::time::Duration;

use crate::arrivals::Arrival;
use crate::error::LoadError;
use crate::workload::Workload;

/// Most connections (and so load threads) a run may open.
pub const MAX_CONNECTIONS: usize = 4096;
/// Highest offered rate accepted, in requests per second.
pub const MAX_RATE: f64 = 10_000_000.0;
/// Longest warm-up or measured period.
pub const MAX_PERIOD: Duration = Duration::from_secs(24 * 3600);
/// Accepted per-request timeouts.
pub const MIN_REQUEST_TIMEOUT: Duration = Duration::from_millis(1);
pub const MAX_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);
/// Longest busy-wait before a send.
pub const MAX_SPIN: Duration = Duration::from_millis(1);

/// Everything a load run needs.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// The server. Must be loopback unless `allow_non_loopback`.
    pub addr: SocketAddr,
    /// What to send.
    pub workload: Workload,
    /// Offered rate over all connections, requests per second.
    pub rate: f64,
    /// Number of connections, each with its own thread and one request in flight at most.
    pub connections: usize,
    /// Spacing of intended send times.
    pub arrival: Arrival,
    /// Unmeasured period at the offered rate before measuring.
    pub warmup: Duration,
    /// Measured period.
    pub duration: Duration,
    /// A request without a complete response after this long counts as a timeout and its
    /// connection is replaced.
    pub request_timeout: Duration,
    /// Stop scheduling measured requests after this many (over all connections); `None` = no cap.
    pub max_requests: Option<u64>,
    /// Seed for request mix and Poisson gaps; the same seed sends the same sequence per connection.
    pub seed: u64,
    /// Permit targets outside 127.0.0.0/8 and ::1.
    pub allow_non_loopback: bool,
    /// Busy-wait this last part of every wait for a send time instead of sleeping through it.
    /// Zero (the default) never spins: on a small machine spinning takes CPU from the server.
    pub spin: Duration,
}

impl LoadConfig {
    /// A configuration with defaults: 4 connections, Poisson arrivals, 1 s warm-up, 10 s measured,
    /// 2 s request timeout, seed 1, loopback only, no spinning.
    pub fn new(addr: SocketAddr, workload: Workload, rate: f64) -> LoadConfig {
        LoadConfig {
            addr,
            workload,
            rate,
            connections: 4,
            arrival: Arrival::Poisson,
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(10),
            request_timeout: Duration::from_secs(2),
            max_requests: None,
            seed: 1,
            allow_non_loopback: false,
            spin: Duration::ZERO,
        }
    }

    /// Checks every bound; `run` calls this first.
    pub fn validate(&self) -> Result<(), LoadError> {
        check_target(self.addr, self.allow_non_loopback)?;
        self.workload.validate()?;
        let bad = |m: String| Err(LoadError::InvalidConfig(m));
        if !self.rate.is_finite() || self.rate <= 0.0 || self.rate > MAX_RATE {
            return bad(format!(
                "rate must be within (0, {MAX_RATE}] requests/s, got {}",
                self.rate
            ));
        }
        if self.connections == 0 || self.connections > MAX_CONNECTIONS {
            return bad(format!(
                "connections must be within 1..={MAX_CONNECTIONS}, got {}",
                self.connections
            ));
        }
        if self.duration.is_zero() || self.duration > MAX_PERIOD {
            return bad(format!(
                "duration must be within (0, {}] s, got {:?}",
                MAX_PERIOD.as_secs(),
                self.duration
            ));
        }
        if self.warmup > MAX_PERIOD {
            return bad(format!(
                "warmup must be at most {} s, got {:?}",
                MAX_PERIOD.as_secs(),
                self.warmup
            ));
        }
        if self.request_timeout < MIN_REQUEST_TIMEOUT || self.request_timeout > MAX_REQUEST_TIMEOUT
        {
            return bad(format!(
                "request_timeout must be within {MIN_REQUEST_TIMEOUT:?}..={MAX_REQUEST_TIMEOUT:?}, got {:?}",
                self.request_timeout
            ));
        }
        if self.spin > MAX_SPIN {
            return bad(format!(
                "spin must be at most {MAX_SPIN:?}, got {:?}",
                self.spin
            ));
        }
        if self.max_requests == Some(0) {
            return bad("max_requests must be at least 1 when set".into());
        }
        Ok(())
    }
}

/// Refuses targets off the loopback network unless explicitly allowed: a load generator pointed at
/// the wrong host is a denial-of-service tool.
pub fn check_target(addr: SocketAddr, allow_non_loopback: bool) -> Result<(), LoadError> {
    if allow_non_loopback || addr.ip().to_canonical().is_loopback() {
        Ok(())
    } else {
        Err(LoadError::NonLoopback { addr })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::MemcachedWorkload;

    fn cfg(addr: &str) -> LoadConfig {
        LoadConfig::new(
            addr.parse().unwrap(),
            Workload::Memcached(MemcachedWorkload::default()),
            1000.0,
        )
    }

    #[test]
    fn loopback_targets_are_accepted() {
        for a in [
            "127.0.0.1:11211",
            "127.9.8.7:80",
            "[::1]:80",
            "[::ffff:127.0.0.1]:80",
        ] {
            cfg(a).validate().unwrap_or_else(|e| panic!("{a}: {e}"));
        }
    }

    #[test]
    fn non_loopback_target_is_refused_unless_allowed() {
        let mut c = cfg("10.1.2.3:11211");
        let err = c.validate().unwrap_err();
        assert!(matches!(err, LoadError::NonLoopback { .. }));
        assert!(err.to_string().contains("10.1.2.3:11211"), "{err}");
        c.allow_non_loopback = true;
        c.validate().unwrap();
    }

    #[test]
    fn out_of_range_parameters_are_refused() {
        let edits: [fn(&mut LoadConfig); 7] = [
            |c| c.rate = 0.0,
            |c| c.rate = f64::INFINITY,
            |c| c.connections = 0,
            |c| c.connections = MAX_CONNECTIONS + 1,
            |c| c.duration = Duration::ZERO,
            |c| c.request_timeout = Duration::from_micros(10),
            |c| c.max_requests = Some(0),
        ];
        for (i, edit) in edits.iter().enumerate() {
            let mut c = cfg("127.0.0.1:1");
            edit(&mut c);
            assert!(
                matches!(c.validate(), Err(LoadError::InvalidConfig(_))),
                "edit {i} accepted"
            );
        }
    }
}
