# gaps.py LAT LOG: the pauses of a `txmq-bench tx --latency-log` run (more than 8 ms with no
# transaction completed) beside the RocksDB jobs and memtable switches of the broker's LOG around
# each; how many pauses began near a switch against the chance of that; and how the transactions
# above the run's p99 fall into 100 ms windows.
import bisect, datetime, json, re, sys

lat, log = sys.argv[1], sys.argv[2]
rows = []; start = None
for l in open(lat):
    if l.startswith('#'):
        start = int(l.split()[-1]); continue
    t, p, e = map(int, l.split()); rows.append((t, p + e))
rows.sort()
abs_ = [start + t // 1000 for t, _ in rows]
gaps = [(a, b) for a, b in zip(abs_, abs_[1:]) if b - a > 8000]
ev = []
for l in open(log):
    m = re.match(r'(\d{4}/\d\d/\d\d-\d\d:\d\d:\d\d\.\d+) .*?\[(\w+)\] New memtable created with log file: #(\d+)', l)
    if m:
        ts = datetime.datetime.strptime(m.group(1), '%Y/%m/%d-%H:%M:%S.%f').replace(tzinfo=datetime.timezone.utc).timestamp()
        ev.append((int(ts * 1e6), 'switch-' + m.group(2)))
    if 'EVENT_LOG_v1' in l:
        try: j = json.loads(l.split('EVENT_LOG_v1 ')[1], strict=False)
        except Exception: continue
        if j['event'] in ('flush_started', 'compaction_started'):
            ev.append((j['time_micros'], j['event'].split('_')[0] + '-' + str(j.get('cf_name', j.get('compaction_reason', '')))))
ev.sort()
sw = [t for t, n in ev if n.startswith('switch')]
print(len(gaps), "pauses > 8 ms in", (abs_[-1] - abs_[0]) / 1e6, "s; memtable switches:", len(sw))
for a, b in gaps:
    items = [f"{n}@{(t - a) / 1000:+.1f}" for t, n in ev if a - 30000 <= t <= b]
    print("pause %5.1f ms at +%.3f s: %s" % ((b - a) / 1000, (a - start) / 1e6, ", ".join(items)))
near = sum(1 for a, _ in gaps if any(-10500 <= t - a <= 5500 for t in sw))
covered = n = 0
for t in range(abs_[0], abs_[-1], 100):  # the share of the run's time with a switch in that window
    n += 1
    i = bisect.bisect_left(sw, t - 5500)
    covered += i < len(sw) and sw[i] <= t + 10500
print(f"pauses beginning 10.5 ms or less after a switch (or 5.5 ms before one): {near} of {len(gaps)}; "
      f"by chance: {covered / n:.1%} of the run's instants")
vals = sorted(v for _, v in rows); p99 = vals[int(.99 * len(vals))]
win = {}
for t, v in rows: win.setdefault(t // 100_000_000, []).append(v)
slow = sorted(sum(1 for x in v if x > p99) for v in win.values())
print(f"p99 {p99 / 1e6:.1f} ms; transactions above it per 100 ms window, largest: {slow[-8:]}; "
      f"windows holding any: {sum(1 for s in slow if s)} of {len(slow)}")
