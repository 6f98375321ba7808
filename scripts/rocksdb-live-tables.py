#!/usr/bin/env python3
"""Live table bytes per column family of a broker's data directory: each .sst file present is
attributed to its family by the table_file_creation event of the LOGs that name it (LOG and
LOG.old.*, every open since the store was created) — the broker exposes no per-family size
(issue #15, docs/BENCHMARKS.md "Eleventh round: the transaction snapshot").
Usage: scripts/rocksdb-live-tables.py DATA_DIR"""
import collections
import glob
import os
import re
import sys

d = sys.argv[1]
cf_of = {}
for log in glob.glob(os.path.join(d, "LOG*")):
    for line in open(log, errors="replace"):
        if '"event": "table_file_creation"' not in line:
            continue
        n = re.search(r'"file_number": (\d+)', line)
        cf = re.search(r'"cf_name": "(\w+)"', line)
        if n and cf:
            cf_of[int(n.group(1))] = cf.group(1)
files = collections.defaultdict(lambda: [0, 0])
for f in glob.glob(os.path.join(d, "*.sst")):
    cf = cf_of.get(int(os.path.basename(f)[:-4]), "?")
    files[cf][0] += 1
    files[cf][1] += os.path.getsize(f)
for cf, (n, b) in sorted(files.items()):
    print(f"live tables {cf:<8} {n:4d} files {b / 1e6:9.1f} MB")
