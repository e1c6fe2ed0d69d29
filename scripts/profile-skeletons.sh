#!/usr/bin/env bash
# Profiles the runtime's empty skeleton for each bundled target: a clone generated with --empty-body
# (same network model, framing and syscalls, no body) is profiled in launch mode under the same
# workload, and its body section is what the runtime itself costs per request. The generator subtracts it
# (`ditto generate --skeleton profiles/skeletons/T.json`), so a clone's body adds only what is missing.
# Usage: scripts/profile-skeletons.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --release -p ditto-cli
ditto=target/release/ditto
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(memcached nginx pix-baseline pix-optimized)
mkdir -p profiles/skeletons
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for t in "${targets[@]}"; do
  echo "== skeleton of $t"
  "$ditto" generate "profiles/$t.json" -o "$work/$t" --seed 1 --empty-body >/dev/null
  "$ditto" profile --launch --target "$work/$t/target.toml" --level medium \
    --body-requests "${BODY_REQUESTS:-2000}" --body-rate "${BODY_RATE:-200}" -o "profiles/skeletons/$t.json"
done
