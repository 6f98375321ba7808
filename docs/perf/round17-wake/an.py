import json,sys
S=[json.loads(l) for l in open(sys.argv[1])]
t0=S[0]['t']; step=int(sys.argv[2]) if len(sys.argv)>2 else 5
prev=S[0]
for s in S[step::step]:
    dt=s['t']-prev['t']
    fsn=s.get('fs_n',0)-prev.get('fs_n',0); fss=s.get('fs_sum',0)-prev.get('fs_sum',0)
    mb=(s['wsect']-prev['wsect'])*512/1e6; io=(s['ioms']-prev['ioms'])/dt/10
    c=lambda k:(s.get('cpu_'+k,0)-prev.get('cpu_'+k,0))/dt  # ticks/s = % of a core
    print(f"{s['t']-t0:6.1f} {s['ph'][6:]:8s} dirty {s['Dirty']/1024:5.0f} MB/s {mb/dt:5.1f} util {io:3.0f} fsync/s {fsn/dt:4.0f} {1000*fss/fsn if fsn else 0:5.2f}ms | cpu all {c('total_busy'):4.0f} brk {c('txmq-broker'):3.0f} pg {c('postgres'):3.0f} rly {c('txmq-relay'):3.0f} bench {c('txmq-bench'):3.0f}")
    prev=s
