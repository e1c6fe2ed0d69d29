#!/usr/bin/env bash
# Whether each instruction block of a clone's body occupies the lines it was planned for, measured
# on the object GNU as makes (not on the generator's own length model): for every `// block N: B
# bytes` comment of src/body.S, the extent from the block's first chunk label to its `_done` label.
# Prints the blocks that take more lines than B / 64, and a count.
# Usage: validation/bench/block-fit.sh CLONE_DIR [CLONE_DIR...]    (e.g. clones/*)
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: block-fit.sh CLONE_DIR [CLONE_DIR...]" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for d in "$@"; do
  [ -f "$d/src/body.S" ] || { echo "block-fit: no $d/src/body.S" >&2; exit 1; }
  cc -c -Wa,-L "$d/src/body.S" -o "$work/body.o"
  nm -n "$work/body.o" > "$work/body.nm"
  python3 - "$d" "$d/src/body.S" "$work/body.nm" <<'PY'
import re, sys
name, src, nm = sys.argv[1:4]
addr = {}
for line in open(nm):
    cols = line.split()
    if len(cols) == 3:
        addr[cols[2]] = int(cols[0], 16)
cluster, blocks = None, []
for line in open(src):
    m = re.match(r'// ---- cluster (\S+):', line)
    if m:
        cluster = m.group(1)
    m = re.match(r'// block (\d+): (\d+) bytes, (\d+) chunk\(s\)', line)
    if m:
        blocks.append((cluster, int(m.group(1)), int(m.group(2)), int(m.group(3))))
over = 0
for cl, b, size, chunks in blocks:
    start, end = addr.get(f'.L{cl}_b{b}_c0'), addr.get(f'.L{cl}_b{b}_done')
    if start is None or end is None:
        sys.exit(f'block-fit: {name}: no labels for cluster {cl} block {b}')
    lines = (end - 1) // 64 - start // 64 + 1
    if lines * 64 > size:
        over += 1
        print(f'{name}: {cl} block {b}: {size} bytes planned ({chunks} chunks), {end - start} assembled over {lines} lines')
print(f'{name}: {over} of {len(blocks)} blocks take more lines than planned')
PY
done
