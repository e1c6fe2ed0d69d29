#!/usr/bin/env bash
# Native CPU cost of a clone against its original: on-CPU time per request (schedstat, user and system,
# every thread) and latency under `ditto compare` at one load level, for the clone at its knobs and for
# one variant per SECTION.KEY=VALUE override (e.g. data_working_set.shared_fraction_scale=0.01). The
# simulated backend sees instructions and misses, not cycles: this is the figure that shows what the
# clone costs on the machine itself. Each round runs the original and every clone once, in that order.
# Figures: docs/validation.md, "Measured: the clones' native CPU time".
# Usage: validation/bench/native-cpu.sh TARGET [SECTION.KEY=VALUE...]
#   env: KNOBS (default clones/TARGET/knobs.toml), LEVEL (medium), ROUNDS (2), DURATION (5 s)
set -euo pipefail
cd "$(dirname "$0")/../.."
t=${1:?usage: validation/bench/native-cpu.sh TARGET [SECTION.KEY=VALUE...]}
shift
knobs=${KNOBS:-clones/$t/knobs.toml}
[ -f "profiles/$t.json" ] || { echo "native-cpu: no profiles/$t.json" >&2; exit 1; }
[ -f "$knobs" ] || { echo "native-cpu: no knobs file $knobs" >&2; exit 1; }
cargo build --quiet --release -p ditto-cli
cargo build --quiet --profile pix -p pix-ledger
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
skeleton=()
[ -f "profiles/skeletons/$t.json" ] && skeleton=(--skeleton "profiles/skeletons/$t.json")
port=23400
specs=(--target "targets/$t.toml")
variant() { # NAME [SECTION.KEY=VALUE]
  python3 - "$knobs" "${2:-}" > "$work/$1.toml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
if sys.argv[2]:
    path, value = sys.argv[2].split("=", 1)
    section, key = path.rsplit(".", 1)
    pattern = r'(\[' + re.escape(section) + r'\][^\[]*?\n' + re.escape(key) + r' = )[^\n]*'
    text, n = re.subn(pattern, lambda m: m.group(1) + value, text, count=1, flags=re.S)
    if n != 1:
        sys.exit(f"native-cpu: no knob {path} in {sys.argv[1]}")
print(text, end="")
PY
  target/release/ditto generate "profiles/$t.json" -o "$work/$1" --seed 1 "${skeleton[@]}" \
    --knobs "$work/$1.toml" >/dev/null 2>"$work/gen.log" || { cat "$work/gen.log" >&2; exit 1; }
  port=$((port + 1))
  sed -i "s/^port = .*/port = $port/; s/^name = .*/name = \"$1\"/" "$work/$1/target.toml"
  specs+=(--target "$work/$1/target.toml")
}
variant clone
n=0
for o in "$@"; do n=$((n + 1)); variant "v$n" "$o"; echo "native-cpu: v$n = $o"; done
for r in $(seq "${ROUNDS:-2}"); do
  echo "native-cpu: round $r"
  target/release/ditto compare "${specs[@]}" --level "${LEVEL:-medium}" --duration "${DURATION:-5}" 2>/dev/null \
    | grep -E "^(medium|low|high|custom) load|^metric|throughput|p50|p99|on-CPU|kept up"
done
