#!/usr/bin/env python3
"""Constant-stride share of data accesses, per static instruction, from a Valgrind address trace.

usage:
  valgrind --tool=lackey --trace-mem=yes BINARY ARGS 2>&1 >/dev/null \\
      | trace_mem.py [--base 0x108000] [--end 0x400000]

Every ` L/S/M addr,size` line belongs to the instruction of the preceding `I  addr,size` line (a rep
movsb prints one `I` line per byte moved, so each of its executions restarts its slots). An access
counts as regular when its address minus the previous address of the same (instruction, slot) equals
that slot's previous delta (so the first two accesses of a slot are never regular). Prints the regular share over all accesses, with stride 0 counted as regular and not,
and the same restricted to instructions of the main binary (addresses in [--base, --end)), plus the
access counts (M = modify, one access in lackey's trace).
"""
import sys


def main():
    args = sys.argv[1:]
    base, end = 0x108000, 0x400000
    for flag in ("--base", "--end"):
        if flag in args:
            i = args.index(flag)
            v = int(args[i + 1], 0)
            base, end = (v, end) if flag == "--base" else (base, v)
            del args[i : i + 2]
    last = {}  # (pc, slot) -> (address, delta)
    pc, slot = 0, 0
    n = {"all": [0, 0, 0], "main": [0, 0, 0]}  # accesses, regular (stride != 0), regular incl. 0
    kinds = {"L": 0, "S": 0, "M": 0}
    for line in sys.stdin:
        if line.startswith("I  "):
            pc, slot = int(line[3:].split(",")[0], 16), 0
            continue
        if len(line) < 4 or line[0] != " " or line[1] not in "LSM":
            continue
        addr = int(line[3:].split(",")[0], 16)
        kinds[line[1]] += 1
        key = (pc, slot)
        slot += 1
        prev = last.get(key)
        reg = reg0 = False
        if prev is not None:
            delta = addr - prev[0]
            if prev[1] is not None and delta == prev[1]:
                reg0 = True
                reg = delta != 0
            last[key] = (addr, delta)
        else:
            last[key] = (addr, None)
        for scope in ("all", "main") if base <= pc < end else ("all",):
            c = n[scope]
            c[0] += 1
            c[1] += reg
            c[2] += reg0
    print(f"accesses: {n['all'][0]} (L {kinds['L']}, S {kinds['S']}, M {kinds['M']}), static slots: {len(last)}")
    for scope in ("all", "main"):
        a, r, r0 = n[scope]
        if a:
            print(f"{scope:5} accesses {a:9d}  regular {r / a:.4f}  regular incl. stride 0 {r0 / a:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
