#!/usr/bin/env bash
# Conditional branches and mispredictions of a clone per function under cachegrind's branch simulator
# (the `sim` backend's predictor), per request of its own target's traffic: how much of a cluster's
# mispredictions its synthetic body makes and how much the runtime's own code (framing, the worker
# loop, libc) makes beside it. Runs the clone at 250 req/s for 8 s without `--warm` (the warm-up's
# sets would outnumber the measured requests), then prints the functions with at least 0.05
# mispredictions a request, and the body and runtime totals of the threads' code.
# Usage: validation/bench/branch-by-function.sh CLONE_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
clone=${1:?usage: validation/bench/branch-by-function.sh CLONE_DIR}
command -v valgrind >/dev/null || { echo "branch-by-function: valgrind is missing; run scripts/setup.sh" >&2; exit 1; }
# shellcheck source=validation/bench/branch-sim-lib.sh
source validation/bench/branch-sim-lib.sh
cargo build --quiet --release -p ditto-cli
work=$(mktemp -d)
trap 'branch_sim_stop; rm -rf "$work"' EXIT
branch_sim_run "$clone" "$work"
answered=$(sed -n 's/.*answered \([0-9]*\).*/\1/p' "$work/load.log" | tail -1)
[ -n "$answered" ] && [ "$answered" -gt 0 ] || { echo "branch-by-function: the load got no answers:" >&2; cat "$work/load.log" >&2; exit 1; }
cg_annotate --show=Bc,Bcm --auto=no "$work/cg.out" >"$work/ann.txt" 2>/dev/null
python3 - "$work/ann.txt" "$answered" <<'PY'
import re, sys
path, requests = sys.argv[1], int(sys.argv[2])
num = r"([\d,]+(?: \(\s*[\d.]+%\))?|\.)"
row = re.compile(r"^\s*" + r"\s+".join([num] * 2) + r"\s\s+(\S.*)$")
def value(s):
    return 0 if s == "." else int(s.split()[0].replace(",", ""))
rows = []
for line in open(path):
    m = row.match(line)
    if m and ":" in m.group(3) and "PROGRAM TOTALS" not in line:
        rows.append((value(m.group(2)), value(m.group(1)), m.group(3).strip()))
# Start-up work (buffer set-up, the warm pass) runs before the first request, not per request.
startup = ("ditto_warm_schedule", "ditto_buffer_alloc", "ditto_process_init", "read_line")
print(f"{requests} requests answered; per request:")
print(f"{'mispredicted':>13}{'branches':>10}  function")
body = runtime = 0.0
for bcm, bc, fn in sorted(rows, reverse=True):
    if any(s in fn for s in startup):
        continue
    if "ditto_body_" in fn:
        body += bcm
    else:
        runtime += bcm
    if bcm / requests >= 0.05:
        print(f"{bcm / requests:>13.2f}{bc / requests:>10.1f}  {fn}")
print(f"bodies: {body / requests:.2f} mispredicted a request; the rest of the code: {runtime / requests:.2f} (start-up left out: {', '.join(startup)})")
PY
