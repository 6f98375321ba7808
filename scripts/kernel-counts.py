#!/usr/bin/env python3
"""Per-message table of `perf stat -x, --per-thread` files (scripts/kernel-counts.sh).

Usage: kernel-counts.py MESSAGES SECONDS BROKER.stat [BENCH.stat]
Threads of the same name are summed (RocksDB's rocksdb:low pool, say); the count of each event
is divided by MESSAGES. task-clock is shown as CPU µs per message.
"""
import collections
import re
import sys

SHORT = {
    "task-clock": "cpu_us",
    "context-switches": "cs",
    "cpu-migrations": "migr",
    "raw_syscalls:sys_enter": "syscalls",
    "sched:sched_wakeup": "wakeups",
}


def load(path):
    per = collections.OrderedDict()
    events = []
    for line in open(path):
        if not line.strip() or line.startswith("#"):
            continue
        f = line.rstrip("\n").split(",")
        if len(f) < 4:
            continue
        thread, value, _unit, event = f[0], f[1], f[2], f[3]
        name = re.sub(r"-\d+$", "", thread)
        try:
            v = float(value)
        except ValueError:
            v = 0.0
        if event == "task-clock":
            v *= 1000.0  # msec -> µs
        short = SHORT.get(event, event.replace("syscalls:sys_enter_", ""))
        if short not in events:
            events.append(short)
        per.setdefault(name, collections.Counter())[short] += v
    return per, events


def table(title, path, messages):
    per, events = load(path)
    total = collections.Counter()
    for c in per.values():
        total.update(c)
    print(f"\n{title}: per message ({messages} messages)")
    print("| thread | " + " | ".join(events) + " |")
    print("|---|" + "---:|" * len(events))
    rows = sorted(per.items(), key=lambda kv: -kv[1]["cpu_us"])
    for name, c in rows + [("all", total)]:
        if name != "all" and c["cpu_us"] == 0 and c["syscalls"] == 0:
            continue
        cells = []
        for e in events:
            x = c[e] / messages
            cells.append(f"{x:.2f}" if e == "cpu_us" else f"{x:.3f}")
        label = f"**{name}**" if name == "all" else name
        print(f"| {label} | " + " | ".join(cells) + " |")


def main():
    messages = int(sys.argv[1])
    seconds = float(sys.argv[2])
    print(f"messages in the window: {messages} ({messages / seconds:,.0f}/s)")
    if messages <= 0:
        sys.exit("no messages stored in the window")
    table("broker", sys.argv[3], messages)
    if len(sys.argv) > 4:
        table("bench (client)", sys.argv[4], messages)


if __name__ == "__main__":
    main()
