#!/usr/bin/env python3
"""Lines up the slow answers of one scripts/bench-tail-trace.sh run with what the kernel and
RocksDB did meanwhile (issue #15, docs/BENCHMARKS.md "Ninth round").

Usage: scripts/tail-correlate.py OUT_DIR [--slow-ms 5] [--episodes 15]

Prints: the bench's percentiles; the broker's fdatasync/fsync durations per thread; ext4
journal (jbd2) commit durations; the device's cache-flush and write latencies; then the "slow
episodes" (slow answers whose send times lie within 20 ms of each other) with, for each, the
broker syncs, journal commits, device flushes and RocksDB events that overlapped it, and a
summary of how many slow answers overlapped a slow sync.
"""
import argparse
import bisect
import datetime
import json
import os
import re

LINE = re.compile(r"^\s*(?P<comm>.+?)-(?P<tid>\d+)\s+(?:\(\s*[\d-]+\)\s+)?\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?(?P<ts>\d+\.\d+): (?P<ev>\w+)(?P<rest>.*)$")
SWITCH = re.compile(r"prev_comm=(?P<pc>.*?) prev_pid=(?P<pp>\d+) prev_prio=\d+ prev_state=(?P<st>\S+) ==> next_comm=(?P<nc>.*?) next_pid=(?P<np>\d+)")
WAKEUP = re.compile(r"comm=(?P<c>.*?) pid=(?P<p>\d+) ")


class sched_timeline:
    """Per thread: intervals running, waiting for a CPU (woken or preempted, not yet running) and
    blocked (S or D), from sched_switch and sched_wakeup; per CPU: who ran when."""

    def __init__(self):
        self.state = {}      # tid -> (kind, since, detail)
        self.intervals = {}  # tid -> [(t0, t1, kind, detail)]
        self.names = {}
        self.cpu_runs = {}   # cpu -> [(t0, t1, comm)]
        self.cpu_cur = {}    # cpu -> (since, comm)

    def _close(self, tid, t, new_kind, detail=""):
        old = self.state.get(tid)
        if old is not None:
            self.intervals.setdefault(tid, []).append((old[1], t, old[0], old[2]))
        self.state[tid] = (new_kind, t, detail)

    def switch(self, cpu, t, m):
        pp, np_ = int(m["pp"]), int(m["np"])
        st = m["st"]
        self.names[pp] = m["pc"]
        self.names[np_] = m["nc"]
        if pp != 0:
            self._close(pp, t, "runnable" if st.startswith("R") else "blocked", "" if st.startswith("R") else st)
        if np_ != 0:
            self._close(np_, t, "running")
        cur = self.cpu_cur.get(cpu)
        if cur is not None:
            self.cpu_runs.setdefault(cpu, []).append((cur[0], t, cur[1]))
        self.cpu_cur[cpu] = (t, m["nc"] if np_ != 0 else "idle")

    SKIP = {"__traceiter_sched_switch", "__schedule", "schedule", "io_schedule", "schedule_timeout",
            "io_schedule_timeout", "schedule_preempt_disabled", "bit_wait_io", "__wait_on_bit",
            "out_of_line_wait_on_bit", "__wait_on_bit_lock", "out_of_line_wait_on_bit_lock",
            "do_wait_for_common", "__wait_for_common", "wait_for_completion_io", "wait_for_completion",
            "__flush_work", "percpu_rwsem_wait", "rwsem_down_write_slowpath", "rwsem_down_read_slowpath"}

    def blocked_stack(self, tid, frames):
        """The kernel stack of the thread's last switch-out while blocked: its wait's name."""
        old = self.state.get(tid)
        if old is None or old[0] != "blocked":
            return
        useful = [f for f in frames if f not in self.SKIP and not f.startswith("trace_")]
        self.state[tid] = (old[0], old[1], old[2] + " " + "<".join(useful[:4]))

    def wakeup(self, t, tid):
        old = self.state.get(tid)
        if old is None or old[0] == "blocked":
            self._close(tid, t, "runnable")

    def split(self, tid, t0, t1):
        """Time of [t0, t1] the thread spent per kind (blocked split by state), in ms."""
        out = {}
        for a, b, kind, detail in self.intervals.get(tid, []):
            if b <= t0 or a >= t1:
                continue
            k = kind + (" " + detail.split()[0] if detail else "")
            out[k] = out.get(k, 0) + (min(b, t1) - max(a, t0)) * 1e3
        return out

    def who_ran(self, t0, t1):
        out = {}
        if not hasattr(self, "_starts"):
            self._starts = {c: [r[0] for r in runs] for c, runs in self.cpu_runs.items()}
        for c, runs in self.cpu_runs.items():
            i = max(0, bisect.bisect_right(self._starts[c], t0) - 1)
            for a, b, comm in runs[i:]:
                if a >= t1:
                    break
                if b <= t0:
                    continue
                name = re.sub(r"[/:]\d+.*$", "", comm)
                out[name] = out.get(name, 0) + (min(b, t1) - max(a, t0)) * 1e3
        return out


