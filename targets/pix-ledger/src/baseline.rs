//! Baseline variant: the straightforward layered design whose memory behaviour the optimized
//! variant improves on.
//!
//! * A [`TransactionProcessor`] (business rules) drives a [`Ledger`] (in-memory persistence),
//!   both used as trait objects with `&mut self` operations.
//! * Because every processor operation needs `&mut self`, the whole processor sits behind one
//!   global [`RwLock`] and every request, reads included, takes the write lock: requests run one
//!   at a time, which also makes each of them trivially atomic and exactly-once.
//! * Each [`Account`] owns its full transfer history (`Vec<HistoricTransfer>`, each entry with
//!   heap strings), so accounts are large and scattered across the heap.
//! * The ledger hands out copies: an operation loads (clones) an account, history included,
//!   mutates the copy and saves it back, replacing the stored one.

use std::collections::HashMap;

use parking_lot::RwLock;

use crate::backend::LedgerBackend;
use crate::model::{
    check_amount, check_pix_key, unix_nanos_now, AccountId, AccountStatement, AccountView,
    BalanceView, Deposit, LedgerError, OpenAccount, TransactionId, TransactionRecord, Transfer,
    TransferReceipt,
};

/// Which way money moved, seen from the account holding the history entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Sent,
    Received,
}

/// One transfer as remembered by one of its two accounts: a full, self-describing copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoricTransfer {
    pub transaction_id: String,
    pub direction: Direction,
    pub counterparty_account_id: AccountId,
    pub counterparty_pix_key: String,
    pub amount_cents: i64,
    pub applied_at_unix_nanos: u64,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub account_id: AccountId,
    pub owner_name: String,
    pub pix_key: String,
    pub balance_cents: i64,
    pub created_at_unix_nanos: u64,
    pub transaction_history: Vec<HistoricTransfer>,
}

/// The operations whose results are remembered per idempotency key. Keys are scoped per
/// operation, so reusing a key for a different kind of request is not a conflict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    OpenAccount,
    Deposit,
    Transfer,
}

/// The first outcome of an idempotent request, replayed to its duplicates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredOutcome {
    Account(Result<AccountView, LedgerError>),
    Balance(Result<BalanceView, LedgerError>),
    Receipt(Result<TransferReceipt, LedgerError>),
}

/// In-memory persistence. Reads return owned copies, like rows fetched from a store.
pub trait Ledger: Send + Sync {
    fn next_account_id(&mut self) -> AccountId;
    fn load_account(&self, account_id: AccountId) -> Option<Account>;
    /// Inserts the account or replaces the stored copy.
    fn save_account(&mut self, account: Account);
    fn find_account_by_pix_key(&self, pix_key: &str) -> Option<AccountId>;
    fn register_pix_key(&mut self, pix_key: String, account_id: AccountId);
    fn load_transaction(&self, transaction_id: &str) -> Option<TransactionRecord>;
    fn save_transaction(&mut self, record: TransactionRecord);
    fn recall_outcome(&self, operation: Operation, idempotency_key: &str) -> Option<StoredOutcome>;
    fn remember_outcome(
        &mut self,
        operation: Operation,
        idempotency_key: String,
        outcome: StoredOutcome,
    );
}

/// The business operations. All take `&mut self`, so callers must serialise them.
pub trait TransactionProcessor: Send + Sync {
    fn open_account(&mut self, request: OpenAccount) -> Result<AccountView, LedgerError>;
    fn deposit(&mut self, request: Deposit) -> Result<BalanceView, LedgerError>;
    fn balance(&mut self, account_id: AccountId) -> Result<BalanceView, LedgerError>;
    fn transfer(&mut self, request: Transfer) -> Result<TransferReceipt, LedgerError>;
    fn transaction(&mut self, transaction_id: &str) -> Result<TransactionRecord, LedgerError>;
    fn statement(&mut self, account_id: AccountId) -> Result<AccountStatement, LedgerError>;
}

