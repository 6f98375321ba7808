import sys, collections
# io thread: attribute each sample to the first frame (from leaf upward) that matches one of the txmq-level names
want = ["tx_coordinator::write_resolve", "tx_coordinator::write_prepare", "tx_coordinator::prepare", "tx_coordinator::end_tx",
        "check_messages", "decode_frame_body", "connection::handle_frame", "respond", "connection::writer", "connection::reader",
        "completion_burst", "epoll_reactor::run", "scheduler::do_run_one"]
cnt=collections.Counter(); leafc=collections.defaultdict(collections.Counter); N=0; tot=0
stack=[]; comm=None
def flush():
    global stack, comm, N, tot
    if comm is None: return
    tot+=1
    if comm=="txmq-io":
        N+=1
        c="other"
        for fr in stack:  # leaf first
            hit=[w for w in want if w in fr]
            if hit: c=hit[0]; break
        cnt[c]+=1; leafc[c][stack[0][:80] if stack else "?"]+=1
    stack=[]; comm=None
for line in open(sys.argv[1], errors="replace"):
    if not line.strip(): flush(); continue
    if not line.startswith((" ","\t")): flush(); comm=line.split()[0]; continue
    parts=line.strip().split(None,1); stack.append(parts[1] if len(parts)>1 else parts[0])
flush()
print("io samples", N, "of", tot)
for c,n in cnt.most_common():
    print(f"{100*n/tot:5.1f}% {c}")
    for l,m in leafc[c].most_common(4): print(f"      {100*m/tot:5.1f}% {l}")
