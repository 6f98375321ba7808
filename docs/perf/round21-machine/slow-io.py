#!/usr/bin/env python3
"""Block requests that took over 5 ms from issue to completion, with the time since the previous
one, in a trace of scripts/bench-tail-trace.sh (trace.txt). Usage: slow-io.py OUT_DIR/trace.txt"""
import re
import sys

issued, slow, n = {}, [], 0
for line in open(sys.argv[1], errors='replace'):
    m = re.search(r'\s(\d+\.\d+): block_rq_(issue|complete): \S+ (\S+) (?:\d+ )?\(\) (\d+) \+ (\d+)', line)
    if not m:
        continue
    t, kind, key = float(m.group(1)), m.group(2), (m.group(4), m.group(5), m.group(3))
    if kind == 'issue':
        issued[key] = t
    elif key in issued:
        start = issued.pop(key)
        n += 1
        if t - start > 0.005:
            slow.append((start, (t - start) * 1000, m.group(3)))
print('requests', n, 'over 5 ms', len(slow))
prev = None
for start, ms, rw in slow:
    print(f'{start:.3f} {ms:6.1f} ms {rw}' + (f'  +{(start - prev) * 1000:.0f} ms' if prev else ''))
    prev = start
