# jobs.py LAT LOG [win]: slow transactions (above the run's p99) by which RocksDB jobs ran in their window
import sys, collections
lat, log = sys.argv[1], sys.argv[2]; win = float(sys.argv[3]) if len(sys.argv) > 3 else 0.1
import tx_logs
rows = tx_logs.latencies(lat)
# [label, start, end]: the flush, or the compaction's reason
jobs = {k: ['flush' if kind == 'flush' else reason, s, e] for k, (kind, reason, s, e) in tx_logs.jobs(log).items()}
t0=rows[0][0]-rows[0][1]//1000
allv=sorted(v for _,v in rows); p99=allv[int(.99*len(allv))]
b={}
for t,v in rows: b.setdefault(int((t-t0)/1e6/win),[]).append(v)
agg=collections.defaultdict(lambda:[0,0,0])
for k,v in b.items():
    a=t0+int(k*win*1e6)
    act=set(j[0] for j in jobs.values() if j[1]<a+int(win*1e6) and (j[2] or 1<<62)>a-50_000)
    cls='compaction L0' if 'LevelL0FilesNum' in act else ('compaction bottommost only' if 'BottommostFiles' in act else ('flush only' if 'flush' in act else 'none'))
    agg[cls][0]+=1; agg[cls][1]+=len(v); agg[cls][2]+=sum(1 for x in v if x>p99)
tot=sum(a[2] for a in agg.values())
print(f"run p99 {p99/1e6:.1f} ms; windows of {win*1000:.0f} ms by the jobs running in them (or in the 50 ms before):")
for c in ['none','flush only','compaction bottommost only','compaction L0']:
    w,n,s=agg[c]; print(f"  {c:28s} {w:4d} windows {n:7d} tx  {s:5d} above p99 ({100*s/max(n,1):5.2f} % of theirs, {100*s/max(tot,1):5.1f} % of all slow)")
