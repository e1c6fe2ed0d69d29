//! What one request ended as.

use std::fmt;

/// The result of one request, as counted in the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The server did what was asked.
    Ok,
    /// A memcached `get` found no value. Not an error: the key space may be larger than the cache.
    Miss,
    /// The server refused the operation by the rules of its API (Pix: insufficient funds).
    Rejected,
    /// Anything else; see [`ErrorKind`].
    Error(ErrorKind),
}

/// Why a request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// A (re)connection attempt failed.
    Connect,
    /// No complete response within the per-request timeout.
    Timeout,
    /// The server closed or reset the connection.
    Disconnected,
    /// Another socket error.
    Io,
    /// The response could not be parsed (garbage, oversized or truncated framing).
    Protocol,
    /// HTTP: a status other than 2xx.
    HttpStatus(u16),
    /// memcached: `SERVER_ERROR …`.
    ServerError,
    /// memcached: `ERROR` or `CLIENT_ERROR …`.
    ClientError,
    /// memcached: a `set` answered other than `STORED`.
    NotStored,
    /// gRPC: a status other than OK or the API's rejection (the numeric gRPC code).
    Grpc(i32),
}

impl ErrorKind {
    /// True when the server produced a well-formed answer (an error status, not a broken exchange).
    /// Such requests count as completed and their latency is recorded.
    pub fn is_answer(self) -> bool {
        matches!(
            self,
            ErrorKind::HttpStatus(_)
                | ErrorKind::ServerError
                | ErrorKind::ClientError
                | ErrorKind::NotStored
                | ErrorKind::Grpc(_)
        )
    }

    /// Stable snake_case label used as the key in reports.
    pub fn label(self) -> String {
        match self {
            ErrorKind::Connect => "connect".into(),
            ErrorKind::Timeout => "timeout".into(),
            ErrorKind::Disconnected => "disconnected".into(),
            ErrorKind::Io => "io".into(),
            ErrorKind::Protocol => "protocol".into(),
            ErrorKind::HttpStatus(code) => format!("http_{code}"),
            ErrorKind::ServerError => "server_error".into(),
            ErrorKind::ClientError => "client_error".into(),
            ErrorKind::NotStored => "not_stored".into(),
            ErrorKind::Grpc(code) => format!("grpc_{}", grpc_code_name(code)),
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

fn grpc_code_name(code: i32) -> String {
    let name = match code {
        0 => "ok",
        1 => "cancelled",
        2 => "unknown",
        3 => "invalid_argument",
        4 => "deadline_exceeded",
        5 => "not_found",
        6 => "already_exists",
        7 => "permission_denied",
        8 => "resource_exhausted",
        9 => "failed_precondition",
        10 => "aborted",
        11 => "out_of_range",
        12 => "unimplemented",
        13 => "internal",
        14 => "unavailable",
        15 => "data_loss",
        16 => "unauthenticated",
        other => return format!("code_{other}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_labels_are_stable_snake_case() {
        assert_eq!(ErrorKind::HttpStatus(503).label(), "http_503");
        assert_eq!(ErrorKind::Grpc(14).label(), "grpc_unavailable");
        assert_eq!(ErrorKind::Grpc(99).label(), "grpc_code_99");
        assert_eq!(ErrorKind::Timeout.to_string(), "timeout");
    }

    #[test]
    fn only_well_formed_answers_count_as_completed() {
        assert!(ErrorKind::HttpStatus(404).is_answer());
        assert!(ErrorKind::Grpc(13).is_answer());
        assert!(!ErrorKind::Timeout.is_answer());
        assert!(!ErrorKind::Protocol.is_answer());
        assert!(!ErrorKind::Connect.is_answer());
    }
}
