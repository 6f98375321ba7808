#!/usr/bin/env python3
"""Which run came just before each steady-rate run, in the raw lines of past `make bench` runs.
Usage (in the repository): docs/perf/round21-machine/order.py COMMIT...  (versions of
docs/bench-peers.jsonl); prints each run's rate rows as SYSTEM:p99, with the predecessor of
txmq's and NATS's."""
import json
import subprocess
import sys

for commit in sys.argv[1:]:
    text = subprocess.run(['git', 'show', f'{commit}:docs/bench-peers.jsonl'],
                          capture_output=True, text=True, check=True).stdout
    rows = [json.loads(l) for l in text.splitlines() if l.startswith('{')]
    prev, out = None, []
    for d in rows:
        label = d.get('label', d.get('system'))
        if d.get('workload') == 'rate':
            after = f'(after {prev})' if label in ('txmq', 'nats') else ''
            out.append(f"{label.replace('rabbitmq-', 'r')}:{d.get('p99_ms', 0):.2f}{after}")
        prev = label
    print(commit, ' '.join(out))
