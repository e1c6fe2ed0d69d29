#!/usr/bin/env bash
# Per-request cachegrind counts of a validation report, original and clone side by side: each
# simulated pair (two offered rates, same duration, per LL geometry) differenced and divided by the
# requests between them, as the sim backend's figures are. Splits what the rates merge: L1d, L2 and
# LLC misses by reads and writes, branches and mispredictions by conditional and indirect.
# Usage: validation/bench/sim-counts.sh [REPORT]   (default: out/bench/tuned/pix-baseline-validate/report.json)
set -euo pipefail
cd "$(dirname "$0")/../.."
report=${1:-out/bench/tuned/pix-baseline-validate/report.json}
[ -f "$report" ] || { echo "sim-counts: no report $report (run validation/bench/tune-validate.sh TARGET)" >&2; exit 1; }
python3 - "$report" <<'PY'
import json, sys

report = json.load(open(sys.argv[1]))

def per_request(runs, geometry):
    pair = sorted((r for r in runs if r["ll_as"] == geometry), key=lambda r: r["offered_rate"])
    if len(pair) != 2:
        return None
    lo, hi = pair
    n = hi["requests_completed"] - lo["requests_completed"]
    if n <= 0:
        return None
    return {k: (hi["totals"][k] - lo["totals"][k]) / n for k in hi["totals"]}

columns = [
    ("instr", "llc", lambda t: t["ir"]),
    ("L1d rd", "llc", lambda t: t["d1mr"]),
    ("L1d wr", "llc", lambda t: t["d1mw"]),
    ("L2 rd", "l2", lambda t: t["dlmr"]),
    ("L2 wr", "l2", lambda t: t["dlmw"]),
    ("LLC rd", "llc", lambda t: t["dlmr"]),
    ("LLC wr", "llc", lambda t: t["dlmw"]),
    ("cond", "llc", lambda t: t["bc"]),
    ("cond mis", "llc", lambda t: t["bcm"]),
    ("ind", "llc", lambda t: t["bi"]),
    ("ind mis", "llc", lambda t: t["bim"]),
]
print("per request; L2 columns from the runs with the L2 as last level")
print(f"{'level':8} {'run':10} " + " ".join(f"{c[0]:>9}" for c in columns))
for level in report["levels"]:
    sides = [(f"original{i}", r) for i, r in enumerate(level["original"])] + [("clone", level["clone"])]
    for name, run in sides:
        runs = run.get("sim_runs") or []
        by = {g: per_request(runs, g) for g in ("llc", "l2")}
        cells = []
        for _, geometry, get in columns:
            t = by[geometry]
            cells.append(f"{get(t):9.2f}" if t else f"{'-':>9}")
        print(f"{level['level']:8} {name:10} " + " ".join(cells))
PY
