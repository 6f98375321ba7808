import os,sys,time
# thr.py PID INTERVAL OUT : per-thread CPU (ticks) every INTERVAL s until the process goes
pid=sys.argv[1]; iv=float(sys.argv[2]); out=open(sys.argv[3],'w')
hz=os.sysconf('SC_CLK_TCK')
while os.path.exists(f'/proc/{pid}'):
    t=time.time(); row=[]
    try:
        for tid in os.listdir(f'/proc/{pid}/task'):
            try:
                s=open(f'/proc/{pid}/task/{tid}/stat').read()
                comm=s[s.index('(')+1:s.rindex(')')]; f=s[s.rindex(')')+2:].split()
                row.append(f'{tid}:{comm}:{int(f[11])+int(f[12])}')
            except OSError: pass
    except OSError: break
    print(f'{t:.2f}',' '.join(row),file=out,flush=True)
    time.sleep(iv)
