#!/usr/bin/env python3
"""Per-static-conditional-branch counts from a callgrind profile, and the taken-rate histogram.

usage: cg_branches.py CALLGRIND_OUT [--min-share 0.001]

The profile must come from `valgrind --tool=callgrind --dump-instr=yes --collect-jumps=yes`.
Callgrind writes `jcnd=TAKEN/EXECUTED TARGET` only for branches that were taken at least once, so a
never-taken branch is invisible there. This script therefore takes the static conditional jumps from
`objdump -d` of every object in the profile and their execution counts from the per-instruction Ir
costs, and the taken counts from the jcnd lines.

Format notes (callgrind 3.19): positions are compressed (absolute hex, +N/-N relative to the last
cost/source position, `*` = same); a jump's or call's target is written relative to that position but
does not move it; the cost line after `calls=` is the call's inclusive cost, not the call instruction's
own. Names are compressed per kind: `fn=(7) main` defines fn id 7, a later `fn=(7)` refers to it.

Prints every static branch with at least --min-share of all conditional-branch executions, then the
11-bin taken-rate histogram (rarer direction's share, bins of profile/src/body.rs) weighted by executions.
Callgrind does not record the order of directions, so transition rates are not available here.
"""
import re
import subprocess
import sys
from collections import defaultdict

KIND = {"ob": "ob", "cob": "ob", "fn": "fn", "cfn": "fn", "fl": "fl", "fi": "fl", "fe": "fl",
        "cfl": "fl", "cfi": "fl"}


def rate_bin(r):
    """body.rs: bin k holds (2^-(k+2), 2^-(k+1)] for k in 0..9; bin 10 holds the rest (incl. 0)."""
    for k in range(10):
        if 2.0 ** -(k + 2) < r <= 2.0 ** -(k + 1):
            return k
    return 0 if r > 0.5 else 10


def parse(path):
    names = defaultdict(dict)
    npos = 1
    last = 0
    ob = fn = "?"
    ir = defaultdict(int)  # (ob, addr) -> executions
    taken = defaultdict(int)  # (ob, addr) -> taken
    fns = {}  # (ob, addr) -> fn
    pending_jcnd = None
    skip_cost = False

    def name(kind, spec):
        if spec.startswith("("):
            ident, _, rest = spec.partition(")")
            rest = rest.strip()
            if rest:
                names[kind][ident] = rest
            return names[kind].get(ident, spec)
        return spec

    def pos(tok, move=True):
        nonlocal last
        if tok == "*":
            value = last
        elif tok[0] in "+-":
            value = last + int(tok)
        else:
            value = int(tok, 0)
        if move:
            last = value
        return value

    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            if line.startswith("positions:"):
                npos = len(line.split()) - 1
                continue
            head = line.split(" ", 1)[0]
            if "=" in head:
                key, rest = line.split("=", 1)
                if key in KIND:
                    value = name(KIND[key], rest)
                    if key == "ob":
                        ob = value
                    elif key == "fn":
                        fn = value
                elif key == "jcnd":
                    counts, target = rest.split()[:2]
                    pending_jcnd = int(counts.split("/")[0])
                    pos(target, move=False)
                elif key in ("jump", "calls"):
                    pos(rest.split()[1], move=False)
                    skip_cost = key == "calls"
                continue
            if line[0] in "0123456789+-*":
                toks = line.split()
                addr = pos(toks[0])
                if pending_jcnd is not None:
                    taken[(ob, addr)] += pending_jcnd
                    pending_jcnd = None
                elif skip_cost:
                    skip_cost = False
                elif len(toks) > npos:
                    ir[(ob, addr)] += int(toks[npos])
                    fns[(ob, addr)] = fn
    return ir, taken, fns


def conditional_jumps(obj):
    """Addresses of jcc/jrcxz/loop instructions in an object, as objdump prints them."""
    try:
        out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    addrs = set()
    for m in re.finditer(r"^\s*([0-9a-f]+):\s+(?:bnd\s+|notrack\s+)?(j[a-z]+|loop[a-z]*)\s", out, re.M):
        if m.group(2) not in ("jmp", "jmpq"):
            addrs.add(int(m.group(1), 16))
    return addrs


def main():
    args = sys.argv[1:]
    min_share = 0.001
    if "--min-share" in args:
        i = args.index("--min-share")
        min_share = float(args[i + 1])
        del args[i : i + 2]
    if len(args) != 1:
        print(__doc__)
        return 2
    ir, taken, fns = parse(args[0])
    jumps = {}
    for ob in {ob for ob, _ in ir}:
        jumps[ob] = conditional_jumps(ob)
    rows = []
    for key, execs in ir.items():
        ob, addr = key
        if jumps.get(ob) is None:  # object not readable: fall back to the branches callgrind saw taken
            if key not in taken:
                continue
        elif addr not in jumps[ob]:
            continue
        rows.append((execs, taken.get(key, 0), ob, fns.get(key, "?"), addr))
    missing = [k for k in taken if k not in ir]
    total = sum(r[0] for r in rows)
    hist = [0.0] * 11
    print(f"conditional branch executions: {total}  static branches executed: {len(rows)}"
          + (f"  (jcnd without Ir: {len(missing)})" if missing else ""))
    print(f"{'share':>8} {'executed':>10} {'taken':>10} {'p(taken)':>9} {'rarer':>9} bin  where")
    for execs, t, ob, fn, addr in sorted(rows, key=lambda r: (-r[0], r[4])):
        p = t / execs
        r = min(p, 1 - p)
        hist[rate_bin(r)] += execs / total
        if execs / total >= min_share:
            print(f"{execs / total:8.4f} {execs:10d} {t:10d} {p:9.6f} {r:9.6f} {rate_bin(r):3d}"
                  f"  {ob.split('/')[-1]}:{fn} {addr:#x}")
    print("taken-rate histogram (bins 0..10):", " ".join(f"{h:.4f}" for h in hist))
    return 0


if __name__ == "__main__":
    sys.exit(main())
