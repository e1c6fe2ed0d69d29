//! Domain types shared by both variants: requests, results, errors, input validation and ids.
//!
//! Both variants speak these types so that the gRPC layer, and the tests, treat them alike; only
//! how they store and lock state differs.

use std::fmt;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

/// Server-assigned account number. Never 0, which is the proto default for "unset".
pub type AccountId = u64;

/// Opens an account and registers its Pix key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAccount {
    pub owner_name: String,
    pub pix_key: String,
    /// Empty means "not idempotent": every such request takes effect.
    pub idempotency_key: String,
}

/// Adds money to an account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deposit {
    pub account_id: AccountId,
    pub amount_cents: i64,
    pub idempotency_key: String,
}

/// Moves money from an account to the account that owns a Pix key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    pub from_account_id: AccountId,
    pub to_pix_key: String,
    pub amount_cents: i64,
    pub idempotency_key: String,
}

/// An account as returned when it is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountView {
    pub account_id: AccountId,
    pub pix_key: String,
    pub balance_cents: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BalanceView {
    pub account_id: AccountId,
    pub balance_cents: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferReceipt {
    pub transaction_id: String,
    /// The payer's balance right after the transfer.
    pub from_balance_cents: i64,
}

/// The record a successful transfer leaves behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionRecord {
    pub transaction_id: String,
    pub from_account_id: AccountId,
    pub to_account_id: AccountId,
    pub amount_cents: i64,
    pub applied_at_unix_nanos: u64,
}

/// Everything the ledger knows about one account; for audits, not part of the gRPC API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountStatement {
    pub account_id: AccountId,
    pub owner_name: String,
    pub pix_key: String,
    pub balance_cents: i64,
    /// Ids of the transfers the account took part in (either side), oldest first.
    pub transfer_ids: Vec<String>,
}

/// Why a ledger operation was refused. `Clone` because idempotent requests replay their first
/// outcome, failures included.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    #[error("account {0} does not exist")]
    AccountNotFound(AccountId),
    #[error("no account has Pix key {0:?}")]
    PixKeyNotFound(String),
    #[error("transaction {0:?} does not exist")]
    TransactionNotFound(String),
    #[error("Pix key {0:?} is already registered")]
    PixKeyTaken(String),
    #[error("account {account_id} has {balance_cents} cents, cannot send {amount_cents}")]
    InsufficientFunds {
        account_id: AccountId,
        balance_cents: i64,
        amount_cents: i64,
    },
    #[error("amount must be positive, got {0} cents")]
    NonPositiveAmount(i64),
    #[error("Pix key must not be empty")]
    EmptyPixKey,
    #[error("transaction id must not be empty")]
    EmptyTransactionId,
    #[error("account {0} cannot transfer to itself")]
    SelfTransfer(AccountId),
    #[error("balance of account {0} would overflow")]
    BalanceOverflow(AccountId),
}

/// Rejects inputs that are wrong whatever the ledger holds. Runs before the idempotency lookup,
/// so a malformed request is never remembered as "the first result" of its key.
pub fn check_amount(amount_cents: i64) -> Result<(), LedgerError> {
    if amount_cents > 0 {
        Ok(())
    } else {
        Err(LedgerError::NonPositiveAmount(amount_cents))
    }
}

/// See [`check_amount`].
pub fn check_pix_key(pix_key: &str) -> Result<(), LedgerError> {
    if pix_key.is_empty() {
        Err(LedgerError::EmptyPixKey)
    } else {
        Ok(())
    }
}

/// Nanoseconds since the Unix epoch; 0 if the clock is before it, saturating far in the future.
pub fn unix_nanos_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// A random (version 4) UUID held as one `u128`: 16 bytes inline instead of a 36-byte heap
/// string, which is what lets the optimized variant keep account histories compact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TransactionId(pub u128);

impl TransactionId {
    const VERSION_MASK: u128 = 0xf << 76;
    const VERSION_4: u128 = 0x4 << 76;
    const VARIANT_MASK: u128 = 0b11 << 62;
    const VARIANT_RFC4122: u128 = 0b10 << 62;

    /// 122 random bits: collisions are not a practical concern for an in-memory ledger.
    pub fn random() -> Self {
        let bits: u128 = rand::random();
        Self(
            (bits & !Self::VERSION_MASK & !Self::VARIANT_MASK)
                | Self::VERSION_4
                | Self::VARIANT_RFC4122,
        )
    }
}

impl fmt::Display for TransactionId {
    /// Canonical lowercase `8-4-4-4-12` form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        write!(
            f,
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            (v >> 96) as u32,
            (v >> 80) as u16,
            (v >> 64) as u16,
            (v >> 48) as u16,
            v & 0xffff_ffff_ffff
        )
    }
}

/// The string is not in the canonical form [`TransactionId`] prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a canonical lowercase UUID")]
pub struct BadTransactionId;

impl FromStr for TransactionId {
    type Err = BadTransactionId;

    /// Accepts exactly what `Display` prints, so a string id maps to at most one `TransactionId`
    /// and both variants agree on which strings name a transaction.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bytes = s.as_bytes();
        if bytes.len() != 36 {
            return Err(BadTransactionId);
        }
        let mut value: u128 = 0;
        for (i, &b) in bytes.iter().enumerate() {
            let nibble = match (i, b) {
                (8 | 13 | 18 | 23, b'-') => continue,
                (8 | 13 | 18 | 23, _) => return Err(BadTransactionId),
                (_, b'0'..=b'9') => b - b'0',
                (_, b'a'..=b'f') => b - b'a' + 10,
                _ => return Err(BadTransactionId),
            };
            value = (value << 4) | u128::from(nibble);
        }
        Ok(Self(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_id_round_trips_through_its_string_form() {
        for _ in 0..100 {
            let id = TransactionId::random();
            let text = id.to_string();
            assert_eq!(text.len(), 36);
            assert_eq!(&text[14..15], "4", "version nibble in {text}");
            assert_eq!(text.parse::<TransactionId>(), Ok(id));
        }
        let fixed = TransactionId(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
        assert_eq!(fixed.to_string(), "01234567-89ab-cdef-0011-223344556677");
    }

    #[test]
    fn transaction_id_parser_rejects_non_canonical_strings() {
        for bad in [
            "",
            "not-an-id",
            "01234567-89AB-cdef-0011-223344556677",
            "0123456789ab-cdef-0011-223344556677--",
            "01234567-89ab-cdef-0011-22334455667",
            "01234567-89ab-cdef-0011-2233445566777",
            "01234567+89ab-cdef-0011-223344556677",
            "0123456g-89ab-cdef-0011-223344556677",
            "01234567-89ab-cdef-0011-2233445566é",
        ] {
            assert_eq!(
                bad.parse::<TransactionId>(),
                Err(BadTransactionId),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn input_checks_reject_non_positive_amounts_and_empty_keys() {
        assert_eq!(check_amount(0), Err(LedgerError::NonPositiveAmount(0)));
        assert_eq!(check_amount(-5), Err(LedgerError::NonPositiveAmount(-5)));
        assert_eq!(
            check_amount(i64::MIN),
            Err(LedgerError::NonPositiveAmount(i64::MIN))
        );
        assert_eq!(check_amount(1), Ok(()));
        assert_eq!(check_pix_key(""), Err(LedgerError::EmptyPixKey));
        assert_eq!(check_pix_key("a@b.c"), Ok(()));
    }
}
