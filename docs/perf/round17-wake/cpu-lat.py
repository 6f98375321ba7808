import json,sys
# mean CPU (% of a core) per process over the samples of the relay latency phase
for f in sys.argv[1:]:
    S=[json.loads(l) for l in open(f)]
    L=[s for s in S if s['ph']=='bench-latency']
    a,b=L[5],L[-2]  # skip the first half second (warm-up) and the end
    dt=b['t']-a['t']
    c=lambda k:(b.get('cpu_'+k,0)-a.get('cpu_'+k,0))/dt
    print(f"{f:14s} {dt:4.1f}s all {c('total_busy'):4.0f} postgres {c('postgres'):4.0f} relay {c('txmq-relay'):4.1f} broker {c('txmq-broker'):4.0f} bench {c('txmq-bench'):4.0f}")
