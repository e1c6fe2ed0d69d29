//! Generates the Pix ledger gRPC client from the shared contract.
//!
//! The library only needs the client. Integration tests need a fake `Ledger` server, so a second,
//! server-only copy is generated into `$OUT_DIR/fake_server/`; only the tests `include!` it, so the
//! library itself never contains server code.

use std::path::PathBuf;

const PROTO: &str = "../../targets/pix-ledger/proto/pix.proto";
const INCLUDE: &str = "../../targets/pix-ledger/proto";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={PROTO}");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);

    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .compile_protos(&[PROTO], &[INCLUDE])?;

    let fake = out.join("fake_server");
    std::fs::create_dir_all(&fake)?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(false)
        .out_dir(&fake)
        .compile_protos(&[PROTO], &[INCLUDE])?;
    Ok(())
}
