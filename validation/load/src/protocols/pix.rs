//! The Pix ledger gRPC API (`pix.v1.Ledger`).
//!
//! Each connection is one HTTP/2 connection (a tonic channel) driven by a current-thread tokio
//! runtime owned by the connection's load thread, so gRPC keeps the same model as the text
//! protocols: one OS thread, one request in flight, timing done by the runner on that thread.
//!
//! Accounts: the run first creates the population (`accounts` accounts, each with an initial
//! deposit; not measured). Deposits and transfers pick uniformly among that population only. The
//! accounts a run creates are not reused: they open with nothing in them, so transfers drawn from
//! them were refused, and as they piled up the refused share grew with the run's length (2.6 % of
//! 5,000 requests, 6.6 % of 20,000, against the Pix ledger). A refusal answers with fewer bytes
//! than a receipt, so every window length was a different response mix; with the funded population
//! alone the mix is the same in every window (docs/decisions.md, "The Pix load pays only from its
//! funded population").

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::Rng;
use tonic::transport::{Channel, Endpoint};

use crate::clock::now_ns;
use crate::config::LoadConfig;
use crate::error::LoadError;
use crate::outcome::{ErrorKind, Outcome};
use crate::protocols::{Connection, Protocol};
use crate::workload::PixWorkload;

#[allow(clippy::all, missing_docs)]
mod pb {
    tonic::include_proto!("pix.v1");
}

use pb::ledger_client::LedgerClient;

/// Per-call timeout while creating the population (at least the run's request timeout): nothing is
/// measured there, and a server under callgrind beside other work can take seconds for one call
/// (Pix baseline's clone timed out a CreateAccount at the default 2 s while two test builds ran).
const POPULATE_TIMEOUT: Duration = Duration::from_secs(10);

/// Most threads used to create the population.
const POPULATION_THREADS: usize = 8;
/// Bits of a key's sequence number; the connection generation takes the bits above.
const SEQ_BITS: u32 = 40;

/// An account the load may use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PixAccount {
    pub id: u64,
    pub pix_key: String,
}

/// The Pix workload with its population.
pub struct PixProtocol {
    workload: PixWorkload,
    population: Arc<Vec<PixAccount>>,
    run_id: u64,
    /// Every connection, including population workers and reconnections, takes a distinct
    /// generation number so that its keys never repeat another's.
    generations: AtomicU64,
    /// Account ids handed out when a server answers CreateAccount with id 0 (see
    /// `PixConnection::create_account`), shared by every connection as a ledger's counter is.
    stand_in_ids: Arc<AtomicU64>,
}

