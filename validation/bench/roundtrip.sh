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
# Usage: validation/bench/roundtrip.sh [--no-memcached]
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --quiet --release -p ditto-cli
ditto=target/release/ditto
out=validation/bench/results/roundtrip
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
  "$ditto" profile --launch --requests $((iters / 1000)) -o "$work/$name.json" -- "${argv[@]}" >/dev/null 2>&1
  "$ditto" generate "$work/$name.json" -o "$work/$name-clone" --seed 1 >/dev/null 2>&1
  (cd "$work/$name-clone" && cc -O2 -Iruntime/include -o harness \
    "$OLDPWD/generator/tests/harness/body_harness.c" src/config.c src/body.S)
  "$ditto" profile --launch --requests 10000 -o "$work/$name-rt.json" -- "$work/$name-clone/harness" 10000 guard >/dev/null 2>&1
  "$ditto" diff "$work/$name.json" "$work/$name-rt.json" > "$out/$name.txt"
  echo "$name: $(tail -1 "$out/$name.txt")"
done
if [ "${1:-}" != "--no-memcached" ]; then
  "$ditto" profile --launch --target clones/memcached/target.toml --level medium \
    --body-requests 2000 --body-rate 200 -o "$work/memcached-rt.json" >/dev/null 2>&1
  "$ditto" diff profiles/memcached.json "$work/memcached-rt.json" --cluster c1 > "$out/memcached.txt"
  echo "memcached (c1): $(tail -1 "$out/memcached.txt")"
fi
