#!/usr/bin/env bash
# Regenerates the committed example clones in clones/ from the committed profiles in profiles/, each
# with seed 1 and default knobs, subtracting the runtime skeleton's own cost measured in
# profiles/skeletons/ (scripts/profile-skeletons.sh), and runs the confidentiality check against the original's binary
# (the result is recorded in each clone's README). Deterministic: running it again reproduces clones/
# byte for byte, which CI checks (`scripts/regenerate-clones.sh --check`).
# Usage: scripts/regenerate-clones.sh [--check] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(memcached nginx pix-baseline pix-optimized)
cargo build --quiet --release -p ditto-cli
cargo build --quiet --profile pix -p pix-ledger
ditto=target/release/ditto
original() {
  case "$1" in
    memcached) echo /usr/bin/memcached ;;
    nginx) echo /usr/sbin/nginx ;;
    pix-*) echo target/pix/pix-ledger ;;
  esac
}
out_root=clones
if [ $check = 1 ]; then out_root=$(mktemp -d); trap 'rm -rf "$out_root"' EXIT; fi
for t in "${targets[@]}"; do
  skeleton=()
  [ -f "profiles/skeletons/$t.json" ] && skeleton=(--skeleton "profiles/skeletons/$t.json")
  "$ditto" generate "profiles/$t.json" -o "$out_root/$t" --seed 1 "${skeleton[@]}" --original "$(original "$t")" >/dev/null
  make -s -C "$out_root/$t" clean >/dev/null 2>&1 || rm -f "$out_root/$t/clone" "$out_root/$t"/*.o
done
if [ $check = 1 ]; then
  for t in "${targets[@]}"; do
    if ! diff -r -x clone -x '*.o' -x clone-asan "clones/$t" "$out_root/$t" >/dev/null; then
      echo "clones/$t differs from what profiles/$t.json generates; run scripts/regenerate-clones.sh" >&2
      diff -r -x clone -x '*.o' -x clone-asan "clones/$t" "$out_root/$t" | head -20 >&2
      exit 1
    fi
  done
  echo "clones/ reproduces from profiles/ (${targets[*]})"
fi
