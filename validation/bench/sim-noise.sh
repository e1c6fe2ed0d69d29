#!/usr/bin/env bash
# The simulated backend's own noise: one clone binary measured three times by the same method, with
# nothing regenerated. Runs `ditto tune` for one iteration with the clone's own target spec as the
# original and two runs of it, so the tuner's three measurements (original twice, clone once) are
# the same binary at the tuner's plan. Prints each run's figures and, per metric, the largest minus
# the smallest over their mean.
# Usage: validation/bench/sim-noise.sh [--clone DIR] TARGET   (default clone: clones/TARGET)
# SIM_FLAGS adds flags of the simulated backend, e.g. SIM_FLAGS="--sim-method differential".
set -euo pipefail
cd "$(dirname "$0")/../.."
clone=
if [ "${1:-}" = --clone ]; then
  clone=$(realpath "${2:?--clone needs a directory}")
  shift 2
fi
target=${1:?usage: sim-noise.sh [--clone DIR] TARGET}
[ -n "$clone" ] || clone="clones/$target"
[ -f "$clone/target.toml" ] || { echo "sim-noise: $clone has no target.toml (a clone directory?)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "sim-noise: valgrind is missing; run scripts/setup.sh" >&2; exit 1; }
cargo build --quiet --release -p ditto-cli
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$clone" "$work/clone"
rm -f "$work/clone/tune-history.json"
sed -i "s/^name = .*/name = \"$target-self\"/" "$work/clone/target.toml"
start=$(date +%s)
# shellcheck disable=SC2086 # SIM_FLAGS is a list of flags
target/release/ditto tune "$work/clone" --target "$work/clone/target.toml" --max-iterations 1 \
  --original-runs 2 --counters sim ${SIM_FLAGS:-} >"$work/tune.log" 2>&1 ||
  { tail -5 "$work/tune.log" >&2; exit 1; }
echo "sim-noise: $target, three measurements in $(($(date +%s) - start)) s ($(sed -n 's/.*(counters \([^)]*\)).*/\1/p' "$work/tune.log" | head -1))"
python3 - "$work/clone/tune-history.json" <<'PY'
import json, sys
h = json.load(open(sys.argv[1]))
keys = ["instructions_per_request", "branch_mispredict_rate", "conditional_mispredict_rate",
        "indirect_mispredict_rate", "l1i_miss_rate", "l1d_miss_rate", "l2_miss_rate", "llc_miss_rate"]
runs = h["original_runs"] + [it["figures"] for it in h["iterations"]]
print(f"{'metric':<30}" + "".join(f"{'run ' + str(i + 1):>14}" for i in range(len(runs))) + f"{'spread %':>10}")
for k in keys:
    v = [r.get(k) for r in runs]
    cells = "".join(f"{'-' if x is None else format(x, '.6g'):>14}" for x in v)
    xs = [x for x in v if x is not None]
    spread = "-" if len(xs) < 2 or sum(xs) == 0 else f"{100 * (max(xs) - min(xs)) / (sum(xs) / len(xs)):.2f}"
    print(f"{k:<30}{cells}{spread:>10}")
PY
