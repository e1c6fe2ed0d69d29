//! The Pix gRPC client path against a minimal in-test `Ledger` server (the real ledger is
//! tested end to end elsewhere). The fake checks what the generator promises: population first,
//! payees addressed by existing Pix keys, fresh idempotency and Pix keys, insufficient funds as
//! FAILED_PRECONDITION.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ditto_load::{run, Arrival, LoadConfig, LoadError, PixWorkload, Workload};
use tonic::{Request, Response, Status};

#[allow(clippy::all, dead_code)]
mod pb {
    include!(concat!(env!("OUT_DIR"), "/fake_server/pix.v1.rs"));
}

use pb::ledger_server::{Ledger, LedgerServer};

#[derive(Default)]
struct State {
    balances: HashMap<u64, i64>,
    by_key: HashMap<String, u64>,
    idempotency_keys: HashSet<String>,
    duplicate_idempotency_keys: u64,
    creates: u64,
    deposits: u64,
    transfers: u64,
    /// Deposits and transfers naming account 0 (proto3: the field left out).
    zero_account_ids: u64,
}

#[derive(Clone, Default)]
struct FakeLedger {
    state: Arc<Mutex<State>>,
    refuse_creates: bool,
    /// Answer CreateAccount with account id 0, as a ditto clone answers every call with defaults.
    zero_ids: bool,
}

impl FakeLedger {
    fn note_key(state: &mut State, key: String) {
        if !state.idempotency_keys.insert(key) {
            state.duplicate_idempotency_keys += 1;
        }
    }
}

#[tonic::async_trait]
impl Ledger for FakeLedger {
    async fn create_account(
        &self,
        request: Request<pb::CreateAccountRequest>,
    ) -> Result<Response<pb::Account>, Status> {
        if self.refuse_creates {
            return Err(Status::internal("creates disabled"));
        }
        let r = request.into_inner();
        let mut s = self.state.lock().unwrap();
        Self::note_key(&mut s, r.idempotency_key);
        if s.by_key.contains_key(&r.pix_key) {
            return Err(Status::already_exists("pix key taken"));
        }
        s.creates += 1;
        let id = s.creates;
        s.balances.insert(id, 0);
        s.by_key.insert(r.pix_key.clone(), id);
        Ok(Response::new(pb::Account {
            account_id: if self.zero_ids { 0 } else { id },
            pix_key: r.pix_key,
            balance_cents: 0,
        }))
    }

    async fn deposit(
        &self,
        request: Request<pb::DepositRequest>,
    ) -> Result<Response<pb::Balance>, Status> {
        let r = request.into_inner();
        let mut s = self.state.lock().unwrap();
        Self::note_key(&mut s, r.idempotency_key);
        if r.account_id == 0 {
            s.zero_account_ids += 1;
        }
        if r.amount_cents <= 0 {
            return Err(Status::invalid_argument("amount"));
        }
        s.deposits += 1;
        let balance = s
            .balances
            .get_mut(&r.account_id)
            .ok_or_else(|| Status::not_found("account"))?;
        *balance += r.amount_cents;
        let balance_cents = *balance;
        Ok(Response::new(pb::Balance {
            account_id: r.account_id,
            balance_cents,
        }))
    }

    async fn get_balance(
        &self,
        _request: Request<pb::GetBalanceRequest>,
    ) -> Result<Response<pb::Balance>, Status> {
        Err(Status::unimplemented("not used by the load"))
    }

    async fn transfer(
        &self,
        request: Request<pb::TransferRequest>,
    ) -> Result<Response<pb::TransferReceipt>, Status> {
        let r = request.into_inner();
        let mut s = self.state.lock().unwrap();
        Self::note_key(&mut s, r.idempotency_key);
        if r.from_account_id == 0 {
            s.zero_account_ids += 1;
        }
        s.transfers += 1;
        let to = *s
            .by_key
            .get(&r.to_pix_key)
            .ok_or_else(|| Status::not_found("payee"))?;
        if to == r.from_account_id || r.amount_cents <= 0 {
            return Err(Status::invalid_argument("bad transfer"));
        }
        let from = s
            .balances
            .get_mut(&r.from_account_id)
            .ok_or_else(|| Status::not_found("payer"))?;
        if *from < r.amount_cents {
            return Err(Status::failed_precondition("insufficient funds"));
        }
        *from -= r.amount_cents;
        let from_balance_cents = *from;
        *s.balances.entry(to).or_default() += r.amount_cents;
        Ok(Response::new(pb::TransferReceipt {
            transaction_id: format!("t{}", s.transfers),
            from_balance_cents,
        }))
    }

    async fn get_transaction(
        &self,
        _request: Request<pb::GetTransactionRequest>,
    ) -> Result<Response<pb::Transaction>, Status> {
        Err(Status::unimplemented("not used by the load"))
    }
}

/// Serves `ledger` on a free loopback port from a background runtime for the rest of the test
/// process.
fn serve(ledger: FakeLedger) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            tonic::transport::Server::builder()
                .add_service(LedgerServer::new(ledger))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await
                .unwrap();
        });
    });
    addr
}

