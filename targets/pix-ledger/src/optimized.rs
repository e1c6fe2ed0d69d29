//! Optimized variant: the same rules as the baseline, laid out for the cache and for parallelism.
//!
//! * No global lock: accounts live in a sharded [`DashMap`], and every method takes `&self`.
//! * Each account's mutable ("hot") state is just a balance and a `Vec` of 16-byte transaction
//!   ids behind its own mutex; the full transfer record is stored once, in a separate map.
//! * Operations mutate that state in place under the account's lock instead of copying accounts
//!   out and back.
//!
//! Lock discipline, which is what keeps a two-account transfer atomic without deadlock:
//! 1. A map guard is never held while an account mutex is taken: operations clone the account's
//!    `Arc` out of the map, dropping the shard guard, and only then lock the account.
//! 2. A transfer locks its two accounts in ascending account-id order, so two transfers over the
//!    same pair cannot each hold one lock while waiting for the other.
//!
//! DashMap's own shard guards cannot serve as the account locks: two accounts may share a shard,
//! and holding two guards of one shard at once deadlocks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use parking_lot::Mutex;

use crate::backend::LedgerBackend;
use crate::model::{
    check_amount, check_pix_key, unix_nanos_now, AccountId, AccountStatement, AccountView,
    BalanceView, Deposit, LedgerError, OpenAccount, TransactionId, TransactionRecord, Transfer,
    TransferReceipt,
};

/// What transfers and deposits touch: kept small so it shares few cache lines.
#[derive(Debug, Default)]
struct AccountState {
    balance_cents: i64,
    transfer_ids: Vec<TransactionId>,
}

/// One account: the hot state under its lock, plus data that never changes after opening.
#[derive(Debug)]
struct Account {
    state: Mutex<AccountState>,
    owner_name: Box<str>,
    pix_key: Box<str>,
}

/// The single copy of a transfer record, keyed by its id.
#[derive(Debug, Clone, Copy)]
struct StoredTransfer {
    from_account_id: AccountId,
    to_account_id: AccountId,
    amount_cents: i64,
    applied_at_unix_nanos: u64,
}

/// A transfer receipt without heap data, so remembering one per idempotency key stays cheap.
#[derive(Debug, Clone, Copy)]
struct CompactReceipt {
    transaction_id: TransactionId,
    from_balance_cents: i64,
}

impl From<CompactReceipt> for TransferReceipt {
    fn from(receipt: CompactReceipt) -> Self {
        TransferReceipt {
            transaction_id: receipt.transaction_id.to_string(),
            from_balance_cents: receipt.from_balance_cents,
        }
    }
}

/// First outcomes per idempotency key. Each key gets a `OnceLock`: of several concurrent
/// duplicates exactly one runs the operation, the others block until its outcome is set and
/// then return a copy of it. Failures are remembered like successes.
#[derive(Debug)]
struct IdempotencyTable<T> {
    outcomes: DashMap<Box<str>, Arc<OnceLock<Result<T, LedgerError>>>>,
}

impl<T> Default for IdempotencyTable<T> {
    fn default() -> Self {
        Self {
            outcomes: DashMap::new(),
        }
    }
}

impl<T: Clone> IdempotencyTable<T> {
    /// Runs `apply` once per non-empty key; an empty key means no deduplication.
    fn once(
        &self,
        key: &str,
        apply: impl FnOnce() -> Result<T, LedgerError>,
    ) -> Result<T, LedgerError> {
        if key.is_empty() {
            return apply();
        }
        // `slot` releases the shard guard before we (maybe) block on the cell.
        self.slot(key).get_or_init(apply).clone()
    }

    fn slot(&self, key: &str) -> Arc<OnceLock<Result<T, LedgerError>>> {
        if let Some(cell) = self.outcomes.get(key) {
            return Arc::clone(cell.value());
        }
        let cell = self.outcomes.entry(key.into()).or_default();
        Arc::clone(cell.value())
    }
}

/// The optimized [`LedgerBackend`].
#[derive(Debug, Default)]
pub struct ShardedLedger {
    accounts: DashMap<AccountId, Arc<Account>>,
    pix_keys: DashMap<Box<str>, AccountId>,
    transfers: DashMap<TransactionId, StoredTransfer>,
    opened: IdempotencyTable<AccountView>,
    deposited: IdempotencyTable<BalanceView>,
    transferred: IdempotencyTable<CompactReceipt>,
    last_account_id: AtomicU64,
}

impl ShardedLedger {
    pub fn new() -> Self {
        Self::default()
    }

    /// The account's handle, with the shard guard already released (lock discipline rule 1).
    fn account(&self, account_id: AccountId) -> Result<Arc<Account>, LedgerError> {
        self.accounts
            .get(&account_id)
            .map(|entry| Arc::clone(entry.value()))
            .ok_or(LedgerError::AccountNotFound(account_id))
    }

    fn open_account_now(
        &self,
        owner_name: String,
        pix_key: String,
    ) -> Result<AccountView, LedgerError> {
        // Holding the key's entry until the account is inserted makes "key free?" and "claim
        // key" one step, so two requests cannot both register the same key.
        match self.pix_keys.entry(pix_key.into_boxed_str()) {
            Entry::Occupied(taken) => Err(LedgerError::PixKeyTaken(taken.key().to_string())),
            Entry::Vacant(free) => {
                let account_id = self.last_account_id.fetch_add(1, Ordering::Relaxed) + 1;
                let account = Account {
                    state: Mutex::new(AccountState::default()),
                    owner_name: owner_name.into_boxed_str(),
                    pix_key: free.key().clone(),
                };
                let view = AccountView {
                    account_id,
                    pix_key: free.key().to_string(),
                    balance_cents: 0,
                };
                // The account exists before its key resolves, so a resolved key always finds it.
                self.accounts.insert(account_id, Arc::new(account));
                free.insert(account_id);
                Ok(view)
            }
        }
    }

