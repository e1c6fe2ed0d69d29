#!/usr/bin/env bash
# Where a clone's runtime skeleton makes coin-like conditional branches (minority direction at least
# a quarter of the time: taken-rate bin 0), per function. Generates the target's clone with an empty
# body (`ditto generate --empty-body`, the skeleton alone), runs it under callgrind with
# --collect-jumps=yes for 6 s of its target's traffic at 250 req/s, and prints each function's
# coin-like and all conditional branch executions per answered request. The body's target for a
# taken-rate bin is the original's minus the skeleton's (generator/src/residual.rs), so a bin the
# skeleton alone fills past the original's share is over in every round trip whatever the body does.
# Usage: validation/bench/coin-branches.sh TARGET   (a profile in profiles/TARGET.json)
set -euo pipefail
cd "$(dirname "$0")/../.."
target=${1:?usage: validation/bench/coin-branches.sh TARGET}
[ -f "profiles/$target.json" ] || { echo "coin-branches: no profiles/$target.json" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "coin-branches: valgrind is missing; run scripts/setup.sh" >&2; exit 1; }
cargo build --quiet --release -p ditto-cli
ditto=target/release/ditto
work=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
"$ditto" generate "profiles/$target.json" -o "$work/clone" --seed 1 --empty-body >/dev/null 2>&1
make -s -C "$work/clone" >/dev/null
port=$((23000 + RANDOM % 3000))
valgrind --tool=callgrind --collect-jumps=yes --callgrind-out-file="$work/cg.%p" \
  "$work/clone/clone" --port "$port" >"$work/clone.log" 2>&1 &
pid=$!
sleep 3
"$ditto" load --target "$work/clone/target.toml" --addr "127.0.0.1:$port" --rate 250 --duration 6 \
  >"$work/load.log" 2>&1
kill -INT "$pid"
wait "$pid" || true
pid=""
answered=$(sed -n 's/.*answered \([0-9]*\).*/\1/p' "$work/load.log" | tail -1)
[ -n "$answered" ] && [ "$answered" -gt 0 ] || { echo "coin-branches: the load got no answers:" >&2; cat "$work/load.log" >&2; exit 1; }
python3 - "$answered" "$work"/cg.* <<'PY'
import collections, re, sys
requests = int(sys.argv[1])
names, by_fn = {}, collections.defaultdict(lambda: [0, 0])
for path in sys.argv[2:]:
    lines = open(path).read().splitlines()
    # Callgrind names a function once, as fn= or cfn=, and by its number after that.
    for line in lines:
        m = re.match(r"c?fn=\((\d+)\) (.*)", line)
        if m:
            names[(path, m.group(1))] = m.group(2)
    fn = "?"
    for line in lines:
        if line.startswith("fn="):
            m = re.match(r"fn=\((\d+)\)", line)
            fn = names.get((path, m.group(1)), m.group(1)) if m else line[3:]
        elif line.startswith("jcnd="):
            # jcnd=TAKEN/EXECUTED TARGET
            taken, executed = map(int, line[5:].split()[0].split("/"))
            if executed == 0:
                continue
            by_fn[fn][0] += executed
            if min(taken, executed - taken) >= 0.25 * executed:
                by_fn[fn][1] += executed
total = sum(v[0] for v in by_fn.values())
coin = sum(v[1] for v in by_fn.values())
print(f"{requests} requests answered; per request: {coin / requests:.1f} coin-like of "
      f"{total / requests:.1f} conditional branch executions (start-up included)")
print(" coin-like       all  function")
for f, (executed, coinlike) in sorted(by_fn.items(), key=lambda x: -x[1][1])[:12]:
    if coinlike:
        print(f"{coinlike / requests:9.2f} {executed / requests:9.2f}  {f}")
PY
