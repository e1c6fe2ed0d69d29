#!/usr/bin/env python3
"""Per-request instruction-cache misses of a clone, attributed to its code and to the L1i's sets.

Reads two cachegrind output files of the same clone under the same geometry, one from a run that
served fewer requests (LO) and one that served more (HI), the clone's `src/body.S` (assembled with
-g) and the clone binary. Prints, per request of the difference HI - LO (which cancels start-up and
per-second work as `ditto tune` does):

* by owner: each body block (cluster, planned bytes and chunks, from the block's comment in body.S),
  each body's prologue and epilogue, the dispatch stubs and the trampolines, the skeleton's
  functions and the libraries: instructions and L1i misses;
* by set: for each of the L1i's sets (address bits 6 and up, modulo the set count), its misses and
  its hot lines (lines fetched at least HOT times a request), and the share of the misses in sets
  holding more hot lines than the cache has ways (conflicts), against the rest.

Usage: code_attribution.py LO.out HI.out BODY.S CLONE_BINARY REQUESTS [SETS WAYS]
(SETS and WAYS default to a 32 KiB 8-way cache of 64-byte lines: 64 and 8.)
"""

import collections
import re
import subprocess
import sys

from miss_attribution import cachegrind_lines

HOT = 0.05
CLUSTER = re.compile(r"^// ---- cluster (\w+):")
BLOCK = re.compile(r"^// block \d+: (\d+) bytes, (\d+) chunk")
INIT = re.compile(r"^(ditto_body_init_\w+):")
LOC = re.compile(r"^(/\S+|\S+\.[chS]):(\d+)")
INSN = re.compile(r"^\s+([0-9a-f]+):")
FUNC = re.compile(r"^[0-9a-f]+ <(\S+)>:")


def classify(body_path):
    """Maps each line of body.S to its owner: a block, a body's prologue/epilogue, stubs, init."""
    owners = {}
    cluster, owner, saved = "?", "header", None
    with open(body_path) as f:
        for number, line in enumerate(f, 1):
            text = line.strip()
            if m := CLUSTER.match(text):
                cluster, owner = m.group(1), f"{m.group(1)} prologue"
            elif m := BLOCK.match(text):
                owner = f"{cluster} block {int(m.group(1)):>7} B x{m.group(2)}"
            elif text.startswith(".size ditto_body_"):
                owner = f"{cluster} epilogue"
            elif m := INIT.match(text):
                owner = f"{cluster} init"
            elif text.startswith(".pushsection .text.ditto_stubs"):
                saved, owner = owner, f"{cluster} dispatch stubs"
            elif text.startswith(".popsection") and saved is not None:
                owners[number] = owner
                owner, saved = saved, None
                continue
            elif text.startswith(".section .text.ditto_indirect"):
                owner = "trampolines"
            owners[number] = owner
    return owners


def per_line(cg_path):
    """(file, line) -> [Ir, I1mr] over one cachegrind file."""
    totals = collections.defaultdict(lambda: [0, 0])
    for source, number, counts in cachegrind_lines(cg_path):
        t = totals[(source.split("/")[-1], number)]
        t[0] += counts["Ir"]
        t[1] += counts["I1mr"]
    return totals


def addresses(binary):
    """(file, line) -> instruction addresses, and address -> enclosing function, from objdump -dl."""
    out = subprocess.run(
        ["objdump", "-d", "-l", "--no-show-raw-insn", binary],
        capture_output=True, text=True, check=True,
    ).stdout
    at, func_of, where, func = collections.defaultdict(list), {}, None, "?"
    for line in out.splitlines():
        if m := FUNC.match(line):
            func = m.group(1)
        elif m := LOC.match(line):
            where = (m.group(1).split("/")[-1], int(m.group(2)))
        elif (m := INSN.match(line)) and where is not None:
            address = int(m.group(1), 16)
            at[where].append(address)
            func_of[address] = func
    return at, func_of


def main():
    lo_path, hi_path, body_path, binary, requests = sys.argv[1:6]
    sets, ways = (int(sys.argv[6]), int(sys.argv[7])) if len(sys.argv) > 7 else (64, 8)
    requests = float(requests)
    owners = classify(body_path)
    lo, hi = per_line(lo_path), per_line(hi_path)
    at, func_of = addresses(binary)
    by_owner = collections.defaultdict(lambda: [0.0, 0.0])
    by_line = collections.defaultdict(lambda: [0.0, 0.0])
    for key in set(lo) | set(hi):
        ir = (hi[key][0] - lo[key][0]) / requests
        miss = (hi[key][1] - lo[key][1]) / requests
        source, number = key
        if source == "body.S":
            owner = owners.get(number, "?")
        elif key in at:
            owner = "skeleton " + func_of[at[key][0]]
        else:
            owner = "library " + source
        by_owner[owner][0] += ir
        by_owner[owner][1] += miss
        for address in at.get(key, []):
            by_line[address >> 6][0] += ir / len(at[key])
            by_line[address >> 6][1] += miss / len(at[key])
    total_ir = sum(v[0] for v in by_owner.values())
    total_miss = sum(v[1] for v in by_owner.values())
    print(f"instructions {total_ir:.1f}, L1i misses {total_miss:.3f} a request "
          f"(miss rate {total_miss / max(total_ir, 1e-9):.5f})")
    print(f"{'owner':44} {'instr/req':>10} {'misses/req':>10}")
    for owner, (ir, miss) in sorted(by_owner.items(), key=lambda kv: (-kv[1][1], kv[0])):
        if abs(miss) >= 0.005 or ir >= 1.0:
            print(f"{owner:44} {ir:10.1f} {miss:10.3f}")
    set_miss, set_hot = [0.0] * sets, [0] * sets
    for line, (ir, miss) in by_line.items():
        s = line % sets
        set_miss[s] += miss
        set_hot[s] += ir >= HOT
    over = [s for s in range(sets) if set_hot[s] > ways]
    mapped = sum(set_miss)
    print(f"\nby set ({sets} sets, {ways} ways; misses a request / lines fetched >= {HOT} a request):")
    for row in range(0, sets, 8):
        print("  ".join(f"{s:2d}:{set_miss[s]:5.2f}/{set_hot[s]:2d}" for s in range(row, min(row + 8, sets))))
    over_miss = sum(set_miss[s] for s in over)
    print(f"sets with more hot lines than ways: {len(over)} of {sets}, holding "
          f"{over_miss:.3f} of {mapped:.3f} mapped misses a request "
          f"({100 * over_miss / max(mapped, 1e-9):.0f} %); hot lines per set: mean "
          f"{sum(set_hot) / sets:.1f}, max {max(set_hot)}")


if __name__ == "__main__":
    main()