def pct(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(q * (len(v) - 1)))]


def summary(name, ms):
    if not ms:
        return f"{name}: none"
    over = lambda x: sum(1 for d in ms if d > x)
    return (f"{name}: n={len(ms)} p50={pct(ms, .5):.2f} p90={pct(ms, .9):.2f} p99={pct(ms, .99):.2f} "
            f"p99.9={pct(ms, .999):.2f} max={max(ms):.2f} ms; >2ms {over(2)} >5ms {over(5)} >10ms {over(10)}")


def histograms(path):
    """The broker's stage histograms from /metrics: bucket bounds of p50, p99, p99.9 (ms)."""
    if not os.path.exists(path):
        return
    h = {}
    for line in open(path):
        m = re.match(r'^(txmq_\w+)_seconds_bucket\{le="([^"]+)"\} (\d+)', line)
        if m:
            h.setdefault(m[1], []).append((float("inf") if m[2] == "+Inf" else float(m[2]) * 1e3, int(m[3])))
    for name, buckets in h.items():
        total = buckets[-1][1]
        if total == 0:
            continue

        def at(q):
            for le, c in buckets:
                if c >= q * total:
                    return f"<={le:g}"
            return "?"
        print(f"  {name}: n={total} p50 {at(.5)} p90 {at(.9)} p99 {at(.99)} p99.9 {at(.999)} ms")


def parse_trace(path):
    syncs = []      # (start_s, end_s, comm, kind)
    commits = []    # (start_s, end_s, tid)
    flushes = []    # device cache flushes: (issue_s, complete_s)
    writes = []     # device writes: (issue_s, complete_s, sectors, comm at issue)
    open_sync = {}
    open_commit = {}
    issued = {}     # (rwbs-kind, sector) -> [(ts, comm)]
    inserted = {}   # the same, at insertion into the I/O scheduler
    queued = []     # (insert_s, issue_s, comm that inserted, rwbs): time in the I/O scheduler
    sched = sched_timeline()
    stack_tid, stack = None, []

    def end_stack():
        if stack_tid is not None and stack:
            sched.blocked_stack(stack_tid, stack)

    for line in open(path, errors="replace"):
        if line.startswith(" => "):
            stack.append(line[4:].split("+")[0].strip())
            continue
        # A stack ends at the next event line: it belongs to the switch just before it.
        end_stack()
        stack_tid, stack = None, []
        if "<stack trace>" in line:
            sm = re.match(r"^\s*(?P<comm>.+?)-(?P<tid>\d+)\s", line)
            stack_tid = int(sm["tid"]) if sm else None
            continue
        m = LINE.match(line)
        if not m:
            continue
        comm, tid, ts, ev, rest = m["comm"], int(m["tid"]), float(m["ts"]), m["ev"], m["rest"]
        if ev == "sched_switch":
            sm = SWITCH.search(rest)
            if sm:
                sched.switch(int(m["cpu"]), ts, sm)
        elif ev == "sched_wakeup":
            wm = WAKEUP.search(rest)
            if wm:
                sched.wakeup(ts, int(wm["p"]))
        elif ev in ("sys_fdatasync", "sys_fsync"):
            if "->" in rest:
                if tid in open_sync:
                    t0, c, k = open_sync.pop(tid)
                    syncs.append((t0, ts, c, k, tid))
            else:
                open_sync[tid] = (ts, comm, ev[4:])
            continue
        elif ev == "jbd2_start_commit":
            t = re.search(r"transaction (\d+)", rest)
            if t:
                open_commit[t[1]] = ts
        elif ev == "jbd2_end_commit":
            t = re.search(r"transaction (\d+)", rest)
            if t and t[1] in open_commit:
                commits.append((open_commit.pop(t[1]), ts, int(t[1])))
        elif ev in ("block_rq_insert", "block_rq_issue", "block_rq_complete"):
            # issue:    "254,0 WS 4096 () 415569192 + 8 be,0,4 [comm]"
            # complete: "254,0 WS () 415569192 + 8 be,0,4 [err]"; a cache flush is "FF", sector 0
            # at issue and -1 at completion, so flushes are matched in order.
            f = rest.lstrip(": ").split()
            if "+" not in f:
                continue
            rwbs = f[1]
            plus = f.index("+")
            sector, nr = f[plus - 1], int(f[plus + 1])
            if rwbs == "FF":
                key = ("FF",)
            else:
                key = (rwbs, sector)
            if ev == "block_rq_insert":
                inserted.setdefault(key, []).append((ts, rest.split("[")[-1].rstrip("]\n ")))
            elif ev == "block_rq_issue":
                who = rest.split("[")[-1].rstrip("]\n ")
                if inserted.get(key):
                    t_ins, who = inserted[key].pop(0)
                    queued.append((t_ins, ts, who, rwbs))
                issued.setdefault(key, []).append((ts, who))
            elif issued.get(key):
                t0, who = issued[key].pop(0)
                if rwbs == "FF":
                    flushes.append((t0, ts))
                elif "W" in rwbs:
                    writes.append((t0, ts, nr, who, rwbs))
    end_stack()
    sched.queued = queued
    return syncs, commits, flushes, writes, sched


