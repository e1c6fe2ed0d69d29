//! The analyzer's side of a traced run: accepts one stream per guest process and analyses each on its
//! own thread, while the caller drives load and decides where the measurement window starts and ends.

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::analysis::{ProcessAnalysis, ProcessCounts};
use crate::classes::ClassTable;

const READ_CHUNK: usize = 1 << 20;

/// One guest process's stream. The analysis and the reader's progress have separate locks: the reader
/// must never wait for a chunk's analysis, or the tool stalls on a full socket.
struct StreamState {
    analysis: Mutex<ProcessAnalysis>,
    progress: Mutex<Progress>,
}

struct Progress {
    /// When the last bytes arrived from the tool.
    last_data: Instant,
    /// When the analysis last finished a chunk.
    last_analysed: Instant,
    /// Chunks received but not analysed yet.
    pending: usize,
    /// The stream ended and every chunk was analysed.
    closed: bool,
    error: Option<String>,
}

struct Shared {
    streams: Mutex<Vec<Arc<StreamState>>>,
    stop: AtomicBool,
    table: ClassTable,
}

/// A listening analyzer. Dropping it stops accepting; reader threads end with their streams.
pub struct BodySession {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A reader that panicked leaves consistent-enough counts; keep going rather than cascade.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl BodySession {
    /// Listens on a free loopback port.
    pub fn listen() -> Result<BodySession> {
        let listener = TcpListener::bind("127.0.0.1:0").context("body analyzer: bind 127.0.0.1")?;
        let addr = listener
            .local_addr()
            .context("body analyzer: local address")?;
        listener
            .set_nonblocking(true)
            .context("body analyzer: non-blocking listener")?;
        let shared = Arc::new(Shared {
            streams: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            table: ClassTable::bundled(),
        });
        let s = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("body-accept".into())
            .spawn(move || accept_loop(listener, s))
            .context("body analyzer: spawn acceptor")?;
        Ok(BodySession {
            addr,
            shared,
            acceptor: Some(acceptor),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn streams(&self) -> Vec<Arc<StreamState>> {
        lock(&self.shared.streams).clone()
    }

    /// Number of processes that connected so far.
    pub fn processes(&self) -> usize {
        lock(&self.shared.streams).len()
    }

    /// Words received over all streams.
    pub fn words(&self) -> u64 {
        self.streams().iter().map(|s| lock(&s.analysis).words).sum()
    }

    /// First analysis error of any stream (a malformed stream stops only that stream).
    pub fn error(&self) -> Option<String> {
        self.streams()
            .iter()
            .find_map(|s| lock(&s.progress).error.clone())
    }

    /// Waits until a guest process has connected.
    pub fn wait_connected(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while self.processes() == 0 {
            if Instant::now() > deadline {
                bail!(
                    "the traced program did not connect to the analyzer within {} s",
                    timeout.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Waits until no stream has delivered data for `quiet` and everything delivered is analysed. The
    /// tool flushes before every system call, so a server blocked in `epoll_wait` on every thread has
    /// delivered everything it did.
    ///
    /// A program whose background threads keep running (a timer thread waking every millisecond)
    /// never goes fully quiet: after `settle` the wait also ends once the analysis has caught up, and
    /// that background activity is part of the window, as it is part of serving the load.
    pub fn wait_quiet(&self, quiet: Duration, settle: Duration, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        let deadline = start + timeout;
        loop {
            let newest = self
                .streams()
                .iter()
                .map(|s| lock(&s.progress).last_data)
                .max()
                .unwrap_or_else(Instant::now);
            let pending: usize = self
                .streams()
                .iter()
                .map(|s| lock(&s.progress).pending)
                .sum();
            if pending == 0 && (newest.elapsed() >= quiet || start.elapsed() >= settle) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the analysis of the traced program did not catch up within {} s",
                    timeout.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts the measurement window on every stream.
    pub fn reset_counts(&self) {
        for s in self.streams() {
            lock(&s.analysis).reset_counts();
        }
    }

    /// The window's counts of every process.
    pub fn snapshot(&self) -> Vec<ProcessCounts> {
        self.streams()
            .iter()
            .map(|s| lock(&s.analysis).snapshot())
            .collect()
    }

    /// Waits until every stream has closed and its backlog is analysed, for as long as that makes
    /// progress: it fails only after `stall` with nothing received and nothing analysed. The backlog
    /// a program leaves at exit can take minutes (the analysis runs at low priority and buffers up
    /// to `MAX_PENDING_CHUNKS`); a deadline on the whole wait cut a 2.4 G-instruction run's counts at
    /// 58 %, silently, when its caller ignored the error.
    pub fn wait_closed(&self, stall: Duration) -> Result<()> {
        let start = Instant::now();
        loop {
            let streams: Vec<StreamProgress> = self
                .streams()
                .iter()
                .map(|s| {
                    let p = lock(&s.progress);
                    StreamProgress {
                        closed: p.closed,
                        last_progress: p.last_data.max(p.last_analysed),
                        pending: p.pending,
                    }
                })
                .collect();
            match closing(&streams, start, Instant::now(), stall) {
                Closing::Done => return Ok(()),
                Closing::Waiting => std::thread::sleep(Duration::from_millis(20)),
                Closing::Stalled { pending } => {
                    return Err(anyhow!(
                        "the traced program's trace stopped for {:.1} s without closing ({pending} chunks unanalysed)",
                        stall.as_secs_f64()
                    ))
                }
            }
        }
    }
}

/// What [`BodySession::wait_closed`] sees of one stream.
#[derive(Debug, Clone, Copy)]
struct StreamProgress {
    closed: bool,
    /// The later of the last bytes received and the last chunk analysed.
    last_progress: Instant,
    pending: usize,
}

#[derive(Debug, PartialEq)]
enum Closing {
    Done,
    Waiting,
    Stalled { pending: usize },
}

/// Whether a wait for the streams to close is over: done when every stream closed, stalled when
/// nothing was received or analysed for `stall` (counted from `start` at the earliest, so a wait
/// that begins after a quiet spell gets its full `stall`).
fn closing(streams: &[StreamProgress], start: Instant, now: Instant, stall: Duration) -> Closing {
    if !streams.is_empty() && streams.iter().all(|s| s.closed) {
        return Closing::Done;
    }
    let newest = streams
        .iter()
        .map(|s| s.last_progress)
        .max()
        .unwrap_or(start)
        .max(start);
    if now.saturating_duration_since(newest) > stall {
        Closing::Stalled {
            pending: streams.iter().map(|s| s.pending).sum(),
        }
    } else {
        Closing::Waiting
    }
}

impl Drop for BodySession {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while !shared.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let state = Arc::new(StreamState {
                    analysis: Mutex::new(ProcessAnalysis::new(&shared.table)),
                    progress: Mutex::new(Progress {
                        last_data: Instant::now(),
                        last_analysed: Instant::now(),
                        pending: 0,
                        closed: false,
                        error: None,
                    }),
                });
                lock(&shared.streams).push(state.clone());
                let _ = std::thread::Builder::new()
                    .name("body-stream".into())
                    .spawn(move || read_loop(stream, state));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Chunks buffered between the socket and the analysis: bursts (a warm-up, a batch job) would otherwise
/// stall the traced program on a full socket while the analysis catches up; with the buffer the tool runs
/// at its own speed and the analysis drains the backlog when the program idles.
const MAX_PENDING_CHUNKS: usize = 4096;

fn read_loop(mut stream: TcpStream, state: Arc<StreamState>) {
    let _ = stream.set_nonblocking(false);
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u64>>(MAX_PENDING_CHUNKS);
    let analysis_state = state.clone();
    let analysis = std::thread::Builder::new()
        .name("body-analysis".into())
        .spawn(move || analyse_loop(rx, analysis_state));
    // One read buffer for the whole stream; each chunk leaves as words of exactly the size read, so a
    // small read (the tool flushes before every syscall) costs its own size, not the buffer's.
    let mut buf = vec![0u8; READ_CHUNK];
    let mut carried = 0;
    loop {
        let n = match stream.read(&mut buf[carried..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                lock(&state.progress).error = Some(format!("body trace stream: {e}"));
                break;
            }
        };
        let filled = carried + n;
        let whole = filled / 8 * 8;
        let words: Vec<u64> = buf[..whole]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect();
        buf.copy_within(whole..filled, 0);
        carried = filled - whole;
        if words.is_empty() {
            continue;
        }
        {
            let mut p = lock(&state.progress);
            p.last_data = Instant::now();
            p.pending += 1;
        }
        if tx.send(words).is_err() {
            break;
        }
    }
    drop(tx);
    match analysis {
        Ok(handle) => {
            let _ = handle.join();
        }
        Err(e) => lock(&state.progress).error = Some(format!("body analysis thread: {e}")),
    }
    let mut p = lock(&state.progress);
    p.closed = true;
    p.last_data = Instant::now();
}

fn analyse_loop(rx: std::sync::mpsc::Receiver<Vec<u64>>, state: Arc<StreamState>) {
    // Yield the CPU to the traced program and the load generator: the analysis works through its
    // backlog when they idle, instead of slowing the target during bursts on a small machine.
    // SAFETY: gettid and setpriority on the calling thread have no memory-safety preconditions.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 10);
    }
    while let Ok(words) = rx.recv() {
        let failed = lock(&state.progress).error.is_some();
        let result = if failed {
            Ok(())
        } else {
            lock(&state.analysis).feed(&words)
        };
        let mut p = lock(&state.progress);
        if let Err(e) = result {
            p.error = Some(format!("{e:#}"));
        }
        p.pending -= 1;
        p.last_analysed = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn the_reader_drains_the_socket_while_the_analysis_is_busy() {
        let session = BodySession::listen().expect("listen");
        let mut client = TcpStream::connect(session.addr()).expect("connect");
        session
            .wait_connected(Duration::from_secs(10))
            .expect("connected");
        // Hold the analysis lock, as a long chunk's analysis would, while the tool writes far more
        // than a socket buffers: the writes must still complete.
        let stream = session.streams()[0].clone();
        let busy = lock(&stream.analysis);
        let writer = std::thread::spawn(move || {
            let chunk = vec![0u8; 1 << 20];
            for _ in 0..16 {
                client.write_all(&chunk).expect("write");
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        while !writer.is_finished() {
            assert!(
                Instant::now() < deadline,
                "the tool's writes stalled while the analysis held its lock"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(lock(&stream.progress).pending > 0);
        drop(busy);
        writer.join().expect("writer");
    }

    #[test]
    fn a_backlog_analysed_long_after_the_program_closed_is_waited_for_until_it_stalls() {
        let start = Instant::now();
        let stall = Duration::from_secs(60);
        let at = |s: u64| start + Duration::from_secs(s);
        let open = |last: u64, pending: usize| StreamProgress {
            closed: false,
            last_progress: at(last),
            pending,
        };
        let closed = StreamProgress {
            closed: true,
            last_progress: at(0),
            pending: 0,
        };
        // Data stopped at 0 s and the analysis still finishes a chunk every few seconds at 200 s:
        // the whole wait is far past `stall`, the wait goes on.
        assert_eq!(
            closing(&[open(197, 40), closed], start, at(200), stall),
            Closing::Waiting
        );
        assert_eq!(
            closing(&[open(100, 40), closed], start, at(200), stall),
            Closing::Stalled { pending: 40 }
        );
        assert_eq!(
            closing(&[closed, closed], start, at(500), stall),
            Closing::Done
        );
        // No stream yet: the wait counts from its own start.
        assert_eq!(closing(&[], start, at(30), stall), Closing::Waiting);
        assert_eq!(
            closing(&[], start, at(61), stall),
            Closing::Stalled { pending: 0 }
        );
    }

    #[test]
    fn an_open_stream_that_goes_silent_is_a_stall() {
        let session = BodySession::listen().expect("listen");
        let _open = TcpStream::connect(session.addr()).expect("connect");
        session
            .wait_connected(Duration::from_secs(10))
            .expect("connected");
        let err = session
            .wait_closed(Duration::from_millis(300))
            .expect_err("an open, silent stream stalls");
        assert!(err.to_string().contains("stopped"), "{err}");
    }
}