impl PixProtocol {
    /// Creates the account population on the server at `cfg.addr` (unmeasured). `progress`
    /// receives `(accounts created, accounts wanted)` about once a second.
    pub fn prepare(
        cfg: &LoadConfig,
        workload: &PixWorkload,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<PixProtocol, LoadError> {
        let mut protocol = PixProtocol {
            workload: workload.clone(),
            population: Arc::new(Vec::new()),
            run_id: fresh_run_id(),
            generations: AtomicU64::new(0),
            stand_in_ids: Arc::new(AtomicU64::new(0)),
        };
        let population = protocol.create_population(cfg, progress)?;
        protocol.population = Arc::new(population);
        Ok(protocol)
    }

    fn create_population(
        &self,
        cfg: &LoadConfig,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Vec<PixAccount>, LoadError> {
        let wanted = self.workload.accounts;
        let workers = (POPULATION_THREADS.min(cfg.connections) as u64).clamp(1, wanted);
        let created = AtomicU64::new(0);
        let fail = |reason: String| LoadError::Prepare {
            addr: cfg.addr,
            protocol: "pix-grpc",
            reason,
        };
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|w| {
                    let count = wanted / workers + u64::from(w < wanted % workers);
                    let created = &created;
                    std::thread::Builder::new()
                        .name(format!("pix-populate-{w}"))
                        .spawn_scoped(scope, move || {
                            self.populate_share(
                                cfg.addr,
                                cfg.request_timeout.max(POPULATE_TIMEOUT),
                                count,
                                created,
                            )
                        })
                        .map_err(LoadError::Thread)
                })
                .collect();
            let mut last_report = now_ns();
            while handles
                .iter()
                .any(|h| h.as_ref().is_ok_and(|h| !h.is_finished()))
            {
                std::thread::sleep(Duration::from_millis(20));
                if now_ns() - last_report >= 1_000_000_000 {
                    last_report = now_ns();
                    progress(created.load(Ordering::Relaxed), wanted);
                }
            }
            let mut accounts = Vec::with_capacity(wanted as usize);
            for handle in handles {
                let share = handle?
                    .join()
                    .map_err(|_| fail("a population thread panicked".into()))?
                    .map_err(fail)?;
                accounts.extend(share);
            }
            progress(accounts.len() as u64, wanted);
            Ok(accounts)
        })
    }

    /// Creates `count` accounts, each followed by its initial deposit, over one connection.
    fn populate_share(
        &self,
        addr: SocketAddr,
        timeout: Duration,
        count: u64,
        created: &AtomicU64,
    ) -> Result<Vec<PixAccount>, String> {
        let mut conn = self.open(addr, timeout)?;
        let mut accounts = Vec::with_capacity(count as usize);
        let timeout_ns = crate::clock::duration_ns(timeout);
        for _ in 0..count {
            let account = conn
                .create_account(now_ns().saturating_add(timeout_ns))
                .map_err(|e| format!("CreateAccount failed: {e}"))?;
            if self.workload.initial_balance_cents > 0 {
                conn.deposit(
                    account.id,
                    self.workload.initial_balance_cents,
                    now_ns().saturating_add(timeout_ns),
                )
                .map_err(|e| format!("initial Deposit to account {} failed: {e}", account.id))?;
            }
            accounts.push(account);
            created.fetch_add(1, Ordering::Relaxed);
        }
        Ok(accounts)
    }

    fn open(&self, addr: SocketAddr, timeout: Duration) -> Result<PixConnection, String> {
        let generation = self.generations.fetch_add(1, Ordering::Relaxed);
        PixConnection::connect(
            addr,
            timeout,
            self.workload.clone(),
            self.population.clone(),
            KeyMaker::new(self.run_id, generation),
            self.stand_in_ids.clone(),
        )
    }

    /// The population created by [`PixProtocol::prepare`].
    pub fn population(&self) -> &[PixAccount] {
        &self.population
    }
}

impl Protocol for PixProtocol {
    fn name(&self) -> &'static str {
        "pix-grpc"
    }

    fn connect(
        &self,
        addr: SocketAddr,
        timeout: Duration,
        _index: usize,
    ) -> Result<Box<dyn Connection>, String> {
        Ok(Box::new(self.open(addr, timeout)?))
    }
}

/// Unique Pix keys and idempotency keys for one connection.
#[derive(Debug)]
pub struct KeyMaker {
    run_id: u64,
    generation: u64,
    seq: u64,
}

