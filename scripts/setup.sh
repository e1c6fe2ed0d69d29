#!/usr/bin/env bash
# Installs what ditto needs on Debian 12 and builds it. Idempotent: a second run installs nothing and
# rebuilds only what changed. Usage: scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: the targets (memcached, nginx), the collectors and counter backends (valgrind, bpftrace,
# linux-perf, strace), the proto compiler for the gRPC crates, and the independent load tools used to
# cross-check `ditto load` (wrk, memcaslap from libmemcached-tools).
packages=(memcached nginx valgrind bpftrace linux-perf strace protobuf-compiler wrk libmemcached-tools chromium
          build-essential pkg-config ca-certificates curl)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The packages start their own daemons on default ports; ditto starts its targets itself.
  for svc in memcached nginx; do $SUDO service "$svc" stop >/dev/null 2>&1 || true; done
fi

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "setup: installing the Rust toolchain with rustup"
    curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --component clippy,rustfmt >/dev/null
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
fi

echo "setup: building ditto (release) and the Pix ledger (pix profile: LTO, one codegen unit)"
cargo build --quiet --release -p ditto-cli
cargo build --quiet --profile pix -p pix-ledger
echo "setup: done; the ditto binary is target/release/ditto"
