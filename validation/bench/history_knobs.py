#!/usr/bin/env python3
"""Prints one iteration's knobs of a `ditto tune` history as the knobs TOML `ditto generate` reads.

The history's knobs have the knobs file's sections and keys. Used by code-size-sweep.sh and
second-level-sweep.sh. Usage: history_knobs.py TUNE-HISTORY.json ITERATION
"""

import json
import sys

path, n = sys.argv[1], int(sys.argv[2])
its = [it for it in json.load(open(path)).get("iterations", []) if it.get("iteration") == n]
if not its:
    sys.exit(f"history_knobs: {path} has no iteration {n}")
for section, keys in its[0]["knobs"].items():
    print(f"[{section}]")
    for key, value in keys.items():
        print(f"{key} = {json.dumps(value)}")
    print()
