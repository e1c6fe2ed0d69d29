#!/usr/bin/env bash
# The main job on a bundled target, end to end: set up and build; profile the target (launch mode:
# skeleton natively, body under the ditto-body Valgrind tool); generate a clone from the profile
# (subtracting the runtime skeleton's own cost, checking confidentiality against the original binary);
# tune the clone against the original; validate both under low/medium/high load; print the dashboard's path.
# Usage: scripts/quickstart.sh [TARGET]   (TARGET: memcached (default), nginx, pix-baseline, pix-optimized)
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-memcached}"
[ -f "targets/$target.toml" ] || { echo "quickstart: no target spec targets/$target.toml" >&2; exit 1; }
scripts/setup.sh
ditto=target/release/ditto
out="out/quickstart/$target"
mkdir -p "$out"
case "$target" in
  memcached) original=/usr/bin/memcached ;;
  nginx) original=/usr/sbin/nginx ;;
  pix-*) original=target/pix/pix-ledger ;;
esac

echo "== 1/4 profile $target (launch mode)"
"$ditto" profile --launch --target "targets/$target.toml" -o "$out/profile.json"

echo "== 2/4 generate the clone"
skeleton=()
[ -f "profiles/skeletons/$target.json" ] && skeleton=(--skeleton "profiles/skeletons/$target.json")
"$ditto" generate "$out/profile.json" -o "$out/clone" "${skeleton[@]}" --original "$original"

echo "== 3/4 tune the clone against $target"
"$ditto" tune "$out/clone" --target "targets/$target.toml" --max-iterations "${TUNE_ITERATIONS:-3}"

echo "== 4/4 validate: $target vs its clone at low, medium and high load"
"$ditto" validate --target "targets/$target.toml" --clone "$out/clone" --out "$out/validate"

echo "quickstart: profile $out/profile.json, clone $out/clone, dashboard $out/validate/index.html"