impl KeyMaker {
    pub fn new(run_id: u64, generation: u64) -> KeyMaker {
        KeyMaker {
            run_id,
            generation,
            seq: 0,
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// A fresh idempotency key: run, connection generation and sequence number.
    pub fn idempotency_key(&mut self) -> String {
        let seq = self.next_seq();
        format!("{:016x}-{:x}-{seq:x}", self.run_id, self.generation)
    }

    /// A fresh Pix key shaped as a random ("EVP") key, i.e. a version-4 UUID: the run id fills
    /// the first half, generation and sequence number the second, so keys differ across runs
    /// (random run id) and never repeat within one.
    pub fn pix_key(&mut self) -> String {
        let seq = self.next_seq();
        let hi = (self.run_id & !0xf000) | 0x4000;
        let lo = (0b10 << 62)
            | ((self.generation & ((1 << (62 - SEQ_BITS)) - 1)) << SEQ_BITS)
            | (seq & ((1 << SEQ_BITS) - 1));
        format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            hi >> 32,
            (hi >> 16) & 0xffff,
            hi & 0xffff,
            lo >> 48,
            lo & 0xffff_ffff_ffff
        )
    }
}

/// A run id that differs between runs and processes (not derived from the seed, which users
/// repeat on purpose).
fn fresh_run_id() -> u64 {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    splitmix64(wall ^ (u64::from(std::process::id()) << 32) ^ now_ns())
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Why one call failed.
#[derive(Debug)]
enum CallError {
    Timeout,
    Status(tonic::Status),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Timeout => f.write_str("timed out"),
            CallError::Status(s) => write!(f, "{}: {}", s.code(), s.message()),
        }
    }
}

/// One HTTP/2 connection to the ledger.
pub struct PixConnection {
    rt: tokio::runtime::Runtime,
    client: LedgerClient<Channel>,
    workload: PixWorkload,
    population: Arc<Vec<PixAccount>>,
    keys: KeyMaker,
    stand_in_ids: Arc<AtomicU64>,
    open: bool,
}

impl PixConnection {
    fn connect(
        addr: SocketAddr,
        timeout: Duration,
        workload: PixWorkload,
        population: Arc<Vec<PixAccount>>,
        keys: KeyMaker,
        stand_in_ids: Arc<AtomicU64>,
    ) -> Result<PixConnection, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a tokio runtime: {e}"))?;
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| e.to_string())?
            .connect_timeout(timeout)
            .tcp_nodelay(true);
        let channel = rt
            .block_on(endpoint.connect())
            .map_err(|e| error_chain(&e))?;
        Ok(PixConnection {
            rt,
            client: LedgerClient::new(channel),
            workload,
            population,
            keys,
            stand_in_ids,
            open: true,
        })
    }

    /// Runs one call to completion on this thread, bounded by `deadline_ns`.
    fn call<T, F>(
        &mut self,
        deadline_ns: u64,
        f: impl FnOnce(LedgerClient<Channel>) -> F,
    ) -> Result<T, CallError>
    where
        F: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let remaining = Duration::from_nanos(deadline_ns.saturating_sub(now_ns()));
        // Cloning a channel handle is cheap and lets the future own its client.
        let fut = f(self.client.clone());
        // The timer must be created inside the runtime, hence the async block.
        match self
            .rt
            .block_on(async move { tokio::time::timeout(remaining, fut).await })
        {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(status)) => Err(CallError::Status(status)),
            Err(_) => Err(CallError::Timeout),
        }
    }

    fn create_account(&mut self, deadline_ns: u64) -> Result<PixAccount, CallError> {
        let pix_key = self.keys.pix_key();
        let request = pb::CreateAccountRequest {
            owner_name: format!("ditto load {pix_key}"),
            pix_key: pix_key.clone(),
            idempotency_key: self.keys.idempotency_key(),
        };
        let account = self.call(deadline_ns, |mut c| async move {
            c.create_account(request).await
        })?;
        Ok(PixAccount {
            // The ledger numbers accounts from 1. A server answering 0 (a ditto clone answers
            // every call with the response type's defaults) gets ids from a shared counter, as the
            // ledger would have given: with id 0, proto3 leaves the field out of every later
            // deposit and transfer, and requests came out 3 bytes short.
            id: if account.account_id == 0 {
                self.stand_in_ids.fetch_add(1, Ordering::Relaxed) + 1
            } else {
                account.account_id
            },
            // Trust our key if the server leaves the field empty.
            pix_key: if account.pix_key.is_empty() {
                pix_key
            } else {
                account.pix_key
            },
        })
    }

    fn deposit(&mut self, account_id: u64, amount: i64, deadline_ns: u64) -> Result<(), CallError> {
        let request = pb::DepositRequest {
            account_id,
            amount_cents: amount,
            idempotency_key: self.keys.idempotency_key(),
        };
        self.call(deadline_ns, |mut c| async move { c.deposit(request).await })
            .map(drop)
    }

    fn transfer(
        &mut self,
        from: u64,
        to_pix_key: String,
        amount: i64,
        deadline_ns: u64,
    ) -> Result<(), CallError> {
        let request = pb::TransferRequest {
            from_account_id: from,
            to_pix_key,
            amount_cents: amount,
            idempotency_key: self.keys.idempotency_key(),
        };
        self.call(
            deadline_ns,
            |mut c| async move { c.transfer(request).await },
        )
        .map(drop)
    }

    fn outcome(&mut self, result: Result<(), CallError>) -> Outcome {
        match result {
            Ok(()) => Outcome::Ok,
            Err(CallError::Timeout) => Outcome::Error(ErrorKind::Timeout),
            Err(CallError::Status(status)) => {
                if status.code() == tonic::Code::FailedPrecondition {
                    return Outcome::Rejected;
                }
                // A status built locally from a transport failure carries its cause; one sent by
                // the server does not.
                if std::error::Error::source(&status).is_some() {
                    self.open = false;
                    return Outcome::Error(ErrorKind::Disconnected);
                }
                Outcome::Error(ErrorKind::Grpc(status.code() as i32))
            }
        }
    }
}

