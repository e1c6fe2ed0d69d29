#!/usr/bin/env bash
# The main job on a bundled target: set up, build, start the target, load it and print the result.
# Usage: scripts/quickstart.sh [TARGET]   (TARGET: memcached (default), nginx, pix-baseline, pix-optimized)
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-memcached}"
scripts/setup.sh
out="out/quickstart/$target"
mkdir -p "$out"
target/release/ditto load --target "targets/$target.toml" --level medium --json "$out/load.json"
echo "quickstart: report written to $out/load.json (HdrHistogram log: $out/load.hlog)"
