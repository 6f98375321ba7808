import os,sys,time
# ctx.py PID AT DUR : per-thread voluntary+involuntary switches and CPU ticks over DUR s starting AT s from now
pid=sys.argv[1]; time.sleep(float(sys.argv[2])); dur=float(sys.argv[3])
def snap():
    d={}
    for tid in os.listdir(f'/proc/{pid}/task'):
        try:
            st=open(f'/proc/{pid}/task/{tid}/status').read().split('\n')
            kv=dict(l.split(':\t',1) for l in st if ':\t' in l)
            s=open(f'/proc/{pid}/task/{tid}/stat').read(); f=s[s.rindex(')')+2:].split()
            d[tid]=(int(kv['voluntary_ctxt_switches']),int(kv['nonvoluntary_ctxt_switches']),int(f[11])+int(f[12]))
        except OSError: pass
    return d
a=snap(); time.sleep(dur); b=snap()
tot=[0,0,0]
for t in sorted(b):
    if t in a:
        x=[b[t][i]-a[t][i] for i in range(3)]
        tot=[tot[i]+x[i] for i in range(3)]
        if sum(x): print(t, open(f"/proc/{pid}/task/{t}/comm").read().strip() if os.path.exists(f"/proc/{pid}/task/{t}/comm") else "?", 'vol/s %7.0f invol/s %6.0f cpu%% %4.0f'%(x[0]/dur,x[1]/dur,x[2]/dur))
print('all vol/s %.0f invol/s %.0f cpu%% %.0f'%(tot[0]/dur,tot[1]/dur,tot[2]/dur))
