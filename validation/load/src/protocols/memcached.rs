//! memcached text protocol: `get` and `set` over a deterministic key space.

use std::io::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::Rng;

use crate::outcome::{ErrorKind, Outcome};
use crate::protocols::{Connection, Protocol};
use crate::wire::Wire;
use crate::workload::MemcachedWorkload;

/// Longest response line accepted (a `VALUE` header with a 250-byte key is far shorter).
const MAX_LINE: usize = 1024;
/// Largest value a `get` response may announce; anything larger is treated as garbage.
const MAX_VALUE_REPLY: usize = 1 << 30;
const KEY_PREFIX: &[u8] = b"key:";

/// Decimal digits needed to write every index below `keys`.
pub fn index_digits(keys: u64) -> usize {
    let mut largest = keys.saturating_sub(1);
    let mut digits = 1;
    while largest >= 10 {
        largest /= 10;
        digits += 1;
    }
    digits
}

/// Writes key number `index` into `out`: exactly `key_size` bytes, `key:` followed by the
/// zero-padded index when it fits, otherwise the zero-padded index alone. The caller has checked
/// that `key_size` holds `index_digits(keys)` digits.
pub fn write_key(out: &mut Vec<u8>, index: u64, key_size: usize) {
    let digits = index_digits(index + 1);
    let start = out.len();
    if key_size >= KEY_PREFIX.len() + digits {
        out.extend_from_slice(KEY_PREFIX);
    }
    let width = key_size - (out.len() - start);
    // Writing into a Vec cannot fail.
    let _ = write!(out, "{index:0width$}");
}

/// Key number `index` as a string (see [`write_key`]).
pub fn key(index: u64, key_size: usize) -> String {
    let mut out = Vec::with_capacity(key_size);
    write_key(&mut out, index, key_size);
    String::from_utf8_lossy(&out).into_owned()
}

/// The memcached workload as a [`Protocol`].
pub struct MemcachedProtocol {
    workload: MemcachedWorkload,
}

impl MemcachedProtocol {
    pub fn new(workload: MemcachedWorkload) -> MemcachedProtocol {
        MemcachedProtocol { workload }
    }
}

impl Protocol for MemcachedProtocol {
    fn name(&self) -> &'static str {
        "memcached"
    }

    fn connect(
        &self,
        addr: SocketAddr,
        timeout: Duration,
        _index: usize,
    ) -> Result<Box<dyn Connection>, String> {
        let conn = MemcachedConnection::connect(addr, timeout, &self.workload)
            .map_err(|e| e.to_string())?;
        Ok(Box::new(conn))
    }
}

/// One memcached connection.
pub struct MemcachedConnection {
    wire: Wire,
    workload: MemcachedWorkload,
    /// The value every `set` stores, built once.
    value: Vec<u8>,
    request: Vec<u8>,
    open: bool,
}

impl MemcachedConnection {
    pub fn connect(
        addr: SocketAddr,
        timeout: Duration,
        workload: &MemcachedWorkload,
    ) -> std::io::Result<MemcachedConnection> {
        let value = (0..workload.value_size)
            .map(|i| b'a' + (i % 26) as u8)
            .collect();
        Ok(MemcachedConnection {
            wire: Wire::connect(addr, timeout)?,
            workload: workload.clone(),
            value,
            request: Vec::with_capacity(workload.value_size + 300),
            open: true,
        })
    }

    /// `get` of key number `index`.
    pub fn get(&mut self, index: u64, deadline_ns: u64) -> Outcome {
        self.request.clear();
        self.request.extend_from_slice(b"get ");
        write_key(&mut self.request, index, self.workload.key_size);
        self.request.extend_from_slice(b"\r\n");
        self.exchange(Command::Get, deadline_ns)
    }

    /// `set` of key number `index` to the workload's value.
    pub fn set(&mut self, index: u64, deadline_ns: u64) -> Outcome {
        self.request.clear();
        self.request.extend_from_slice(b"set ");
        write_key(&mut self.request, index, self.workload.key_size);
        let _ = write!(self.request, " 0 0 {}\r\n", self.value.len());
        self.request.extend_from_slice(&self.value);
        self.request.extend_from_slice(b"\r\n");
        self.exchange(Command::Set, deadline_ns)
    }

    fn exchange(&mut self, command: Command, deadline_ns: u64) -> Outcome {
        let outcome = match self.try_exchange(command, deadline_ns) {
            Ok(outcome) => outcome,
            Err(kind) => Outcome::Error(kind),
        };
        // After anything but a clean answer the byte stream may be out of step with our
        // requests; a `CLIENT_ERROR` may even be followed by a second reply. Start afresh.
        if let Outcome::Error(kind) = outcome {
            if kind != ErrorKind::ServerError && kind != ErrorKind::NotStored {
                self.open = false;
            }
        }
        outcome
    }

    fn try_exchange(&mut self, command: Command, deadline_ns: u64) -> Result<Outcome, ErrorKind> {
        self.wire.send(&self.request)?;
        let mut parser = ResponseParser::new(command);
        loop {
            let used = parser.advance(self.wire.data())?;
            self.wire.consume(used);
            if let Some(outcome) = parser.outcome() {
                return Ok(outcome);
            }
            if self.wire.fill(deadline_ns)? == 0 {
                return Err(ErrorKind::Disconnected);
            }
        }
    }
}

