//! Analyzer throughput: records the ditto-body stream of one program run, then replays it through the
//! analyzer on one thread and reports guest instructions (and stream words) analysed per second.
//! Usage: cargo run --release -p ditto-body --example analyzer_throughput -- PROGRAM [ARGS]
use std::io::Read;
use std::net::TcpListener;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use ditto_body::analysis::ProcessAnalysis;
use ditto_body::classes::ClassTable;

fn main() -> Result<()> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.is_empty() {
        bail!("usage: analyzer_throughput PROGRAM [ARGS]");
    }
    let tool = ditto_body::tool::ensure_tool()?;
    let listener = TcpListener::bind("127.0.0.1:0").context("bind")?;
    let addr = listener.local_addr()?;
    let recorder = std::thread::spawn(move || -> Result<Vec<u8>> {
        // The first connection is the program's process (a program that forks is not supported here).
        let (mut s, _) = listener.accept()?;
        let mut bytes = Vec::new();
        s.read_to_end(&mut bytes)?;
        Ok(bytes)
    });
    let t = Instant::now();
    let status = tool
        .command(addr, &[], &argv)
        .stdout(std::process::Stdio::null())
        .status()?;
    let traced = t.elapsed().as_secs_f64();
    let bytes = recorder
        .join()
        .map_err(|_| anyhow::anyhow!("recorder panicked"))??;
    let words: Vec<u64> = bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect();
    let mut a = ProcessAnalysis::new(&ClassTable::bundled());
    let t = Instant::now();
    for chunk in words.chunks(1 << 17) {
        a.feed(chunk)?;
    }
    let secs = t.elapsed().as_secs_f64();
    let instructions: u64 = a.snapshot().threads.iter().map(|t| t.instructions).sum();
    println!(
        "{}: {status}, traced in {traced:.2} s; analysis of {:.1} M words / {:.1} M instructions in {secs:.2} s \
         on one thread: {:.1} M instructions/s, {:.1} M words/s",
        argv[0],
        words.len() as f64 / 1e6,
        instructions as f64 / 1e6,
        instructions as f64 / 1e6 / secs,
        words.len() as f64 / 1e6 / secs
    );
    Ok(())
}
