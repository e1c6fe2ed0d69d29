#!/usr/bin/env bash
# System calls per request of one running original over a series of load windows: how a count moves
# with the window's length (calls per connection), its place in the server's life (drift, start-up
# transients) and its load. Starts TARGET with `ditto serve`, then for each "LEVEL SECONDS" argument runs
# `ditto profile --pid` at that level for that long (its own load: preparation unmeasured, then the
# window) and prints the requests it completed, the network bytes in and out per request and the calls
# per request of the listed syscalls summed over the process's clusters. Stops the server at the end, also on Ctrl-C or a failure.
# Usage: validation/bench/syscall-windows.sh TARGET "LEVEL SECONDS"...
#   e.g. validation/bench/syscall-windows.sh pix-baseline "low 5" "low 10" "low 5" "medium 10" "low 20"
# CALLS (default "recvfrom read epoll_wait writev mprotect futex clock_nanosleep") picks the columns.
set -euo pipefail
cd "$(dirname "$0")/../.."
target=${1:?usage: syscall-windows.sh TARGET "LEVEL SECONDS"...}
shift
[ $# -gt 0 ] || { echo "syscall-windows: give at least one \"LEVEL SECONDS\" window" >&2; exit 1; }
[ -f "targets/$target.toml" ] || { echo "syscall-windows: no targets/$target.toml" >&2; exit 1; }
command -v bpftrace >/dev/null || { echo "syscall-windows: bpftrace is missing; run scripts/setup.sh" >&2; exit 1; }
cargo build --quiet --release -p ditto-cli
ditto=target/release/ditto
calls=${CALLS:-recvfrom read epoll_wait writev mprotect futex clock_nanosleep}
work=$(mktemp -d)
"$ditto" serve --target "targets/$target.toml" >"$work/serve.out" 2>"$work/serve.err" &
server=$!
trap 'kill -INT $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 600); do
  grep -q '^pid=' "$work/serve.out" 2>/dev/null && break
  kill -0 $server 2>/dev/null || { cat "$work/serve.err" >&2; echo "syscall-windows: $target did not start" >&2; exit 1; }
  sleep 0.2
done
pid=$(sed -n 's/^pid=\([0-9]*\).*/\1/p' "$work/serve.out")
addr=$(sed -n 's/.* addr=\([^ ]*\).*/\1/p' "$work/serve.out")
[ -n "$pid" ] && [ -n "$addr" ] || { echo "syscall-windows: $target did not report its pid and address" >&2; exit 1; }
echo "window requests bytes_in bytes_out $calls"
for window in "$@"; do
  read -r level seconds <<<"$window"
  "$ditto" profile --pid "$pid" --target "targets/$target.toml" --addr "$addr" --level "$level" \
    --duration "$seconds" --second-level none -o "$work/window.json" >/dev/null 2>"$work/profile.err" ||
    { cat "$work/profile.err" >&2; exit 1; }
  python3 - "$work/window.json" "$level $seconds" $calls <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
per = {}
for cluster in p["syscalls"]["clusters"]:
    for call in cluster["calls"]:
        per[call["name"]] = per.get(call["name"], 0.0) + call["per_request"]
net = p["network"]
print(sys.argv[2].replace(" ", ":") + "s", p["conditions"]["requests"],
      f'{net["bytes_in_per_request"]:.2f} {net["bytes_out_per_request"]:.2f}',
      " ".join(f"{per.get(n, 0.0):.4f}" for n in sys.argv[3:]))
PY
done
