//! Generates the gRPC client and server for `proto/pix.proto` into `$OUT_DIR`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    const PROTO: &str = "proto/pix.proto";
    println!("cargo:rerun-if-changed={PROTO}");
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_protos(&[PROTO], &["proto"])?;
    Ok(())
}
