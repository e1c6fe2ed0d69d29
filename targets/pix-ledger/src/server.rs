//! Starting the gRPC server in-process.

use std::future::Future;

use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;

use crate::backend::{LedgerBackend, Variant};
use crate::baseline::GlobalLockLedger;
use crate::optimized::ShardedLedger;
use crate::proto::ledger_server::LedgerServer;
use crate::service::LedgerService;

/// Serves a fresh, empty ledger of `variant` on `listener` until `shutdown` completes, then
/// stops accepting connections and lets in-flight requests finish (graceful shutdown).
pub async fn serve<F>(
    variant: Variant,
    listener: TcpListener,
    shutdown: F,
) -> Result<(), tonic::transport::Error>
where
    F: Future<Output = ()> + Send,
{
    // One monomorphised server per variant: the choice is made once, here, not per request.
    match variant {
        Variant::Baseline => serve_backend(GlobalLockLedger::new(), listener, shutdown).await,
        Variant::Optimized => serve_backend(ShardedLedger::new(), listener, shutdown).await,
    }
}

/// [`serve`] for any backend.
pub async fn serve_backend<B, F>(
    backend: B,
    listener: TcpListener,
    shutdown: F,
) -> Result<(), tonic::transport::Error>
where
    B: LedgerBackend,
    F: Future<Output = ()> + Send,
{
    // Small unary RPCs: don't let Nagle's algorithm hold responses back.
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    Server::builder()
        .add_service(LedgerServer::new(LedgerService::new(backend)))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
}
