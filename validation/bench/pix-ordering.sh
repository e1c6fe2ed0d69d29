#!/usr/bin/env bash
# Seed 000's ordering in two validation reports: Pix baseline's L1d miss rate and p99 latency against Pix
# optimized's, for the originals (each of their runs) and for the clones, at every level both reports
# hold. Reads the reports tune-validate.sh writes (or the two given).
# Usage: validation/bench/pix-ordering.sh [BASELINE_REPORT OPTIMIZED_REPORT]
#   default: out/bench/tuned/pix-baseline-validate/report.json out/bench/tuned/pix-optimized-validate/report.json
set -euo pipefail
cd "$(dirname "$0")/../.."
b=${1:-out/bench/tuned/pix-baseline-validate/report.json}
o=${2:-out/bench/tuned/pix-optimized-validate/report.json}
for f in "$b" "$o"; do
  [ -f "$f" ] || { echo "pix-ordering: no report $f (run validation/bench/tune-validate.sh pix-baseline pix-optimized)" >&2; exit 1; }
done
python3 - "$b" "$o" <<'PY'
import json, sys

def rows(path):
    report = json.load(open(path))
    return {level["level"]: {m["key"]: m for m in level["metrics"]} for level in report["levels"]}

base, opt = rows(sys.argv[1]), rows(sys.argv[2])
fmt = lambda x: "-" if x is None else f"x{x:.2f}"
ratio = lambda a, b: None if a is None or b in (None, 0) else a / b
print(f"{'level':8} {'metric':16} {'originals (each run)':28} {'clones':8} {'holds':5}")
for level in [l for l in base if l in opt]:
    for key, label in (("l1d_miss_rate", "L1d miss rate"), ("latency_p99_us", "p99 latency")):
        mb, mo = base[level][key], opt[level][key]
        originals = [ratio(x, y) for x, y in zip(mb["original_runs"], mo["original_runs"])]
        clones = ratio(mb["clone"], mo["clone"])
        holds = clones is not None and clones > 1 and all(r is not None and r > 1 for r in originals)
        runs = ", ".join(fmt(r) for r in originals)
        print(f"{level:8} {label:16} {runs:28} {fmt(clones):8} {'yes' if holds else 'no'}")
PY
