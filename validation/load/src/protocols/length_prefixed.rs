//! The ditto clones' length-prefixed protocol: a message is a 32-bit big-endian length followed
//! by that many bytes, in both directions. One response answers each request.
//!
//! Clones sample their response sizes from the profile, so by default any response length up to
//! [`LENGTH_PREFIXED_MAX_RESPONSE`] is accepted; a workload may pin the expected length.

use std::net::SocketAddr;
use std::time::Duration;

use rand::rngs::SmallRng;

use crate::outcome::{ErrorKind, Outcome};
use crate::protocols::{Connection, Protocol};
use crate::wire::Wire;
use crate::workload::{LengthPrefixedWorkload, LENGTH_PREFIXED_MAX_RESPONSE};

/// Builds one request: the length prefix, then `bytes` bytes of a repeating printable pattern.
pub fn request_bytes(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + bytes);
    // The workload caps `bytes` far below u32::MAX (checked in validation).
    out.extend_from_slice(&(bytes as u32).to_be_bytes());
    out.extend((0..bytes).map(|i| b'a' + (i % 26) as u8));
    out
}

/// The length-prefixed workload as a [`Protocol`]: every request is the same, built once.
pub struct LengthPrefixedProtocol {
    workload: LengthPrefixedWorkload,
    request: Vec<u8>,
}

impl LengthPrefixedProtocol {
    pub fn new(workload: LengthPrefixedWorkload) -> LengthPrefixedProtocol {
        let request = request_bytes(workload.request_bytes);
        LengthPrefixedProtocol { workload, request }
    }
}

impl Protocol for LengthPrefixedProtocol {
    fn name(&self) -> &'static str {
        "length-prefixed"
    }

    fn connect(
        &self,
        addr: SocketAddr,
        timeout: Duration,
        _index: usize,
    ) -> Result<Box<dyn Connection>, String> {
        let wire = Wire::connect(addr, timeout).map_err(|e| e.to_string())?;
        Ok(Box::new(LengthPrefixedConnection {
            wire,
            request: self.request.clone(),
            expect: self.workload.response_bytes,
            open: true,
        }))
    }
}

/// One length-prefixed connection.
pub struct LengthPrefixedConnection {
    wire: Wire,
    request: Vec<u8>,
    expect: Option<u64>,
    open: bool,
}

impl LengthPrefixedConnection {
    pub fn connect(
        addr: SocketAddr,
        timeout: Duration,
        workload: &LengthPrefixedWorkload,
    ) -> std::io::Result<LengthPrefixedConnection> {
        Ok(LengthPrefixedConnection {
            wire: Wire::connect(addr, timeout)?,
            request: request_bytes(workload.request_bytes),
            expect: workload.response_bytes,
            open: true,
        })
    }

    fn exchange(&mut self, deadline_ns: u64) -> Result<Outcome, ErrorKind> {
        self.wire.send(&self.request)?;
        let mut parser = ResponseParser::new(self.expect);
        loop {
            let used = parser.advance(self.wire.data())?;
            self.wire.consume(used);
            if parser.is_done() {
                return Ok(Outcome::Ok);
            }
            if self.wire.fill(deadline_ns)? == 0 {
                return Err(ErrorKind::Disconnected);
            }
        }
    }
}

impl Connection for LengthPrefixedConnection {
    fn request(&mut self, _rng: &mut SmallRng, deadline_ns: u64) -> Outcome {
        match self.exchange(deadline_ns) {
            Ok(outcome) => outcome,
            Err(kind) => {
                // A broken exchange leaves the stream out of step: start afresh.
                self.open = false;
                Outcome::Error(kind)
            }
        }
    }

