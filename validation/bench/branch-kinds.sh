#!/usr/bin/env bash
# Where a clone's branch mispredictions come from: runs the clone under cachegrind's branch simulator
# (the `sim` backend's geometry) at 250 req/s for 8 s of its own target's traffic and splits one body's
# branches by kind per call: ring entry jumps (`jmp rcx`), loop branches (after `dec r13`), pattern
# branches (after `test ebx`/`test bl`), data-dependent pattern branches (after `test dword ptr [r15 …]`,
# the pseudo-random word), indirect dispatch jumps (`jmp rcx` into a dispatch's stubs), rep-string
# iterations and the rest.
# Usage: validation/bench/branch-kinds.sh CLONE_DIR [CLUSTER]   (CLUSTER: c1 by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
clone=${1:?usage: validation/bench/branch-kinds.sh CLONE_DIR [CLUSTER]}
cluster=${2:-c1}
command -v valgrind >/dev/null || { echo "branch-kinds: valgrind is missing; run scripts/setup.sh" >&2; exit 1; }
cargo build --quiet --release -p ditto-cli
make -s -C "$clone" >/dev/null
work=$(mktemp -d)
vp=
trap '[ -n "$vp" ] && kill "$vp" 2>/dev/null; rm -rf "$work"' EXIT
port=$((22000 + RANDOM % 1000))
# One output file per process (%p): a prefork clone's workers are forked children of its master.
valgrind --tool=cachegrind --cache-sim=no --branch-sim=yes --cachegrind-out-file="$work/cg.out.%p" \
  "$clone/clone" --port "$port" >"$work/clone.log" 2>&1 &
vp=$!
sleep 3
target/release/ditto load --target "$clone/target.toml" --addr "127.0.0.1:$port" --rate 250 \
  --duration 8 --warm >"$work/load.log" 2>&1
kill -INT "$vp"
wait "$vp" || true
sleep 1
cg_merge -o "$work/cg.out" "$work"/cg.out.*
cg_annotate --show=Ir,Bc,Bcm,Bi,Bim "$work/cg.out" "$clone/src/body.S" >"$work/ann.txt" 2>/dev/null
python3 - "$work/ann.txt" "ditto_body_$cluster" <<'PY'
import re, sys
path, fn_name = sys.argv[1], sys.argv[2] + ":"
num = r"([\d,]+(?: \(\s*[\d.]+%\))?|\.)"
row = re.compile(r"^\s*" + r"\s+".join([num] * 5) + r"\s\s+(.*)$")
kinds, prev, lea, fn, calls = {}, "", "", None, 0
for line in open(path):
    m = row.match(line.rstrip("\n"))
    if not m:
        continue
    ir, bc, bcm, bi, bim = (0 if g == "." else int(g.split()[0].replace(",", "")) for g in m.groups()[:5])
    src = m.group(6).strip()
    if re.match(r"ditto_body_\w+:$", src):
        fn = src
    if fn != fn_name:
        prev = src
        continue
    if src.startswith("push rbx") and calls == 0:
        calls = ir
    if src.startswith("lea rcx, [rip + "):
        lea = src
    if bc or bi:
        if src.startswith("jmp rcx") and "stubs" not in lea:
            k = "dispatch jumps"
        elif src.startswith("jmp rcx"):
            k = "ring entry jumps"
        elif prev.startswith("dec r13"):
            k = "loop branches"
        elif prev.startswith("test ebx") or prev.startswith("test bl"):
            k = "pattern branches"
        elif prev.startswith("test dword ptr [r15"):
            k = "data-dependent branches"
        elif src.startswith("rep"):
            k = "rep-string iterations"
        else:
            k = "other"
        a = kinds.setdefault(k, [0, 0])
        a[0] += bc + bi
        a[1] += bcm + bim
    prev = src
if calls == 0:
    sys.exit(f"branch-kinds: {fn_name[:-1]} never ran (wrong cluster, or the load failed)")
print(f"{fn_name[:-1]}: {calls} calls")
print(f"{'kind':<24}{'executed/call':>14}{'mispredicted/call':>19}")
total = [0, 0]
for k, (b, mp) in sorted(kinds.items()):
    print(f"{k:<24}{b / calls:>14.2f}{mp / calls:>19.2f}")
    total[0] += b
    total[1] += mp
print(f"{'all':<24}{total[0] / calls:>14.2f}{total[1] / calls:>19.2f}  ({100 * total[1] / max(total[0], 1):.2f} % mispredicted)")
PY
