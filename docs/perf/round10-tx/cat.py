import sys, collections
# categorize samples per thread by the first matching frame (outermost-first search order given)
cats = [
 ("resolve.apply", "rocksdb_store::resolve("),
 ("prepare.apply", "rocksdb_store::prepare("),
 ("memtable.put", "MemTableInserter::PutCF"),
 ("memtable.del", "MemTableInserter::DeleteCF"),
 ("wal", "WriteToWAL"),
 ("finalize", "rocksdb_store::finalize"),
 ("group_ctx dtor", "group_ctx::~group_ctx"),
 ("make_durable", "make_durable"),
 ("complete", "complete"),
]
per = collections.Counter(); tot = collections.Counter(); sub = collections.defaultdict(collections.Counter)
stack=[]; comm=None
def flush():
    global stack, comm
    if comm is None: return
    tot[comm]+=1
    s = " ".join(stack)
    c = "other"
    for name, pat in cats:
        if pat in s: c = name; break
    per[(comm,c)]+=1
    if comm=="txmq-writer" and c in ("resolve.apply","prepare.apply","other"):
        # next frame below apply
        leaf = stack[0] if stack else "?"
        sub[c][leaf[:90]]+=1
    stack=[]; comm=None
for line in open(sys.argv[1], errors="replace"):
    if not line.strip():
        flush(); continue
    if not line.startswith((" ","\t")):
        flush(); comm=line.split()[0]; continue
    parts=line.strip().split(None,1)
    stack.append(parts[1] if len(parts)>1 else parts[0])
flush()
N=sum(tot.values())
for t,n in tot.most_common(): print(f"{t:20s} {100*n/N:5.1f}%")
print()
for (t,c),n in sorted(per.items(), key=lambda x:-x[1]):
    if n/N>0.004: print(f"{t:20s} {c:20s} {100*n/N:5.1f}%")
for c in sub:
    print("==",c, "leaf frames")
    for l,n in sub[c].most_common(12): print(f"   {100*n/N:5.1f}% {l}")
