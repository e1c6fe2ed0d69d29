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

struct StreamState {
    analysis: ProcessAnalysis,
    last_data: Instant,
    closed: bool,
    error: Option<String>,
}

struct Shared {
    streams: Mutex<Vec<Arc<Mutex<StreamState>>>>,
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

    fn streams(&self) -> Vec<Arc<Mutex<StreamState>>> {
        lock(&self.shared.streams).clone()
    }

    /// Number of processes that connected so far.
    pub fn processes(&self) -> usize {
        lock(&self.shared.streams).len()
    }

    /// Words received over all streams.
    pub fn words(&self) -> u64 {
        self.streams().iter().map(|s| lock(s).analysis.words).sum()
    }

    /// First analysis error of any stream (a malformed stream stops only that stream).
    pub fn error(&self) -> Option<String> {
        self.streams().iter().find_map(|s| lock(s).error.clone())
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

    /// Waits until no stream has delivered data for `quiet`. The tool flushes before every system call,
    /// so a server blocked in `epoll_wait` on every thread has delivered everything it did.
    pub fn wait_quiet(&self, quiet: Duration, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let newest = self
                .streams()
                .iter()
                .map(|s| lock(s).last_data)
                .max()
                .unwrap_or_else(Instant::now);
            if newest.elapsed() >= quiet {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the traced program kept running for {} s after the load stopped; \
                     its trace never went quiet",
                    timeout.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts the measurement window on every stream.
    pub fn reset_counts(&self) {
        for s in self.streams() {
            lock(&s).analysis.reset_counts();
        }
    }

    /// The window's counts of every process.
    pub fn snapshot(&self) -> Vec<ProcessCounts> {
        self.streams()
            .iter()
            .map(|s| lock(s).analysis.snapshot())
            .collect()
    }

    /// Whether every stream has closed (the traced processes exited).
    pub fn all_closed(&self) -> bool {
        let s = self.streams();
        !s.is_empty() && s.iter().all(|s| lock(s).closed)
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
                let state = Arc::new(Mutex::new(StreamState {
                    analysis: ProcessAnalysis::new(&shared.table),
                    last_data: Instant::now(),
                    closed: false,
                    error: None,
                }));
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

fn read_loop(mut stream: TcpStream, state: Arc<Mutex<StreamState>>) {
    let _ = stream.set_nonblocking(false);
    let mut buf = vec![0u8; READ_CHUNK];
    let mut filled = 0usize;
    let mut words: Vec<u64> = Vec::with_capacity(READ_CHUNK / 8);
    loop {
        let n = match stream.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                lock(&state).error = Some(format!("body trace stream: {e}"));
                break;
            }
        };
        filled += n;
        let whole = filled / 8 * 8;
        words.clear();
        words.extend(
            buf[..whole]
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])),
        );
        buf.copy_within(whole..filled, 0);
        filled -= whole;
        let mut st = lock(&state);
        st.last_data = Instant::now();
        if st.error.is_none() {
            if let Err(e) = st.analysis.feed(&words) {
                st.error = Some(format!("{e:#}"));
            }
        }
    }
    let mut st = lock(&state);
    st.closed = true;
    st.last_data = Instant::now();
}
