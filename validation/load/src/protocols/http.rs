//! HTTP/1.1 keep-alive `GET`s.

use std::net::SocketAddr;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::Rng;

use crate::outcome::{ErrorKind, Outcome};
use crate::protocols::{Connection, Protocol};
use crate::wire::{Wire, READ_BUFFER};
use crate::workload::HttpWorkload;

/// Longest chunk-size or trailer line accepted.
const MAX_LINE: usize = 4096;

/// The HTTP workload as a [`Protocol`]: every request is prebuilt once.
pub struct HttpProtocol {
    requests: Vec<Vec<u8>>,
    /// The request targets, in `requests`' order: the request classes.
    paths: Vec<String>,
    /// Cumulative weights, for choosing a path with one binary search.
    cumulative: Vec<f64>,
}

impl HttpProtocol {
    pub fn new(workload: HttpWorkload, addr: SocketAddr) -> HttpProtocol {
        let host = workload.host.clone().unwrap_or_else(|| addr.to_string());
        let requests = workload
            .paths
            .iter()
            .map(|p| request_bytes(&p.path, &host))
            .collect();
        let paths = workload.paths.iter().map(|p| p.path.clone()).collect();
        let mut total = 0.0;
        let cumulative = workload
            .paths
            .iter()
            .map(|p| {
                total += p.weight;
                total
            })
            .collect();
        HttpProtocol {
            requests,
            paths,
            cumulative,
        }
    }
}

/// The request wrk sends: request line and `Host` only, so both tools cost the server the same.
pub fn request_bytes(path: &str, host: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").into_bytes()
}

impl Protocol for HttpProtocol {
    fn name(&self) -> &'static str {
        "http"
    }

    fn connect(
        &self,
        addr: SocketAddr,
        timeout: Duration,
        _index: usize,
    ) -> Result<Box<dyn Connection>, String> {
        let wire = Wire::connect(addr, timeout).map_err(|e| e.to_string())?;
        Ok(Box::new(HttpConnection {
            wire,
            requests: self.requests.clone(),
            cumulative: self.cumulative.clone(),
            open: true,
            last: None,
        }))
    }

    fn request_classes(&self) -> Vec<String> {
        self.paths.clone()
    }
}

/// One keep-alive HTTP connection.
pub struct HttpConnection {
    wire: Wire,
    requests: Vec<Vec<u8>>,
    cumulative: Vec<f64>,
    open: bool,
    /// The last request's path index and response bytes, once answered.
    last: Option<(usize, u64)>,
}

impl HttpConnection {
    pub fn connect(
        addr: SocketAddr,
        timeout: Duration,
        workload: &HttpWorkload,
    ) -> std::io::Result<HttpConnection> {
        let protocol = HttpProtocol::new(workload.clone(), addr);
        Ok(HttpConnection {
            wire: Wire::connect(addr, timeout)?,
            requests: protocol.requests,
            cumulative: protocol.cumulative,
            open: true,
            last: None,
        })
    }

    /// Sends the request for path number `index` and reads its response.
    pub fn get(&mut self, index: usize, deadline_ns: u64) -> Outcome {
        match self.exchange(index, deadline_ns) {
            Ok(outcome) => outcome,
            Err(kind) => {
                self.open = false;
                Outcome::Error(kind)
            }
        }
    }

    fn exchange(&mut self, index: usize, deadline_ns: u64) -> Result<Outcome, ErrorKind> {
        self.last = None;
        let request = self.requests.get(index).ok_or(ErrorKind::Protocol)?;
        self.wire.send(request)?;
        let mut parser = ResponseParser::new();
        // Every byte the parser takes belongs to this response (it stops at the response's end).
        let mut response_bytes = 0u64;
        loop {
            let used = parser.advance(self.wire.data())?;
            self.wire.consume(used);
            response_bytes += used as u64;
            if let Some(response) = parser.response() {
                if !response.keep_alive {
                    self.open = false;
                }
                self.last = Some((index, response_bytes));
                return Ok(response.outcome());
            }
            if self.wire.fill(deadline_ns)? == 0 {
                parser.finish_at_eof()?;
                self.open = false;
                let response = parser.response().ok_or(ErrorKind::Disconnected)?;
                self.last = Some((index, response_bytes));
                return Ok(response.outcome());
            }
        }
    }
}

