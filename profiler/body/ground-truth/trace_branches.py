#!/usr/bin/env python3
"""Taken AND transition rates of the main binary's conditional branches, from a Valgrind instruction trace.

usage:
  valgrind --tool=lackey --trace-superblocks=yes --vex-guest-max-insns=1 --vex-guest-chase=no \\
      BINARY ARGS 2>&1 >/dev/null | trace_branches.py BINARY [--base 0x108000] [--min-share 0.001]

With one guest instruction per superblock, lackey's `SB <addr>` lines are the exact sequence of executed
instruction addresses. For every conditional jump of BINARY (from objdump -d), the next executed address
tells the direction (== the jump target: taken). Per branch this prints the executions, the taken share,
the rarer direction's share and the transitions (direction differs from the previous execution of the
same branch; the first execution is not a transition), with the body.rs bins, and the two 11-bin
histograms weighted by executions over the main binary's branches only. Valgrind loads a PIE main
program at 0x108000 (checked: the entry point's address must appear in the trace).
"""
import re
import subprocess
import sys


def rate_bin(r):
    for k in range(10):
        if 2.0 ** -(k + 2) < r <= 2.0 ** -(k + 1):
            return k
    return 0 if r > 0.5 else 10


def jumps(binary):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary], capture_output=True,
                         text=True, check=True).stdout
    table, fn = {}, "?"
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if m:
            fn = m.group(1)
            continue
        m = re.match(r"^\s*([0-9a-f]+):\s+(j[a-z]+|loop[a-z]*)\s+([0-9a-f]+)\b", line)
        if m and m.group(2) not in ("jmp", "jmpq"):
            table[int(m.group(1), 16)] = (int(m.group(3), 16), fn)
    return table


def main():
    args = sys.argv[1:]
    base, min_share = 0x108000, 0.001
    for flag in ("--base", "--min-share"):
        if flag in args:
            i = args.index(flag)
            if flag == "--base":
                base = int(args[i + 1], 0)
            else:
                min_share = float(args[i + 1])
            del args[i : i + 2]
    if len(args) != 1:
        print(__doc__)
        return 2
    table = {a + base: (t + base, fn) for a, (t, fn) in jumps(args[0]).items()}
    stats = {a: [0, 0, 0, None] for a in table}  # executions, taken, transitions, last direction
    prev = None
    seen = 0
    for line in sys.stdin:
        if not line.startswith("SB "):
            continue
        addr = int(line[3:], 16)
        seen += 1
        if prev is not None:
            s = stats[prev]
            d = addr == table[prev][0]
            s[0] += 1
            s[1] += d
            if s[3] is not None and s[3] != d:
                s[2] += 1
            s[3] = d
        prev = addr if addr in table else None
    rows = [(a, s) for a, s in stats.items() if s[0]]
    total = sum(s[0] for _, s in rows)
    if not total:
        print(f"no conditional branch of {args[0]} seen in {seen} traced instructions (wrong --base?)")
        return 1
    th, rh = [0.0] * 11, [0.0] * 11
    print(f"traced instructions: {seen}; conditional branch executions in the binary: {total}")
    print(f"{'share':>7} {'executed':>9} {'p(taken)':>9} {'rarer':>9} bin {'transition':>10} bin  where")
    for a, (e, t, tr, _) in sorted(rows, key=lambda r: (-r[1][0], r[0])):
        p, trate = t / e, tr / e
        r = min(p, 1 - p)
        th[rate_bin(r)] += e / total
        rh[rate_bin(trate)] += e / total
        if e / total >= min_share:
            tb = rate_bin(trate) if trate <= 0.5 else "0*"
            print(f"{e / total:7.4f} {e:9d} {p:9.6f} {r:9.6f} {rate_bin(r):3d} {trate:10.6f} {tb:>3}"
                  f"  {table[a][1]}+{a - base:#x}")
    print("taken histogram:     ", " ".join(f"{h:.4f}" for h in th))
    print("transition histogram:", " ".join(f"{h:.4f}" for h in rh),
          "(0*: rate above 0.5, no body.rs bin; counted in bin 0)" if any(
              s[2] / s[0] > 0.5 for _, s in rows) else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
