//! The protocols the generator speaks, behind one small interface.
//!
//! A protocol opens connections; a connection sends one request and waits for its whole response.
//! The runner owns timing, scheduling and accounting, so adding a protocol is: implement
//! [`Protocol`] and [`Connection`], add a [`crate::Workload`] variant, and map it in [`prepare`]
//! and [`crate::warm`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::SmallRng;

use crate::config::LoadConfig;
use crate::error::LoadError;
use crate::outcome::Outcome;
use crate::workload::Workload;

pub mod http;
pub mod length_prefixed;
pub mod memcached;
pub mod pix;

/// A protocol with its workload: a factory of connections, shared by all load threads.
pub trait Protocol: Send + Sync {
    /// Name used in reports and errors, e.g. `"memcached"`.
    fn name(&self) -> &'static str;

    /// Opens connection number `index` (called on that connection's own thread). `timeout` bounds
    /// the connection attempt. The error is a human-readable reason.
    fn connect(
        &self,
        addr: SocketAddr,
        timeout: Duration,
        index: usize,
    ) -> Result<Box<dyn Connection>, String>;

    /// The request classes a connection reports in [`Connection::last_class`], by index: the
    /// request key the server sees, e.g. an HTTP request target. Empty for protocols whose
    /// responses do not depend on a key the runtime reads (see [`crate::RequestClassStats`]).
    fn request_classes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// One connection with at most one request in flight.
pub trait Connection {
    /// Picks the next request with `rng`, sends it and waits for its complete response, giving up
    /// at `deadline_ns` (on [`crate::clock::now_ns`]'s clock). Never panics on a bad response: it
    /// becomes an [`Outcome::Error`].
    fn request(&mut self, rng: &mut SmallRng, deadline_ns: u64) -> Outcome;

    /// False once this connection cannot carry another request (closed, desynchronised or timed
    /// out); the runner then opens a new one before the next request.
    fn is_open(&self) -> bool;

    /// The class (an index into [`Protocol::request_classes`]) of the request just answered and
    /// the bytes of its whole response, head included; `None` when the protocol has no classes
    /// or the last request got no complete response.
    fn last_class(&self) -> Option<(usize, u64)> {
        None
    }
}

/// Builds the protocol for `cfg.workload` and runs its unmeasured preparation (the Pix account
/// population). `progress` receives `(done, total)` preparation steps.
pub fn prepare(
    cfg: &LoadConfig,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Arc<dyn Protocol>, LoadError> {
    Ok(match &cfg.workload {
        Workload::Memcached(w) => Arc::new(memcached::MemcachedProtocol::new(w.clone())),
        Workload::Http(w) => Arc::new(http::HttpProtocol::new(w.clone(), cfg.addr)),
        Workload::PixGrpc(w) => Arc::new(pix::PixProtocol::prepare(cfg, w, progress)?),
        Workload::LengthPrefixed(w) => {
            Arc::new(length_prefixed::LengthPrefixedProtocol::new(w.clone()))
        }
    })
}
