//! End to end over real gRPC: the server in-process on an ephemeral loopback port, and the built
//! binary as a child process (ready line, signals, flag and bind errors). Both variants.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use pix_ledger::proto::ledger_client::LedgerClient;
use pix_ledger::proto::{
    CreateAccountRequest, DepositRequest, GetBalanceRequest, GetTransactionRequest, TransferRequest,
};
use pix_ledger::Variant;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;
use tonic::Code;

macro_rules! for_both_variants {
    ($($name:ident),* $(,)?) => {
        mod baseline {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
               async fn $name() { super::$name(pix_ledger::Variant::Baseline).await } )*
        }
        mod optimized {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
               async fn $name() { super::$name(pix_ledger::Variant::Optimized).await } )*
        }
    };
}

for_both_variants!(
    every_rpc_works_over_grpc,
    concurrent_grpc_transfers_conserve_money,
    binary_serves_until_sigterm_and_exits_cleanly,
);

/// A server running in this process; dropping the sender side stops it.
struct InProcess {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), tonic::transport::Error>>,
}

async fn start(variant: Variant) -> InProcess {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(pix_ledger::serve(variant, listener, async {
        let _ = stopped.await;
    }));
    InProcess { addr, stop, task }
}

impl InProcess {
    async fn shutdown(self) {
        self.stop.send(()).expect("server still running");
        let result = tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("graceful shutdown within 10 s")
            .expect("server task did not panic");
        result.expect("server ended without error");
    }
}

async fn connect(addr: SocketAddr) -> LedgerClient<Channel> {
    LedgerClient::connect(format!("http://{addr}"))
        .await
        .expect("connect")
}

fn create(pix_key: &str, idempotency_key: &str) -> CreateAccountRequest {
    CreateAccountRequest {
        owner_name: format!("owner of {pix_key}"),
        pix_key: pix_key.into(),
        idempotency_key: idempotency_key.into(),
    }
}

fn deposit(account_id: u64, amount_cents: i64, idempotency_key: &str) -> DepositRequest {
    DepositRequest {
        account_id,
        amount_cents,
        idempotency_key: idempotency_key.into(),
    }
}

fn transfer(
    from_account_id: u64,
    to_pix_key: &str,
    amount_cents: i64,
    idempotency_key: &str,
) -> TransferRequest {
    TransferRequest {
        from_account_id,
        to_pix_key: to_pix_key.into(),
        amount_cents,
        idempotency_key: idempotency_key.into(),
    }
}

/// The status code of a call that must fail.
fn code<T: std::fmt::Debug>(result: Result<tonic::Response<T>, tonic::Status>) -> Code {
    result.expect_err("the call must fail").code()
}