impl Connection for PixConnection {
    fn request(&mut self, rng: &mut SmallRng, deadline_ns: u64) -> Outcome {
        let (create, deposit) = (
            self.workload.create_fraction,
            self.workload.deposit_fraction,
        );
        let op: f64 = rng.gen();
        let amount = rng.gen_range(1..=self.workload.max_amount_cents);
        let n = self.population.len();
        if op < create || n < 2 {
            let result = self.create_account(deadline_ns).map(drop);
            self.outcome(result)
        } else if op < create + deposit {
            let id = self.population[rng.gen_range(0..n)].id;
            let result = self.deposit(id, amount, deadline_ns);
            self.outcome(result)
        } else {
            let from = rng.gen_range(0..n);
            // A different payee: draw from the other n-1 accounts.
            let mut to = rng.gen_range(0..n - 1);
            if to >= from {
                to += 1;
            }
            let from_id = self.population[from].id;
            let to_key = self.population[to].pix_key.clone();
            let result = self.transfer(from_id, to_key, amount, deadline_ns);
            self.outcome(result)
        }
    }

    fn is_open(&self) -> bool {
        self.open
    }
}

/// An error and its causes on one line (tonic's top-level message alone is just "transport error").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pix_keys_are_uuid_shaped_and_unique() {
        let mut a = KeyMaker::new(0x0123_4567_89ab_cdef, 0);
        let mut b = KeyMaker::new(0x0123_4567_89ab_cdef, 1);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            for k in [a.pix_key(), b.pix_key()] {
                assert_eq!(k.len(), 36, "{k}");
                let groups: Vec<&str> = k.split('-').collect();
                assert_eq!(
                    groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
                    [8, 4, 4, 4, 12]
                );
                assert!(groups[2].starts_with('4'), "version nibble: {k}");
                assert!(
                    matches!(groups[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'),
                    "variant: {k}"
                );
                assert!(seen.insert(k));
            }
        }
    }

    #[test]
    fn pix_keys_differ_between_runs() {
        let k1 = KeyMaker::new(fresh_run_id(), 0).pix_key();
        std::thread::sleep(Duration::from_millis(1));
        let k2 = KeyMaker::new(fresh_run_id(), 0).pix_key();
        assert_ne!(k1, k2);
    }

    #[test]
    fn idempotency_keys_are_fresh_per_request() {
        let mut k = KeyMaker::new(7, 3);
        let a = k.idempotency_key();
        let b = k.idempotency_key();
        assert_ne!(a, b);
        assert!(a.starts_with("0000000000000007-3-"), "{a}");
    }
}