impl Connection for HttpConnection {
    fn request(&mut self, rng: &mut SmallRng, deadline_ns: u64) -> Outcome {
        let total = self.cumulative.last().copied().unwrap_or(0.0);
        let x = rng.gen::<f64>() * total;
        // First path whose cumulative weight exceeds x: zero-weight paths are never picked.
        let index = self
            .cumulative
            .partition_point(|&c| c <= x)
            .min(self.requests.len().saturating_sub(1));
        self.get(index, deadline_ns)
    }

    fn is_open(&self) -> bool {
        self.open
    }

    fn last_class(&self) -> Option<(usize, u64)> {
        self.last
    }
}

/// A complete response's status and connection fate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub keep_alive: bool,
}

impl Response {
    /// 2xx is success; any other status is an error named by its code.
    pub fn outcome(self) -> Outcome {
        if (200..300).contains(&self.status) {
            Outcome::Ok
        } else {
            Outcome::Error(ErrorKind::HttpStatus(self.status))
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Head,
    Body(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkDataEnd,
    Trailers,
    UntilClose,
    Done,
}

/// Incremental HTTP/1.1 response parser: status line, headers, then a `Content-Length`,
/// chunked or read-until-close body, which it consumes without keeping.
#[derive(Debug)]
pub struct ResponseParser {
    state: State,
    status: u16,
    keep_alive: bool,
}

impl Default for ResponseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponseParser {
    pub fn new() -> ResponseParser {
        ResponseParser {
            state: State::Head,
            status: 0,
            keep_alive: true,
        }
    }

    /// The response once it is complete.
    pub fn response(&self) -> Option<Response> {
        (self.state == State::Done).then_some(Response {
            status: self.status,
            keep_alive: self.keep_alive,
        })
    }

    /// The peer closed the connection: completes a read-until-close body, otherwise the response
    /// was truncated.
    pub fn finish_at_eof(&mut self) -> Result<(), ErrorKind> {
        match self.state {
            State::UntilClose | State::Done => {
                self.state = State::Done;
                self.keep_alive = false;
                Ok(())
            }
            // Closed before a single byte of the response: a plain disconnect.
            State::Head => Err(ErrorKind::Disconnected),
            _ => Err(ErrorKind::Protocol),
        }
    }

    /// Consumes a prefix of `data` and returns its length; stops after a complete response.
    pub fn advance(&mut self, data: &[u8]) -> Result<usize, ErrorKind> {
        let mut used = 0;
        loop {
            let rest = &data[used..];
            match self.state {
                State::Done => return Ok(used),
                State::Head => {
                    let Some(end) = find(rest, b"\r\n\r\n") else {
                        // A head must fit in the read buffer; the wire reports a full buffer.
                        return if rest.len() >= READ_BUFFER {
                            Err(ErrorKind::Protocol)
                        } else {
                            Ok(used)
                        };
                    };
                    self.state = self.on_head(&rest[..end])?;
                    used += end + 4;
                }
                State::Body(remaining) | State::ChunkData(remaining) => {
                    if rest.is_empty() {
                        return Ok(used);
                    }
                    let take = remaining.min(rest.len() as u64);
                    used += take as usize;
                    let left = remaining - take;
                    self.state = match (self.state, left) {
                        (State::Body(_), 0) => State::Done,
                        (State::Body(_), n) => State::Body(n),
                        (_, 0) => State::ChunkDataEnd,
                        (_, n) => State::ChunkData(n),
                    };
                }
                State::ChunkDataEnd => {
                    if rest.len() < 2 {
                        return Ok(used);
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(ErrorKind::Protocol);
                    }
                    used += 2;
                    self.state = State::ChunkSize;
                }
                State::ChunkSize | State::Trailers => {
                    let Some(end) = line_end(rest)? else {
                        return Ok(used);
                    };
                    let line = &rest[..end];
                    used += end + 2;
                    self.state = if self.state == State::ChunkSize {
                        match parse_chunk_size(line)? {
                            0 => State::Trailers,
                            n => State::ChunkData(n),
                        }
                    } else if line.is_empty() {
                        State::Done
                    } else {
                        State::Trailers
                    };
                }
                State::UntilClose => return Ok(data.len()),
            }
        }
    }

    fn on_head(&mut self, head: &[u8]) -> Result<State, ErrorKind> {
        let text = std::str::from_utf8(head).map_err(|_| ErrorKind::Protocol)?;
        let mut lines = text.split("\r\n");
        let status_line = lines.next().ok_or(ErrorKind::Protocol)?;
        let (version, status) = parse_status_line(status_line)?;
        let mut keep_alive = version >= 1;
        let mut content_length: Option<u64> = None;
        let mut chunked = false;
        for line in lines {
            let (name, value) = line.split_once(':').ok_or(ErrorKind::Protocol)?;
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                let n: u64 = value.parse().map_err(|_| ErrorKind::Protocol)?;
                if content_length.is_some_and(|m| m != n) {
                    return Err(ErrorKind::Protocol);
                }
                content_length = Some(n);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value
                    .rsplit(',')
                    .next()
                    .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
            } else if name.eq_ignore_ascii_case("connection") {
                for token in value.split(',').map(str::trim) {
                    if token.eq_ignore_ascii_case("close") {
                        keep_alive = false;
                    } else if token.eq_ignore_ascii_case("keep-alive") {
                        keep_alive = true;
                    }
                }
            }
        }
        // 1xx interim responses precede the real one; we never ask to switch protocols.
        if (100..200).contains(&status) {
            return if status == 101 {
                Err(ErrorKind::Protocol)
            } else {
                Ok(State::Head)
            };
        }
        self.status = status;
        self.keep_alive = keep_alive;
        Ok(if status == 204 || status == 304 {
            State::Done
        } else if chunked {
            State::ChunkSize
        } else if let Some(n) = content_length {
            if n == 0 {
                State::Done
            } else {
                State::Body(n)
            }
        } else {
            self.keep_alive = false;
            State::UntilClose
        })
    }
}

/// `HTTP/1.x SSS reason` → (x, SSS).
fn parse_status_line(line: &str) -> Result<(u8, u16), ErrorKind> {
    let rest = line.strip_prefix("HTTP/1.").ok_or(ErrorKind::Protocol)?;
    let minor = match rest.as_bytes().first() {
        Some(b'0') => 0,
        Some(b'1') => 1,
        _ => return Err(ErrorKind::Protocol),
    };
    let code = rest.get(2..5).ok_or(ErrorKind::Protocol)?;
    if rest.as_bytes().get(1) != Some(&b' ') || !code.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ErrorKind::Protocol);
    }
    if rest.len() > 5 && rest.as_bytes()[5] != b' ' {
        return Err(ErrorKind::Protocol);
    }
    let status: u16 = code.parse().map_err(|_| ErrorKind::Protocol)?;
    if status < 100 {
        return Err(ErrorKind::Protocol);
    }
    Ok((minor, status))
}

