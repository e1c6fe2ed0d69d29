#!/usr/bin/env bash
# How much of a body's branch structure a data-size step moves: regenerates nginx's clone at the given
# knobs (default: the committed clone's) and at data size ×1.1 and ×0.9, and compares the bodies chunk by
# chunk: how many chunks get another number of dispatch sites, and how many keep their sequence of
# branch mnemonics. No simulation; a few seconds. Figures: docs/generator.md, "Dispatches placed by one
# corrected length per body".
# Usage: validation/bench/dispatch-placement.sh [KNOBS_FILE]
set -euo pipefail
cd "$(dirname "$0")/../.."
knobs=${1:-clones/nginx/knobs.toml}
[ -f "$knobs" ] || { echo "dispatch-placement: no knobs file $knobs" >&2; exit 1; }
cargo build --quiet --release -p ditto-cli
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for f in 1.0 1.1 0.9; do
  python3 - "$knobs" "$f" > "$work/knobs-$f.toml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def scale(m):
    return m.group(1) + repr(float(m.group(2)) * float(sys.argv[2]))
print(re.sub(r'(\[data_working_set\][^\[]*?\nsize_scale = )([0-9.eE+-]+)', scale, text, count=1, flags=re.S))
PY
  target/release/ditto generate profiles/nginx.json -o "$work/clone-$f" --seed 1 \
    --skeleton profiles/skeletons/nginx.json --knobs "$work/knobs-$f.toml" >/dev/null 2>"$work/gen.log" \
    || { cat "$work/gen.log" >&2; exit 1; }
done
python3 - "$work" <<'PY'
import re, sys
def chunks(path):
    cur, out = None, {}
    for line in open(path):
        m = re.match(r'^(\.L\w+_b\d+_c\d+):', line)
        if m:
            cur = m.group(1); out[cur] = ([], 0); continue
        if re.match(r'^(\.L\w+_b\d+_(done|stubs)|ditto)', line):
            cur = None; continue
        if cur is None or re.match(r'^\S', line):
            continue
        t = line.strip()
        if not t or t.startswith('.'):
            continue
        ops, sites = out[cur]
        op = t.split()[0]
        if op.startswith('j') or op == 'test':
            ops.append(op)
        if op == 'lea' and re.search(r'_d\d+_[js]\]', t):
            sites += 1
        out[cur] = (ops, sites)
    return out
base = chunks(f"{sys.argv[1]}/clone-1.0/src/body.S")
for f in ("1.1", "0.9"):
    other = chunks(f"{sys.argv[1]}/clone-{f}/src/body.S")
    moved = sum(1 for k in base if other.get(k, ([], -1))[1] != base[k][1])
    kept = sum(1 for k in base if k in other and other[k][0] == base[k][0])
    print(f"data size x{f}: {moved} of {len(base)} chunks with another number of dispatches, "
          f"{kept} keep their branch sequence")
PY
