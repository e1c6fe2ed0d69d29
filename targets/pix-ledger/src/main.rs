//! `pix-ledger`: serve the Pix ledger over gRPC until SIGINT or SIGTERM.

use std::future::Future;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::process::ExitCode;

use anyhow::Context;
use clap::error::ErrorKind;
use clap::{Parser, ValueEnum};
use pix_ledger::Variant;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum VariantArg {
    /// Trait objects, one global write lock, fat account histories, clone-and-write-back.
    Baseline,
    /// Sharded map, per-account locks, compact histories, in-place mutation.
    Optimized,
}

impl From<VariantArg> for Variant {
    fn from(arg: VariantArg) -> Self {
        match arg {
            VariantArg::Baseline => Variant::Baseline,
            VariantArg::Optimized => Variant::Optimized,
        }
    }
}

/// In-memory Pix instant-payment ledger over gRPC.
#[derive(Debug, Parser)]
#[command(name = "pix-ledger", version)]
struct Args {
    /// Which implementation serves the API.
    #[arg(long, value_enum)]
    variant: VariantArg,
    /// Address to accept gRPC connections on.
    #[arg(long, default_value = "127.0.0.1:50051")]
    listen: SocketAddr,
    /// Tokio worker threads (default: one per CPU).
    #[arg(long)]
    worker_threads: Option<NonZeroUsize>,
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(err)
            if matches!(
                err.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) =>
        {
            // Help and version go to stdout; nothing useful can be done if that fails.
            let _ = err.print();
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            eprintln!("{}", one_line(&err.to_string()));
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Squeezes clap's multi-line usage error into one line, keeping the diagnosis and dropping the
/// usage synopsis and the "--help" hint.
fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|line| {
            !line.is_empty()
                && !line.starts_with("Usage:")
                && !line.starts_with("For more information")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn run(args: Args) -> anyhow::Result<()> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(threads) = args.worker_threads {
        builder.worker_threads(threads.get());
    }
    let runtime = builder.build().context("cannot start the tokio runtime")?;
    runtime.block_on(serve(args.variant.into(), args.listen))
}

async fn serve(variant: Variant, listen: SocketAddr) -> anyhow::Result<()> {
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener
        .local_addr()
        .context("cannot read the bound address")?;
    // Handlers go in before the ready line, so a signal sent right after it is not fatal.
    let shutdown = shutdown_signal()?;
    eprintln!("pix-ledger listening on {addr} variant={variant}");
    pix_ledger::serve(variant, listener, shutdown)
        .await
        .context("gRPC server failed")
}

/// Completes on the first SIGINT or SIGTERM.
fn shutdown_signal() -> anyhow::Result<impl Future<Output = ()>> {
    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}