/// Hex size before any `;extension`.
fn parse_chunk_size(line: &[u8]) -> Result<u64, ErrorKind> {
    let size = line.split(|&b| b == b';').next().unwrap_or_default();
    let size = std::str::from_utf8(size)
        .map_err(|_| ErrorKind::Protocol)?
        .trim();
    if size.is_empty() || size.len() > 15 {
        return Err(ErrorKind::Protocol);
    }
    u64::from_str_radix(size, 16).map_err(|_| ErrorKind::Protocol)
}

/// Position of the CRLF ending the first line, `None` if not yet buffered.
fn line_end(data: &[u8]) -> Result<Option<usize>, ErrorKind> {
    match find(data, b"\r\n") {
        Some(end) if end <= MAX_LINE => Ok(Some(end)),
        Some(_) => Err(ErrorKind::Protocol),
        None if data.len() > MAX_LINE => Err(ErrorKind::Protocol),
        None => Ok(None),
    }
}

fn find(data: &[u8], needle: &[u8]) -> Option<usize> {
    data.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds chunks through a buffer like the connection does, then signals EOF if `eof`.
    fn parse(chunks: &[&[u8]], eof: bool) -> Result<Option<Response>, ErrorKind> {
        let mut parser = ResponseParser::new();
        let mut pending: Vec<u8> = Vec::new();
        for chunk in chunks {
            pending.extend_from_slice(chunk);
            let used = parser.advance(&pending)?;
            pending.drain(..used);
            if let Some(r) = parser.response() {
                return Ok(Some(r));
            }
        }
        if eof {
            parser.finish_at_eof()?;
        }
        Ok(parser.response())
    }

    const NGINX_200: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sat, 21 Nov 2026 13:00:00 GMT\r\nContent-Type: text/html\r\nContent-Length: 12\r\nLast-Modified: Sat, 21 Nov 2026 12:00:00 GMT\r\nConnection: keep-alive\r\nETag: \"1-c\"\r\nAccept-Ranges: bytes\r\n\r\nhello world\n";

    const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;name=value\r\n world\r\n0\r\nX-Trailer: yes\r\n\r\n";

    const OK: Response = Response {
        status: 200,
        keep_alive: true,
    };

    #[test]
    fn content_length_response_parses_at_every_split_point() {
        for i in 0..=NGINX_200.len() {
            let r = parse(&[&NGINX_200[..i], &NGINX_200[i..]], false);
            assert_eq!(r, Ok(Some(OK)), "split at {i}");
        }
    }

    #[test]
    fn chunked_response_parses_at_every_split_point() {
        for i in 0..=CHUNKED.len() {
            let r = parse(&[&CHUNKED[..i], &CHUNKED[i..]], false);
            assert_eq!(r, Ok(Some(OK)), "split at {i}");
        }
        // And byte by byte.
        let bytes: Vec<&[u8]> = CHUNKED.chunks(1).collect();
        assert_eq!(parse(&bytes, false), Ok(Some(OK)));
    }

    #[test]
    fn parser_stops_at_end_of_response() {
        let mut two = NGINX_200.to_vec();
        two.extend_from_slice(NGINX_200);
        let mut parser = ResponseParser::new();
        assert_eq!(parser.advance(&two), Ok(NGINX_200.len()));
        assert_eq!(parser.response(), Some(OK));
    }

    #[test]
    fn non_2xx_status_is_an_error_by_code() {
        let r = parse(
            &[b"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nno\n"],
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.outcome(), Outcome::Error(ErrorKind::HttpStatus(404)));
        assert_eq!(OK.outcome(), Outcome::Ok);
    }

    #[test]
    fn connection_close_and_http10_end_keep_alive() {
        let r = parse(
            &[b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"],
            false,
        );
        assert!(!r.unwrap().unwrap().keep_alive);
        let r = parse(&[b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"], false);
        assert!(!r.unwrap().unwrap().keep_alive);
        let r = parse(
            &[b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n"],
            false,
        );
        assert!(r.unwrap().unwrap().keep_alive);
    }

    #[test]
    fn body_without_length_ends_at_close() {
        let head: &[u8] = b"HTTP/1.1 200 OK\r\n\r\nsome body";
        assert_eq!(parse(&[head], false), Ok(None));
        let r = parse(&[head], true).unwrap().unwrap();
        assert_eq!(r.status, 200);
        assert!(!r.keep_alive);
    }

    #[test]
    fn interim_100_continue_is_skipped() {
        let r = parse(
            &[b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"],
            false,
        );
        assert_eq!(r.unwrap().unwrap().status, 201);
    }

    #[test]
    fn no_body_statuses_complete_at_head() {
        let r = parse(
            &[b"HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n"],
            false,
        );
        assert_eq!(r.unwrap().unwrap().status, 304);
    }

    #[test]
    fn truncated_response_at_close_is_an_error() {
        let cut = &NGINX_200[..NGINX_200.len() - 3];
        assert_eq!(parse(&[cut], true), Err(ErrorKind::Protocol));
        assert_eq!(parse(&[], true), Err(ErrorKind::Disconnected));
        let chunked_cut = &CHUNKED[..20 + CHUNKED.len() / 2];
        assert_eq!(parse(&[chunked_cut], true), Err(ErrorKind::Protocol));
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        let garbage: [&[u8]; 10] = [
            b"VALUE k 0 5\r\nhello\r\nEND\r\n\r\n",
            b"HTTP/2 200\r\n\r\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 abc OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXX",
            b"\xff\xfe\r\n\r\n",
        ];
        for g in garbage {
            assert_eq!(
                parse(&[g], false),
                Err(ErrorKind::Protocol),
                "{:?}",
                String::from_utf8_lossy(g)
            );
        }
    }

    #[test]
    fn oversized_head_is_refused() {
        let mut head = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        head.extend(std::iter::repeat_n(b'a', READ_BUFFER));
        assert_eq!(parse(&[&head], false), Err(ErrorKind::Protocol));
    }

    #[test]
    fn request_matches_what_wrk_sends() {
        assert_eq!(
            request_bytes("/index.html", "127.0.0.1:8080"),
            b"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"
        );
    }
}
