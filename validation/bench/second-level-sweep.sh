#!/usr/bin/env bash
# How a clone's simulated L1d, L2 and LLC miss rates respond to the data mid stretch
# (data_working_set.mid_scale, from data_working_set.mid_from_bytes): regenerates the clone of a
# tune history's iteration at each scale and measures each one as the tuner does (`ditto tune
# --max-iterations 1 --original-runs 1` against the clone's own spec: the "original" figures are
# the clone's), then prints the four rates per scale.
# Why: the L2 misses of Pix optimized's tuned clone are its 64 KiB and 128 KiB regions' (18 of 18.8
# a request, validation/bench/miss-attribution.sh), which the tail share (past 1 MiB) does not
# reach; docs/validation.md, "the second level's misses are below its size".
# Usage: validation/bench/second-level-sweep.sh HISTORY ITERATION MID_FROM_BYTES SCALE...
#   e.g. validation/bench/second-level-sweep.sh out/bench/s55/pix-optimized/tune-history.json 5 65536 1 0.5 0.3
#   env: PORT=23200 (the clones' ports count up from it). Writes out/bench/second-level-sweep/.
set -euo pipefail
history=$(realpath "${1:?usage: second-level-sweep.sh HISTORY ITERATION MID_FROM_BYTES SCALE...}")
iteration=${2:?iteration}
mid_from=${3:?mid_from_bytes}
shift 3
[ $# -gt 0 ] || { echo "second-level-sweep: give at least one scale" >&2; exit 1; }
cd "$(dirname "$0")/../.."
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
  sed -e "/^\[data_working_set\]/,/^\[/ s/^mid_scale = .*/mid_scale = $s/" \
    -e "/^\[data_working_set\]/,/^\[/ s/^mid_from_bytes = .*/mid_from_bytes = $mid_from/" \
    "$out/knobs.toml" >"$out/knobs-$s.toml"
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
print(f"{'mid scale':>10}" + "".join(f"{k:>16}" for k in keys))
for s in scales:
    f = json.load(open(f"{out}/clone-{s}/tune-history.json"))["iterations"][0]["figures"]
    print(f"{'x' + s:>10}" + "".join(f"{'-' if f.get(k) is None else format(f[k], '.5f'):>16}" for k in keys))
PY