/// [`Ledger`] over plain `HashMap`s.
#[derive(Debug, Default)]
pub struct HashMapLedger {
    accounts: HashMap<AccountId, Account>,
    pix_keys: HashMap<String, AccountId>,
    transactions: HashMap<String, TransactionRecord>,
    outcomes: HashMap<(Operation, String), StoredOutcome>,
    last_account_id: AccountId,
}

impl Ledger for HashMapLedger {
    fn next_account_id(&mut self) -> AccountId {
        self.last_account_id += 1;
        self.last_account_id
    }

    fn load_account(&self, account_id: AccountId) -> Option<Account> {
        self.accounts.get(&account_id).cloned()
    }

    fn save_account(&mut self, account: Account) {
        self.accounts.insert(account.account_id, account);
    }

    fn find_account_by_pix_key(&self, pix_key: &str) -> Option<AccountId> {
        self.pix_keys.get(pix_key).copied()
    }

    fn register_pix_key(&mut self, pix_key: String, account_id: AccountId) {
        self.pix_keys.insert(pix_key, account_id);
    }

    fn load_transaction(&self, transaction_id: &str) -> Option<TransactionRecord> {
        self.transactions.get(transaction_id).cloned()
    }

    fn save_transaction(&mut self, record: TransactionRecord) {
        self.transactions
            .insert(record.transaction_id.clone(), record);
    }

    fn recall_outcome(&self, operation: Operation, idempotency_key: &str) -> Option<StoredOutcome> {
        // The tuple key forces an owned String for the lookup; acceptable in the baseline.
        self.outcomes
            .get(&(operation, idempotency_key.to_owned()))
            .cloned()
    }

    fn remember_outcome(
        &mut self,
        operation: Operation,
        idempotency_key: String,
        outcome: StoredOutcome,
    ) {
        self.outcomes.insert((operation, idempotency_key), outcome);
    }
}

/// Results that can be stored as a [`StoredOutcome`] and replayed.
trait Replayable: Sized {
    const OPERATION: Operation;
    fn store(outcome: Result<Self, LedgerError>) -> StoredOutcome;
    fn replay(stored: StoredOutcome) -> Option<Result<Self, LedgerError>>;
}

impl Replayable for AccountView {
    const OPERATION: Operation = Operation::OpenAccount;
    fn store(outcome: Result<Self, LedgerError>) -> StoredOutcome {
        StoredOutcome::Account(outcome)
    }
    fn replay(stored: StoredOutcome) -> Option<Result<Self, LedgerError>> {
        match stored {
            StoredOutcome::Account(outcome) => Some(outcome),
            _ => None,
        }
    }
}

impl Replayable for BalanceView {
    const OPERATION: Operation = Operation::Deposit;
    fn store(outcome: Result<Self, LedgerError>) -> StoredOutcome {
        StoredOutcome::Balance(outcome)
    }
    fn replay(stored: StoredOutcome) -> Option<Result<Self, LedgerError>> {
        match stored {
            StoredOutcome::Balance(outcome) => Some(outcome),
            _ => None,
        }
    }
}

impl Replayable for TransferReceipt {
    const OPERATION: Operation = Operation::Transfer;
    fn store(outcome: Result<Self, LedgerError>) -> StoredOutcome {
        StoredOutcome::Receipt(outcome)
    }
    fn replay(stored: StoredOutcome) -> Option<Result<Self, LedgerError>> {
        match stored {
            StoredOutcome::Receipt(outcome) => Some(outcome),
            _ => None,
        }
    }
}

/// The [`TransactionProcessor`] implementing the Pix rules on top of any [`Ledger`].
pub struct PixProcessor {
    ledger: Box<dyn Ledger>,
}

impl PixProcessor {
    pub fn new(ledger: Box<dyn Ledger>) -> Self {
        Self { ledger }
    }

    /// Runs `apply` unless `idempotency_key` already has an outcome, which is replayed instead.
    /// Failures are remembered too: a retry gets the answer the first attempt got.
    fn once<T: Replayable + Clone>(
        &mut self,
        idempotency_key: String,
        apply: impl FnOnce(&mut Self) -> Result<T, LedgerError>,
    ) -> Result<T, LedgerError> {
        if idempotency_key.is_empty() {
            return apply(self);
        }
        if let Some(replayed) = self
            .ledger
            .recall_outcome(T::OPERATION, &idempotency_key)
            .and_then(T::replay)
        {
            return replayed;
        }
        let outcome = apply(self);
        self.ledger
            .remember_outcome(T::OPERATION, idempotency_key, T::store(outcome.clone()));
        outcome
    }

