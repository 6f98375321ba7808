import json,statistics as st,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
A=[x for x in rows if x['side']=='A']; B=[x for x in rows if x['side']=='B']
def rate(r): return r.get('tx_per_s') or r.get('messages_per_s')
def cpu(r): return r['broker_cpu_s']/ (r.get('tx_per_s') or r.get('messages_per_s') or 1)
for side,xs in (('A',A),('B',B)):
    r=[x['r'] for x in xs]
    print(side, "raised", [x.get("raised") for x in xs], "rate", [round(rate(x)/1000,1) for x in r], "p99", [round(x['p99_ms'],2) for x in r], "p999", [round(x['p999_ms'],1) for x in r], "stalls", [x['stall_lines'] for x in xs])
rp=[b['r']['p99_ms']/a['r']['p99_ms'] for a,b in zip(A,B)]; rt=[rate(b['r'])/rate(a['r']) for a,b in zip(A,B)]
r9=[b['r']['p999_ms']/a['r']['p999_ms'] for a,b in zip(A,B)]
print("B/A p99 %.2f (%d of %d lower), p99.9 %.2f, rate %.2f; medians A p99 %.2f B p99 %.2f; loads %s"%(st.median(rp),sum(1 for x in rp if x<1),len(rp),st.median(r9),st.median(rt),st.median(a['r']['p99_ms'] for a in A),st.median(b['r']['p99_ms'] for b in B),[x['load'] for x in rows]))
