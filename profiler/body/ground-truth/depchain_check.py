#!/usr/bin/env python3
"""RAW/WAR/WAW distance histograms of depchain's steady-state loop, from the built binary's disassembly.

usage: depchain_check.py DEPCHAIN_BINARY [--no-flags]

Takes each chainK function's loop (240 x lea, sub, jne) from objdump -d, checks its shape, replays three
iterations and histograms the third one's register dependencies in the body.rs bins (1, 2, 3-4, ...,
513+). RAW: per register read, distance back to its last writer. WAW: per register write, back to the
last writer. WAR: per register write, back to the last read by an earlier instruction. The flags count
as a register unless --no-flags.
"""
import math
import re
import subprocess
import sys


def dist_bin(d):
    return 0 if d == 1 else min(10, math.ceil(math.log2(d)))


def main():
    args = sys.argv[1:]
    flags = "--no-flags" not in args
    args = [a for a in args if a != "--no-flags"]
    if len(args) != 1:
        print(__doc__)
        return 2
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", args[0]], capture_output=True,
                         text=True, check=True).stdout
    for k in (1, 2, 3, 4, 6, 8, 12):
        body = dis.split(f"<chain{k}>:")[1].split("\n\n")[0]
        ins = re.findall(r"^\s*[0-9a-f]+:\s+(\w+)\s+(.*)$", body, re.M)
        start = next(i for i, (m, _) in enumerate(ins) if m == "lea")
        loop = ins[start : start + 242]
        assert [m for m, _ in loop[:240]] == ["lea"] * 240, f"chain{k}: not 240 leas"
        assert loop[240][0] == "sub" and loop[241][0] == "jne", f"chain{k}: no sub/jne"
        regs = {re.match(r"0x1\((%\w+)\),", o).group(1) for _, o in loop[:240]}
        assert len(regs) == k, f"chain{k}: {len(regs)} registers"
        last_w, last_r = {}, {}
        hists = {"raw": [0] * 11, "war": [0] * 11, "waw": [0] * 11}
        pos = 0
        for it in range(3):
            for m, o in loop:
                if m == "lea":
                    src, dst = re.match(r"0x1\((%\w+)\),(%\w+)", o).groups()
                    reads, writes = [src], [dst]
                elif m == "sub":
                    reads, writes = ["%rcx"], ["%rcx"] + (["flags"] if flags else [])
                else:
                    reads, writes = (["flags"] if flags else []), []
                if it == 2:
                    for r in reads:
                        hists["raw"][dist_bin(pos - last_w[r])] += 1
                    for w in writes:
                        hists["waw"][dist_bin(pos - last_w[w])] += 1
                        hists["war"][dist_bin(pos - last_r[w])] += 1
                for w in writes:
                    last_w[w] = pos
                for r in reads:
                    last_r[r] = pos
                pos += 1
        for name, h in hists.items():
            n = sum(h)
            print(f"K={k:2d} {name}: " + " ".join(f"{x / n:.4f}" for x in h))
    return 0


if __name__ == "__main__":
    sys.exit(main())