    fn open_account_now(&mut self, request: OpenAccount) -> Result<AccountView, LedgerError> {
        if self
            .ledger
            .find_account_by_pix_key(&request.pix_key)
            .is_some()
        {
            return Err(LedgerError::PixKeyTaken(request.pix_key));
        }
        let account_id = self.ledger.next_account_id();
        let account = Account {
            account_id,
            owner_name: request.owner_name,
            pix_key: request.pix_key.clone(),
            balance_cents: 0,
            created_at_unix_nanos: unix_nanos_now(),
            transaction_history: Vec::new(),
        };
        let view = AccountView {
            account_id,
            pix_key: request.pix_key.clone(),
            balance_cents: 0,
        };
        self.ledger.save_account(account);
        self.ledger.register_pix_key(request.pix_key, account_id);
        Ok(view)
    }

    fn deposit_now(
        &mut self,
        account_id: AccountId,
        amount_cents: i64,
    ) -> Result<BalanceView, LedgerError> {
        let mut account = self
            .ledger
            .load_account(account_id)
            .ok_or(LedgerError::AccountNotFound(account_id))?;
        account.balance_cents = account
            .balance_cents
            .checked_add(amount_cents)
            .ok_or(LedgerError::BalanceOverflow(account_id))?;
        let view = BalanceView {
            account_id,
            balance_cents: account.balance_cents,
        };
        self.ledger.save_account(account);
        Ok(view)
    }

    fn transfer_now(&mut self, request: Transfer) -> Result<TransferReceipt, LedgerError> {
        let amount_cents = request.amount_cents;
        let mut from = self
            .ledger
            .load_account(request.from_account_id)
            .ok_or(LedgerError::AccountNotFound(request.from_account_id))?;
        let to_id = self
            .ledger
            .find_account_by_pix_key(&request.to_pix_key)
            .ok_or(LedgerError::PixKeyNotFound(request.to_pix_key))?;
        if to_id == from.account_id {
            return Err(LedgerError::SelfTransfer(to_id));
        }
        let mut to = self
            .ledger
            .load_account(to_id)
            .ok_or(LedgerError::AccountNotFound(to_id))?;
        if from.balance_cents < amount_cents {
            return Err(LedgerError::InsufficientFunds {
                account_id: from.account_id,
                balance_cents: from.balance_cents,
                amount_cents,
            });
        }
        // Every check happens before the first mutation, so a refused transfer changes nothing.
        let to_balance = to
            .balance_cents
            .checked_add(amount_cents)
            .ok_or(LedgerError::BalanceOverflow(to_id))?;
        from.balance_cents -= amount_cents;
        to.balance_cents = to_balance;

        let transaction_id = TransactionId::random().to_string();
        let applied_at_unix_nanos = unix_nanos_now();
        let description = format!(
            "Pix transfer of {amount_cents} cents from account {} ({}) to account {} ({})",
            from.account_id, from.pix_key, to.account_id, to.pix_key
        );
        from.transaction_history.push(HistoricTransfer {
            transaction_id: transaction_id.clone(),
            direction: Direction::Sent,
            counterparty_account_id: to.account_id,
            counterparty_pix_key: to.pix_key.clone(),
            amount_cents,
            applied_at_unix_nanos,
            description: description.clone(),
        });
        to.transaction_history.push(HistoricTransfer {
            transaction_id: transaction_id.clone(),
            direction: Direction::Received,
            counterparty_account_id: from.account_id,
            counterparty_pix_key: from.pix_key.clone(),
            amount_cents,
            applied_at_unix_nanos,
            description,
        });
        let receipt = TransferReceipt {
            transaction_id: transaction_id.clone(),
            from_balance_cents: from.balance_cents,
        };
        self.ledger.save_transaction(TransactionRecord {
            transaction_id,
            from_account_id: from.account_id,
            to_account_id: to.account_id,
            amount_cents,
            applied_at_unix_nanos,
        });
        self.ledger.save_account(from);
        self.ledger.save_account(to);
        Ok(receipt)
    }
}

