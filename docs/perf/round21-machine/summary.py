#!/usr/bin/env python3
"""Per file and per system: the steady-rate p99 of each round and their median (settle-ab.sh)."""
import json
import statistics
import sys

for path in sys.argv[1:]:
    rows = [json.loads(l) for l in open(path) if l.startswith('{')]
    by = {}
    prev = None
    for d in rows:
        label = d.get('label', d.get('system'))
        if d.get('workload') in ('rate', 'e2e'):
            key = (d['workload'], label)
            by.setdefault(key, []).append((d['p99_ms'], prev))
        prev = label
    print(path)
    for (w, label), vals in sorted(by.items()):
        p99s = [v for v, _ in vals]
        after = ' '.join(f'{v:.2f}({(p or "-")[:6]})' for v, p in vals)
        print(f'  {w:5} {label:16} p99 median {statistics.median(p99s):6.2f}  rounds (after): {after}')
