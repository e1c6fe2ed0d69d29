#!/usr/bin/env bash
# Regenerates the example profiles in profiles/ with one launch-mode command per bundled target: ditto
# starts the target natively and profiles its skeleton under the spec's medium load, then runs it under the
# ditto-body Valgrind tool for the body, and writes one merged profile (statistics only).
# Usage: scripts/profile-examples.sh [TARGET...]   (default: all four bundled targets)
# BODY_REQUESTS / BODY_RATE set the traced window (default 2000 requests at 200 req/s);
# BODY_WARMUP_REQUESTS the requests served before it and not counted (default 0;
# docs/body-profiling.md). SKELETON_ONLY=1 re-takes only the native part (syscalls, threads, network and
# the second load's syscalls) and keeps each profile's body (`--body-from`): seconds instead of minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --release -p ditto-cli
ditto=target/release/ditto
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(memcached nginx pix-baseline pix-optimized)
mkdir -p profiles
for t in "${targets[@]}"; do
  echo "== $t"
  if [ "${SKELETON_ONLY:-0}" = 1 ]; then
    # Written beside, then moved: the body comes from the profile being replaced.
    "$ditto" profile --launch --target "targets/$t.toml" --level medium \
      --body-from "profiles/$t.json" -o "profiles/$t.json.new"
    mv "profiles/$t.json.new" "profiles/$t.json"
    continue
  fi
  "$ditto" profile --launch --target "targets/$t.toml" --level medium \
    --body-requests "${BODY_REQUESTS:-2000}" --body-rate "${BODY_RATE:-200}" \
    --body-warmup-requests "${BODY_WARMUP_REQUESTS:-0}" -o "profiles/$t.json"
done
