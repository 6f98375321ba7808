import sys
rows=[tuple(map(int,l.split())) for l in open(sys.argv[1])]
win=float(sys.argv[2]) if len(sys.argv)>2 else 0.1
def pct(v,q):
    v=sorted(v); return v[min(len(v)-1,int(q*len(v)))]/1e6
tot=[p+e for _,p,e in rows]; pre=[p for _,p,e in rows]; end=[e for _,p,e in rows]
print("all: n=%d  total p50 %.1f p99 %.1f max %.1f | prepare p50 %.1f p99 %.1f | endtx p50 %.1f p99 %.1f"%(len(rows),pct(tot,.5),pct(tot,.99),max(tot)/1e6,pct(pre,.5),pct(pre,.99),pct(end,.5),pct(end,.99)))
b={}
for t,p,e in rows: b.setdefault(int(t/1e9/win),[]).append((p,e))
for k in sorted(b):
    v=b[k]; tt=[p+e for p,e in v]
    print("%6.1fs n=%6d tot p50 %5.1f p99 %5.1f max %5.1f  pre p50 %5.1f p99 %5.1f  end p50 %5.1f p99 %5.1f"%(k*win,len(v),pct(tt,.5),pct(tt,.99),max(tt)/1e6,pct([p for p,e in v],.5),pct([p for p,e in v],.99),pct([e for p,e in v],.5),pct([e for p,e in v],.99)))
