#!/usr/bin/env python3
"""Per-request data-cache misses of a clone, attributed to its body's regions.

Reads two cachegrind output files of the same clone under the same cache geometry, one from a run
that served fewer requests (LO) and one that served more (HI), and the clone's `src/body.S`
(assembled with -g, so cachegrind attributes every access to a line of it). Each memory operand of
the body is classed by what it addresses:

* `window` operands `[base + temp + disp]` by the size of the region their temp was masked to
  (`and temp, size - 64`), per buffer (r15 private, r14 shared);
* `fixed` operands `[base + disp]`: the header, the one-line class and the 2-4-line regions;
* `other`: the rest of the body (the chase, stack, dispatch tables);
* `skeleton`: every access outside body.S, except memset (the buffers' start-up clearing).

Prints, for each class of operand, its data references, L1d misses and LL misses per request of
the difference HI - LO, which cancels start-up and per-second work as `ditto tune` does.
Usage: miss_attribution.py LO.out HI.out BODY.S REQUESTS
"""

import collections
import re
import sys

WINDOW = re.compile(r"\[(r1[45]) \+ (\w+) \+ (\d+)\]")
FIXED = re.compile(r"\[r1[45] \+ \d+\]")
MASK = re.compile(r"\s+and (\w+), (\d+)$")
BODY_LABEL = re.compile(r"^(ditto_body_\w+):")
BUFFER = {"r15": "private", "r14": "shared"}


def classify(body_path):
    """Maps each line of body.S with a memory operand to (body, buffer, region bytes)."""
    kinds = {}
    body, masks = None, {}
    with open(body_path) as f:
        for number, line in enumerate(f, 1):
            label = BODY_LABEL.match(line)
            if label:
                body, masks = label.group(1), {}
            mask = MASK.match(line)
            if mask:
                masks[mask.group(1)] = int(mask.group(2)) + 64
            if body is None:
                continue
            window = WINDOW.search(line)
            if window and window.group(2) in masks:
                kinds[number] = (body, BUFFER[window.group(1)], masks[window.group(2)])
            elif FIXED.search(line):
                kinds[number] = (body, "fixed", 0)
    return kinds


def cachegrind_lines(cg_path):
    """Yields (source file, line, {event: count}) for every cost line of a cachegrind output file;
    events a line leaves out count 0."""
    events, source = None, ""
    with open(cg_path) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("fl="):
                source = line.strip()[3:]
            elif line[:1].isdigit() and events is not None:
                fields = line.split()
                counts = [int(x) for x in fields[1:]]
                counts += [0] * (len(events) - len(counts))
                yield source, int(fields[0]), dict(zip(events, counts))


def per_kind(cg_path, kinds):
    """Sums data references, L1d misses and LL misses per kind over one cachegrind file."""
    totals = collections.defaultdict(lambda: [0, 0, 0])
    for source, number, counts in cachegrind_lines(cg_path):
        if source.endswith("body.S"):
            kind = kinds.get(number, ("body", "other", 0))
        elif "memset" in source:
            continue
        else:
            kind = ("skeleton", "", 0)
        t = totals[kind]
        t[0] += counts["Dr"] + counts["Dw"]
        t[1] += counts["D1mr"] + counts["D1mw"]
        t[2] += counts["DLmr"] + counts["DLmw"]
    return totals


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: miss_attribution.py LO.out HI.out BODY.S REQUESTS")
    lo_path, hi_path, body_path, requests = sys.argv[1:]
    requests = float(requests)
    if requests <= 0:
        sys.exit("miss_attribution: the HI run must serve more requests than the LO run")
    kinds = classify(body_path)
    lo, hi = per_kind(lo_path, kinds), per_kind(hi_path, kinds)
    rows = []
    total = [0.0, 0.0, 0.0]
    for kind in sorted(set(lo) | set(hi), key=lambda k: (k[0], k[1], k[2])):
        d = [(hi[kind][i] - lo[kind][i]) / requests for i in range(3)]
        total = [a + b for a, b in zip(total, d)]
        rows.append((kind, d))
    print(
        f"per request: {total[0]:.0f} data refs, {total[1]:.2f} L1d misses "
        f"({total[1] / max(total[0], 1e-9):.4f} of refs), {total[2]:.3f} LL misses "
        f"({total[2] / max(total[1], 1e-9):.3f} of L1d misses)"
    )
    print(f"{'body':16} {'operand':8} {'region B':>10} {'refs':>9} {'L1d miss':>9} {'LL miss':>8}")
    for (body, operand, region), d in rows:
        # Kinds below a twentieth of a reference and a hundredth of a miss per request are noise.
        if abs(d[0]) < 0.05 and abs(d[1]) < 0.01:
            continue
        region_text = str(region) if region else ""
        print(f"{body:16} {operand:8} {region_text:>10} {d[0]:9.2f} {d[1]:9.3f} {d[2]:8.3f}")


if __name__ == "__main__":
    main()
