#!/usr/bin/env bash
# Tunes a copy of each committed clone against its original and validates the tuned copy: the
# reproducible source of the per-target error tables in docs/validation.md. For each TARGET: copies
# clones/TARGET to out/bench/tuned/TARGET, runs `ditto tune` (--max-iterations 5, two runs of the
# original), then `ditto validate` at low and medium load without the saturation search, writing
# out/bench/tuned/TARGET-validate/{report.json,index.html}. Prints one summary line per target.
# Each target takes 15-30 minutes on a 2-vCPU machine (the simulated counters run under cachegrind).
# Usage: validation/bench/tune-validate.sh [TARGET...]   (default: memcached nginx pix-baseline pix-optimized)
# SIM_FLAGS adds flags of the simulated backend to both commands, e.g. SIM_FLAGS="--sim-method
# differential --sim-requests 60000 --sim-seconds 45" for the older cachegrind differential, three
# times as long (docs/validation.md, "The simulated window"); TUNE_ITERATIONS sets the iteration cap (5;
# 0 validates without tuning); TUNE_SEED_TRIALS the seed trials after them (`ditto tune --seed-trials`,
# default 2). FROM_KNOBS=DIR starts each copy from DIR/TARGET/knobs.toml instead of the
# committed knobs (the copy is regenerated from profiles/TARGET.json with them and the seed their
# regeneration line names: a tuning warm-started
# from an earlier one, e.g. FROM_KNOBS=out/bench/tuned after a profile was re-taken); OUT sets the
# output directory (out/bench/tuned).
set -euo pipefail
cd "$(dirname "$0")/../.."
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(memcached nginx pix-baseline pix-optimized)
cargo build --quiet --release -p ditto-cli
cargo build --quiet --profile pix -p pix-ledger
ditto=target/release/ditto
out=${OUT:-out/bench/tuned}
mkdir -p "$out"
for t in "${targets[@]}"; do
  [ -d "clones/$t" ] || { echo "tune-validate: no clones/$t" >&2; exit 1; }
  knobs=
  if [ -n "${FROM_KNOBS:-}" ]; then
    [ -f "$FROM_KNOBS/$t/knobs.toml" ] || { echo "tune-validate: no $FROM_KNOBS/$t/knobs.toml" >&2; exit 1; }
    # Read before the copy is replaced: FROM_KNOBS may be the output directory itself.
    knobs=$(mktemp)
    cp "$FROM_KNOBS/$t/knobs.toml" "$knobs"
  fi
  rm -rf "${out:?}/$t" "$out/$t-validate"
  cp -r "clones/$t" "$out/$t"
  if [ -n "$knobs" ]; then
    skeleton=()
    [ -f "profiles/skeletons/$t.json" ] && skeleton=(--skeleton "profiles/skeletons/$t.json")
    # The seed the knobs were tuned at (a seed trial may have left another than 1), from the
    # regeneration line `ditto tune` writes at the top of the file.
    seed=$(sed -n 's/^#.*--seed \([0-9][0-9]*\).*/\1/p' "$knobs" | head -n 1)
    "$ditto" generate "profiles/$t.json" -o "$out/$t" --knobs "$knobs" --seed "${seed:-1}" "${skeleton[@]}" >/dev/null
    rm -f "$knobs"
  fi
  start=$(date +%s)
  if [ "${TUNE_ITERATIONS:-5}" -gt 0 ]; then
    # shellcheck disable=SC2086 # SIM_FLAGS is a list of flags
    "$ditto" tune "$out/$t" --target "targets/$t.toml" --max-iterations "${TUNE_ITERATIONS:-5}" \
      --seed-trials "${TUNE_SEED_TRIALS:-2}" ${SIM_FLAGS:-}
  else
    make -s -C "$out/$t"
  fi
  tuned=$(date +%s)
  # shellcheck disable=SC2086
  "$ditto" validate --target "targets/$t.toml" --clone "$out/$t" --levels low,medium --no-saturation \
    --out "$out/$t-validate" ${SIM_FLAGS:-}
  echo "tune-validate: $t tuned in $((tuned - start)) s, validated in $(($(date +%s) - tuned)) s;" \
    "history $out/$t/tune-history.json, dashboard $out/$t-validate/index.html"
done
