# corr2.py LAT SAMPLES LOG: per 100 ms window, latency p50/p99 beside the threads' CPU, the machine's busy share, the disk
import sys
lat, smp, log = sys.argv[1:4]
import tx_logs
rows = tx_logs.latencies(lat)
S=[]
for l in open(smp):
    p=l.split(); d={k:int(v) for k,v in (x.split('=') for x in p[1:])}; S.append((int(p[0]),d))
# [F(lush) | L(0 compaction) | B(ottommost compaction), start, end]
jobs = {k: ['F' if kind == 'flush' else ('L' if reason[:1] == 'L' else 'B'), s, e] for k, (kind, reason, s, e) in tx_logs.jobs(log).items()}
allv=sorted(v for _,v in rows); p99=allv[int(.99*len(allv))]
print(f"run p99 {p99/1e6:.1f}; columns: window, tx, p50, p99, slow, CPU % of a core per thread (writer io syncer high low), machine busy % of 2 cores, disk MB written, disk busy ms, jobs")
for i in range(1,len(S)):
    (ta,a),(tb,b)=S[i-1],S[i]
    v=sorted(x for t,x in rows if ta<=t<tb)
    if not v: continue
    dt=(tb-ta)/1e6
    c=lambda k: (b.get(k,0)-a.get(k,0))/dt  # ticks/s = % of a core
    act=''.join(sorted(j[0] for j in jobs.values() if j[1]<tb and (j[2] or 1<<62)>ta))
    print(f"{(ta-S[0][0])/1e6:6.2f} {len(v):5d} {v[len(v)//2]/1e6:5.1f} {v[int(.99*len(v))]/1e6:5.1f} {sum(1 for x in v if x>p99):5d} | {c('txmq-writer'):4.0f} {c('txmq-io'):4.0f} {c('txmq-syncer'):4.0f} {c('rocksdb:high'):4.0f} {c('rocksdb:low'):4.0f} | {(b['busy']-a['busy'])/dt/2:4.0f} | {(b['wsect']-a['wsect'])*512/1e6:5.1f} {b['io_ms']-a['io_ms']:4d} | {act}")
