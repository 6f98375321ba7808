# sampler.py PID OUT [period_s]: every period, per broker thread name the CPU ticks, the machine's
# busy ticks, and the disk's write sectors / io ms (all devices), with the wall clock in µs.
import sys, time, os, glob
pid, out = sys.argv[1], sys.argv[2]; period = float(sys.argv[3]) if len(sys.argv) > 3 else 0.05
f = open(out, 'w')
while os.path.exists(f'/proc/{pid}'):
    t = int(time.time() * 1e6)
    by = {}
    for st in glob.glob(f'/proc/{pid}/task/*/stat'):
        try: s = open(st).read()
        except OSError: continue
        comm = s[s.index('(') + 1:s.rindex(')')]; rest = s[s.rindex(')') + 2:].split()
        by[comm] = by.get(comm, 0) + int(rest[11]) + int(rest[12])
    cpu = open('/proc/stat').readline().split()[1:]
    busy = sum(map(int, cpu)) - int(cpu[3]) - int(cpu[4])
    ws = io = 0
    for l in open('/proc/diskstats'):
        p = l.split()
        if p[2].startswith(('loop', 'ram')): continue
        if p[2][-1].isdigit() and not p[2].startswith('nvme'): continue
        ws += int(p[9]); io += int(p[12])
    f.write(f"{t} busy={busy} wsect={ws} io_ms={io} " + ' '.join(f"{k.replace(' ','_')}={v}" for k, v in sorted(by.items())) + '\n')
    f.flush(); time.sleep(period)
