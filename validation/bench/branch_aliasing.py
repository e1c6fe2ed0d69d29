"""Summarises a `branch_aliasing` report (ditto-body's example): mispredictions per request by file,
aliased ones by (victim file <- aggressor file), and, with the clone's binary, the clone's branches by
kind (the generator's body forms, the runtime, libraries).

Usage: python3 branch_aliasing.py REPORT.tsv REQUESTS [CLONE_BINARY]
"""
import collections
import math
import re
import subprocess
import sys

# A PIE runs at this base under Valgrind; the report's addresses are guest addresses.
PIE_BASE = 0x108000


def read(path):
    sites, files, pairs, kinds, instructions = {}, [], [], [], None
    for line in open(path):
        if line.startswith("# executed ") and " instructions " in line:
            instructions = int(line.split(" instructions ")[1])
        elif line.startswith("# kind "):
            name, kind, e, m = line[len("# kind "):].rstrip("\n").split("\t")
            kinds.append((name, kind, int(e), int(m)))
        elif line.startswith("# file "):
            name, *n = line[len("# file "):].rstrip("\n").split("\t")
            files.append((name, *map(int, n)))
        elif line.startswith("# pair "):
            what, n = line[len("# pair "):].rstrip("\n").split("\t")
            pairs.append((what, int(n)))
        elif not line.startswith("#"):
            f = line.rstrip("\n").split("\t")
            sites[int(f[0], 16)] = (int(f[1]), int(f[4]), int(f[5]), int(f[2]), int(f[3]))
    return sites, files, pairs, kinds, instructions


