#!/usr/bin/env python3
"""Samples a txmq-bench relay backlog run from /proc (issue #15, thirteenth round).

Usage: sample.py BROKER_PID BENCH_PID PGCONN [interval_ms]
Waits for the bench's backlog txmq-relay (a child of BENCH_PID), then every interval samples
the relay's main thread state (running, or the syscall it waits in: poll = PostgreSQL,
futex = the broker's acks), and the CPU of the relay (per thread), its PostgreSQL backend
(application_name), all postgres processes, the broker and the bench, plus /proc/stat idle.
Stops when the relay exits or its CPU stops moving for 300 ms after it moved; prints one JSON
line with per-row figures over the drain (relay start to its last CPU move)."""
import json, os, subprocess, sys, time

HZ = os.sysconf("SC_CLK_TCK")

def cpu(pid):
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / HZ
    except OSError:
        return None

def tcpu(pid):
    out = {}
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                raw = open(f"/proc/{pid}/task/{t}/stat").read()
                name = raw[raw.index("(") + 1: raw.rindex(")")]
                f = raw.rsplit(")", 1)[1].split()
                out[f"{name}/{t}"] = (int(f[11]) + int(f[12])) / HZ
            except OSError:
                pass
    except OSError:
        pass
    return out

def children(pid):
    try:
        return [int(x) for x in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []

def comm(pid):
    try:
        return open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        return ""

def postgres_pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and comm(int(p)) == "postgres"]

def idle():
    f = open("/proc/stat").readline().split()
    vals = [int(x) for x in f[1:]]
    return (vals[3] + vals[4]) / HZ, sum(vals) / HZ

SYSCALLS = {"7": "poll", "271": "ppoll", "202": "futex", "232": "epoll_wait", "281": "epoll_pwait",
            "0": "read", "1": "write", "44": "sendto", "45": "recvfrom", "46": "sendmsg", "47": "recvmsg"}

def state(pid):
    try:
        st = open(f"/proc/{pid}/task/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        if st == "R":
            return "running"
        sc = open(f"/proc/{pid}/task/{pid}/syscall").read().split()[0]
        return SYSCALLS.get(sc, "sys" + sc)
    except OSError:
        return None

def main():
    broker, bench = int(sys.argv[1]), int(sys.argv[2])
    interval = float(sys.argv[4] if len(sys.argv) > 4 else 5) / 1000
    relay = None
    while relay is None:
        for c in children(bench):
            if comm(c).startswith("txmq-relay"):
                relay = c
        if cpu(bench) is None:
            return
        time.sleep(0.002)
    t0 = time.monotonic()
    base = {"broker": cpu(broker), "bench": cpu(bench)}
    pg0 = {p: cpu(p) for p in postgres_pids()}
    threads0 = tcpu(relay)
    bthreads0 = tcpu(broker)
    idle0, tot0 = idle()
    states = {}
    last_cpu, last_move = 0.0, t0
    end = None
    while True:
        now = time.monotonic()
        c = cpu(relay)
        if c is None:
            break
        if c > last_cpu:
            last_cpu, last_move = c, now
            pgs = {p: cpu(p) for p in postgres_pids()}
            new = [v for p, v in pgs.items() if p not in pg0 and v is not None]
            end = (now - t0, c, cpu(broker), cpu(bench), sum(v for v in pgs.values() if v is not None)
                   - sum(v for p, v in pg0.items() if p in pgs and v is not None), max(new, default=0.0),
                   idle()[0], tcpu(relay))
        elif now - last_move > 0.3 and last_cpu > 0.05:
            break
        s = state(relay)
        if s:
            states[s] = states.get(s, 0) + 1
        time.sleep(interval)
    wall = end[0]
    n = sum(states.values())
    out = {"wall_s": round(wall, 3),
           "relay_cpu_s": end[1], "broker_cpu_s": round(end[2] - base["broker"], 3),
           "bench_cpu_s": round(end[3] - base["bench"], 3),
           "postgres_cpu_s": round(end[4], 3),
           "backend_cpu_s": round(end[5], 3),
           "idle_cpu_s": round(end[6] - idle0, 3),
           "relay_threads_s": {k: round(v - threads0.get(k, 0.0), 3) for k, v in end[7].items()},
           "broker_threads_s": {k: round(v - bthreads0.get(k, 0.0), 3) for k, v in tcpu(broker).items()},
           "main_thread_states": {k: round(v / n, 3) for k, v in sorted(states.items(), key=lambda kv: -kv[1])}}
    # The direct run follows: from the relay's exit to the next relay the bench starts.
    while cpu(relay) is not None:
        time.sleep(0.005)
    d0 = (time.monotonic(), cpu(broker), cpu(bench), idle()[0])
    dthreads0 = tcpu(broker)
    dthreads1 = dthreads0
    while cpu(bench) is not None:
        if any(comm(c).startswith("txmq-relay") for c in children(bench)):
            break
        d1 = (time.monotonic(), cpu(broker), cpu(bench), idle()[0])
        dthreads1 = tcpu(broker)
        time.sleep(0.005)
    out["direct"] = {"wall_s": round(d1[0] - d0[0], 3), "broker_cpu_s": round(d1[1] - d0[1], 3),
                     "bench_cpu_s": round(d1[2] - d0[2], 3), "idle_cpu_s": round(d1[3] - d0[3], 3),
                     "broker_threads_s": {k: round(v - dthreads0.get(k, 0.0), 3) for k, v in dthreads1.items()}}
    print(json.dumps(out))

main()
