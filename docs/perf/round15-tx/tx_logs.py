# What jobs.py and corr2.py read: a txmq-bench tx --latency-log file and a RocksDB LOG's jobs.
import json, re

def latencies(path):
    """[(end time in unix µs, Prepare + EndTx latency in ns)] of a --latency-log file."""
    start, rows = None, []
    for l in open(path):
        if l.startswith('#'):
            start = int(l.split()[2]); continue
        t, p, e = map(int, l.split()); rows.append((start + t // 1000, p + e))
    return rows

def jobs(path):
    """{job id: [kind, compaction reason or '', start µs, end µs or None]} from a RocksDB LOG."""
    out = {}
    for l in open(path):
        m = re.search(r'EVENT_LOG_v1 (\{.*\})', l)
        if not m: continue
        try: ev = json.loads(m.group(1))
        except Exception: continue
        k = ev.get('event')
        if k in ('flush_started', 'compaction_started'):
            out[ev['job']] = ['flush' if k[0] == 'f' else 'compaction', ev.get('compaction_reason', ''), ev['time_micros'], None]
        elif k in ('flush_finished', 'compaction_finished') and ev.get('job') in out:
            out[ev['job']][3] = ev['time_micros']
    return out
