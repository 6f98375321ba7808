#!/usr/bin/env python3
"""Medians per side of ab-other.sh's lines, and the median of the per-round B/A ratios.
Usage: summary.py < out.jsonl"""
import json, statistics, sys, collections

def key(d):
    if d["figure"] == "storage":
        return ("raw fsyncs/s", "fsyncs_per_s") if d["workload"] == "raw_fsync" else (f"storage, {d['writers']} writers, msg/s", "messages_per_s")
    if d["figure"] == "webhook":
        return ("webhook deliveries/s", "deliveries_per_s")
    return ("recovery of 10,000 orphans, s", "seconds")

vals = collections.defaultdict(lambda: collections.defaultdict(dict))  # name -> round -> side -> value
extra = collections.defaultdict(lambda: collections.defaultdict(dict))
for line in sys.stdin:
    d = json.loads(line)
    name, field = key(d)
    vals[name][d["round"]][d["side"]] = d[field]
    if d["workload"] == "storage_append":
        extra[f"storage, {d['writers']} writers, p99 ms"][d["round"]][d["side"]] = d["p99_ms"]
    if d["figure"] == "webhook":
        extra["webhook produce sent to first attempt p99 ms"][d["round"]][d["side"]] = d["send_to_attempt_p99_ms"]
print("| figure | A median (rounds) | B median (rounds) | B/A per-round median |")
print("|---|---|---|---:|")
for table in (vals, extra):
    for name, rounds in table.items():
        a = [r["A"] for r in rounds.values() if "A" in r]
        b = [r["B"] for r in rounds.values() if "B" in r]
        ratios = [r["B"] / r["A"] for r in rounds.values() if "A" in r and "B" in r and r["A"]]
        fmt = lambda xs: f"{statistics.median(xs):,.4g} ({', '.join(f'{x:,.4g}' for x in xs)})" if xs else "-"
        print(f"| {name} | {fmt(a)} | {fmt(b)} | {statistics.median(ratios):.2f} |" if ratios else f"| {name} | {fmt(a)} | {fmt(b)} | - |")