impl TransactionProcessor for PixProcessor {
    fn open_account(&mut self, mut request: OpenAccount) -> Result<AccountView, LedgerError> {
        check_pix_key(&request.pix_key)?;
        let key = std::mem::take(&mut request.idempotency_key);
        self.once(key, |p| p.open_account_now(request))
    }

    fn deposit(&mut self, request: Deposit) -> Result<BalanceView, LedgerError> {
        check_amount(request.amount_cents)?;
        self.once(request.idempotency_key, |p| {
            p.deposit_now(request.account_id, request.amount_cents)
        })
    }

    fn balance(&mut self, account_id: AccountId) -> Result<BalanceView, LedgerError> {
        let account = self
            .ledger
            .load_account(account_id)
            .ok_or(LedgerError::AccountNotFound(account_id))?;
        Ok(BalanceView {
            account_id,
            balance_cents: account.balance_cents,
        })
    }

    fn transfer(&mut self, mut request: Transfer) -> Result<TransferReceipt, LedgerError> {
        check_amount(request.amount_cents)?;
        check_pix_key(&request.to_pix_key)?;
        let key = std::mem::take(&mut request.idempotency_key);
        self.once(key, |p| p.transfer_now(request))
    }

    fn transaction(&mut self, transaction_id: &str) -> Result<TransactionRecord, LedgerError> {
        if transaction_id.is_empty() {
            return Err(LedgerError::EmptyTransactionId);
        }
        self.ledger
            .load_transaction(transaction_id)
            .ok_or_else(|| LedgerError::TransactionNotFound(transaction_id.to_owned()))
    }

    fn statement(&mut self, account_id: AccountId) -> Result<AccountStatement, LedgerError> {
        let account = self
            .ledger
            .load_account(account_id)
            .ok_or(LedgerError::AccountNotFound(account_id))?;
        Ok(AccountStatement {
            account_id,
            owner_name: account.owner_name,
            pix_key: account.pix_key,
            balance_cents: account.balance_cents,
            transfer_ids: account
                .transaction_history
                .into_iter()
                .map(|entry| entry.transaction_id)
                .collect(),
        })
    }
}

/// The baseline [`LedgerBackend`]: a processor behind one global lock, write-locked by every
/// request.
pub struct GlobalLockLedger {
    processor: RwLock<Box<dyn TransactionProcessor>>,
}

impl GlobalLockLedger {
    /// A [`PixProcessor`] over an empty [`HashMapLedger`].
    pub fn new() -> Self {
        Self::with_processor(Box::new(PixProcessor::new(Box::<HashMapLedger>::default())))
    }

    pub fn with_processor(processor: Box<dyn TransactionProcessor>) -> Self {
        Self {
            processor: RwLock::new(processor),
        }
    }
}

impl Default for GlobalLockLedger {
    fn default() -> Self {
        Self::new()
    }
}

impl LedgerBackend for GlobalLockLedger {
    fn open_account(&self, request: OpenAccount) -> Result<AccountView, LedgerError> {
        self.processor.write().open_account(request)
    }

    fn deposit(&self, request: Deposit) -> Result<BalanceView, LedgerError> {
        self.processor.write().deposit(request)
    }

    fn balance(&self, account_id: AccountId) -> Result<BalanceView, LedgerError> {
        self.processor.write().balance(account_id)
    }

    fn transfer(&self, request: Transfer) -> Result<TransferReceipt, LedgerError> {
        self.processor.write().transfer(request)
    }

    fn transaction(&self, transaction_id: &str) -> Result<TransactionRecord, LedgerError> {
        self.processor.write().transaction(transaction_id)
    }

    fn statement(&self, account_id: AccountId) -> Result<AccountStatement, LedgerError> {
        self.processor.write().statement(account_id)
    }
}
