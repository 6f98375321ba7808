import re,json,datetime,sys
lat,log=sys.argv[1],sys.argv[2]
rows=[];start=None
for l in open(lat):
    if l.startswith('#'):
        start=int(l.split()[-1]); continue
    t,p,e=map(int,l.split()); rows.append(t)
rows.sort()
abs_=[start+t//1000 for t in rows]
gaps=[(a,b) for a,b in zip(abs_,abs_[1:]) if b-a>8000]
ev=[]
for l in open(log):
    m=re.match(r'(\d{4}/\d\d/\d\d-\d\d:\d\d:\d\d\.\d+) .*?\[(\w+)\] New memtable created with log file: #(\d+)',l)
    if m:
        ts=datetime.datetime.strptime(m.group(1),'%Y/%m/%d-%H:%M:%S.%f').replace(tzinfo=datetime.timezone.utc).timestamp()
        ev.append((int(ts*1e6),'switch-'+m.group(2)))
    if 'EVENT_LOG_v1' in l:
        try: j=json.loads(l.split('EVENT_LOG_v1 ')[1],strict=False)
        except Exception: continue
        if j['event'] in('flush_started','compaction_started'):
            ev.append((j['time_micros'], j['event'].split('_')[0]+'-'+str(j.get('cf_name',j.get('compaction_reason','')))))
ev.sort()
print(len(gaps),"gaps > 8 ms in",(abs_[-1]-abs_[0])/1e6,"s; switches:",sum(1 for _,n in ev if n.startswith('switch')))
for a,b in gaps:
    items=[f"{n}@{(t-a)/1000:+.1f}" for t,n in ev if a-30000<=t<=b]
    print("gap %5.1f ms at +%.3f s: %s"%((b-a)/1000,(a-start)/1e6,", ".join(items)))
