//! Helpers shared by the integration tests that run real servers.
#![allow(dead_code)] // each test binary uses some of the helpers

use std::path::{Path, PathBuf};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Fails the test, naming the Debian package, when `tool` is not on the PATH.
pub fn require(tool: &str, package: &str) {
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|d| d.join(tool).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "`{tool}` is not installed: install the Debian package `{package}` (scripts/setup.sh does); the test needs it"
    );
}

/// Serialises the tests of one binary that load real servers: run side by side (cargo's default),
/// a memcheck run takes the CPU a timing-sensitive run is measuring.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
