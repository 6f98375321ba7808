import sys, collections
# samples separated by blank lines; each line "ip sym"
samples=[]; cur=[]
for line in open(sys.argv[1]):
    line=line.strip()
    if not line:
        if cur: samples.append(cur); cur=[]
        continue
    parts=line.split(None,1)
    cur.append(parts[1] if len(parts)>1 else parts[0])
if cur: samples.append(cur)
n=len(samples)
cats=collections.Counter()
for s in samples:
    j=' | '.join(s)
    def has(x): return x in j
    key=[]
    if has('DeleteCF'): key.append('memtable delete')
    elif has('PutCF'): key.append('memtable put')
    elif has('WriteToWAL'): key.append('WAL')
    elif has('DBImpl::Write'): key.append('DBImpl::Write other')
    elif has('finalize'): key.append('finalize')
    elif has('resolve('): key.append('apply resolve')
    elif has('prepare('): key.append('apply prepare')
    elif has('run_group'): key.append('run_group other')
    else: key.append('other')
    if has('RecomputeSpliceLevels'): key.append('splice')
    cats[' / '.join(key)]+=1
print(n,'writer samples')
for k,v in cats.most_common(): print(f'{100*v/n:6.1f}% {k}')
