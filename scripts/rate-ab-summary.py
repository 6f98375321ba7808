#!/usr/bin/env python3
"""Summarizes scripts/bench-rate-ab.sh output (stdin): per side the p50/p99/p99.9 of every run in
order, the broker CPU µs per message, the load, and the medians of the per-round ratios B/A
(rounds pair the n-th A run with the n-th B run)."""
import json
import signal
import statistics
import sys

# Piped into head: stop quietly when the reader goes, as other filters do.
signal.signal(signal.SIGPIPE, signal.SIG_DFL)

runs = {"A": [], "B": []}
for line in sys.stdin:
    if line.startswith("{"):
        d = json.loads(line)
        runs[d["ab"]].append(d)
n = min(len(runs["A"]), len(runs["B"]))
if n == 0:
    sys.exit(f"rate-ab-summary: no JSON lines of both sides on stdin (A: {len(runs['A'])}, B: {len(runs['B'])}); "
             "give it the output of scripts/bench-rate-ab.sh")
fmt = lambda xs: ", ".join(f"{x:.2f}" for x in xs)
for side in "AB":
    rs = runs[side]
    if rs:
        print(f"{side} env: {rs[0].get('env', '')!r}")
    for key in ("p50_ms", "p99_ms", "p999_ms", "broker_cpu_us_per_msg", "load1"):
        xs = [r[key] for r in rs]
        print(f"  {key:<22} median {statistics.median(xs):8.2f}  runs {fmt(xs)}")
for key in ("p50_ms", "p99_ms", "p999_ms", "broker_cpu_us_per_msg"):
    ratios = [runs["B"][i][key] / runs["A"][i][key] for i in range(n)]
    print(f"B/A {key:<22} median {statistics.median(ratios):.2f}  rounds {fmt(ratios)}")
