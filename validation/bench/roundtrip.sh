#!/usr/bin/env bash
# Round trip: profile(generate(P)) ≈ P, field by field (`ditto diff`), for ground-truth programs and for
# memcached's committed profile.
#  - a ground-truth program (profiler/body/ground-truth) is profiled under the body tool (one request =
#    1,000 loop iterations, so that a request's body is thousands of instructions as in a service), a clone is generated from that profile, its body is run by the body harness
#    (generator/tests/harness/body_harness.c: all bodies once per iteration) under the tool, and the two
#    bodies are compared;
#  - memcached: the clone in clones/memcached (skeleton subtracted) is profiled in launch mode under the
#    same workload as the original and its request workers' body is compared with profiles/memcached.json.
# Prints each comparison's worst field and writes the full tables to validation/bench/results/roundtrip/.
#
# --requests N cuts each ground-truth run into N requests instead (the clone's body is then called N
# times), and writes to results/roundtrip-N/. A ground-truth program's hot loop never exits, while a
# clone's body returns once a call, so its loop branch exits once per call: at 1,000 iterations a
# request that is at least once per 1,000 executions (taken-rate bin 8 or below), never the
# original's bin 10, and the call's fixed cost (prologue, header, stack) is a visible share of a
# small request's accesses. With N = 100 a request is 1,250-100,000 iterations; the programs'
# start-up (dynamic linking, stdio) is then a visible share of the rare events, such as indirect
# jumps (about 350 a run, so 3.5 a request, compared since they reach 1 a request).
# Usage: validation/bench/roundtrip.sh [--no-memcached] [--requests N]
set -euo pipefail
cd "$(dirname "$0")/../.."
memcached=1
requests=
while [ $# -gt 0 ]; do
  case "$1" in
    --no-memcached) memcached= ;;
    --requests)
      requests=${2:?--requests needs a count}
      shift
      ;;
    *)
      echo "roundtrip.sh: unknown argument '$1'; usage: roundtrip.sh [--no-memcached] [--requests N]" >&2
      exit 2
      ;;
  esac
  shift
done
cargo build --quiet --release -p ditto-cli
ditto=target/release/ditto
out=validation/bench/results/roundtrip${requests:+-$requests}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
make -s -C profiler/body/ground-truth OUT="$work/gt"
# name: program args; iterations (requests) of the default run
cases=(
  "ws_data_64k|ws_data 64K|10000000"
  "branches_mid|branches mid|1048576"
  "depchain_4|depchain 4|125000"
  "stride_2|stride 2|4000000"
  "ptrchase_chase|ptrchase chase|10000000"
  "mix|mix|1000000"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name cmd iters <<<"$c"
  read -r -a argv <<<"$cmd"
  argv[0]="$work/gt/${argv[0]}"
  "$ditto" profile --launch --requests "${requests:-$((iters / 1000))}" -o "$work/$name.json" -- "${argv[@]}" >/dev/null 2>&1
  "$ditto" generate "$work/$name.json" -o "$work/$name-clone" --seed 1 >/dev/null 2>&1
  (cd "$work/$name-clone" && cc -O2 -Iruntime/include -o harness \
    "$OLDPWD/generator/tests/harness/body_harness.c" src/config.c src/body.S)
  calls=${requests:-10000}
  "$ditto" profile --launch --requests "$calls" -o "$work/$name-rt.json" -- "$work/$name-clone/harness" "$calls" guard >/dev/null 2>&1
  "$ditto" diff "$work/$name.json" "$work/$name-rt.json" > "$out/$name.txt"
  echo "$name: $(tail -1 "$out/$name.txt")"
done
if [ -n "$memcached" ] && [ -z "$requests" ]; then
  "$ditto" profile --launch --target clones/memcached/target.toml --level medium \
    --body-requests 2000 --body-rate 200 -o "$work/memcached-rt.json" >/dev/null 2>&1
  "$ditto" diff profiles/memcached.json "$work/memcached-rt.json" --cluster c1 > "$out/memcached.txt"
  echo "memcached (c1): $(tail -1 "$out/memcached.txt")"
fi