impl Connection for MemcachedConnection {
    fn request(&mut self, rng: &mut SmallRng, deadline_ns: u64) -> Outcome {
        let index = rng.gen_range(0..self.workload.keys);
        if rng.gen::<f64>() < self.workload.get_fraction {
            self.get(index, deadline_ns)
        } else {
            self.set(index, deadline_ns)
        }
    }

    fn is_open(&self) -> bool {
        self.open
    }
}

/// Which reply a parser expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Get,
    Set,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Expecting a reply line (`VALUE …`, `END`, `STORED`, an error line).
    Line,
    /// Inside a value's data block.
    Data(usize),
    /// Expecting the CRLF after a data block.
    DataEnd,
    Done(Outcome),
}

/// Incremental parser for one reply. Feed it buffered bytes with [`ResponseParser::advance`]; it
/// consumes what it can, so values never need to fit in the read buffer at once.
#[derive(Debug)]
pub struct ResponseParser {
    command: Command,
    state: State,
    hit: bool,
}

impl ResponseParser {
    pub fn new(command: Command) -> ResponseParser {
        ResponseParser {
            command,
            state: State::Line,
            hit: false,
        }
    }

    /// The reply's outcome once it is complete.
    pub fn outcome(&self) -> Option<Outcome> {
        match self.state {
            State::Done(o) => Some(o),
            _ => None,
        }
    }

    /// Consumes a prefix of `data`; returns its length. Stops after a complete reply, leaving
    /// later bytes alone. `Err(Protocol)` on anything that is not a valid reply.
    pub fn advance(&mut self, data: &[u8]) -> Result<usize, ErrorKind> {
        let mut used = 0;
        loop {
            let rest = &data[used..];
            match self.state {
                State::Done(_) => return Ok(used),
                State::Line => {
                    let Some(end) = find_crlf(rest) else {
                        return if rest.len() > MAX_LINE {
                            Err(ErrorKind::Protocol)
                        } else {
                            Ok(used)
                        };
                    };
                    if end > MAX_LINE {
                        return Err(ErrorKind::Protocol);
                    }
                    self.state = self.on_line(&rest[..end])?;
                    used += end + 2;
                }
                State::Data(remaining) => {
                    if rest.is_empty() {
                        return Ok(used);
                    }
                    let take = remaining.min(rest.len());
                    used += take;
                    self.state = if take == remaining {
                        State::DataEnd
                    } else {
                        State::Data(remaining - take)
                    };
                }
                State::DataEnd => {
                    if rest.len() < 2 {
                        return Ok(used);
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(ErrorKind::Protocol);
                    }
                    used += 2;
                    self.state = State::Line;
                }
            }
        }
    }

    fn on_line(&mut self, line: &[u8]) -> Result<State, ErrorKind> {
        if line.starts_with(b"SERVER_ERROR") {
            return Ok(State::Done(Outcome::Error(ErrorKind::ServerError)));
        }
        if line == b"ERROR" || line.starts_with(b"CLIENT_ERROR") {
            return Ok(State::Done(Outcome::Error(ErrorKind::ClientError)));
        }
        match self.command {
            Command::Get => {
                if line == b"END" {
                    let outcome = if self.hit { Outcome::Ok } else { Outcome::Miss };
                    return Ok(State::Done(outcome));
                }
                let bytes = parse_value_header(line).ok_or(ErrorKind::Protocol)?;
                self.hit = true;
                Ok(if bytes == 0 {
                    State::DataEnd
                } else {
                    State::Data(bytes)
                })
            }
            Command::Set => match line {
                b"STORED" => Ok(State::Done(Outcome::Ok)),
                b"NOT_STORED" | b"EXISTS" | b"NOT_FOUND" => {
                    Ok(State::Done(Outcome::Error(ErrorKind::NotStored)))
                }
                _ => Err(ErrorKind::Protocol),
            },
        }
    }
}

/// `VALUE <key> <flags> <bytes> [<cas>]` → bytes.
fn parse_value_header(line: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(line).ok()?;
    let mut parts = text.split(' ');
    if parts.next()? != "VALUE" {
        return None;
    }
    let _key = parts.next().filter(|k| !k.is_empty())?;
    let _flags: u32 = parts.next()?.parse().ok()?;
    let bytes: usize = parts.next()?.parse().ok()?;
    if let Some(cas) = parts.next() {
        cas.parse::<u64>().ok()?;
    }
    if parts.next().is_some() || bytes > MAX_VALUE_REPLY {
        return None;
    }
    Some(bytes)
}

