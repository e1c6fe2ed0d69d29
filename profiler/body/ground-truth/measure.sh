#!/usr/bin/env bash
# Cachegrind reference sweep: D1 and I1 miss rates of one ground-truth command at the reference cache sizes
# (64-byte lines, 8-way below 1 MiB, 16-way at/above; I1 and D1 get the same geometry, LL is fixed).
#
# usage: measure.sh [-s "SIZES"] BINARY [ARGS...]
#   SIZES defaults to "4096 32768 262144 2097152" (bytes). Output: one TSV line per size:
#   size  assoc  I_refs  I1_misses  I1_miss_rate  D_refs  D1_misses  D1_miss_rate
set -euo pipefail
sizes="4096 32768 262144 2097152"
if [[ "${1:-}" == "-s" ]]; then sizes="$2"; shift 2; fi
[[ $# -ge 1 ]] || { sed -n '2,7p' "$0"; exit 2; }
printf 'size\tassoc\tI_refs\tI1_misses\tI1_miss_rate\tD_refs\tD1_misses\tD1_miss_rate\n'
for size in $sizes; do
  assoc=8; (( size >= 1048576 )) && assoc=16
  out=$(nice -n 10 valgrind --tool=cachegrind --cache-sim=yes --branch-sim=no \
        --cachegrind-out-file=/dev/null \
        --I1="$size,$assoc,64" --D1="$size,$assoc,64" --LL=16777216,16,64 "$@" 2>&1 >/dev/null)
  num() { grep -E "$1" <<<"$out" | head -1 | sed -E 's/^==[0-9]+== [^:]+: *([0-9,]+).*/\1/' | tr -d ,; }
  ir=$(num 'I +refs:'); i1=$(num 'I1 +misses:'); dr=$(num 'D +refs:'); d1=$(num 'D1 +misses:')
  awk -v s="$size" -v a="$assoc" -v ir="$ir" -v i1="$i1" -v dr="$dr" -v d1="$d1" \
    'BEGIN { printf "%d\t%d\t%d\t%d\t%.6f\t%d\t%d\t%.6f\n", s, a, ir, i1, i1/ir, dr, d1, d1/dr }'
done
