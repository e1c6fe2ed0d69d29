#!/usr/bin/env bash
# The main job on a bundled target: set up and build, then start the target, load it and print the
# result, then profile the running target from outside (attach mode) while ditto drives its load.
# Usage: scripts/quickstart.sh [TARGET]   (TARGET: memcached (default), nginx, pix-baseline, pix-optimized)
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-memcached}"
[ -f "targets/$target.toml" ] || { echo "quickstart: no target spec targets/$target.toml" >&2; exit 1; }
scripts/setup.sh
ditto=target/release/ditto
out="out/quickstart/$target"
mkdir -p "$out"

echo "== load: $target at its medium level"
"$ditto" load --target "targets/$target.toml" --level medium --json "$out/load.json"

echo "== profile: attach to a running $target"
serve_pid=""
cleanup() { [ -z "$serve_pid" ] || { kill -TERM "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; }; }
trap cleanup EXIT INT TERM
fifo=$(mktemp -u); mkfifo "$fifo"
"$ditto" serve --target "targets/$target.toml" >"$fifo" &
serve_pid=$!
read -r line <"$fifo"; rm -f "$fifo"
pid=$(sed -n 's/^pid=\([0-9]*\).*/\1/p' <<<"$line")
[ -n "$pid" ] || { echo "quickstart: $target did not start (see the error above)" >&2; exit 1; }
"$ditto" profile --pid "$pid" --target "targets/$target.toml" --duration 10 -o "$out/profile.json"
cleanup; serve_pid=""

echo "quickstart: load report $out/load.json (HdrHistogram log $out/load.hlog), profile $out/profile.json"
