#!/usr/bin/env bash
# How a clone's simulated L1i miss rate responds to the tuner's code-size knob
# (instruction_working_set.size_scale): regenerates the committed clone of TARGET at each scale
# (seed 1, its committed knobs otherwise, skeleton subtracted) and measures all of them side by side
# with `ditto compare --sim` (cachegrind at 2,000 req/s, runs of 15,000 and 30,000 requests: with
# `compare`'s default 1,000 and 2,000 the L1i misses per request are a few and their run-to-run
# difference can come out negative). A smooth response is what lets
# `ditto tune` close in on the original's rate; a cliff between neighbouring scales is what stops it.
# --knobs FILE starts from FILE instead of the committed knobs, to reproduce what the tuner measured
# there: a knobs TOML, or a tune-history.json with --iteration N (that iteration's knobs).
# --knob KEY sweeps another key of [instruction_working_set] instead of size_scale, e.g.
# far_share_scale (the share of fetches past the L1i's size); --knob SECTION.KEY a key of another
# section, e.g. branches.transition_rate_scale (how the L1i moves with a knob that is not the code's).
# Usage: validation/bench/code-size-sweep.sh [--knobs FILE [--iteration N]] [--knob [SECTION.]KEY] [TARGET [SCALE...]]   (default: memcached 1 1.05 1.09 1.14 1.19 1.3)
set -euo pipefail
knobs=
iteration=
knob=size_scale
while [ $# -gt 0 ]; do
  case "$1" in
    --knobs)
      knobs=$(realpath "${2:?--knobs needs a file}")
      shift 2
      ;;
    --iteration)
      iteration=${2:?--iteration needs an iteration number of the --knobs history}
      shift 2
      ;;
    --knob)
      knob=${2:?--knob needs a key of [instruction_working_set], or SECTION.KEY}
      shift 2
      ;;
    *) break ;;
  esac
done
cd "$(dirname "$0")/../.."
. validation/bench/knobs-lib.sh
target=${1:-memcached}
shift || true
scales=("$@")
[ ${#scales[@]} -gt 0 ] || scales=(1 1.05 1.09 1.14 1.19 1.3)
[ -f "profiles/$target.json" ] || { echo "code-size-sweep: no profiles/$target.json" >&2; exit 1; }
[ -n "$knobs" ] || knobs="clones/$target/knobs.toml"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ $knobs == *.json ]]; then
  [ -n "$iteration" ] || { echo "code-size-sweep: --knobs $knobs is a tune history: give --iteration N" >&2; exit 1; }
  # The history's knobs have the knobs file's sections and keys; TOML is what `generate` reads.
  python3 validation/bench/history_knobs.py "$knobs" "$iteration" >"$work/knobs-history.toml" || exit 1
  knobs="$work/knobs-history.toml"
fi
section=instruction_working_set
key=$knob
if [[ $knob == *.* ]]; then
  section=${knob%%.*}
  key=${knob#*.}
fi
grep -q "^\[$section\]" "$knobs" || { echo "code-size-sweep: no [$section] in $knobs" >&2; exit 1; }
cargo build --quiet --release -p ditto-cli
ditto=target/release/ditto
out=out/bench
mkdir -p "$out"
skeleton=()
[ -f "profiles/skeletons/$target.json" ] && skeleton=(--skeleton "profiles/skeletons/$target.json")
specs=()
for s in "${scales[@]}"; do
  cp "$knobs" "$work/knobs-$s.toml"
  set_knob "$work/knobs-$s.toml" "$section" "$key" "$s"
  "$ditto" generate "profiles/$target.json" -o "$work/clone-$s" --seed 1 --knobs "$work/knobs-$s.toml" "${skeleton[@]}" >/dev/null 2>&1
  sed -i "s/^name = .*/name = \"x${s/./_}\"/" "$work/clone-$s/target.toml"
  specs+=(--target "$work/clone-$s/target.toml")
done
"$ditto" compare "${specs[@]}" --sim --sim-rate 2000 --sim-requests 15000 --json "$out/code-size-sweep-$target-$knob.json" >"$work/compare.txt"
python3 - "$out/code-size-sweep-$target-$knob.json" "${scales[@]}" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
scales = sys.argv[2:]
keys = ["l1i_miss_rate", "l1d_miss_rate", "branch_mispredict_rate", "instructions_per_request"]
print(f"{'scale':>10}" + "".join(f"{k:>26}" for k in keys))
for scale, t in zip(scales, report["targets"]):
    rates = (t.get("sim") or {}).get("rates") or {}
    cells = [rates.get(k) for k in keys]
    print(f"{'x' + scale:>10}" + "".join(f"{'-' if v is None else format(v, '.6g'):>26}" for v in cells))
PY
