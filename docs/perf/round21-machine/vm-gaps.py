#!/usr/bin/env python3
"""Stretches of over 4 ms in which no CPU logged any event, in a trace of
scripts/bench-tail-trace.sh (trace.txt). During a 10,000 msg/s run the bench's 100 µs timer alone
logs events every 100 µs, so such a stretch means the whole VM did not run.
Usage: vm-gaps.py OUT_DIR/trace.txt"""
import re
import sys

last, gaps = None, []
for line in open(sys.argv[1], errors='replace'):
    m = re.search(r'\[\d{3}\] \S+\s+(\d+\.\d+):', line)
    if not m:
        continue
    t = float(m.group(1))
    if last is not None and t - last > 0.004:
        gaps.append((last, t - last))
    last = t if last is None else max(t, last)
print('gaps > 4 ms with no event on any CPU:', len(gaps))
for start, length in gaps:
    print(f'  {start:.3f} {length * 1000:.1f} ms')
