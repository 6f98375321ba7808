import sys, json
rows=[json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
by={}
for r in rows: by.setdefault(r['workload_ab'],[]).append(r)
for w,rs in by.items():
    A=[r for r in rs if r['ab']=='A']; B=[r for r in rs if r['ab']=='B']
    key='tx_per_s' if w=='tx' else 'messages_per_s'
    out=[]
    for a,b in zip(A,B):
        ca=a.get('broker_cpu_s',0)-a.get('broker_cpu_at_start_s',0); cb=b.get('broker_cpu_s',0)-b.get('broker_cpu_at_start_s',0)
        out.append(f"{a[key]:.0f}/{b[key]:.0f}={b[key]/a[key]:.2f} p99 {a['p99_ms']:.1f}/{b['p99_ms']:.1f} load {a['load1']}/{b['load1']}")
    print(w); [print('  ',o) for o in out]
