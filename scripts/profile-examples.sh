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
serve_pid=""
cleanup() { [ -z "$serve_pid" ] || { kill -TERM "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; }; }
trap cleanup EXIT INT TERM
for t in "${targets[@]}"; do
  fifo=$(mktemp -u); mkfifo "$fifo"
  "$ditto" serve --target "targets/$t.toml" >"$fifo" &
  serve_pid=$!
  read -r line <"$fifo"; rm -f "$fifo"
  pid=$(sed -n 's/^pid=\([0-9]*\).*/\1/p' <<<"$line")
  [ -n "$pid" ] || { echo "profile-examples: $t did not start (see the error above)" >&2; exit 1; }
  echo "== $t (pid $pid)"
  "$ditto" profile --pid "$pid" --target "targets/$t.toml" --duration "${DURATION:-10}" -o "profiles/$t.json"
  cleanup; serve_pid=""
done
