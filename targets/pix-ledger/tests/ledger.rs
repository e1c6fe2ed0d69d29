//! Ledger rules, checked against both variants through the `LedgerBackend` trait (no gRPC).
//!
//! Every check runs once per variant: `baseline::NAME` and `optimized::NAME`.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use pix_ledger::model::{AccountId, Deposit, OpenAccount, TransactionId, Transfer};
use pix_ledger::{new_backend, LedgerBackend, LedgerError, Variant};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

macro_rules! for_both_variants {
    ($($name:ident),* $(,)?) => {
        mod baseline {
            $( #[test] fn $name() { super::$name(pix_ledger::Variant::Baseline) } )*
        }
        mod optimized {
            $( #[test] fn $name() { super::$name(pix_ledger::Variant::Optimized) } )*
        }
    };
}

for_both_variants!(
    total_balance_is_conserved_under_concurrent_random_transfers,
    opposite_transfers_between_two_accounts_do_not_deadlock,
    refused_transfers_and_deposits_change_nothing,
    bad_input_gets_specific_errors,
    invalid_requests_do_not_consume_their_idempotency_key,
    open_account_repeated_sequentially_opens_one_account,
    open_account_duplicates_arriving_concurrently_open_one_account,
    concurrent_opens_of_one_pix_key_register_it_once,
    deposit_repeated_sequentially_is_applied_once,
    deposit_duplicates_arriving_concurrently_are_applied_once,
    requests_without_idempotency_key_all_take_effect,
    transfer_repeated_sequentially_moves_money_once,
    transfer_duplicates_arriving_concurrently_move_money_once,
    a_refused_transfer_is_replayed_as_refused,
    transaction_record_describes_the_transfer,
);

fn open(ledger: &dyn LedgerBackend, pix_key: &str) -> AccountId {
    ledger
        .open_account(OpenAccount {
            owner_name: format!("owner of {pix_key}"),
            pix_key: pix_key.to_owned(),
            idempotency_key: String::new(),
        })
        .expect("open account")
        .account_id
}

fn deposit(ledger: &dyn LedgerBackend, account_id: AccountId, amount_cents: i64, key: &str) -> i64 {
    ledger
        .deposit(Deposit {
            account_id,
            amount_cents,
            idempotency_key: key.to_owned(),
        })
        .expect("deposit")
        .balance_cents
}

fn transfer(
    ledger: &dyn LedgerBackend,
    from_account_id: AccountId,
    to_pix_key: &str,
    amount_cents: i64,
    key: &str,
) -> Result<pix_ledger::model::TransferReceipt, LedgerError> {
    ledger.transfer(Transfer {
        from_account_id,
        to_pix_key: to_pix_key.to_owned(),
        amount_cents,
        idempotency_key: key.to_owned(),
    })
}

fn balance(ledger: &dyn LedgerBackend, account_id: AccountId) -> i64 {
    ledger.balance(account_id).expect("balance").balance_cents
}

fn history_len(ledger: &dyn LedgerBackend, account_id: AccountId) -> usize {
    ledger
        .statement(account_id)
        .expect("statement")
        .transfer_ids
        .len()
}

/// Runs `work` on `threads` threads released together by a barrier; returns their results.
fn run_together<T: Send + 'static>(
    threads: usize,
    work: impl Fn(usize) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let barrier = Arc::new(Barrier::new(threads));
    let work = Arc::new(work);
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (barrier, work) = (Arc::clone(&barrier), Arc::clone(&work));
            thread::spawn(move || {
                barrier.wait();
                work(i)
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("worker panicked"))
        .collect()
}

/// Like [`run_together`], but fails instead of hanging if the workers do not finish in time.
fn run_together_within<T: Send + 'static>(
    limit: Duration,
    threads: usize,
    work: impl Fn(usize) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let (done, finished) = mpsc::channel();
    thread::spawn(move || {
        // The receiver is gone only if we already timed out.
        let _ = done.send(run_together(threads, work));
    });
    match finished.recv_timeout(limit) {
        Ok(results) => results,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("workers did not finish within {limit:?}: deadlock?")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("a worker panicked (see above)"),
    }
}

/// Duplicate races are caught by chance, so each duplicate test races over many keys, with the
/// racers released together again (by a [`SpinBarrier`]) for every key.
const RACE_KEYS: usize = 1_000;
const RACERS: usize = 4;

/// A reusable barrier that busy-waits, so the racers that are on a CPU leave it within
/// nanoseconds of each other (a sleeping barrier wakes them one by one, microseconds apart,
/// which lets most races slip by).
struct SpinBarrier {
    parties: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
}

impl SpinBarrier {
    fn new(parties: usize) -> Self {
        Self {
            parties,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
        }
    }

    fn wait(&self) {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.parties {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
        } else {
            // Mostly spin, so release is seen at once; yield now and then, as there may be more
            // runnable threads than CPUs.
            let mut spins = 0u32;
            while self.generation.load(Ordering::Acquire) == generation {
                spins = spins.wrapping_add(1);
                if spins % 256 == 0 {
                    thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
    }
}

/// A successful transfer as the client saw it.
struct Applied {
    transaction_id: String,
    from: usize,
    to: usize,
    amount: i64,
}

fn total_balance_is_conserved_under_concurrent_random_transfers(variant: Variant) {
    const ACCOUNTS: usize = 50;
    const THREADS: usize = 8;
    const TRANSFERS_PER_THREAD: usize = 1_500;

    let ledger = new_backend(variant);
    let ids: Vec<AccountId> = (0..ACCOUNTS)
        .map(|i| open(&*ledger, &format!("key-{i}")))
        .collect();
    let mut rng = StdRng::seed_from_u64(7);
    let deposits: Vec<i64> = (0..ACCOUNTS).map(|_| rng.gen_range(0..=5_000)).collect();
    for (&id, &amount) in ids.iter().zip(&deposits) {
        if amount > 0 {
            deposit(&*ledger, id, amount, "");
        }
    }

    let shared = (Arc::clone(&ledger), Arc::new(ids.clone()));
    let per_thread = run_together_within(Duration::from_secs(60), THREADS, move |t| {
        let (ledger, ids) = &shared;
        let mut rng = StdRng::seed_from_u64(1_000 + t as u64);
        let (mut applied, mut refused, mut self_transfers) = (Vec::new(), 0usize, 0usize);
        for n in 0..TRANSFERS_PER_THREAD {
            let from = rng.gen_range(0..ACCOUNTS);
            // About 1 in 50 picks the payer as payee, which must be refused.
            let to = if rng.gen_ratio(1, 50) {
                from
            } else {
                rng.gen_range(0..ACCOUNTS)
            };
            let amount = rng.gen_range(1..=4_000);
            // Half the transfers carry a (unique) idempotency key, half none.
            let key = if n % 2 == 0 {
                format!("t{t}-{n}")
            } else {
                String::new()
            };
            match transfer(&**ledger, ids[from], &format!("key-{to}"), amount, &key) {
                Ok(receipt) => {
                    assert!(
                        receipt.from_balance_cents >= 0,
                        "negative balance in {receipt:?}"
                    );
                    applied.push(Applied {
                        transaction_id: receipt.transaction_id,
                        from,
                        to,
                        amount,
                    });
                }
                Err(LedgerError::InsufficientFunds { .. }) => refused += 1,
                Err(LedgerError::SelfTransfer(_)) if from == to => self_transfers += 1,
                Err(other) => panic!("unexpected error {other:?} for {from} -> {to}"),
            }
        }
        (applied, refused, self_transfers)
    });

    let mut expected: Vec<i64> = deposits.clone();
    let mut touching: Vec<HashSet<String>> = vec![HashSet::new(); ACCOUNTS];
    let mut all_ids = HashSet::new();
    let (mut applied_count, mut refused, mut self_transfers) = (0, 0, 0);
    for (applied, r, s) in &per_thread {
        refused += r;
        self_transfers += s;
        for a in applied {
            applied_count += 1;
            assert_ne!(a.from, a.to, "a self-transfer succeeded");
            expected[a.from] -= a.amount;
            expected[a.to] += a.amount;
            touching[a.from].insert(a.transaction_id.clone());
            touching[a.to].insert(a.transaction_id.clone());
            assert!(
                all_ids.insert(a.transaction_id.clone()),
                "duplicate id {}",
                a.transaction_id
            );
            let record = ledger
                .transaction(&a.transaction_id)
                .expect("record of an applied transfer");
            assert_eq!(
                (
                    record.from_account_id,
                    record.to_account_id,
                    record.amount_cents
                ),
                (ids[a.from], ids[a.to], a.amount)
            );
        }
    }
    // The workload must exercise both outcomes, or it proves little.
    assert!(
        applied_count > 1_000,
        "only {applied_count} transfers succeeded"
    );
    assert!(
        refused > 1_000,
        "only {refused} transfers were refused for insufficient funds"
    );
    assert!(self_transfers > 0, "no self-transfer was attempted");

    let mut total = 0;
    for (i, &id) in ids.iter().enumerate() {
        let statement = ledger.statement(id).expect("statement");
        assert!(statement.balance_cents >= 0, "account {i} is negative");
        assert_eq!(
            statement.balance_cents, expected[i],
            "balance of account {i}"
        );
        assert_eq!(balance(&*ledger, id), expected[i]);
        assert_eq!(
            statement.transfer_ids.len(),
            touching[i].len(),
            "history length of account {i}"
        );
        let history: HashSet<String> = statement.transfer_ids.into_iter().collect();
        assert_eq!(history, touching[i], "history of account {i}");
        total += statement.balance_cents;
    }
    assert_eq!(
        total,
        deposits.iter().sum::<i64>(),
        "money was created or lost"
    );
}

fn opposite_transfers_between_two_accounts_do_not_deadlock(variant: Variant) {
    let ledger = new_backend(variant);
    let a = open(&*ledger, "a");
    let b = open(&*ledger, "b");
    deposit(&*ledger, a, 1_000, "");
    deposit(&*ledger, b, 1_000, "");
    // The baseline (one global lock) cannot deadlock and copies both growing histories on every
    // transfer, so it gets a short run; the optimized variant's lock order is what is at stake.
    let per_thread = match variant {
        Variant::Baseline => 150,
        Variant::Optimized => 2_000,
    };
    let shared = Arc::clone(&ledger);
    let counts = run_together_within(Duration::from_secs(30), 8, move |t| {
        // Half the threads push a -> b, half b -> a.
        let (from, to_key) = if t % 2 == 0 { (a, "b") } else { (b, "a") };
        (0..per_thread)
            .filter(|_| transfer(&*shared, from, to_key, 1, "").is_ok())
            .count()
    });
    assert_eq!(balance(&*ledger, a) + balance(&*ledger, b), 2_000);
    let applied: usize = counts.iter().sum();
    assert_eq!(history_len(&*ledger, a), applied);
    assert_eq!(history_len(&*ledger, b), applied);
}

fn refused_transfers_and_deposits_change_nothing(variant: Variant) {
    let ledger = new_backend(variant);
    let payer = open(&*ledger, "payer");
    let rich = open(&*ledger, "rich");
    deposit(&*ledger, payer, 100, "");
    deposit(&*ledger, rich, i64::MAX, "");

    assert_eq!(
        transfer(&*ledger, payer, "rich", 101, ""),
        Err(LedgerError::InsufficientFunds {
            account_id: payer,
            balance_cents: 100,
            amount_cents: 101,
        })
    );
    // The payee's balance would overflow: refused before the payer is debited.
    assert_eq!(
        transfer(&*ledger, payer, "rich", 1, ""),
        Err(LedgerError::BalanceOverflow(rich))
    );
    assert_eq!(
        ledger.deposit(Deposit {
            account_id: rich,
            amount_cents: 1,
            idempotency_key: String::new(),
        }),
        Err(LedgerError::BalanceOverflow(rich))
    );
    assert_eq!(balance(&*ledger, payer), 100);
    assert_eq!(balance(&*ledger, rich), i64::MAX);
    assert_eq!(history_len(&*ledger, payer), 0);
    assert_eq!(history_len(&*ledger, rich), 0);

    // Exactly the whole balance may be sent.
    let receipt = transfer(&*ledger, rich, "payer", i64::MAX - 100, "").expect("transfer");
    assert_eq!(receipt.from_balance_cents, 100);
    assert_eq!(balance(&*ledger, payer), i64::MAX);
}

fn bad_input_gets_specific_errors(variant: Variant) {
    let ledger = new_backend(variant);
    let alice = open(&*ledger, "alice");
    deposit(&*ledger, alice, 500, "");
    let open_with = |pix_key: &str| {
        ledger.open_account(OpenAccount {
            owner_name: "x".into(),
            pix_key: pix_key.into(),
            idempotency_key: String::new(),
        })
    };
    assert_eq!(open_with(""), Err(LedgerError::EmptyPixKey));
    assert_eq!(
        open_with("alice"),
        Err(LedgerError::PixKeyTaken("alice".into()))
    );

    for amount in [0, -1, i64::MIN] {
        let refused = ledger.deposit(Deposit {
            account_id: alice,
            amount_cents: amount,
            idempotency_key: String::new(),
        });
        assert_eq!(refused, Err(LedgerError::NonPositiveAmount(amount)));
        assert_eq!(
            transfer(&*ledger, alice, "alice", amount, ""),
            Err(LedgerError::NonPositiveAmount(amount))
        );
    }
    for missing in [0, 999] {
        let refused = ledger.deposit(Deposit {
            account_id: missing,
            amount_cents: 1,
            idempotency_key: String::new(),
        });
        assert_eq!(refused, Err(LedgerError::AccountNotFound(missing)));
        assert_eq!(
            ledger.balance(missing),
            Err(LedgerError::AccountNotFound(missing))
        );
        assert_eq!(
            ledger.statement(missing),
            Err(LedgerError::AccountNotFound(missing))
        );
        assert_eq!(
            transfer(&*ledger, missing, "alice", 1, ""),
            Err(LedgerError::AccountNotFound(missing))
        );
    }
    assert_eq!(
        transfer(&*ledger, alice, "", 1, ""),
        Err(LedgerError::EmptyPixKey)
    );
    assert_eq!(
        transfer(&*ledger, alice, "nobody", 1, ""),
        Err(LedgerError::PixKeyNotFound("nobody".into()))
    );
    assert_eq!(
        transfer(&*ledger, alice, "alice", 1, ""),
        Err(LedgerError::SelfTransfer(alice))
    );
    assert_eq!(balance(&*ledger, alice), 500);

    assert_eq!(ledger.transaction(""), Err(LedgerError::EmptyTransactionId));
    let bob = open(&*ledger, "bob");
    let real = transfer(&*ledger, alice, "bob", 1, "")
        .expect("transfer")
        .transaction_id;
    let unknown = TransactionId::random().to_string();
    for bad in [
        "nope",
        unknown.as_str(),
        &real.to_uppercase(),
        &format!("{real} "),
        "\u{0}",
    ] {
        assert_eq!(
            ledger.transaction(bad),
            Err(LedgerError::TransactionNotFound(bad.to_owned()))
        );
    }
    assert_eq!(ledger.transaction(&real).map(|r| r.to_account_id), Ok(bob));
}

fn invalid_requests_do_not_consume_their_idempotency_key(variant: Variant) {
    let ledger = new_backend(variant);
    let alice = open(&*ledger, "alice");
    let refused = ledger.deposit(Deposit {
        account_id: alice,
        amount_cents: 0,
        idempotency_key: "k".into(),
    });
    assert_eq!(refused, Err(LedgerError::NonPositiveAmount(0)));
    assert_eq!(deposit(&*ledger, alice, 40, "k"), 40);
}

fn open_account_repeated_sequentially_opens_one_account(variant: Variant) {
    let ledger = new_backend(variant);
    let request = |pix_key: &str| OpenAccount {
        owner_name: "Maria".into(),
        pix_key: pix_key.into(),
        idempotency_key: "open-1".into(),
    };
    let first = ledger
        .open_account(request("maria@example.com"))
        .expect("open");
    assert_eq!(first.balance_cents, 0);
    assert_ne!(first.account_id, 0, "0 is the proto's 'unset'");
    for _ in 0..3 {
        assert_eq!(
            ledger.open_account(request("maria@example.com")),
            Ok(first.clone())
        );
    }
    // Same key, different payload: still the first result, and nothing new is registered.
    assert_eq!(
        ledger.open_account(request("other@example.com")),
        Ok(first.clone())
    );
    let next = open(&*ledger, "other@example.com");
    assert_ne!(next, first.account_id);
    let statement = ledger.statement(first.account_id).expect("statement");
    assert_eq!(
        (statement.owner_name.as_str(), statement.pix_key.as_str()),
        ("Maria", "maria@example.com")
    );
}

fn open_account_duplicates_arriving_concurrently_open_one_account(variant: Variant) {
    let ledger = new_backend(variant);
    let shared = Arc::clone(&ledger);
    // Each racer sends its own Pix key under the shared idempotency key, so we can tell which
    // duplicate ran.
    let step = SpinBarrier::new(RACERS);
    let per_thread = run_together(RACERS, move |i| {
        (0..RACE_KEYS)
            .map(|k| {
                step.wait();
                shared.open_account(OpenAccount {
                    owner_name: "dup".into(),
                    pix_key: format!("dup-{k}-{i}"),
                    idempotency_key: format!("open-{k}"),
                })
            })
            .collect::<Vec<_>>()
    });
    for k in 0..RACE_KEYS {
        let first = per_thread[0][k].clone().expect("open");
        for results in &per_thread {
            assert_eq!(results[k].as_ref(), Ok(&first), "key open-{k}");
        }
        let registered: Vec<usize> = (0..RACERS)
            .filter(|i| {
                let probe = ledger.open_account(OpenAccount {
                    owner_name: "probe".into(),
                    pix_key: format!("dup-{k}-{i}"),
                    idempotency_key: String::new(),
                });
                matches!(probe, Err(LedgerError::PixKeyTaken(_)))
            })
            .collect();
        assert_eq!(
            registered.len(),
            1,
            "key open-{k} registered {registered:?}"
        );
        assert_eq!(first.pix_key, format!("dup-{k}-{}", registered[0]));
    }
}

fn concurrent_opens_of_one_pix_key_register_it_once(variant: Variant) {
    let ledger = new_backend(variant);
    let shared = Arc::clone(&ledger);
    let results = run_together(16, move |i| {
        shared.open_account(OpenAccount {
            owner_name: format!("racer {i}"),
            pix_key: "contested".into(),
            idempotency_key: format!("racer-{i}"),
        })
    });
    let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    assert!(results
        .iter()
        .filter(|r| r.is_err())
        .all(|r| *r == Err(LedgerError::PixKeyTaken("contested".into()))));
}

fn deposit_repeated_sequentially_is_applied_once(variant: Variant) {
    let ledger = new_backend(variant);
    let alice = open(&*ledger, "alice");
    for _ in 0..3 {
        assert_eq!(deposit(&*ledger, alice, 100, "dep-1"), 100);
    }
    // Same key, different amount: the first result, no new effect.
    assert_eq!(deposit(&*ledger, alice, 7, "dep-1"), 100);
    assert_eq!(balance(&*ledger, alice), 100);
    // Keys are scoped per operation, so a transfer may reuse it.
    let _bob = open(&*ledger, "bob");
    assert!(transfer(&*ledger, alice, "bob", 10, "dep-1").is_ok());
    assert_eq!(deposit(&*ledger, alice, 100, "dep-2"), 190);
}

fn deposit_duplicates_arriving_concurrently_are_applied_once(variant: Variant) {
    let ledger = new_backend(variant);
    let alice = open(&*ledger, "alice");
    let shared = Arc::clone(&ledger);
    let step = SpinBarrier::new(RACERS);
    let per_thread = run_together(RACERS, move |_| {
        (0..RACE_KEYS)
            .map(|k| {
                let key = format!("dep-{k}");
                step.wait();
                deposit(&*shared, alice, 250, &key)
            })
            .collect::<Vec<_>>()
    });
    // Each key applied once, in key order per thread: the k-th deposit leaves 250 * (k + 1).
    let expected: Vec<i64> = (1..=RACE_KEYS as i64).map(|k| 250 * k).collect();
    for results in &per_thread {
        assert_eq!(results, &expected);
    }
    assert_eq!(balance(&*ledger, alice), 250 * RACE_KEYS as i64);
}

fn requests_without_idempotency_key_all_take_effect(variant: Variant) {
    let ledger = new_backend(variant);
    let alice = open(&*ledger, "alice");
    let _bob = open(&*ledger, "bob");
    assert_eq!(deposit(&*ledger, alice, 100, ""), 100);
    assert_eq!(deposit(&*ledger, alice, 100, ""), 200);
    let first = transfer(&*ledger, alice, "bob", 50, "").expect("transfer");
    let second = transfer(&*ledger, alice, "bob", 50, "").expect("transfer");
    assert_ne!(first.transaction_id, second.transaction_id);
    assert_eq!(balance(&*ledger, alice), 100);
}

fn transfer_repeated_sequentially_moves_money_once(variant: Variant) {
    let ledger = new_backend(variant);
    let alice = open(&*ledger, "alice");
    let bob = open(&*ledger, "bob");
    deposit(&*ledger, alice, 1_000, "");
    let first = transfer(&*ledger, alice, "bob", 300, "pay-1").expect("transfer");
    assert_eq!(first.from_balance_cents, 700);
    for _ in 0..3 {
        assert_eq!(
            transfer(&*ledger, alice, "bob", 300, "pay-1"),
            Ok(first.clone())
        );
    }
    assert_eq!(
        (balance(&*ledger, alice), balance(&*ledger, bob)),
        (700, 300)
    );
    assert_eq!(
        (history_len(&*ledger, alice), history_len(&*ledger, bob)),
        (1, 1)
    );
}

fn transfer_duplicates_arriving_concurrently_move_money_once(variant: Variant) {
    // Keys rotate over several payer -> payee pairs so that no history grows long (the
    // baseline copies histories on every transfer).
    const PAIRS: usize = 10;
    const PER_PAIR: usize = RACE_KEYS / PAIRS;
    let ledger = new_backend(variant);
    let funds = 300 * PER_PAIR as i64 + 50;
    let pairs: Vec<(AccountId, AccountId)> = (0..PAIRS)
        .map(|j| {
            let payer = open(&*ledger, &format!("payer-{j}"));
            deposit(&*ledger, payer, funds, "");
            (payer, open(&*ledger, &format!("payee-{j}")))
        })
        .collect();
    let (shared, payers) = (Arc::clone(&ledger), pairs.clone());
    let step = SpinBarrier::new(RACERS);
    let per_thread = run_together(RACERS, move |_| {
        (0..RACE_KEYS)
            .map(|k| {
                let (key, payee) = (format!("pay-{k}"), format!("payee-{}", k % PAIRS));
                step.wait();
                transfer(&*shared, payers[k % PAIRS].0, &payee, 300, &key)
            })
            .collect::<Vec<_>>()
    });
    let mut ids = HashSet::new();
    for k in 0..RACE_KEYS {
        let first = per_thread[0][k].clone().expect("transfer");
        for results in &per_thread {
            assert_eq!(results[k].as_ref(), Ok(&first), "key pay-{k}");
        }
        let sent_by_payer = 300 * (k / PAIRS + 1) as i64;
        assert_eq!(
            first.from_balance_cents,
            funds - sent_by_payer,
            "key pay-{k}"
        );
        ids.insert(first.transaction_id);
    }
    assert_eq!(ids.len(), RACE_KEYS);
    for (payer, payee) in pairs {
        assert_eq!(
            (balance(&*ledger, payer), balance(&*ledger, payee)),
            (50, 300 * PER_PAIR as i64)
        );
        assert_eq!(
            (history_len(&*ledger, payer), history_len(&*ledger, payee)),
            (PER_PAIR, PER_PAIR)
        );
    }
}

fn a_refused_transfer_is_replayed_as_refused(variant: Variant) {
    let ledger = new_backend(variant);
    let alice = open(&*ledger, "alice");
    let bob = open(&*ledger, "bob");
    let refused = transfer(&*ledger, alice, "bob", 500, "pay-early");
    assert!(
        matches!(refused, Err(LedgerError::InsufficientFunds { .. })),
        "{refused:?}"
    );
    deposit(&*ledger, alice, 1_000, "");
    // The key's first outcome stands even though the transfer could now succeed.
    assert_eq!(transfer(&*ledger, alice, "bob", 500, "pay-early"), refused);
    assert_eq!(
        (balance(&*ledger, alice), balance(&*ledger, bob)),
        (1_000, 0)
    );
}

fn transaction_record_describes_the_transfer(variant: Variant) {
    let ledger = new_backend(variant);
    let alice = open(&*ledger, "alice");
    let bob = open(&*ledger, "bob");
    deposit(&*ledger, alice, 1_000, "");
    let before = pix_ledger::model::unix_nanos_now();
    let receipt = transfer(&*ledger, alice, "bob", 250, "").expect("transfer");
    let after = pix_ledger::model::unix_nanos_now();
    assert!(
        receipt.transaction_id.parse::<TransactionId>().is_ok(),
        "{}",
        receipt.transaction_id
    );
    let record = ledger.transaction(&receipt.transaction_id).expect("record");
    assert_eq!(record.transaction_id, receipt.transaction_id);
    assert_eq!(
        (
            record.from_account_id,
            record.to_account_id,
            record.amount_cents
        ),
        (alice, bob, 250)
    );
    assert!(
        (before..=after).contains(&record.applied_at_unix_nanos),
        "{record:?}"
    );
    let ids = |id| ledger.statement(id).expect("statement").transfer_ids;
    assert_eq!(ids(alice), vec![receipt.transaction_id.clone()]);
    assert_eq!(ids(bob), vec![receipt.transaction_id]);
}