fn find_crlf(data: &[u8]) -> Option<usize> {
    data.windows(2).position(|w| w == b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks` one at a time through a buffer, as the connection does.
    fn parse_chunks(command: Command, chunks: &[&[u8]]) -> Result<Option<Outcome>, ErrorKind> {
        let mut parser = ResponseParser::new(command);
        let mut pending: Vec<u8> = Vec::new();
        for chunk in chunks {
            pending.extend_from_slice(chunk);
            let used = parser.advance(&pending)?;
            pending.drain(..used);
            if let Some(o) = parser.outcome() {
                return Ok(Some(o));
            }
        }
        Ok(None)
    }

    fn every_split(command: Command, bytes: &[u8]) -> Vec<Result<Option<Outcome>, ErrorKind>> {
        (0..=bytes.len())
            .map(|i| parse_chunks(command, &[&bytes[..i], &bytes[i..]]))
            .collect()
    }

    const HIT: &[u8] = b"VALUE key:000000001 0 5\r\nhello\r\nEND\r\n";

    #[test]
    fn keys_have_exact_size_and_are_distinct() {
        assert_eq!(key(123, 13), "key:000000123");
        assert_eq!(key(0, 30).len(), 30);
        assert_eq!(key(9_999, 30).len(), 30);
        assert_eq!(key(42, 4), "0042", "too short for the prefix: digits only");
        assert_eq!(key(7, 1), "7");
        let keys: std::collections::HashSet<String> = (0..1000).map(|i| key(i, 6)).collect();
        assert_eq!(keys.len(), 1000);
        assert!(keys.iter().all(|k| k.len() == 6));
        assert_eq!(index_digits(1), 1);
        assert_eq!(index_digits(10), 1);
        assert_eq!(index_digits(11), 2);
        assert_eq!(index_digits(10_000), 4);
    }

    #[test]
    fn get_hit_parses_at_every_split_point() {
        for (i, r) in every_split(Command::Get, HIT).into_iter().enumerate() {
            assert_eq!(r, Ok(Some(Outcome::Ok)), "split at {i}");
        }
    }

    #[test]
    fn get_miss_is_a_miss_not_an_error() {
        assert_eq!(
            parse_chunks(Command::Get, &[b"END\r\n"]),
            Ok(Some(Outcome::Miss))
        );
    }

    #[test]
    fn get_with_cas_and_binary_value_parses() {
        let reply = b"VALUE k 7 4 99\r\n\r\nEN\r\nEND\r\n";
        assert_eq!(parse_chunks(Command::Get, &[reply]), Ok(Some(Outcome::Ok)));
    }

    #[test]
    fn value_larger_than_read_buffer_streams_through() {
        let mut reply = b"VALUE k 0 200000\r\n".to_vec();
        reply.extend(std::iter::repeat_n(b'x', 200_000));
        reply.extend_from_slice(b"\r\nEND\r\n");
        let chunks: Vec<&[u8]> = reply.chunks(4096).collect();
        assert_eq!(parse_chunks(Command::Get, &chunks), Ok(Some(Outcome::Ok)));
    }

    #[test]
    fn incomplete_reply_waits_for_more() {
        assert_eq!(
            parse_chunks(Command::Get, &[&HIT[..HIT.len() - 1]]),
            Ok(None)
        );
        assert_eq!(parse_chunks(Command::Set, &[b"STOR"]), Ok(None));
    }

    #[test]
    fn reply_stops_before_following_bytes() {
        let mut parser = ResponseParser::new(Command::Set);
        assert_eq!(parser.advance(b"STORED\r\nEND\r\n"), Ok(8));
        assert_eq!(parser.outcome(), Some(Outcome::Ok));
    }

    #[test]
    fn set_replies_map_to_outcomes() {
        let cases: [(&[u8], Outcome); 5] = [
            (b"STORED\r\n", Outcome::Ok),
            (b"NOT_STORED\r\n", Outcome::Error(ErrorKind::NotStored)),
            (
                b"SERVER_ERROR out of memory storing object\r\n",
                Outcome::Error(ErrorKind::ServerError),
            ),
            (
                b"CLIENT_ERROR bad data chunk\r\n",
                Outcome::Error(ErrorKind::ClientError),
            ),
            (b"ERROR\r\n", Outcome::Error(ErrorKind::ClientError)),
        ];
        for (bytes, expected) in cases {
            assert_eq!(parse_chunks(Command::Set, &[bytes]), Ok(Some(expected)));
        }
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        let garbage: [&[u8]; 7] = [
            b"HTTP/1.1 200 OK\r\n",
            b"VALUE k 0 notanumber\r\n",
            b"VALUE k 0 3\r\nabcXY",
            b"VALUE k 0 3 1 2\r\n",
            b"VALUE k 0 99999999999\r\n",
            b"\x00\xff\r\n",
            b"STORED\r\n",
        ];
        for g in garbage {
            assert_eq!(
                parse_chunks(Command::Get, &[g]),
                Err(ErrorKind::Protocol),
                "{:?}",
                String::from_utf8_lossy(g)
            );
        }
        assert_eq!(
            parse_chunks(Command::Set, &[b"END\r\n"]),
            Err(ErrorKind::Protocol)
        );
    }

    #[test]
    fn endless_line_is_refused() {
        let long = vec![b'V'; MAX_LINE + 10];
        assert_eq!(
            parse_chunks(Command::Get, &[&long]),
            Err(ErrorKind::Protocol)
        );
    }
}
