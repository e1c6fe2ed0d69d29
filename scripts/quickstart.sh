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
DITTO=$ditto
source scripts/serve-lib.sh
trap serve_stop EXIT INT TERM
serve_start "targets/$target.toml"
"$ditto" profile --pid "$TARGET_PID" --target "targets/$target.toml" --duration 10 -o "$out/profile.json"
serve_stop

echo "quickstart: load report $out/load.json (HdrHistogram log $out/load.hlog), profile $out/profile.json"