def parse_rocksdb_log(path, realtime_minus_mono_ns):
    """(mono_s, text) of RocksDB events: flushes, compactions, table files, WAL switches."""
    events = []
    if not os.path.exists(path):
        return events
    for line in open(path, errors="replace"):
        if "EVENT_LOG_v1" in line:
            try:
                j = json.loads(line.split("EVENT_LOG_v1", 1)[1])
            except ValueError:
                continue
            t = (j["time_micros"] * 1000 - realtime_minus_mono_ns) / 1e9
            ev = j.get("event", "?")
            detail = ""
            if ev in ("flush_started",):
                detail = f"cf={j.get('cf_name', '')} entries={j.get('num_entries', '')} mem={j.get('total_data_size', '')}"
            elif ev == "flush_finished":
                detail = f"cf={j.get('cf_name', '')}"
            elif ev == "table_file_creation":
                detail = f"cf={j.get('cf_name', '')} file={j.get('file_number', '')} size={j.get('file_size', '')}"
            elif ev == "table_file_deletion":
                detail = f"file={j.get('file_number', '')}"
            elif ev.startswith("compaction"):
                detail = f"cf={j.get('cf_name', '')} in={j.get('input_data_size', j.get('total_input_size', ''))} out={j.get('total_output_size', '')}"
            events.append((t, ev + " " + detail))
        elif "New memtable created with log file" in line or "Flushing memtable" in line:
            m = re.match(r"(\d{4})/(\d\d)/(\d\d)-(\d\d):(\d\d):(\d\d)\.(\d{6})", line)
            if not m:
                continue
            d = datetime.datetime(*map(int, m.groups()[:6]), tzinfo=datetime.timezone.utc)
            ns = int(d.timestamp()) * 10**9 + int(m[7]) * 1000
            text = re.sub(r"^\S+ \S+ ", "", line.strip())
            events.append(((ns - realtime_minus_mono_ns) / 1e9, text[:120]))
    events.sort()
    return events


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--slow-ms", type=float, default=5)
    ap.add_argument("--episodes", type=int, default=15)
    args = ap.parse_args()
    d = args.out
    lat = []
    if os.path.exists(os.path.join(d, "latency.txt")):
        for line in open(os.path.join(d, "latency.txt")):
            s, l = line.split()
            lat.append((int(s) / 1e9, int(l) / 1e6))
    lat.sort()
    ms = [l for _, l in lat]
    print(summary("bench latency (send -> answer)", ms))
    print("broker stage histograms (bucket bounds):")
    histograms(os.path.join(d, "metrics.txt"))
    syncs, commits, flushes, writes, sched = parse_trace(os.path.join(d, "trace.txt"))
    # This run's broker threads only (other brokers may run on the machine).
    mine = set()
    if os.path.exists(os.path.join(d, "threads.txt")):
        mine = {int(l.split()[0]) for l in open(os.path.join(d, "threads.txt")) if l.strip()}
    syncs = [x for x in syncs if not x[2].startswith("txmq") and not x[2].startswith("rocksdb") or x[4] in mine]
    if lat:
        t_begin, t_end = lat[0][0], lat[-1][0] + 0.05
    else:  # a bench without --latency-log: the whole trace
        t_begin = min(x[0] for x in syncs) + 1
        t_end = max(x[1] for x in syncs)
    off = int(open(os.path.join(d, "realtime_minus_monotonic_ns")).read())
    rdb = parse_rocksdb_log(os.path.join(d, "rocksdb-LOG"), off)

    inwin = lambda t0: t_begin - 1 <= t0 <= t_end
    broker_threads = {}
    for t0, t1, comm, kind, _ in syncs:
        if inwin(t0):
            broker_threads.setdefault(f"{comm} {kind}", []).append((t1 - t0) * 1e3)
    for k in sorted(broker_threads):
        print(summary(f"  {k}", broker_threads[k]))
    print(summary("jbd2 commits (start -> end)", [(b - a_) * 1e3 for a_, b, _ in commits if inwin(a_)]))
    print(summary("device cache flushes (issue -> complete)", [(b - a_) * 1e3 for a_, b in flushes if inwin(a_)]))
    print(summary("device writes (issue -> complete)", [(b - a_) * 1e3 for a_, b, _, _, _ in writes if inwin(a_)]))
    print(summary("  of them the broker's syncs' (WAL data, inode)", [(b - a_) * 1e3 for a_, b, _, who, _ in writes if inwin(a_) and who.startswith("txmq")]))
    print(summary("time in the I/O scheduler (insert -> issue), the broker's syncs' requests",
                  [(b - a_) * 1e3 for a_, b, who, _ in getattr(sched, "queued", []) if inwin(a_) and who.startswith("txmq")]))
    print(summary("time in the I/O scheduler, everyone else's", [(b - a_) * 1e3 for a_, b, who, _ in getattr(sched, "queued", []) if inwin(a_) and not who.startswith("txmq")]))
    wb = {}
    for t0, t1, n, who, _ in writes:
        if inwin(t0):
            wb[who] = wb.get(who, 0) + n * 512
    print("bytes written to the device by issuer: " + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in sorted(wb.items(), key=lambda x: -x[1])[:8]))
    print(f"RocksDB events in the window: {sum(1 for t, _ in rdb if inwin(t))}")
    # The broker's WAL fdatasyncs while a RocksDB flush or compaction ran (from its start to its
    # end event in the LOG, 5 ms either side) against the others.
    busy, start = [], None
    for t, text in rdb:
        if text.startswith(("flush_started", "compaction_started")):
            start = t
        elif text.startswith(("flush_finished", "compaction_finished")) and start is not None:
            busy.append((start - 0.005, t + 0.005))
            start = None
    ours = [(t0, t1) for t0, t1, comm, kind, _ in syncs if comm.startswith("txmq") and kind == "fdatasync" and inwin(t0)]
    during = [(t1 - t0) * 1e3 for t0, t1 in ours if any(a_ <= t0 <= b for a_, b in busy)]
    print(f"RocksDB flushes/compactions: {len(busy)}, lasting " + ", ".join(f"{(b - a_) * 1e3 - 10:.0f}" for a_, b in busy) + " ms")
    print(summary("  broker fdatasyncs while one ran", during))
    print(summary("  broker fdatasyncs otherwise", [(t1 - t0) * 1e3 for t0, t1 in ours if not any(a_ <= t0 <= b for a_, b in busy)]))

    # Where the broker's slow syncs spent their time: running, waiting for a CPU, blocked.
    for limit in (2, 5):
        tot, n = {}, 0
        for t0, t1, comm, kind, tid in syncs:
            if inwin(t0) and comm.startswith("txmq") and (t1 - t0) * 1e3 > limit:
                n += 1
                for k, v in sched.split(tid, t0, t1).items():
                    tot[k] = tot.get(k, 0) + v
        if n:
            print(f"broker syncs over {limit} ms: {n}, their time (ms, summed): " +
                  ", ".join(f"{k} {v:.1f}" for k, v in sorted(tot.items(), key=lambda x: -x[1])))
    # What the broker's threads waited for while blocked (D state) in slow syncs, by kernel stack.
    dsig = {}
    for t0, t1, comm, kind, tid in syncs:
        if inwin(t0) and comm.startswith("txmq") and (t1 - t0) * 1e3 > 2:
            for a, b, k, detail in sched.intervals.get(tid, []):
                if k == "blocked" and b > t0 and a < t1 and detail.startswith("D"):
                    key = detail[2:] or "?"
                    v = dsig.setdefault(key, [0, 0.0])
                    v[0] += 1
                    v[1] += (min(b, t1) - max(a, t0)) * 1e3
    if dsig:
        print("blocked (D) inside broker syncs over 2 ms, by kernel stack (count, ms):")
        for k, (n, t) in sorted(dsig.items(), key=lambda x: -x[1][1])[:10]:
            print(f"   {n:5d} {t:8.1f}  {k}")
    # Waits for a CPU of the broker's threads (and the bench's), and who ran while the long ones waited.
    for tid, name in sorted(sched.names.items(), key=lambda x: x[1]):
        if tid not in mine and not name.startswith("txmq-bench"):
            continue
        waits = [(a, b) for a, b, kind, _ in sched.intervals.get(tid, []) if kind == "runnable" and inwin(a)]
        if not waits:
            continue
        ms_ = [(b - a) * 1e3 for a, b in waits]
        print(summary(f"  wait for a CPU: {name} ({tid})", ms_))
        long_ = [(a, b) for a, b in waits if (b - a) * 1e3 > 1]
        if long_:
            ran = {}
            for a, b in long_:
                for k, v in sched.who_ran(a, b).items():
                    ran[k] = ran.get(k, 0) + v
            print("      while it waited over 1 ms the CPUs ran: " +
                  ", ".join(f"{k} {v:.0f}" for k, v in sorted(ran.items(), key=lambda x: -x[1])[:8]) + " ms")

    if not lat:
        return
    # Slow episodes: slow answers grouped by send time.
    slow = [(s, l) for s, l in lat if l > args.slow_ms]
    episodes = []
    for s, l in slow:
        if episodes and s - episodes[-1]["last"] < 0.02:
            e = episodes[-1]
            e["last"] = s
            e["n"] += 1
            e["end"] = max(e["end"], s + l / 1e3)
            e["max"] = max(e["max"], l)
        else:
            episodes.append({"first": s, "last": s, "n": 1, "end": s + l / 1e3, "max": l})
    print(f"\nanswers over {args.slow_ms} ms: {len(slow)} of {len(lat)} ({100 * len(slow) / len(lat):.2f} %) in {len(episodes)} episodes")
    sync_starts = [x[0] for x in syncs]

    def overlapping(items, t0, t1, start=lambda x: x[0], end=lambda x: x[1]):
        return [x for x in items if start(x) < t1 and end(x) > t0]

    explained = {"slow broker sync (>2 ms) overlapping": 0, "none": 0}
    for e in episodes:
        ss = overlapping(syncs, e["first"], e["end"])
        if any((x[1] - x[0]) * 1e3 > 2 for x in ss if x[2].startswith("txmq")):
            explained["slow broker sync (>2 ms) overlapping"] += e["n"]
        else:
            explained["none"] += e["n"]
    print("slow answers by cause: " + ", ".join(f"{k}: {v}" for k, v in explained.items()))
    rel = lambda t: (t - t_begin) * 1e3
    for e in sorted(episodes, key=lambda e: -e["n"] * e["max"])[: args.episodes]:
        print(f"\nepisode at {rel(e['first']):.1f} ms: {e['n']} slow answers, max {e['max']:.1f} ms, sends until {rel(e['last']):.1f}, answers until {rel(e['end']):.1f}")
        w0, w1 = e["first"] - 0.005, e["end"]
        for t0, t1, comm, kind, tid in overlapping(syncs, w0, w1):
            sp = sched.split(tid, t0, t1)
            print(f"   {rel(t0):9.1f} +{(t1 - t0) * 1e3:6.2f} ms  {kind} by {comm}: " +
                  ", ".join(f"{k} {v:.2f}" for k, v in sorted(sp.items(), key=lambda x: -x[1])))
        for t0, t1, tid in overlapping(commits, w0, w1):
            print(f"   {rel(t0):9.1f} +{(t1 - t0) * 1e3:6.2f} ms  jbd2 commit {tid}")
        for t0, t1 in overlapping(flushes, w0, w1):
            if (t1 - t0) * 1e3 > 1:
                print(f"   {rel(t0):9.1f} +{(t1 - t0) * 1e3:6.2f} ms  device cache flush")
        big = [x for x in overlapping(writes, w0, w1) if (x[1] - x[0]) * 1e3 > 2]
        for t0, t1, n, who, rwbs in big[:5]:
            print(f"   {rel(t0):9.1f} +{(t1 - t0) * 1e3:6.2f} ms  device write {rwbs} {n * 512 // 1024} KiB by {who}")
        for t, text in rdb:
            if w0 - 0.1 <= t <= w1 + 0.02:
                print(f"   {rel(t):9.1f}            RocksDB: {text}")


if __name__ == "__main__":
    main()
