#!/usr/bin/env python3
"""Medians per side of this round's raw files: lines "LABEL ROUND {rate1.sh's JSON line}
txmq_store_fsyncs_total N" (mfi-ab.txt, mfi-int.txt). New A/Bs: scripts/bench-rate-ab.sh with
BROKER_ARGS_B, summarized by scripts/rate-ab-summary.py. Usage: summary.py mfi-ab.txt"""
import collections, json, re, statistics as st, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r'(\w+) (\d+) (\{.*\}) txmq_store_fsyncs_total (\d+)', line)
    if not m:
        continue
    d = json.loads(m.group(3))
    rows[m.group(1)].append((d['p50_ms'], d['p90_ms'], d['p99_ms'], d['p999_ms'], d['broker_cpu_us_per_msg'], int(m.group(4))))
for k, v in rows.items():
    med = tuple(st.median([x[i] for x in v]) for i in range(6))
    print(k, 'p99 per round', [round(x[2], 1) for x in v])
    print('   median p50 %.2f p90 %.2f p99 %.2f p99.9 %.2f broker CPU us/msg %.1f fsyncs in the run %d' % med)
