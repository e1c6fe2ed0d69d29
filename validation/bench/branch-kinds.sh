#!/usr/bin/env bash
# Where a clone's branch mispredictions come from: runs the clone under cachegrind's branch simulator
# (the `sim` backend's geometry) at 250 req/s for 8 s of its own target's traffic and splits one body's
# branches by kind per call: ring entry jumps (`jmp rcx`), loop branches (after `dec r13`), pattern
# branches (after `test ebx`/`test bl`), data-dependent pattern branches (after `test dword ptr [r15 …]`,
# the pseudo-random word), indirect dispatch jumps (`jmp rcx` into a dispatch's stubs), rep-string
# iterations and the rest; then every body's indirect jumps split by whether their predictor entry
# (address bits 0-8) is shared with another body site. Beside the pattern branches, what they would
# mispredict each on a 2-bit counter of its own (cachegrind's counters, without the history and
# address bits that share them): the excess over it is aliasing and history.
# Usage: validation/bench/branch-kinds.sh CLONE_DIR [CLUSTER]   (CLUSTER: c1 by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
clone=${1:?usage: validation/bench/branch-kinds.sh CLONE_DIR [CLUSTER]}
cluster=${2:-c1}
command -v valgrind >/dev/null || { echo "branch-kinds: valgrind is missing; run scripts/setup.sh" >&2; exit 1; }
# shellcheck source=validation/bench/branch-sim-lib.sh
source validation/bench/branch-sim-lib.sh
cargo build --quiet --release -p ditto-cli
work=$(mktemp -d)
trap 'branch_sim_stop; rm -rf "$work"' EXIT
branch_sim_run "$clone" "$work" --warm
cg_annotate --show=Ir,Bc,Bcm,Bi,Bim "$work/cg.out" "$clone/src/body.S" >"$work/ann.txt" 2>/dev/null
python3 - "$work/ann.txt" "ditto_body_$cluster" <<'PY'
import re, sys
path, fn_name = sys.argv[1], sys.argv[2] + ":"
num = r"([\d,]+(?: \(\s*[\d.]+%\))?|\.)"
row = re.compile(r"^\s*" + r"\s+".join([num] * 5) + r"\s\s+(.*)$")
def private_rate(bits, jz, n=1 << 14):
    # A counter pattern's outcome at its chunk's e-th execution: the mask's bits of e all clear
    # (jz taken) or not. Steady state of a 2-bit counter over the second half of n executions.
    c = mp = 0
    for e in range(n):
        clear = (e & bits) == 0
        taken = clear if jz else not clear
        if e >= n // 2:
            mp += (c >= 2) != taken
        c = min(3, c + 1) if taken else max(0, c - 1)
    return mp / (n - n // 2)
rates, private, shift = {}, 0.0, 0
kinds, prev, fn, calls = {}, "", None, 0
for line in open(path):
    m = row.match(line.rstrip("\n"))
    if not m:
        continue
    ir, bc, bcm, bi, bim = (0 if g == "." else int(g.split()[0].replace(",", "")) for g in m.groups()[:5])
    src = m.group(6).strip()
    b = re.match(r"// block \d+: \d+ bytes, (\d+) chunk", src)
    if b:
        shift = int(b.group(1)).bit_length() - 1
    if re.match(r"ditto_body_\w+:$", src):
        fn = src
    # The trampolines (every indirect jump) follow all the functions; their labels name the body.
    t = re.match(r"\.L(\w+?)_\w*_t:$", prev)
    body = "ditto_body_" + t.group(1) + ":" if t and src == "jmp rcx" else fn
    if body != fn_name:
        prev = src
        continue
    if src.startswith("push rbx") and calls == 0:
        calls = ir
    if bc or bi:
        # Every indirect jump is a trampoline's `jmp rcx`, right after its label (`…stubs_t:` for
        # a ring entry, a dispatch's otherwise).
        if src.startswith("jmp rcx") and not prev.endswith("stubs_t:"):
            k = "dispatch jumps"
        elif src.startswith("jmp rcx"):
            k = "ring entry jumps"
        elif prev.startswith("dec r13"):
            k = "loop branches"
        elif prev.startswith("test ebx") or prev.startswith("test bl"):
            k = "pattern branches"
            key = (int(prev.split(", ")[1]) >> shift, src.startswith("jz"))
            if key not in rates:
                rates[key] = private_rate(*key, 1 << min(20, max(12, key[0].bit_length() + 4)))
            private += bc * rates[key]
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
print(f"pattern branches each on a 2-bit counter of its own: {private / calls:.2f} mispredicted/call")
PY
# Indirect jumps by predictor entry: cachegrind predicts an indirect jump's target from a 512-entry
# table indexed by the jump's address bits 0-8, so two sites on one entry evict each other's target.
# Every body's sites (all clusters: the table is the process's), their addresses from the line table.
readelf --debug-dump=decodedline "$clone/clone" >"$work/lines.txt"
python3 - "$work/cg.out" "$work/lines.txt" "$clone/src/body.S" <<'PY'
import collections, sys
cg, lines, body = sys.argv[1:4]
sites, in_body = {}, False
for line in open(cg):
    if line.startswith("fl="):
        in_body = line.rstrip().endswith("/body.S")
    elif in_body and line[:1].isdigit():
        f = line.split() + ["0"] * 6
        if int(f[4]):
            s = sites.setdefault(int(f[0]), [0, 0])
            s[0] += int(f[4])
            s[1] += int(f[5])
addr = {}
for line in open(lines):
    f = line.split()
    if len(f) >= 3 and f[0] == "body.S" and f[1].isdigit() and f[2].startswith("0x"):
        addr.setdefault(int(f[1]), int(f[2], 16))
src = open(body).read().splitlines()
def kind(n):
    # A trampoline: its label (the label its rcx was loaded from, then `_t`) on the line before.
    label = src[n - 2].strip() if n >= 2 else ""
    if label.endswith("_j_t:"):
        return "dispatch, one target"
    if label.endswith("_s_t:"):
        return "dispatch, stubs"
    return "ring entry" if label.endswith("stubs_t:") else "other"
entry = collections.Counter(addr[n] & 511 for n in sites if n in addr)
rows = {}
for n, (b, mp) in sites.items():
    shared = n in addr and entry[addr[n] & 511] > 1
    r = rows.setdefault(kind(n), [0, 0, 0, 0])
    r[0] += b
    r[1] += mp
    r[2] += b if shared else 0
    r[3] += mp if shared else 0
print(f"indirect jumps of every body: {len(sites)} sites on {len(entry)} predictor entries (address bits 0-8)")
print(f"{'kind':<24}{'executed':>12}{'mispredicted':>14}{'on a shared entry':>20}{'mispredicted':>14}")
for k, (b, mp, sb, smp) in sorted(rows.items()):
    print(f"{k:<24}{b:>12}{mp:>14}{sb:>20}{smp:>14}")
PY
