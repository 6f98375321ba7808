#!/usr/bin/env python3
"""Summarizes scripts/bench-ab.sh output (JSON lines on stdin): per workload, the medians of A
and B (msg/s or tx/s, broker CPU µs per message or transaction) and the median of the per-round
ratios B/A, which is what a busy machine can still tell. For the relay workload the rate is the
relay's backlog rows/s, µs is the relay's CPU per row, p99 the commit→consume latency; a second
table gives relay ÷ direct of the same run and the latency p50/p99."""
import json
import statistics
import sys
from collections import defaultdict

runs = defaultdict(lambda: {"A": [], "B": []})
relay = {"A": [], "B": []}  # relay workload: (relay rows/s ÷ direct msg/s of the same run, p50, p99)
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{"):
        continue
    d = json.loads(line)
    rate = d.get("messages_per_s", d.get("tx_per_s", d.get("relay_rows_per_s")))
    cpu = d.get("broker_cpu_us_per_msg", d.get("relay_cpu_us_per_row"))
    if cpu is None and d.get("broker_cpu_s") is not None and rate:
        # The broker's CPU covers the warm-up too: lines that say their warm-up count it (the
        # rate then stands for both; older lines divide by the measured seconds alone).
        # bench-ab.sh also says what opening the store took (a SEED is checksummed at open).
        cpu = (d["broker_cpu_s"] - d.get("broker_cpu_at_start_s", 0)) * 1e6 / (rate * (d.get("seconds", 5) + d.get("warmup", 0)))
    runs[d["workload_ab"]][d["ab"]].append((rate, cpu, d.get("p99_ms", d.get("relay_p99_ms"))))
    if d["workload_ab"] == "relay":
        relay[d["ab"]].append((rate / d["direct_msgs_per_s"], d["relay_p50_ms"], d["relay_p99_ms"]))

print(f"{'workload':<12}{'rounds':>7}{'A rate':>12}{'B rate':>12}{'B/A rate':>10}{'A µs':>8}{'B µs':>8}{'B/A µs':>8}{'A p99':>9}{'B p99':>9}")
for w, ab in runs.items():
    n = min(len(ab["A"]), len(ab["B"]))
    if n == 0:
        continue
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    rr = med([ab["B"][i][0] / ab["A"][i][0] for i in range(n)])
    cr = med([ab["B"][i][1] / ab["A"][i][1] for i in range(n) if ab["A"][i][1] and ab["B"][i][1]])
    print(f"{w:<12}{n:>7}{med([x[0] for x in ab['A']]):>12.0f}{med([x[0] for x in ab['B']]):>12.0f}{rr:>10.2f}"
          f"{med([x[1] for x in ab['A'] if x[1]]):>8.2f}{med([x[1] for x in ab['B'] if x[1]]):>8.2f}{cr:>8.2f}"
          f"{med([x[2] for x in ab['A'] if x[2]]):>9.1f}{med([x[2] for x in ab['B'] if x[2]]):>9.1f}")
if relay["A"] and relay["B"]:
    med = statistics.median
    print(f"\n{'relay':<12}{'runs':>7}{'relay/direct':>14}{'p50 ms':>9}{'p99 ms':>9}")
    for side in "AB":
        xs = relay[side]
        print(f"{side:<12}{len(xs):>7}{med([x[0] for x in xs]):>14.2f}{med([x[1] for x in xs]):>9.2f}{med([x[2] for x in xs]):>9.2f}")
