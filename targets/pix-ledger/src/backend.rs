//! The seam between the gRPC layer and a variant: one trait, two implementations.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::model::{
    AccountId, AccountStatement, AccountView, BalanceView, Deposit, LedgerError, OpenAccount,
    TransactionRecord, Transfer, TransferReceipt,
};

/// What the gRPC service needs from a ledger. Methods take `&self` so the service can call them
/// from any number of tasks; each variant decides how to make that safe (one global lock vs.
/// per-account locks). Calls are short and never await, so they run inline on the async runtime.
pub trait LedgerBackend: Send + Sync + 'static {
    /// Opens an account holding 0 cents under a fresh id. Idempotent per `idempotency_key`.
    fn open_account(&self, request: OpenAccount) -> Result<AccountView, LedgerError>;
    /// Idempotent per `idempotency_key`; returns the balance right after the deposit.
    fn deposit(&self, request: Deposit) -> Result<BalanceView, LedgerError>;
    fn balance(&self, account_id: AccountId) -> Result<BalanceView, LedgerError>;
    /// Atomic: both balances change or neither does. Idempotent per `idempotency_key`.
    fn transfer(&self, request: Transfer) -> Result<TransferReceipt, LedgerError>;
    fn transaction(&self, transaction_id: &str) -> Result<TransactionRecord, LedgerError>;
    /// The account with its transfer history; not part of the gRPC API, used to audit the ledger.
    fn statement(&self, account_id: AccountId) -> Result<AccountStatement, LedgerError>;
}

/// Which implementation serves the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// Trait objects, one global write lock, fat per-account histories, clone-mutate-write-back.
    Baseline,
    /// Sharded map, per-account locks, compact histories, in-place mutation.
    Optimized,
}

impl Variant {
    pub const ALL: [Variant; 2] = [Variant::Baseline, Variant::Optimized];

    pub fn as_str(self) -> &'static str {
        match self {
            Variant::Baseline => "baseline",
            Variant::Optimized => "optimized",
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown variant {0:?} (expected baseline or optimized)")]
pub struct UnknownVariant(pub String);

impl FromStr for Variant {
    type Err = UnknownVariant;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Variant::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownVariant(s.to_owned()))
    }
}

/// A fresh, empty ledger of the given variant behind a trait object, for callers that pick the
/// variant at run time without caring about static dispatch (tests, tools). The server itself
/// is monomorphised per variant instead; see [`crate::serve`].
pub fn new_backend(variant: Variant) -> Arc<dyn LedgerBackend> {
    match variant {
        Variant::Baseline => Arc::new(crate::baseline::GlobalLockLedger::new()),
        Variant::Optimized => Arc::new(crate::optimized::ShardedLedger::new()),
    }
}