    fn is_open(&self) -> bool {
        self.open
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Header,
    Body(u64),
    Done,
}

/// Incremental parser for one response: the 4-byte length, then the payload, which it consumes
/// without keeping, so responses never need to fit in the read buffer.
#[derive(Debug)]
pub struct ResponseParser {
    state: State,
    expect: Option<u64>,
}

impl ResponseParser {
    /// `expect`: the only payload length accepted, if any.
    pub fn new(expect: Option<u64>) -> ResponseParser {
        ResponseParser {
            state: State::Header,
            expect,
        }
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes a prefix of `data` and returns its length; stops after a complete response.
    /// `Err(Protocol)` for a length above the limit or other than the expected one.
    pub fn advance(&mut self, data: &[u8]) -> Result<usize, ErrorKind> {
        let mut used = 0;
        loop {
            let rest = &data[used..];
            match self.state {
                State::Done => return Ok(used),
                State::Header => {
                    let Some(prefix) = rest.get(..4) else {
                        return Ok(used);
                    };
                    let len = u64::from(u32::from_be_bytes([
                        prefix[0], prefix[1], prefix[2], prefix[3],
                    ]));
                    if len > LENGTH_PREFIXED_MAX_RESPONSE || self.expect.is_some_and(|e| e != len) {
                        return Err(ErrorKind::Protocol);
                    }
                    used += 4;
                    self.state = if len == 0 {
                        State::Done
                    } else {
                        State::Body(len)
                    };
                }
                State::Body(remaining) => {
                    if rest.is_empty() {
                        return Ok(used);
                    }
                    let take = remaining.min(rest.len() as u64);
                    used += take as usize;
                    self.state = if take == remaining {
                        State::Done
                    } else {
                        State::Body(remaining - take)
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks` one at a time through a buffer, as the connection does.
    fn parse_chunks(expect: Option<u64>, chunks: &[&[u8]]) -> Result<bool, ErrorKind> {
        let mut parser = ResponseParser::new(expect);
        let mut pending: Vec<u8> = Vec::new();
        for chunk in chunks {
            pending.extend_from_slice(chunk);
            let used = parser.advance(&pending)?;
            pending.drain(..used);
            if parser.is_done() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn message(payload: &[u8]) -> Vec<u8> {
        let mut m = (payload.len() as u32).to_be_bytes().to_vec();
        m.extend_from_slice(payload);
        m
    }

    #[test]
    fn request_is_prefix_and_pattern() {
        let r = request_bytes(30);
        assert_eq!(&r[..4], &[0, 0, 0, 30]);
        assert_eq!(&r[4..8], b"abcd");
        assert_eq!(r.len(), 34);
        assert_eq!(request_bytes(0), vec![0, 0, 0, 0]);
    }

    #[test]
    fn response_parses_at_every_split_point() {
        let m = message(b"hello, clone");
        for i in 0..=m.len() {
            assert_eq!(
                parse_chunks(None, &[&m[..i], &m[i..]]),
                Ok(true),
                "split at {i}"
            );
        }
        let bytes: Vec<&[u8]> = m.chunks(1).collect();
        assert_eq!(parse_chunks(Some(12), &bytes), Ok(true));
    }

    #[test]
    fn empty_response_is_complete_at_its_prefix() {
        assert_eq!(parse_chunks(None, &[&[0, 0, 0, 0]]), Ok(true));
    }

    #[test]
    fn incomplete_response_waits_for_more() {
        let m = message(b"abc");
        assert_eq!(parse_chunks(None, &[&m[..m.len() - 1]]), Ok(false));
        assert_eq!(parse_chunks(None, &[&m[..3]]), Ok(false));
    }

    #[test]
    fn parser_stops_at_end_of_response() {
        let mut two = message(b"one");
        two.extend(message(b"two!"));
        let mut parser = ResponseParser::new(None);
        assert_eq!(parser.advance(&two), Ok(7));
        assert!(parser.is_done());
    }

    #[test]
    fn large_response_streams_through() {
        let m = message(&vec![b'x'; 200_000]);
        let chunks: Vec<&[u8]> = m.chunks(4096).collect();
        assert_eq!(parse_chunks(None, &chunks), Ok(true));
    }

    #[test]
    fn wrong_or_oversized_length_is_a_protocol_error() {
        assert_eq!(
            parse_chunks(Some(5), &[&message(b"abcd")]),
            Err(ErrorKind::Protocol)
        );
        assert_eq!(
            parse_chunks(None, &[&[0xff, 0xff, 0xff, 0xff]]),
            Err(ErrorKind::Protocol)
        );
    }
}
