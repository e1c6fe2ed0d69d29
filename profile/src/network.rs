//! `network`: the server's I/O model, its listening sockets and the messages it exchanges.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Histogram;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Network {
    /// How the server waits for and dispatches work.
    pub server: ServerModel,
    /// Listening sockets and their options.
    pub listen: Vec<ListenSocket>,
    /// Connections accepted in the window.
    pub connections_accepted: u64,
    /// Established connections at the end of the window.
    pub connections_open: u64,
    /// Message framing of the protocol.
    pub framing: Framing,
    /// How `framing` was determined.
    pub framing_source: String,
    /// Bytes received per request (sum of socket reads).
    pub bytes_in_per_request: f64,
    /// Bytes sent per request (sum of socket writes, including sendfile).
    pub bytes_out_per_request: f64,
    /// Sizes of single socket reads that returned data, bytes.
    pub read_sizes: Histogram,
    /// Sizes of single socket writes that sent data, bytes.
    pub write_sizes: Histogram,
    /// Options of the accepted connections open at the end of the window (the first few per
    /// process; an option is reported when they agree). Options a server sets after accepting, such
    /// as nginx's `TCP_NODELAY` on keep-alive connections, show here and not on the listening
    /// socket. Absent from profiles taken before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_options: Option<SocketOptions>,
    /// The requests by class, as the load generator saw them while profiling: a class is a request
    /// key the response depends on and a clone's runtime reads (for HTTP/1.1, the request target).
    /// A clone gives each class's responses the sizes the original gave it, so a run's bytes follow
    /// its own mix of requests rather than the profile's. Keys are hashed ([`request_key_hash`]):
    /// the profile and the clone hold no request strings. Empty when ditto did not drive the load,
    /// for protocols without classes, and in profiles taken before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub request_classes: Vec<RequestClass>,
}

/// One request class (see [`Network::request_classes`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RequestClass {
    /// [`request_key_hash`] of the key's bytes as they appear in the request.
    pub key_hash: u64,
    /// Share of the answered requests in this class.
    pub share: f64,
    /// Mean bytes of its whole responses (head included), as the client received them.
    pub mean_response_bytes: f64,
}

/// The hash that names a request key in [`RequestClass::key_hash`]: 64-bit FNV-1a, which a
/// clone's runtime computes with a few instructions per byte while it parses the request.
pub fn request_key_hash(key: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    key.iter()
        .fold(OFFSET, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerModel {
    /// How threads wait for socket readiness.
    pub io: IoModel,
    /// Whether sockets are used in non-blocking mode.
    pub nonblocking: bool,
    /// How accepted connections reach the threads that serve them.
    pub accept: AcceptModel,
    /// Cluster that accepts connections.
    pub acceptor_cluster: Option<String>,
    /// Cluster that serves requests.
    pub worker_cluster: Option<String>,
    /// Threads (or processes, when `multi_process`) serving requests.
    pub workers: u32,
    /// Requests are served by several processes (a master and workers).
    pub multi_process: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum IoModel {
    /// One thread blocks on one connection.
    Blocking,
    /// Sockets are polled without a readiness call.
    NonBlocking,
    Epoll,
    Poll,
    Select,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AcceptModel {
    /// One thread accepts and hands connections to a pool of workers.
    DispatchToWorkers,
    /// Each serving thread or process accepts its own connections.
    WorkersAccept,
    /// A new thread is started per connection.
    ThreadPerConnection,
    /// No accept was seen in the window (connections were opened before it).
    NotObserved,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Framing {
    /// Text lines ending in CRLF (memcached text, Redis inline).
    Line,
    /// HTTP/1.x.
    Http1,
    /// A length prefix before each message.
    LengthPrefixed,
    /// HTTP/2 (gRPC).
    Http2,
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ListenSocket {
    /// `tcp4`, `tcp6` or `unix`.
    pub family: String,
    /// Listening port (0 for unix sockets).
    pub port: u16,
    /// Accept queue length, when known.
    pub backlog: Option<u32>,
    /// Options read from the live socket.
    pub options: SocketOptions,
}

/// Socket options read from the target's socket (duplicated with `pidfd_getfd`, never changed).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SocketOptions {
    /// `SO_REUSEADDR`.
    pub reuse_addr: Option<bool>,
    /// `SO_REUSEPORT`.
    pub reuse_port: Option<bool>,
    /// `SO_KEEPALIVE`.
    pub keepalive: Option<bool>,
    /// `TCP_NODELAY`.
    pub nodelay: Option<bool>,
    /// `O_NONBLOCK` on the open file.
    pub nonblocking: Option<bool>,
    /// `TCP_DEFER_ACCEPT` seconds.
    pub defer_accept_s: Option<u32>,
    /// `SO_RCVBUF` bytes.
    pub rcvbuf: Option<u32>,
    /// `SO_SNDBUF` bytes.
    pub sndbuf: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::request_key_hash;

    #[test]
    fn request_key_hash_is_fnv1a_64() {
        // The published FNV-1a 64 test vectors.
        assert_eq!(request_key_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(request_key_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(request_key_hash(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
