#!/usr/bin/env bash
# Where a clone's simulated data-cache misses come from: runs CLONE_DIR's clone under cachegrind at
# two rates (as `ditto tune` does, so that the difference is per request), once with the platform's
# L2 as cachegrind's last level and once with its LLC, and attributes every access to the line of
# src/body.S that made it (miss_attribution.py: per region of the body, its fixed offsets, the rest
# of the body, and the skeleton); from the first pair also every instruction fetch
# (code_attribution.py: L1i misses per block, stub section and skeleton function, and per set).
# Writes out/bench/miss-attribution/NAME-{l2,llc}-{lo,hi}.out and prints the three tables.
# Usage: validation/bench/miss-attribution.sh CLONE_DIR
#   env: RATE=2000 (the faster run; the slower one offers a third), DURATION=15, PLATFORM=epyc-host,
#        PORT=22170
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
clone=$(cd "${1:?usage: miss-attribution.sh CLONE_DIR}" && pwd)
[ -f "$clone/src/body.S" ] || { echo "miss-attribution: $clone has no src/body.S (not a clone)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "miss-attribution: valgrind not found (scripts/setup.sh)" >&2; exit 1; }
cd "$root"
[ -x target/release/ditto ] || cargo build --quiet --release -p ditto-cli
ditto=$root/target/release/ditto
platform=validation/platforms/${PLATFORM:-epyc-host}.toml
rate=${RATE:-2000}
duration=${DURATION:-15}
port=${PORT:-22170}
name=$(basename "$clone")
out=out/bench/miss-attribution
mkdir -p "$out"
make -s -C "$clone"

# "size,assoc,line" of one level of the platform file.
geometry() {
  python3 - "$platform" "$1" <<'PY'
import sys, tomllib
level = tomllib.load(open(sys.argv[1], "rb"))[sys.argv[2]]
print(f"{level['size']},{level['assoc']},{level['line']}")
PY
}
l1d=$(geometry l1d)
l1i=$(geometry l1i)

server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null || true; }
trap cleanup EXIT

# One run: the clone under cachegrind with last level $1, offered $2 req/s; prints the requests it
# served (measured plus warm-up; the warming before them is the same in every run).
run() {
  local ll=$1 offered=$2 file=$3
  valgrind --tool=cachegrind --cache-sim=yes --I1="$l1i" --D1="$l1d" --LL="$ll" \
    --cachegrind-out-file="$file" "$clone/clone" --port "$port" >"$file.log" 2>&1 &
  server=$!
  for _ in $(seq 600); do
    grep -qs "listening" "$file.log" && break
    kill -0 "$server" 2>/dev/null || { echo "miss-attribution: the clone exited, see $file.log" >&2; exit 1; }
    sleep 0.1
  done
  "$ditto" load --addr "127.0.0.1:$port" --target "$clone/target.toml" --warm --rate "$offered" \
    --duration "$duration" --warmup 1 --json "$file.load.json" >"$file.load.log" 2>&1
  kill -INT "$server"
  wait "$server" || true
  server=""
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["requests_sent"] + r["offered_rate"] * r["warmup_s"])' \
    "$file.load.json"
}

for level in l2 llc; do
  ll=$(geometry "$level")
  lo=$(run "$ll" "$(python3 -c "print($rate / 3)")" "$out/$name-$level-lo.out")
  hi=$(run "$ll" "$rate" "$out/$name-$level-hi.out")
  echo "== $name, last level = the platform's $level ($ll), $lo and $hi requests"
  python3 validation/bench/miss_attribution.py "$out/$name-$level-lo.out" "$out/$name-$level-hi.out" \
    "$clone/src/body.S" "$(python3 -c "print($hi - $lo)")"
  if [ "$level" = l2 ]; then
    # The L1i is the same in both pairs of runs: its misses by code and by set, once.
    echo "== $name, instruction cache ($l1i)"
    IFS=, read -r size assoc line <<<"$l1i"
    python3 validation/bench/code_attribution.py "$out/$name-$level-lo.out" "$out/$name-$level-hi.out" \
      "$clone/src/body.S" "$clone/clone" "$(python3 -c "print($hi - $lo)")" $((size / assoc / line)) "$assoc"
  fi
done
