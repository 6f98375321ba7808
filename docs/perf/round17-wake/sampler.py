#!/usr/bin/env python3
# Every 100 ms: dirty/writeback memory, vda write stats, the broker's fsync count/sum, which bench relay runs.
import sys, time, urllib.request, subprocess, json
http = sys.argv[1]; out = open(sys.argv[2], 'w'); stop = sys.argv[3]
import os
def mem():
    d = {}
    for l in open('/proc/meminfo'):
        k, v = l.split(':'); 
        if k in ('Dirty', 'Writeback'): d[k] = int(v.split()[0])
    return d
def disk():
    for l in open('/proc/diskstats'):
        f = l.split()
        if f[2] == 'vda': return dict(w=int(f[7]), wsect=int(f[9]), wms=int(f[10]), inflight=int(f[11]), ioms=int(f[12]))
def fsync():
    try:
        t = urllib.request.urlopen(f'http://{http}/metrics', timeout=1).read().decode()
    except Exception: return {}
    r = {}
    for l in t.splitlines():
        if l.startswith('txmq_store_fsync_seconds_sum'): r['fs_sum'] = float(l.split()[-1])
        if l.startswith('txmq_store_fsync_seconds_count'): r['fs_n'] = float(l.split()[-1])
    return r
def phase():
    try:
        ps = subprocess.run(['pgrep', '-af', 'txmq-relay'], capture_output=True, text=True).stdout
    except Exception: return ''
    for k in ('bench-latency', 'bench-backlog'):
        if k in ps: return k
    return ''
def cpu():
    r = {}
    for p in os.listdir('/proc'):
        if not p.isdigit(): continue
        try:
            s = open(f'/proc/{p}/stat').read()
        except Exception: continue
        comm = s[s.index('(')+1:s.rindex(')')]
        if comm in ('postgres', 'txmq-broker', 'txmq-relay', 'txmq-bench'):
            f = s[s.rindex(')')+2:].split()
            r['cpu_' + comm] = r.get('cpu_' + comm, 0) + int(f[11]) + int(f[12])
    st = open('/proc/stat').readline().split()
    r['cpu_total_busy'] = sum(int(x) for x in st[1:4]) + sum(int(x) for x in st[6:9])
    return r
while not os.path.exists(stop):
    s = dict(t=time.time(), **mem(), **disk(), **fsync(), **cpu(), ph=phase())
    out.write(json.dumps(s) + '\n'); out.flush()
    time.sleep(0.1)
