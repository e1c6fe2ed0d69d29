//! What the original did per connection rather than per request.
//!
//! Two kinds: calls the runtime makes itself at accept and close (`getpeername`, `getsockname`,
//! `shutdown`), counted over the process's accepts; and the extras' calls per connection, which
//! only windows of different lengths can tell from calls per request. The trade-off of the second:
//! a split is only as good as the windows' noise, so one that does not stand above how far the two
//! short windows are apart is not made (docs/decisions.md, "Calls per connection come from other
//! window lengths").

use ditto_profile::Profile;

/// Calls per accepted connection (`struct ditto_conn_calls`): getpeername and getsockname after
/// accept, shutdown before close.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnCalls {
    pub peer_names: u32,
    pub sock_names: u32,
    pub shutdowns: u32,
}

/// The most of one call per connection the runtime makes.
const MAX_CONN_CALLS: f64 = 4.0;

/// How many times the original called getpeername, getsockname and shutdown per accepted connection
/// (the process's calls of each over its accepts, rounded). They are per connection, not per request:
/// Pix's workers made each once for each of the load's 8 connections, 0.0004 a request in the
/// profile's 20,000 requests and 0.003 in a low-load run's 2,500.
pub fn conn_calls(p: &Profile) -> ConnCalls {
    let by_name = p.syscalls.per_request_by_name();
    let rate = |names: &[&str]| names.iter().filter_map(|n| by_name.get(n)).sum::<f64>();
    let accepts = rate(&["accept", "accept4"]);
    let per_conn = |name: &str| {
        if accepts > 0.0 {
            (rate(&[name]) / accepts).round().clamp(0.0, MAX_CONN_CALLS) as u32
        } else {
            0
        }
    };
    ConnCalls {
        peer_names: per_conn("getpeername"),
        sock_names: per_conn("getsockname"),
        shutdowns: per_conn("shutdown"),
    }
}

/// The windows calls per connection are read from: the profiled one (its counts are taken apart
/// too), the second load's long one and its short ones, each with its requests and connections.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionWindows {
    pub first: Window,
    pub long: Window,
    /// At least two: their difference is the measure of noise and drift.
    pub shorts: Vec<Window>,
}

/// Requests completed and connections opened in one window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub requests: f64,
    pub connections: f64,
}

impl Window {
    fn of(s: &ditto_profile::SecondLoadSyscalls) -> Option<Window> {
        Some(Window {
            requests: s.requests as f64,
            connections: f64::from(s.connections?),
        })
    }
}

impl ConnectionWindows {
    /// `None` unless the profile has the second load's long window and two short ones, each with
    /// its connections, a profiled load with its connections, and windows far enough apart in
    /// requests per connection to tell calls per request from calls per connection.
    pub fn of(p: &Profile) -> Option<ConnectionWindows> {
        let w = ConnectionWindows {
            first: Window {
                requests: p.conditions.requests as f64,
                connections: p.conditions.load.as_ref()?.connections as f64,
            },
            long: Window::of(p.syscalls.at_second_load.as_ref()?)?,
            shorts: p
                .syscalls
                .at_second_load_short
                .iter()
                .map(Window::of)
                .collect::<Option<Vec<_>>>()?,
        };
        let all = || std::iter::once(&w.first).chain([&w.long]).chain(&w.shorts);
        if w.shorts.len() < 2 || !all().all(|x| x.requests > 0.0 && x.connections > 0.0) {
            return None;
        }
        // The equations must be far from parallel: requests per connection at least a quarter
        // apart between the long window and the short ones together.
        let (l, s) = (
            w.long.requests / w.long.connections,
            w.short_requests_per_connection(),
        );
        ((l - s).abs() >= 0.25 * l.max(s)).then_some(w)
    }

    fn short_requests_per_connection(&self) -> f64 {
        let r: f64 = self.shorts.iter().map(|x| x.requests).sum();
        let c: f64 = self.shorts.iter().map(|x| x.connections).sum();
        r / c
    }
}

/// Least calls per connection an extra gets.
const MIN_CALLS_PER_CONNECTION: f64 = 1.0;
/// Most calls per connection an extra gets.
const MAX_CALLS_PER_CONNECTION: f64 = 256.0;

/// One op's calls per connection from its counts per request in the second load's long window and
/// its short ones (`short`, in the order of `w.shorts`). Every window holds calls_per_request ×
/// requests + calls_per_connection × connections: the long window and the shorts pooled are two
/// equations in the two unknowns, and the shorts, before and after the long one, cancel a count
/// that drifts steadily. Zero where the split is not above what the short windows differ by between
/// themselves (noise and drift the pooling did not cancel) in a short window's count, below
/// [`MIN_CALLS_PER_CONNECTION`], or where the shorts made fewer.
pub fn per_connection(long: f64, short: &[f64], w: &ConnectionWindows) -> f64 {
    // `ConnectionWindows::of` made sure of two short windows at least.
    if short.len() != w.shorts.len() {
        return 0.0;
    }
    let (rl, cl) = (w.long.requests, w.long.connections);
    let rs: f64 = w.shorts.iter().map(|x| x.requests).sum();
    let cs: f64 = w.shorts.iter().map(|x| x.connections).sum();
    let ns: f64 = short
        .iter()
        .zip(&w.shorts)
        .map(|(v, x)| v * x.requests)
        .sum();
    let nl = long * rl;
    let det = rl * cs - rs * cl;
    if det.abs() < 1e-9 {
        return 0.0;
    }
    let b = (rl * ns - rs * nl) / det;
    // What the split adds to a short window's count per request, against how far the short
    // windows' counts are apart.
    let spread = short.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        - short.iter().copied().fold(f64::INFINITY, f64::min);
    let shown = w
        .shorts
        .iter()
        .map(|x| b * x.connections / x.requests)
        .fold(f64::INFINITY, f64::min);
    if b.is_finite() && b >= MIN_CALLS_PER_CONNECTION && shown > spread {
        b.min(MAX_CALLS_PER_CONNECTION)
    } else {
        0.0
    }
}
