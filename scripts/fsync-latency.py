#!/usr/bin/env python3
"""The disk's own fsync latency, without the broker (issue #15, docs/BENCHMARKS.md "Ninth round").

Usage: scripts/fsync-latency.py [--dir D] [--seconds S] [--bytes B] [--mode append|overwrite]
                                [--slow-log FILE]

append:    a new file grows by B bytes per write, each followed by fdatasync -- what a WAL
           does (the size changes, so every fdatasync also commits the ext4 journal).
overwrite: the same writes into a file written and synced beforehand (no size or extent
           change: fdatasync only writes the data and flushes the device cache).
Prints the count, rate and percentiles of the fdatasync calls; --slow-log writes
"start_ns duration_ns" (CLOCK_MONOTONIC) of every call over 2 ms, to line them up with traces.

--background STEP[,strict][,MBPS]: meanwhile a second process writes 16 MiB files as fast as it
can (or at MBPS MB/s, as RocksDB's rate_limiter would pace it), starting their write-back every
STEP KiB with sync_file_range and fdatasync-ing each file at its end, as a RocksDB memtable flush
does with bytes_per_sync = STEP KiB; "strict" first waits for the previous step's write-back
(strict_bytes_per_sync).
"""
import argparse
import ctypes
import os
import signal
import time

SYNC_FILE_RANGE_WAIT_BEFORE, SYNC_FILE_RANGE_WRITE = 1, 2


def flush_like_writer(directory, step_kib, strict, mbps):
    """Child process: 16 MiB files written in 64 KiB writes, write-back started every step."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    chunk = b"y" * (64 << 10)
    step = step_kib << 10
    path = os.path.join(directory, f"fsync-latency-bg.{os.getpid()}")
    t0, total = time.monotonic(), 0
    while True:
        fd = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
        written = synced = 0
        while written < (16 << 20):
            written += os.write(fd, chunk)
            total += len(chunk)
            if mbps:
                ahead = total / (mbps * 1e6) - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
            if written - synced >= step:
                if strict and synced >= step:
                    libc.sync_file_range(fd, 0, synced - step, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE)
                libc.sync_file_range(fd, synced, written - synced, SYNC_FILE_RANGE_WRITE)
                synced = written
        os.fdatasync(fd)
        os.close(fd)
        os.unlink(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--bytes", type=int, default=300)
    ap.add_argument("--mode", choices=["append", "overwrite"], default="append")
    ap.add_argument("--slow-log")
    ap.add_argument("--background")
    a = ap.parse_args()
    child = 0
    if a.background:
        parts = a.background.split(",")
        rate = [float(p) for p in parts[1:] if p != "strict"]
        child = os.fork()
        if child == 0:
            try:
                flush_like_writer(a.dir, int(parts[0]), "strict" in parts[1:], rate[0] if rate else 0)
            finally:
                os._exit(0)
    path = os.path.join(a.dir, f"fsync-latency.{os.getpid()}")
    fd = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
    try:
        buf = b"x" * a.bytes
        if a.mode == "overwrite":
            total = int(a.bytes * 20000 * a.seconds) + (1 << 20)
            os.write(fd, b"\0" * total)
            os.fsync(fd)
            os.lseek(fd, 0, os.SEEK_SET)
        durations = []
        slow = []
        end = time.monotonic() + a.seconds
        while time.monotonic() < end:
            os.write(fd, buf)
            t0 = time.monotonic_ns()
            os.fdatasync(fd)
            d = time.monotonic_ns() - t0
            durations.append(d)
            if d > 2_000_000:
                slow.append((t0, d))
    finally:
        os.close(fd)
        os.unlink(path)
        if child:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            for f in os.listdir(a.dir):
                if f == f"fsync-latency-bg.{child}":
                    os.unlink(os.path.join(a.dir, f))
    durations.sort()
    n = len(durations)

    def at(q):
        return durations[min(n - 1, int(q * (n - 1)))] / 1e6

    over = lambda ms: sum(1 for d in durations if d > ms * 1e6)
    print(f"mode={a.mode} background={a.background or 'none'} bytes={a.bytes} n={n} rate={n / a.seconds:.0f}/s "
          f"p50={at(0.5):.3f} p90={at(0.9):.3f} p99={at(0.99):.3f} p99.9={at(0.999):.3f} "
          f"max={durations[-1] / 1e6:.3f} ms; >2ms {over(2)} >5ms {over(5)} >10ms {over(10)} "
          f"load1={os.getloadavg()[0]:.2f}")
    if a.slow_log:
        with open(a.slow_log, "w") as f:
            for t0, d in slow:
                f.write(f"{t0} {d}\n")


if __name__ == "__main__":
    main()