async fn every_rpc_works_over_grpc(variant: Variant) {
    let server = start(variant).await;
    let mut client = connect(server.addr).await;

    // CreateAccount: idempotent, and key rules enforced.
    let alice = client
        .create_account(create("alice@pix", "open-alice"))
        .await
        .expect("create")
        .into_inner();
    assert_eq!(
        (alice.pix_key.as_str(), alice.balance_cents),
        ("alice@pix", 0)
    );
    let again = client
        .create_account(create("alice@pix", "open-alice"))
        .await
        .expect("replay")
        .into_inner();
    assert_eq!(again, alice);
    let bob = client
        .create_account(create("bob@pix", ""))
        .await
        .expect("create")
        .into_inner();
    assert_ne!(bob.account_id, alice.account_id);
    assert_eq!(
        code(client.create_account(create("alice@pix", "other")).await),
        Code::AlreadyExists
    );
    assert_eq!(
        code(client.create_account(create("", "")).await),
        Code::InvalidArgument
    );

    // Deposit and GetBalance.
    let balance = client
        .deposit(deposit(alice.account_id, 10_000, "dep-1"))
        .await
        .expect("deposit")
        .into_inner();
    assert_eq!(
        (balance.account_id, balance.balance_cents),
        (alice.account_id, 10_000)
    );
    let replay = client
        .deposit(deposit(alice.account_id, 10_000, "dep-1"))
        .await
        .expect("replay")
        .into_inner();
    assert_eq!(replay, balance);
    let read = |id| GetBalanceRequest { account_id: id };
    assert_eq!(
        client
            .get_balance(read(alice.account_id))
            .await
            .expect("balance")
            .into_inner()
            .balance_cents,
        10_000
    );
    assert_eq!(
        code(client.deposit(deposit(alice.account_id, 0, "")).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(client.deposit(deposit(alice.account_id, -3, "")).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(client.deposit(deposit(424_242, 1, "")).await),
        Code::NotFound
    );
    assert_eq!(
        code(client.get_balance(read(424_242)).await),
        Code::NotFound
    );

    // Transfer: idempotent, atomic, refusals with their codes.
    let receipt = client
        .transfer(transfer(alice.account_id, "bob@pix", 2_500, "tx-1"))
        .await
        .expect("transfer");
    let receipt = receipt.into_inner();
    assert_eq!(receipt.from_balance_cents, 7_500);
    let replay = client
        .transfer(transfer(alice.account_id, "bob@pix", 2_500, "tx-1"))
        .await
        .expect("replay");
    assert_eq!(replay.into_inner(), receipt);
    assert_eq!(
        code(
            client
                .transfer(transfer(alice.account_id, "bob@pix", 7_501, ""))
                .await
        ),
        Code::FailedPrecondition
    );
    assert_eq!(
        code(
            client
                .transfer(transfer(alice.account_id, "alice@pix", 1, ""))
                .await
        ),
        Code::InvalidArgument
    );
    assert_eq!(
        code(client.transfer(transfer(alice.account_id, "", 1, "")).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            client
                .transfer(transfer(alice.account_id, "bob@pix", -1, ""))
                .await
        ),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            client
                .transfer(transfer(alice.account_id, "carol@pix", 1, ""))
                .await
        ),
        Code::NotFound
    );
    assert_eq!(
        code(client.transfer(transfer(424_242, "bob@pix", 1, "")).await),
        Code::NotFound
    );
    assert_eq!(
        client
            .get_balance(read(alice.account_id))
            .await
            .expect("balance")
            .into_inner()
            .balance_cents,
        7_500
    );
    assert_eq!(
        client
            .get_balance(read(bob.account_id))
            .await
            .expect("balance")
            .into_inner()
            .balance_cents,
        2_500
    );

    // GetTransaction.
    let lookup = |id: &str| GetTransactionRequest {
        transaction_id: id.into(),
    };
    let record = client
        .get_transaction(lookup(&receipt.transaction_id))
        .await
        .expect("record")
        .into_inner();
    assert_eq!(record.transaction_id, receipt.transaction_id);
    assert_eq!(
        (
            record.from_account_id,
            record.to_account_id,
            record.amount_cents
        ),
        (alice.account_id, bob.account_id, 2_500)
    );
    assert!(
        record.applied_at_unix_nanos > 1_600_000_000_000_000_000,
        "{record:?}"
    );
    assert_eq!(
        code(client.get_transaction(lookup("no-such-transaction")).await),
        Code::NotFound
    );
    assert_eq!(
        code(client.get_transaction(lookup("")).await),
        Code::InvalidArgument
    );

    // Shut down with the client still connected: graceful shutdown must not wait on it forever.
    server.shutdown().await;
    drop(client);
}

async fn concurrent_grpc_transfers_conserve_money(variant: Variant) {
    const ACCOUNTS: u64 = 10;
    let server = start(variant).await;
    let mut client = connect(server.addr).await;
    let mut ids = Vec::new();
    for i in 0..ACCOUNTS {
        let account = client
            .create_account(create(&format!("k{i}"), ""))
            .await
            .expect("create")
            .into_inner();
        client
            .deposit(deposit(account.account_id, 1_000, ""))
            .await
            .expect("deposit");
        ids.push(account.account_id);
    }
    let tasks: Vec<_> = (0..8u64)
        .map(|t| {
            // Clones share one HTTP/2 connection; requests still run concurrently on the server.
            let (mut client, ids) = (client.clone(), ids.clone());
            tokio::spawn(async move {
                let mut ok = 0;
                for n in 0..50u64 {
                    let from = ((t * 7 + n * 3) % ACCOUNTS) as usize;
                    let to = (from + 1 + (n % (ACCOUNTS - 1)) as usize) % ACCOUNTS as usize;
                    let amount = 100 + ((t + n) % 7) as i64 * 150;
                    match client
                        .transfer(transfer(ids[from], &format!("k{to}"), amount, ""))
                        .await
                    {
                        Ok(_) => ok += 1,
                        Err(status) => {
                            assert_eq!(status.code(), Code::FailedPrecondition, "{status}")
                        }
                    }
                }
                ok
            })
        })
        .collect();
    let mut applied = 0;
    for task in tasks {
        applied += task.await.expect("task");
    }
    assert!(applied > 0);
    let mut total = 0;
    for &id in &ids {
        let balance = client
            .get_balance(GetBalanceRequest { account_id: id })
            .await
            .expect("balance");
        let cents = balance.into_inner().balance_cents;
        assert!(cents >= 0);
        total += cents;
    }
    assert_eq!(total, 1_000 * ACCOUNTS as i64);
    server.shutdown().await;
}

/// The built binary, killed if a test leaves it running.
struct ServerProcess(Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl ServerProcess {
    /// Starts the binary on an ephemeral port and waits for its ready line.
    fn start(variant: Variant) -> (Self, SocketAddr) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_pix-ledger"))
            .args([
                "--variant",
                variant.as_str(),
                "--listen",
                "127.0.0.1:0",
                "--worker-threads",
                "2",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pix-ledger");
        let stderr = child.stderr.take().expect("stderr is piped");
        let process = ServerProcess(child);
        let mut line = String::new();
        BufReader::new(stderr)
            .read_line(&mut line)
            .expect("read ready line");
        let rest = line
            .trim_end()
            .strip_prefix("pix-ledger listening on ")
            .unwrap_or_else(|| panic!("unexpected ready line {line:?}"));
        let (addr, shown) = rest
            .split_once(' ')
            .unwrap_or_else(|| panic!("unexpected ready line {line:?}"));
        assert_eq!(shown, format!("variant={variant}"));
        (process, addr.parse().expect("address in ready line"))
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([format!("-{name}"), self.0.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} failed");
    }

    fn wait_within(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.0.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "process still running after {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

async fn binary_serves_until_sigterm_and_exits_cleanly(variant: Variant) {
    let (mut process, addr) = ServerProcess::start(variant);
    let mut client = connect(addr).await;
    let account = client
        .create_account(create("proc@pix", ""))
        .await
        .expect("create")
        .into_inner();
    let balance = client
        .get_balance(GetBalanceRequest {
            account_id: account.account_id,
        })
        .await
        .expect("balance");
    assert_eq!(balance.into_inner().balance_cents, 0);
    process.signal("TERM");
    assert!(
        process.wait_within(Duration::from_secs(10)).success(),
        "SIGTERM must exit 0"
    );
}

#[test]
fn binary_exits_cleanly_on_sigint() {
    let (mut process, _addr) = ServerProcess::start(Variant::Optimized);
    process.signal("INT");
    assert!(
        process.wait_within(Duration::from_secs(10)).success(),
        "SIGINT must exit 0"
    );
}

/// Runs the binary expecting it to refuse to start; returns its stderr.
fn refused_start(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_pix-ledger"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run pix-ledger");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "{args:?} should fail");
    assert_eq!(
        stderr.lines().count(),
        1,
        "{args:?} should print one line, got {stderr:?}"
    );
    assert!(stderr.starts_with("error: "), "{stderr:?}");
    assert!(!stderr.contains("panicked"), "{stderr:?}");
    stderr
}

#[test]
fn binary_rejects_bad_flags_with_one_line_error() {
    assert!(refused_start(&["--variant", "fastest"]).contains("fastest"));
    assert!(refused_start(&[]).contains("--variant"));
    assert!(
        refused_start(&["--variant", "optimized", "--listen", "not-an-address"])
            .contains("--listen")
    );
    assert!(
        refused_start(&["--variant", "baseline", "--worker-threads", "0"])
            .contains("--worker-threads")
    );
    assert!(refused_start(&["--variant", "baseline", "--bogus"]).contains("--bogus"));
}

#[test]
fn binary_reports_a_port_in_use() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("local addr").to_string();
    let stderr = refused_start(&["--variant", "optimized", "--listen", &addr]);
    assert!(
        stderr.contains(&format!("cannot listen on {addr}")),
        "{stderr:?}"
    );
}
