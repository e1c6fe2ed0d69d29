//! A blocking TCP connection with a read buffer and per-request deadlines, shared by the text
//! protocols.
//!
//! Blocking sockets keep a request to two system calls on the fast path (one write, one read), and
//! the socket's own receive timeout bounds every wait without a timer thread.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::clock::now_ns;
use crate::outcome::ErrorKind;

/// Size of the read buffer; also the largest unit a parser may need to see at once (a response
/// head or a line).
pub const READ_BUFFER: usize = 64 * 1024;

/// One blocking TCP connection.
pub struct Wire {
    stream: TcpStream,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    timeout: Duration,
    /// The receive timeout currently set on the socket.
    read_timeout: Duration,
    reads_this_request: u32,
}

impl Wire {
    /// Connects with TCP_NODELAY (requests are small and latency-bound) and `timeout` on connect,
    /// reads and writes.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> io::Result<Wire> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        Ok(Wire {
            stream,
            buf: vec![0; READ_BUFFER].into_boxed_slice(),
            start: 0,
            end: 0,
            timeout,
            read_timeout: timeout,
            reads_this_request: 0,
        })
    }

    /// Starts a request: writes all of `bytes`.
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), ErrorKind> {
        self.reads_this_request = 0;
        self.stream.write_all(bytes).map_err(io_kind)
    }

    /// Buffered bytes not yet consumed.
    pub fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Marks `n` buffered bytes as used.
    pub fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Reads at least one more byte before `deadline_ns`; `Ok(0)` means the peer closed.
    ///
    /// Fails with `Protocol` when the buffer is full of bytes the parser could not use.
    pub fn fill(&mut self, deadline_ns: u64) -> Result<usize, ErrorKind> {
        if self.end == self.buf.len() {
            if self.start == 0 {
                return Err(ErrorKind::Protocol);
            }
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let now = now_ns();
        if now >= deadline_ns {
            return Err(ErrorKind::Timeout);
        }
        // The first read of a request waits the full timeout, which is the deadline give or take
        // the time to write; later reads of a slow, trickling response get the exact remainder.
        if self.reads_this_request > 0 {
            let remaining = Duration::from_nanos(deadline_ns - now);
            self.set_read_timeout(remaining)?;
        } else if self.read_timeout != self.timeout {
            self.set_read_timeout(self.timeout)?;
        }
        self.reads_this_request += 1;
        loop {
            match self.stream.read(&mut self.buf[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_kind(e)),
            }
        }
    }

    fn set_read_timeout(&mut self, t: Duration) -> Result<(), ErrorKind> {
        let t = t.max(Duration::from_micros(1));
        self.stream.set_read_timeout(Some(t)).map_err(io_kind)?;
        self.read_timeout = t;
        Ok(())
    }
}

/// Maps a socket error to the report's error kinds.
pub fn io_kind(e: io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ErrorKind::Timeout,
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof
        | io::ErrorKind::NotConnected => ErrorKind::Disconnected,
        _ => ErrorKind::Io,
    }
}
