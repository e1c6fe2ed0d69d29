//! Helpers shared by the CLI's end-to-end tests.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The `ditto` binary under test.
pub fn ditto() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ditto"))
}

/// A bundled target spec.
pub fn spec(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../targets")
        .join(format!("{name}.toml"))
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("ephemeral port")
        .port()
}

/// Sends `sig` to `pid`.
pub fn signal(pid: u32, sig: i32) {
    extern "C" {
        fn kill(pid: i32, sig: i32) -> i32;
    }
    // SAFETY: kill(2) touches no memory; the tests signal only processes they started.
    unsafe {
        kill(pid as i32, sig);
    }
}