    fn deposit_now(
        &self,
        account_id: AccountId,
        amount_cents: i64,
    ) -> Result<BalanceView, LedgerError> {
        let account = self.account(account_id)?;
        let mut state = account.state.lock();
        state.balance_cents = state
            .balance_cents
            .checked_add(amount_cents)
            .ok_or(LedgerError::BalanceOverflow(account_id))?;
        Ok(BalanceView {
            account_id,
            balance_cents: state.balance_cents,
        })
    }

    fn transfer_now(
        &self,
        from_account_id: AccountId,
        to_pix_key: &str,
        amount_cents: i64,
    ) -> Result<CompactReceipt, LedgerError> {
        let from = self.account(from_account_id)?;
        let to_account_id = self
            .pix_keys
            .get(to_pix_key)
            .map(|entry| *entry.value())
            .ok_or_else(|| LedgerError::PixKeyNotFound(to_pix_key.to_owned()))?;
        if to_account_id == from_account_id {
            return Err(LedgerError::SelfTransfer(from_account_id));
        }
        let to = self.account(to_account_id)?;

        // Lock discipline rule 2: ascending account-id order.
        let (mut from_state, mut to_state) = if from_account_id < to_account_id {
            let from_state = from.state.lock();
            (from_state, to.state.lock())
        } else {
            let to_state = to.state.lock();
            (from.state.lock(), to_state)
        };
        if from_state.balance_cents < amount_cents {
            return Err(LedgerError::InsufficientFunds {
                account_id: from_account_id,
                balance_cents: from_state.balance_cents,
                amount_cents,
            });
        }
        // Every check happens before the first mutation, so a refused transfer changes nothing.
        let to_balance = to_state
            .balance_cents
            .checked_add(amount_cents)
            .ok_or(LedgerError::BalanceOverflow(to_account_id))?;
        let transaction_id = TransactionId::random();
        let applied_at_unix_nanos = unix_nanos_now();
        from_state.balance_cents -= amount_cents;
        to_state.balance_cents = to_balance;
        from_state.transfer_ids.push(transaction_id);
        to_state.transfer_ids.push(transaction_id);
        let from_balance_cents = from_state.balance_cents;
        drop(to_state);
        drop(from_state);

        // Stored before the id is returned to anyone, so a receipt's id always resolves.
        self.transfers.insert(
            transaction_id,
            StoredTransfer {
                from_account_id,
                to_account_id,
                amount_cents,
                applied_at_unix_nanos,
            },
        );
        Ok(CompactReceipt {
            transaction_id,
            from_balance_cents,
        })
    }
}

impl LedgerBackend for ShardedLedger {
    fn open_account(&self, request: OpenAccount) -> Result<AccountView, LedgerError> {
        check_pix_key(&request.pix_key)?;
        let OpenAccount {
            owner_name,
            pix_key,
            idempotency_key,
        } = request;
        self.opened.once(&idempotency_key, || {
            self.open_account_now(owner_name, pix_key)
        })
    }

    fn deposit(&self, request: Deposit) -> Result<BalanceView, LedgerError> {
        check_amount(request.amount_cents)?;
        self.deposited.once(&request.idempotency_key, || {
            self.deposit_now(request.account_id, request.amount_cents)
        })
    }

    fn balance(&self, account_id: AccountId) -> Result<BalanceView, LedgerError> {
        let account = self.account(account_id)?;
        let balance_cents = account.state.lock().balance_cents;
        Ok(BalanceView {
            account_id,
            balance_cents,
        })
    }

    fn transfer(&self, request: Transfer) -> Result<TransferReceipt, LedgerError> {
        check_amount(request.amount_cents)?;
        check_pix_key(&request.to_pix_key)?;
        self.transferred
            .once(&request.idempotency_key, || {
                self.transfer_now(
                    request.from_account_id,
                    &request.to_pix_key,
                    request.amount_cents,
                )
            })
            .map(TransferReceipt::from)
    }

    fn transaction(&self, transaction_id: &str) -> Result<TransactionRecord, LedgerError> {
        if transaction_id.is_empty() {
            return Err(LedgerError::EmptyTransactionId);
        }
        let not_found = || LedgerError::TransactionNotFound(transaction_id.to_owned());
        // Only the canonical form parses, so any other string is simply an unknown id.
        let id: TransactionId = transaction_id.parse().map_err(|_| not_found())?;
        let stored = self
            .transfers
            .get(&id)
            .map(|entry| *entry.value())
            .ok_or_else(not_found)?;
        Ok(TransactionRecord {
            transaction_id: transaction_id.to_owned(),
            from_account_id: stored.from_account_id,
            to_account_id: stored.to_account_id,
            amount_cents: stored.amount_cents,
            applied_at_unix_nanos: stored.applied_at_unix_nanos,
        })
    }

    fn statement(&self, account_id: AccountId) -> Result<AccountStatement, LedgerError> {
        let account = self.account(account_id)?;
        let (balance_cents, ids) = {
            let state = account.state.lock();
            (state.balance_cents, state.transfer_ids.clone())
        };
        Ok(AccountStatement {
            account_id,
            owner_name: account.owner_name.to_string(),
            pix_key: account.pix_key.to_string(),
            balance_cents,
            transfer_ids: ids.iter().map(TransactionId::to_string).collect(),
        })
    }
}
