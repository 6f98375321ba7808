#!/usr/bin/env python3
"""What RocksDB wrote behind a run, from the EVENT_LOG_v1 lines of a broker's LOG (issue #15,
docs/BENCHMARKS.md "Tenth round"): table files and MB written per job kind (flush, compaction by
its reason: LevelL0FilesNum, BottommostFiles, ...) and column family, compaction input MB per
reason, compaction CPU seconds per reason and family (issue #15, "Nineteenth round"), and trivial
moves (metadata only).
Usage: scripts/rocksdb-log-summary.py DATA_DIR/LOG"""
import collections
import re
import sys

kind = {}
job_cf = {}
cpu_us = {}
out = collections.defaultdict(lambda: [0, 0])
moves = 0
for line in open(sys.argv[1], errors="replace"):
    i = line.find("EVENT_LOG_v1 ")
    if i < 0:
        continue
    t = line[i + 13:]
    ev = re.search(r'"event": "(\w+)"', t)
    job = re.search(r'"job": (\d+)', t)
    if not ev:
        continue
    ev = ev.group(1)
    job = int(job.group(1)) if job else -1
    if ev == "flush_started":
        kind[job] = ("flush", "-")
    elif ev == "compaction_started":
        reason = re.search(r'"compaction_reason": "(\w+)"', t).group(1)
        kind[job] = ("compaction", reason)
        key = ("compaction-in", reason, "*")
        out[key][0] += 1
        out[key][1] += int(re.search(r'"input_data_size": (\d+)', t).group(1))
    elif ev == "compaction_finished":
        cpu_us[job] = int(re.search(r'"compaction_time_cpu_micros": (\d+)', t).group(1))
    elif ev == "trivial_move":
        moves += 1
    elif ev == "table_file_creation":
        k = kind.get(job, ("?", "?"))
        cf = re.search(r'"cf_name": "(\w+)"', t).group(1)
        job_cf[job] = cf
        out[(k[0], k[1], cf)][0] += 1
        out[(k[0], k[1], cf)][1] += int(re.search(r'"file_size": (\d+)', t).group(1))
for k, v in sorted(out.items()):
    what = "jobs " if k[0] == "compaction-in" else "files"
    print(f"{k[0]:<13} {k[1]:<16} {k[2]:<7} {v[0]:4d} {what} {v[1] / 1e6:8.1f} MB")
cpu = collections.defaultdict(lambda: [0, 0])
for job, us in cpu_us.items():
    k = (kind.get(job, ("?", "?"))[1], job_cf.get(job, "?"))
    cpu[k][0] += 1
    cpu[k][1] += us
for k, v in sorted(cpu.items()):
    print(f"{'compaction-cpu':<13} {k[0]:<16} {k[1]:<7} {v[0]:4d} jobs  {v[1] / 1e6:8.2f} s")
print("trivial moves:", moves)