fn config(addr: SocketAddr, workload: PixWorkload) -> LoadConfig {
    let mut cfg = LoadConfig::new(addr, Workload::PixGrpc(workload), 300.0);
    cfg.connections = 2;
    cfg.arrival = Arrival::Poisson;
    cfg.warmup = Duration::from_millis(200);
    cfg.duration = Duration::from_secs(1);
    cfg
}

#[test]
fn pix_run_creates_population_then_mixes_operations() {
    let ledger = FakeLedger::default();
    let addr = serve(ledger.clone());
    let workload = PixWorkload {
        accounts: 50,
        ..PixWorkload::default()
    };
    let mut prepare_ticks = 0;
    let report = run(&config(addr, workload), &mut |p| {
        if p.phase == ditto_load::Phase::Prepare {
            prepare_ticks += 1;
        }
    })
    .unwrap();
    let summary = report.to_summary();
    let s = ledger.state.lock().unwrap();
    assert!(
        prepare_ticks >= 1,
        "final preparation progress is always reported"
    );
    assert!(s.creates > 50, "population plus run creates: {}", s.creates);
    assert!(s.deposits >= 50, "each population account gets a deposit");
    assert!(s.transfers > 100, "{summary}");
    assert_eq!(s.duplicate_idempotency_keys, 0);
    // Unknown payees or payer == payee would be errors here.
    assert_eq!(report.outcomes.errors_total, 0, "{summary}");
    assert_eq!(
        report.outcomes.ok + report.outcomes.rejected,
        report.requests_completed
    );
    assert!(
        (report.achieved_rate - 300.0).abs() / 300.0 < 0.2,
        "Poisson over 1 s: {summary}"
    );
    assert!(
        report.requests_completed as f64 >= 0.95 * report.requests_scheduled as f64,
        "{summary}"
    );
}

#[test]
fn insufficient_funds_is_rejected_not_an_error() {
    let ledger = FakeLedger::default();
    let addr = serve(ledger.clone());
    let workload = PixWorkload {
        accounts: 10,
        initial_balance_cents: 0,
        create_fraction: 0.0,
        deposit_fraction: 0.0,
        transfer_fraction: 1.0,
        ..PixWorkload::default()
    };
    let report = run(&config(addr, workload), &mut |_| {}).unwrap();
    let summary = report.to_summary();
    assert!(report.requests_completed > 100, "{summary}");
    assert_eq!(
        report.outcomes.rejected, report.requests_completed,
        "{summary}"
    );
    assert_eq!(report.outcomes.errors_total, 0, "{summary}");
}

/// Accounts a run creates open empty; drawn as payers they were refused, more often the longer the
/// run, so every window length saw a different response mix. Only the funded population pays.
#[test]
fn transfers_and_deposits_name_only_the_funded_population() {
    let ledger = FakeLedger::default();
    let addr = serve(ledger.clone());
    let workload = PixWorkload {
        accounts: 10,
        create_fraction: 0.5,
        deposit_fraction: 0.0,
        transfer_fraction: 0.5,
        ..PixWorkload::default()
    };
    let report = run(&config(addr, workload), &mut |_| {}).unwrap();
    let summary = report.to_summary();
    let s = ledger.state.lock().unwrap();
    assert!(s.creates > 100 && s.transfers > 100, "{summary}");
    assert_eq!(report.outcomes.rejected, 0, "{summary}");
    assert_eq!(report.outcomes.errors_total, 0, "{summary}");
    // Accounts 1..=10 are the population (created first, one connection at a time or in
    // parallel, but all before the run); every account a transfer paid into must be one of them.
    let funded: Vec<u64> = s
        .balances
        .iter()
        .filter(|(_, &b)| b > 0)
        .map(|(&id, _)| id)
        .collect();
    assert!(funded.iter().all(|&id| id <= 10), "paid into {funded:?}");
}

#[test]
fn failing_population_is_a_prepare_error() {
    let addr = serve(FakeLedger {
        refuse_creates: true,
        ..FakeLedger::default()
    });
    let err = run(&config(addr, PixWorkload::default()), &mut |_| {}).unwrap_err();
    assert!(matches!(err, LoadError::Prepare { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("CreateAccount") && text.contains("pix-grpc"),
        "{text}"
    );
}

#[test]
fn pix_server_absent_is_a_prepare_error_naming_the_address() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let err = run(&config(addr, PixWorkload::default()), &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
}

#[test]
fn a_server_answering_account_id_0_gets_stand_in_ids_from_1() {
    let ledger = FakeLedger {
        zero_ids: true,
        ..FakeLedger::default()
    };
    let addr = serve(ledger.clone());
    let workload = PixWorkload {
        accounts: 50,
        ..PixWorkload::default()
    };
    let report = run(&config(addr, workload), &mut |_| {}).unwrap();
    let summary = report.to_summary();
    let s = ledger.state.lock().unwrap();
    assert!(s.deposits >= 50 && s.transfers > 100, "{summary}");
    // Every deposit and transfer names a real-looking account (1..=created), never 0.
    assert_eq!(s.zero_account_ids, 0, "{summary}");
    // (The fake's own ids and the stand-ins need not agree, so a payer may be its payee here.)
    assert_eq!(report.requests_completed, report.requests_sent, "{summary}");
}
