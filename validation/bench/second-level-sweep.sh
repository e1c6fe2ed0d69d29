#!/usr/bin/env bash
# How a clone's simulated L1d, L2 and LLC miss rates respond to a data knob (default
# data_working_set.mid_scale, the mid stretch from data_working_set.mid_from_bytes): regenerates the
# clone of a tune history's iteration at each value and measures each one as the tuner does (`ditto
# tune --max-iterations 1 --original-runs 1` against the clone's own spec: the "original" figures are
# the clone's), then prints the four rates per value.
# Why: the L2 misses of Pix optimized's tuned clone are its 64 KiB and 128 KiB regions' (18 of 18.8
# a request, validation/bench/miss-attribution.sh), which the tail share (past 1 MiB) does not
# reach; docs/validation.md, "the second level's misses are below its size". --knob far_share_scale
# (with --set far_from_bytes=32768) measures the share of accesses past the L1d instead
# (docs/validation.md, "the far share as the L1d's lever where the mid leads").
# Usage: validation/bench/second-level-sweep.sh [--knob KEY] [--set KEY=VALUE]... HISTORY ITERATION VALUE...
#   KEY: a key of [data_working_set]; --set fixes another one at every value.
#   e.g. validation/bench/second-level-sweep.sh --set mid_from_bytes=65536 out/bench/s55/pix-optimized/tune-history.json 5 1 0.5 0.3
#   env: PORT=23200 (the clones' ports count up from it). Writes out/bench/second-level-sweep/.
set -euo pipefail
knob=mid_scale
sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --knob)
      knob=${2:?--knob needs a key of [data_working_set]}
      shift 2
      ;;
    --set)
      sets+=("${2:?--set needs KEY=VALUE}")
      shift 2
      ;;
    *) break ;;
  esac
done
[ -f "${1:?usage: second-level-sweep.sh [--knob KEY] [--set KEY=VALUE]... HISTORY ITERATION VALUE...}" ] \
  || { echo "second-level-sweep: no tune history at $1 (a tune-history.json)" >&2; exit 1; }
history=$(realpath "$1")
iteration=${2:?iteration}
shift 2
[ $# -gt 0 ] || { echo "second-level-sweep: give at least one value" >&2; exit 1; }
cd "$(dirname "$0")/../.."
. validation/bench/knobs-lib.sh
clone_dir=$(dirname "$history")
[ -f "$clone_dir/profile.json" ] && [ -f "$clone_dir/target.toml" ] \
  || { echo "second-level-sweep: $clone_dir has no profile.json and target.toml (a tuned clone's directory)" >&2; exit 1; }
cargo build --quiet --release -p ditto-cli
ditto=target/release/ditto
out=out/bench/second-level-sweep
mkdir -p "$out"
python3 validation/bench/history_knobs.py "$history" "$iteration" >"$out/knobs.toml" || exit 1
skeleton=()
name=$(sed -n 's/^name = "\(.*\)"/\1/p' "$clone_dir/target.toml" | head -1)
[ -f "profiles/skeletons/$name.json" ] && skeleton=(--skeleton "profiles/skeletons/$name.json")
port=${PORT:-23200}
for s in "$@"; do
  dir=$out/clone-$s
  rm -rf "$dir"
  cp "$out/knobs.toml" "$out/knobs-$s.toml"
  for kv in "${sets[@]}" "$knob=$s"; do
    set_knob "$out/knobs-$s.toml" data_working_set "${kv%%=*}" "${kv#*=}"
  done
  "$ditto" generate "$clone_dir/profile.json" -o "$dir" --seed 1 --knobs "$out/knobs-$s.toml" "${skeleton[@]}" >/dev/null
  sed "s/^port = .*/port = $port/" "$clone_dir/target.toml" >"$dir/target.toml"
  port=$((port + 1))
  "$ditto" tune "$dir" --target "$dir/target.toml" --max-iterations 1 --original-runs 1 >"$out/tune-$s.log" 2>&1 \
    || { echo "second-level-sweep: measuring x$s failed, see $out/tune-$s.log" >&2; exit 1; }
done
python3 - "$out" "$@" <<'PY'
import json, sys
out, scales = sys.argv[1], sys.argv[2:]
keys = ["l1d_miss_rate", "l2_miss_rate", "llc_miss_rate", "l1i_miss_rate"]
print(f"{'value':>10}" + "".join(f"{k:>16}" for k in keys))
for s in scales:
    f = json.load(open(f"{out}/clone-{s}/tune-history.json"))["iterations"][0]["figures"]
    print(f"{'x' + s:>10}" + "".join(f"{'-' if f.get(k) is None else format(f[k], '.5f'):>16}" for k in keys))
PY
