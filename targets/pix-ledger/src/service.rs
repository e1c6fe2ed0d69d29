//! The gRPC face of the ledger: decodes requests, calls a [`LedgerBackend`], encodes results and
//! maps [`LedgerError`]s onto status codes.

use tonic::{Code, Request, Response, Status};

use crate::backend::LedgerBackend;
use crate::model::{Deposit, LedgerError, OpenAccount, Transfer};
use crate::proto;

/// The gRPC service over one backend. Generic rather than `dyn`, so the optimized variant pays
/// no dynamic dispatch at this boundary; only the baseline's own design uses trait objects.
#[derive(Debug)]
pub struct LedgerService<B> {
    backend: B,
}

impl<B: LedgerBackend> LedgerService<B> {
    pub fn new(backend: B) -> Self {
        Self { backend }
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }
}

/// The gRPC status code a ledger error is reported with.
pub fn status_code(error: &LedgerError) -> Code {
    match error {
        LedgerError::AccountNotFound(_)
        | LedgerError::PixKeyNotFound(_)
        | LedgerError::TransactionNotFound(_) => Code::NotFound,
        LedgerError::PixKeyTaken(_) => Code::AlreadyExists,
        LedgerError::InsufficientFunds { .. } => Code::FailedPrecondition,
        LedgerError::NonPositiveAmount(_)
        | LedgerError::EmptyPixKey
        | LedgerError::EmptyTransactionId
        | LedgerError::SelfTransfer(_) => Code::InvalidArgument,
        LedgerError::BalanceOverflow(_) => Code::OutOfRange,
    }
}

impl From<LedgerError> for Status {
    fn from(error: LedgerError) -> Self {
        Status::new(status_code(&error), error.to_string())
    }
}

#[tonic::async_trait]
impl<B: LedgerBackend> proto::ledger_server::Ledger for LedgerService<B> {
    async fn create_account(
        &self,
        request: Request<proto::CreateAccountRequest>,
    ) -> Result<Response<proto::Account>, Status> {
        let request = request.into_inner();
        let account = self.backend.open_account(OpenAccount {
            owner_name: request.owner_name,
            pix_key: request.pix_key,
            idempotency_key: request.idempotency_key,
        })?;
        Ok(Response::new(proto::Account {
            account_id: account.account_id,
            pix_key: account.pix_key,
            balance_cents: account.balance_cents,
        }))
    }

    async fn deposit(
        &self,
        request: Request<proto::DepositRequest>,
    ) -> Result<Response<proto::Balance>, Status> {
        let request = request.into_inner();
        let balance = self.backend.deposit(Deposit {
            account_id: request.account_id,
            amount_cents: request.amount_cents,
            idempotency_key: request.idempotency_key,
        })?;
        Ok(Response::new(proto::Balance {
            account_id: balance.account_id,
            balance_cents: balance.balance_cents,
        }))
    }

    async fn get_balance(
        &self,
        request: Request<proto::GetBalanceRequest>,
    ) -> Result<Response<proto::Balance>, Status> {
        let balance = self.backend.balance(request.into_inner().account_id)?;
        Ok(Response::new(proto::Balance {
            account_id: balance.account_id,
            balance_cents: balance.balance_cents,
        }))
    }

    async fn transfer(
        &self,
        request: Request<proto::TransferRequest>,
    ) -> Result<Response<proto::TransferReceipt>, Status> {
        let request = request.into_inner();
        let receipt = self.backend.transfer(Transfer {
            from_account_id: request.from_account_id,
            to_pix_key: request.to_pix_key,
            amount_cents: request.amount_cents,
            idempotency_key: request.idempotency_key,
        })?;
        Ok(Response::new(proto::TransferReceipt {
            transaction_id: receipt.transaction_id,
            from_balance_cents: receipt.from_balance_cents,
        }))
    }

    async fn get_transaction(
        &self,
        request: Request<proto::GetTransactionRequest>,
    ) -> Result<Response<proto::Transaction>, Status> {
        let record = self
            .backend
            .transaction(&request.into_inner().transaction_id)?;
        Ok(Response::new(proto::Transaction {
            transaction_id: record.transaction_id,
            from_account_id: record.from_account_id,
            to_account_id: record.to_account_id,
            amount_cents: record.amount_cents,
            applied_at_unix_nanos: record.applied_at_unix_nanos,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ledger_errors_map_to_the_documented_status_codes() {
        let cases = [
            (LedgerError::AccountNotFound(7), Code::NotFound),
            (LedgerError::PixKeyNotFound("k".into()), Code::NotFound),
            (LedgerError::TransactionNotFound("t".into()), Code::NotFound),
            (LedgerError::PixKeyTaken("k".into()), Code::AlreadyExists),
            (
                LedgerError::InsufficientFunds {
                    account_id: 1,
                    balance_cents: 0,
                    amount_cents: 1,
                },
                Code::FailedPrecondition,
            ),
            (LedgerError::NonPositiveAmount(0), Code::InvalidArgument),
            (LedgerError::EmptyPixKey, Code::InvalidArgument),
            (LedgerError::EmptyTransactionId, Code::InvalidArgument),
            (LedgerError::SelfTransfer(1), Code::InvalidArgument),
            (LedgerError::BalanceOverflow(1), Code::OutOfRange),
        ];
        for (error, code) in cases {
            let message = error.to_string();
            let status = Status::from(error);
            assert_eq!(status.code(), code, "{message}");
            assert_eq!(status.message(), message);
        }
    }
}
