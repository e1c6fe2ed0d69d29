#!/usr/bin/env bash
# Runs every test of the project: formatting, lints, unit tests and the integration tests that start real
# memcached, nginx and Pix ledger servers. Installs what it needs first (scripts/setup.sh).
# Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"

echo "test: cargo fmt --check"
cargo fmt --all -- --check
echo "test: cargo clippy -D warnings"
cargo clippy --quiet --workspace --all-targets -- -D warnings
echo "test: cargo test"
cargo test --workspace --release --no-fail-fast 2>&1 | tee target/test.log
echo "test: the committed clones reproduce from the committed profiles"
if scripts/regenerate-clones.sh --check; then
  echo "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out (clones reproduce)" >> target/test.log
else
  echo "test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out (clones reproduce)" >> target/test.log
  clones_failed=1
fi
# One summary line over all test binaries, in the plain form CI reads.
awk '/^test result:/ { p += $4; f += $6; i += $8 } END { printf "all: %d passed, %d failed, %d skipped\n", p, f, i }' target/test.log
[ -z "${clones_failed:-}" ]
