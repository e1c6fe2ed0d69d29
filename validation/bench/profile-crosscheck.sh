#!/usr/bin/env bash
# Checks the attach profiler's syscall counts against an independent tracer over the same load:
# `perf trace -s` runs on the same memcached for the whole time `ditto profile --pid` observes it, and the
# per-request counts of read, sendmsg and epoll_wait (summed over threads) must agree within 2%.
# Also prints the thread/network model ditto found. Writes out/bench/profile-crosscheck.json.
# Usage: validation/bench/profile-crosscheck.sh   (env: DURATION=10 LEVEL=medium)
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x target/release/ditto ] || cargo build --quiet --release -p ditto-cli
command -v perf >/dev/null || { echo "perf is missing: run scripts/setup.sh" >&2; exit 1; }
ditto=target/release/ditto
out=out/bench; mkdir -p "$out"
work=$(mktemp -d)
DITTO=$ditto
source scripts/serve-lib.sh
perf_pid=""
cleanup() {
  [ -z "$perf_pid" ] || kill -INT "$perf_pid" 2>/dev/null || true
  serve_stop
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

serve_start targets/memcached.toml 21311
pid=$TARGET_PID

perf trace -s -p "$pid" -o "$work/perf.txt" &
perf_pid=$!
sleep 2
"$ditto" profile --pid "$pid" --target targets/memcached.toml --addr 127.0.0.1:21311 \
  --level "${LEVEL:-medium}" --duration "${DURATION:-10}" -o "$out/profile-crosscheck-memcached.json"
sleep 1
kill -INT "$perf_pid"; wait "$perf_pid" 2>/dev/null || true; perf_pid=""

python3 - "$work/perf.txt" "$out/profile-crosscheck-memcached.json" "$out/profile-crosscheck.json" <<'PY'
import json, re, sys
perf_txt, prof_path, out_path = sys.argv[1:4]
calls = {}
for line in open(perf_txt):
    m = re.match(r"^\s+([a-z_0-9]+)\s+(\d+)\s+\d+\s+[\d.]+", line)
    if m and m.group(1) != "syscall":
        calls[m.group(1)] = calls.get(m.group(1), 0) + int(m.group(2))
prof = json.load(open(prof_path))
req = prof["conditions"]["requests"]
ditto = {}
for c in prof["syscalls"]["clusters"]:
    for s in c["calls"]:
        ditto[s["name"]] = ditto.get(s["name"], 0.0) + s["per_request"]
rows, ok = [], True
print(f"{req} requests; per-request syscall counts, ditto profile vs perf trace -s over the same load")
for name in ("read", "sendmsg", "epoll_wait"):
    d = ditto.get(name, 0.0)
    p = calls.get(name, 0) / req if req else 0.0
    err = abs(d - p) / p if p else float("inf")
    passed = err <= 0.02
    ok &= passed
    rows.append({"syscall": name, "ditto_per_request": d, "perf_trace_per_request": p, "error": err, "pass": passed})
    print(f"  {name:<11} ditto {d:8.4f}  perf trace {p:8.4f}  error {100*err:5.2f}%  {'PASS' if passed else 'FAIL'}")
s = prof["network"]["server"]
roles = [(c["role"], c["threads"]) for c in prof["threads"]["clusters"]]
print(f"  model: io {s['io']}, accept {s['accept']}, workers {s['workers']}, clusters {roles}")
json.dump({"requests": req, "checks": rows, "server": s, "clusters": roles}, open(out_path, "w"), indent=2)
sys.exit(0 if ok else 1)
PY
