import re,json,collections,sys
L=open(sys.argv[1]).read().splitlines()
jobcf={}
for l in L:
    m=re.search(r'\[(\w+)\] \[JOB (\d+)\] (Compacting|Flushing)',l)
    if m: jobcf[int(m.group(2))]=m.group(1)
st=collections.defaultdict(lambda:[0,0,0,0]); reason={}
fl=collections.defaultdict(lambda:[0,0])
for l in L:
    if 'EVENT_LOG_v1' not in l: continue
    try: e=json.loads(l[l.index('{'):])
    except Exception: continue
    if e['event']=='compaction_started': reason[e['job']]=e['compaction_reason']
    if e['event']=='compaction_finished':
        k=(jobcf.get(e['job']),reason.get(e['job']))
        s=st[k]; s[0]+=1; s[1]+=e['compaction_time_cpu_micros']/1e6; s[2]+=e['total_output_size']/1e6; s[3]+=e['compaction_time_micros']/1e6
    if e['event']=='flush_finished':
        pass
for l in L:
  m=re.search(r'\[(\w+)\] \[JOB (\d+)\] Level-0 flush table #\d+: (\d+) bytes',l)
  if m: f=fl[m.group(1)]; f[0]+=1; f[1]+=int(m.group(3))/1e6
for k,v in sorted(st.items(),key=lambda x:-x[1][1]): print(k, 'jobs %d cpu %.2fs out %.0fMB wall %.2fs'%tuple(v))
for k,v in fl.items(): print('flush',k,'%d files %.0f MB'%tuple(v))
