#!/usr/bin/env python3
"""Exact taken and transition rates of every static branch of branches.c, by replaying its loop.

usage: branch_patterns.py [mid|classic] [ITERS]      (defaults: mid 1048576, as branches.c)

Replays the directions each jcc of branches.c takes (same masks, same LCG, same seed), and prints per
branch: taken share p, rarer-direction rate min(p, 1-p), transitions / executions (the first execution
counts as no transition), and their body.rs bins; then the two 11-bin histograms weighted by executions.
"""
import sys

MASK64 = (1 << 64) - 1
SEED, MUL = 0x853C49E6748FEA9B, 6364136223846793005


def rate_bin(r):
    for k in range(10):
        if 2.0 ** -(k + 2) < r <= 2.0 ** -(k + 1):
            return k
    return 0 if r > 0.5 else 10


def bt(mask, shift=0):
    return lambda i, x: (mask >> ((i >> shift) & 63)) & 1 == 1


BRANCHES = {
    "mid": [
        ("M1", bt(0x60C30C30C30C30C3)),
        ("M2", bt(0x000C0300C0300C03)),
        ("M3", bt(0x00000C0000300003)),
        ("M4", bt(0x000FFC00FFE007FF, 1)),
        ("M5", bt(0x0000040000200001)),
        ("M6", bt(0x0001FC0007F000FF, 2)),
        ("R1", lambda i, x: (x >> 57) < 3),
        ("R2", lambda i, x: ((x >> 40) & 1023) < 3),
        ("N0", lambda i, x: False),
    ],
    "classic": [
        ("C1", bt(0xAAAAAAAAAAAAAAAA)),
        ("C2", bt(0x0101010101010101)),
        ("C3", bt(0xFF00FF00FF00FF00)),
        ("C4", lambda i, x: True),
        ("C5", lambda i, x: (x >> 59) == 0),
    ],
}


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "mid"
    n = int(sys.argv[2], 0) if len(sys.argv) > 2 else 1048576
    branches = BRANCHES[mode]
    taken = [0] * (len(branches) + 1)
    trans = [0] * (len(branches) + 1)
    prev = [None] * (len(branches) + 1)
    x = SEED
    for i in range(n):
        x = (x * MUL + 1) & MASK64  # the LCG step precedes the LCG branches; masks use i
        dirs = [f(i, x) for _, f in branches] + [i + 1 < n]  # loop: jb taken while i+1 < n
        for k, d in enumerate(dirs):
            taken[k] += d
            if prev[k] is not None and prev[k] != d:
                trans[k] += 1
            prev[k] = d
    names = [nm for nm, _ in branches] + ["loop"]
    th, rh = [0.0] * 11, [0.0] * 11
    print(f"{'branch':6} {'p(taken)':>9} {'rarer':>9} {'bin':>3} {'transition':>10} {'bin':>3}")
    for k, nm in enumerate(names):
        p = taken[k] / n
        r = min(p, 1 - p)
        t = trans[k] / n
        tb = rate_bin(t) if t <= 0.5 else "0*"
        print(f"{nm:6} {p:9.6f} {r:9.6f} {rate_bin(r):3d} {t:10.6f} {tb:>3}")
        th[rate_bin(r)] += 1 / len(names)
        rh[rate_bin(t) if t <= 0.5 else 0] += 1 / len(names)
    print("taken histogram:     ", " ".join(f"{h:.4f}" for h in th))
    print("transition histogram:", " ".join(f"{h:.4f}" for h in rh),
          "(* a rate above 0.5 has no bin in body.rs; counted in bin 0 here)" if mode == "classic" else "")


if __name__ == "__main__":
    main()
