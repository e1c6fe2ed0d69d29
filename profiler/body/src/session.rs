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

    /// Whether every stream has closed (the traced processes exited).
    pub fn all_closed(&self) -> bool {
        let s = self.streams();
        !s.is_empty() && s.iter().all(|s| lock(&s.progress).closed)
    }

    /// Waits until every stream has closed.
    pub fn wait_closed(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while !self.all_closed() {
            if Instant::now() > deadline {
                return Err(anyhow!("the traced program's streams did not close"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
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
}
