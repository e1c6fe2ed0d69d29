#!/usr/bin/env bash
# Regenerates the example attach-mode profiles in profiles/: each bundled target is started with
# `ditto serve`, profiled from outside with `ditto profile --pid` while ditto drives its medium load, and
# stopped. Usage: scripts/profile-examples.sh [TARGET...]   (default: all four bundled targets)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x target/release/ditto ] || cargo build --quiet --release -p ditto-cli
ditto=target/release/ditto
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(memcached nginx pix-baseline pix-optimized)
mkdir -p profiles
DITTO=$ditto
source scripts/serve-lib.sh
trap serve_stop EXIT INT TERM
for t in "${targets[@]}"; do
  serve_start "targets/$t.toml"
  echo "== $t (pid $TARGET_PID)"
  "$ditto" profile --pid "$TARGET_PID" --target "targets/$t.toml" --duration "${DURATION:-10}" -o "profiles/$t.json"
  serve_stop
done
