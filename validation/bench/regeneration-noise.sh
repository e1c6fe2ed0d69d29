#!/usr/bin/env bash
# How much of a clone's simulated figures move when the tuner regenerates it with one data knob
# changed. `ditto tune` steps one knob group at a time and reads every other group's metrics as if
# they had stayed put; a metric that moves when a knob of another group moves is noise to the tuner.
# Regenerates TARGET's clone from one knobs file (seed 1, skeleton subtracted) as:
#   base      the knobs as given
#   base'     the same clone measured again (the measurement's own run-to-run spread)
#   data×0.9, data×1.1   data_working_set.size_scale times 0.9 and 1.1 (a typical tuner step)
#   seed 2 … seed N+1    the knobs as given, other seeds (a full redraw of every random choice;
#                        --seeds N, default 2)
# and measures all of them side by side with `ditto compare --sim`. Prints each metric per variant and,
# for every metric outside the data group, the largest relative difference from base among the data
# variants and among the seeds. --l2 adds `compare`'s L2 window (L2 and LLC miss rates as `ditto tune`
# measures them; twice the simulated time) and their spreads (the L2 and LLC are data metrics:
# their "data ±10 %" column is the data group's own response, the others are noise).
# Usage: validation/bench/regeneration-noise.sh [--knobs FILE] [--l2] [--seeds N] [TARGET]
#        (default: nginx, clones/TARGET/knobs.toml, 2 other seeds)
set -euo pipefail
knobs=
l2=()
seeds=2
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds)
      seeds=${2:?--seeds needs a count}
      [[ $seeds =~ ^[1-9][0-9]*$ ]] || { echo "regeneration-noise: --seeds takes a positive count, not '$seeds'" >&2; exit 2; }
      shift 2
      ;;
    --knobs)
      knobs=$(realpath "${2:?--knobs needs a file}")
      shift 2
      ;;
    --l2)
      l2=(--l2)
      shift
      ;;
    *) break ;;
  esac
done
cd "$(dirname "$0")/../.."
target=${1:-nginx}
[ -f "profiles/$target.json" ] || { echo "regeneration-noise: no profiles/$target.json" >&2; exit 1; }
[ -n "$knobs" ] || knobs="clones/$target/knobs.toml"
command -v valgrind >/dev/null || { echo "regeneration-noise: valgrind is missing; run scripts/setup.sh" >&2; exit 1; }
cargo build --quiet --release -p ditto-cli
ditto=target/release/ditto
out=out/bench
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
skeleton=()
[ -f "profiles/skeletons/$target.json" ] && skeleton=(--skeleton "profiles/skeletons/$target.json")
base_size=$(sed -n "/^\[data_working_set\]/,/^\[/ s/^size_scale = //p" "$knobs")
[ -n "$base_size" ] || { echo "regeneration-noise: $knobs has no data_working_set.size_scale" >&2; exit 1; }
variants=(base base2 data0_9 data1_1)
for ((k = 2; k <= seeds + 1; k++)); do variants+=("seed$k"); done
specs=()
for v in "${variants[@]}"; do
  seed=1
  size=$base_size
  case $v in
    data0_9) size=$(python3 -c "print($base_size * 0.9)") ;;
    data1_1) size=$(python3 -c "print($base_size * 1.1)") ;;
    seed*) seed=${v#seed} ;;
  esac
  if [ "$v" = base2 ]; then
    cp -r "$work/clone-base" "$work/clone-base2"
  else
    sed "/^\[data_working_set\]/,/^\[/ s/^size_scale = .*/size_scale = $size/" "$knobs" >"$work/knobs-$v.toml"
    "$ditto" generate "profiles/$target.json" -o "$work/clone-$v" --seed "$seed" --knobs "$work/knobs-$v.toml" \
      "${skeleton[@]}" >/dev/null 2>&1
  fi
  sed -i "s/^name = .*/name = \"$v\"/" "$work/clone-$v/target.toml"
  specs+=(--target "$work/clone-$v/target.toml")
done
"$ditto" compare "${specs[@]}" --sim "${l2[@]}" --json "$out/regeneration-noise-$target.json" >"$work/compare.txt"
python3 - "$out/regeneration-noise-$target.json" "${variants[@]}" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
names = sys.argv[2:]
keys = ["instructions_per_request", "branch_mispredict_rate", "l1i_miss_rate", "l1d_miss_rate",
        "l2_miss_rate", "llc_miss_rate"]
def measured(target):
    # The L2 and LLC miss rates are in the --l2 figures; the rest in the one-geometry window's rates.
    sim = target.get("sim") or {}
    r = dict(sim.get("rates") or {})
    figures = sim.get("figures") or {}
    for k in ("l2_miss_rate", "llc_miss_rate"):
        r[k] = figures.get(k)
    return r
rates = [measured(t) for t in report["targets"]]
print(f"{'variant':>10}" + "".join(f"{k:>26}" for k in keys))
for name, r in zip(names, rates):
    print(f"{name:>10}" + "".join(f"{'-' if r.get(k) is None else format(r[k], '.6g'):>26}" for k in keys))
def spread(group, k):
    b = rates[0].get(k)
    vals = [rates[names.index(n)].get(k) for n in group]
    if not b or any(v is None for v in vals):
        return None
    return max(abs(v - b) / b * 100 for v in vals)
print()
seed_names = [n for n in names if n.startswith("seed")]
seed_label = f"seeds 2-{1 + len(seed_names)}"
print(f"{'largest |x - base| / base, %':<34}{'remeasured':>12}{'data ±10 %':>12}{seed_label:>12}")
for k in ["instructions_per_request", "branch_mispredict_rate", "l1i_miss_rate", "l1d_miss_rate",
          "l2_miss_rate", "llc_miss_rate"]:
    cells = [spread(["base2"], k), spread(["data0_9", "data1_1"], k), spread(seed_names, k)]
    print(f"{k:<34}" + "".join(f"{'-' if c is None else format(c, '.1f'):>12}" for c in cells))
PY