def body_kinds(binary):
    """Guest address -> kind of branch, and guest address -> function, from the clone's disassembly
    and body.S source lines."""
    dis = subprocess.run(["objdump", "-d", "-l", "--no-show-raw-insn", "-M", "intel", binary],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    sources, kinds, functions, fn, cur = {}, {}, {}, None, None

    def src(path, n):
        if path not in sources:
            try:
                sources[path] = open(path).read().split("\n")
            except OSError:
                sources[path] = []
        lines = sources[path]
        return lines[n - 1].strip() if 0 < n <= len(lines) else ""

    for line in dis:
        m = re.match(r"^([0-9a-f]+) <(.*)>:", line)
        if m:
            fn = m.group(2)
            continue
        m = re.match(r"^(/\S+):(\d+)", line)
        if m:
            cur = (m.group(1), int(m.group(2)))
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s", line)
        if not m:
            continue
        addr = int(m.group(1), 16) + PIE_BASE
        functions[addr] = fn or "?"
        if not (fn or "").startswith("ditto_body"):
            kinds[addr] = "runtime"
            continue
        s = src(*cur) if cur else ""
        prev = src(cur[0], cur[1] - 1) if cur else ""
        if s.startswith("rep"):
            kinds[addr] = "body rep-string iterations"
        elif re.match(r"j\w+ \.L\w+_c\d+$", s):
            kinds[addr] = "body loop back-edge"
        elif re.match(r"j\w+ \.L\w+_done$", s):
            kinds[addr] = "body ring exit"
        elif re.match(r"j\w+ 1f$", s) and re.match(r"test ebx, (1073741824|2147483648)$", prev):
            kinds[addr] = "body never (bit 30 or 31)"
        elif re.match(r"j\w+ 1f$", s) and re.match(r"test (ebx|bl), ", prev):
            kinds[addr] = "body counter pattern"
        elif re.match(r"j\w+ 1f$", s):
            kinds[addr] = "body data-dependent"
        else:
            kinds[addr] = "body other"
    return kinds, functions


def main():
    path, requests = sys.argv[1], float(sys.argv[2])
    sites, files, pairs, kinds_by_instr, instructions = read(path)
    executed = sum(s[0] for s in sites.values())
    missed = sum(s[1] for s in sites.values())
    aliased = sum(s[2] for s in sites.values())
    print(f"  {requests:.0f} requests: {executed / requests:.0f} conditional branches, "
          f"{missed / requests:.2f} mispredicted ({missed / max(executed, 1):.4f}), "
          f"{aliased / requests:.2f} of them aliased, per request")
    if instructions:
        print(f"  {instructions / requests:.0f} instructions, {executed / instructions:.4f} conditional branches "
              f"and {missed / instructions * 1000:.2f} mispredictions per 1,000 instructions")
    # How many predictor counters the branches use: each (history, address bits) pair is one.
    hist = sum(s[0] * s[3] for s in sites.values()) / max(executed, 1)
    print(f"  histories a branch is predicted under (weighted by executions): {hist:.1f} of 128")
    print(f"  {'file':32s} {'branches':>9s} {'mispred':>8s} {'aliased':>8s}   (per request)")
    for name, e, m, a in sorted(files, key=lambda f: -f[2]):
        if m / requests >= 0.01:
            print(f"  {name:32s} {e / requests:9.1f} {m / requests:8.2f} {a / requests:8.2f}")
    # Per minority-direction bin (the profile's taken-rate bins: bin i holds (2^-(i+2), 2^-(i+1)],
    # bin 10 the rest), as this run's outcomes place each branch: how predictable each kind of
    # branch is, the part of a program's behaviour the taken and transition histograms leave out.
    bins = collections.defaultdict(lambda: [0, 0, 0, 0])
    for e, m, a, _h, t in sites.values():
        if e == 0:
            continue
        q = min(t, e - t) / e
        b = 10 if q == 0 else max(0, min(10, int(math.floor(-math.log2(q))) - 1))
        row = bins[b]
        row[0] += 1
        row[1] += e
        row[2] += m
        row[3] += a
    print(f"  {'minority bin':12s} {'sites':>6s} {'branches':>9s} {'mispred':>8s} {'aliased':>8s} {'rate':>7s}   (per request)")
    for b in sorted(bins):
        n, e, m, a = bins[b]
        print(f"  {b:12d} {n:6d} {e / requests:9.1f} {m / requests:8.2f} {a / requests:8.2f} {m / e:7.4f}")
    print("  by file and instruction (cachegrind counts every guarded exit; per request):")
    for name, kind, e, m in sorted(kinds_by_instr, key=lambda k: -k[2]):
        if e / requests >= 1:
            print(f"    {name:28s} {kind:20s} {e / requests:9.1f} {m / requests:8.2f}")
    print("  aliased, victim <- aggressor (per request):")
    for what, n in sorted(pairs, key=lambda p: -p[1]):
        if n / requests >= 0.05:
            print(f"    {what:50s} {n / requests:.2f}")
    if len(sys.argv) > 3:
        kinds, functions = body_kinds(sys.argv[3])
        # Per function of the clone (each body cluster, the runtime's functions; libraries as one):
        # which thread's code runs the branches, and its minority outcomes (the executions in the
        # rarer direction, what a per-branch bias predictor would miss).
        agg = collections.defaultdict(lambda: [0, 0, 0])
        by_fn = collections.defaultdict(lambda: [0, 0, 0, 0])
        for addr, (e, m, a, _h, t) in sites.items():
            k = agg[kinds.get(addr, "libraries")]
            k[0] += e
            k[1] += m
            k[2] += a
            row = by_fn[functions.get(addr, "libraries")]
            row[0] += e
            row[1] += m
            row[2] += a
            row[3] += min(t, e - t)
        print(f"  {'clone branch kind':32s} {'branches':>9s} {'mispred':>8s} {'aliased':>8s} {'own':>8s}   (per request)")
        for k, (e, m, a) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
            if m / requests >= 0.01:
                print(f"  {k:32s} {e / requests:9.1f} {m / requests:8.2f} {a / requests:8.2f} {(m - a) / requests:8.2f}")
        print(f"  {'clone function':32s} {'branches':>9s} {'mispred':>8s} {'aliased':>8s} {'minority':>8s}   (per request)")
        for f, (e, m, a, q) in sorted(by_fn.items(), key=lambda kv: -kv[1][1]):
            if m / requests >= 0.05 or e / requests >= 10:
                print(f"  {f:32s} {e / requests:9.1f} {m / requests:8.2f} {a / requests:8.2f} {q / requests:8.2f}")


main()
