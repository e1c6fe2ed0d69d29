//! Runs one program under the ditto-body tool and prints its body section: a quick way to look at what
//! the profiler sees. Usage: cargo run --release -p ditto-body --example trace_one -- PROGRAM [ARGS]
use std::time::{Duration, Instant};

fn main() -> anyhow::Result<()> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.is_empty() {
        anyhow::bail!("usage: trace_one PROGRAM [ARGS]");
    }
    let tool = ditto_body::tool::ensure_tool()?;
    let session = ditto_body::session::BodySession::listen()?;
    let t = Instant::now();
    let status = tool
        .command(session.addr(), &[], &argv)
        .stdout(std::process::Stdio::null())
        .status()?;
    session.wait_closed(Duration::from_secs(30))?;
    let secs = t.elapsed().as_secs_f64();
    if let Some(e) = session.error() {
        anyhow::bail!(e);
    }
    let counts = session.snapshot();
    let instr: u64 = counts
        .iter()
        .flat_map(|c| &c.threads)
        .map(|t| t.instructions)
        .sum();
    let body = ditto_body::report::build_body(&counts, &[], &ditto_body::report::no_names, 1);
    println!("{}", serde_json::to_string_pretty(&body)?);
    eprintln!(
        "{status}; {:.2} s, {:.1} M instructions, {:.1} M instructions/s, {:.1} M words",
        secs,
        instr as f64 / 1e6,
        instr as f64 / 1e6 / secs,
        session.words() as f64 / 1e6
    );
    Ok(())
}
