#!/usr/bin/env bash
# One steady-rate run with everything needed to tell what a slow answer waited for (issue #15,
# docs/BENCHMARKS.md "Ninth round"): the bench's per-message latencies with their send times
# (--latency-log), the broker's stage histograms (/metrics), its RocksDB LOG (flushes,
# compactions, WAL switches with wall-clock times), and a kernel trace in the same clock as the
# bench (ftrace instance, trace_clock mono): the broker's fsync/fdatasync calls, ext4 journal
# (jbd2) commits, block requests (the device's cache flushes among them), plus `vmstat 1` and
# /proc/meminfo Dirty/Writeback every 100 ms, and every context switch (sched_switch) with the
# wake-ups of the broker's threads. Then scripts/tail-correlate.py lines them up.
# Usage: scripts/bench-tail-trace.sh BROKER OUT_DIR [SECONDS] [WORKLOAD] [-- BROKER_ARGS...]
#        WORKLOAD: rate (default) or e2e (10,000 msg/s, 256 B, one message per request).
# Environment: BENCH (txmq-bench with --latency-log, default build/bin/txmq-bench), RATE (10000).
# Needs root (tracefs); uses its own ftrace instance "txmq-tail", removed at the end.
set -euo pipefail
broker=$1; out=$2; secs=${3:-8}; workload=${4:-rate}; shift $(( $# < 4 ? $# : 4 ))
[[ ${1:-} == -- ]] && shift
bench=${BENCH:-build/bin/txmq-bench}; rate=${RATE:-10000}
mkdir -p "$out"; out=$(cd "$out" && pwd)
dir=$(mktemp -d /var/tmp/txmq-tail.XXXXXX); port=$((20000 + RANDOM % 20000)); http=$((port + 1))
T=/sys/kernel/tracing/instances/txmq-tail
pid=""; bg=()
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null
  for p in "${bg[@]}"; do kill "$p" 2>/dev/null || true; done
  if [[ -d $T ]]; then
    echo 0 > "$T/tracing_on"
    echo '!stacktrace if prev_state & 2 && prev_comm ~ "txmq*"' > "$T/events/sched/sched_switch/trigger" 2>/dev/null || true
    rmdir "$T" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
"$broker" --data-dir "$dir/data" --listen 127.0.0.1:$port --http 127.0.0.1:$http "$@" > "$out/broker.log" 2>&1 & pid=$!
for _ in $(seq 100); do curl -sf "127.0.0.1:$http/healthz" > /dev/null 2>&1 && break; sleep 0.1; done
ps -L -o tid=,comm= -p "$pid" > "$out/threads.txt"

mkdir -p "$T"
echo mono > "$T/trace_clock"
# Large enough for the whole run: the trace is read after it, so no reader competes for the CPU.
echo 131072 > "$T/buffer_size_kb"
for e in syscalls/sys_enter_fdatasync syscalls/sys_exit_fdatasync syscalls/sys_enter_fsync syscalls/sys_exit_fsync; do
  echo "common_pid != 0" > "$T/events/$e/filter"
  echo 1 > "$T/events/$e/enable"
done
# (This machine's ext4 has no journal: fdatasync writes the data, then the inode, then flushes
# the device cache; the jbd2 events stay empty there.) Every context switch, and the wake-ups
# of the broker's threads: a thread's time off the CPU splits into blocked and waiting for a CPU.
for e in jbd2/jbd2_start_commit jbd2/jbd2_end_commit block/block_rq_insert block/block_rq_issue block/block_rq_complete sched/sched_switch; do
  echo 1 > "$T/events/$e/enable"
done
# The kernel stack of every switch-out of a broker thread in D state (what it waits for inside
# fdatasync: its own I/O, a page or buffer someone else is writing back, a lock).
echo 'stacktrace if prev_state & 2 && prev_comm ~ "txmq*"' > "$T/events/sched/sched_switch/trigger"
for e in sched/sched_wakeup; do
  echo 'comm ~ "txmq*" || comm ~ "rocksdb*"' > "$T/events/$e/filter"
  echo 1 > "$T/events/$e/enable"
done
python3 -c 'import time; print(time.time_ns() - time.monotonic_ns())' > "$out/realtime_minus_monotonic_ns"
echo > "$T/trace"; echo 1 > "$T/tracing_on"
nice -n 19 vmstat -n 1 > "$out/vmstat.txt" & bg+=($!)
( while :; do
    printf '%s ' "$(awk '{ printf "%d", $1 * 1e9 }' /proc/uptime)"
    awk '/^(Dirty|Writeback):/ { printf "%s %s ", $1, $2 }' /proc/meminfo; echo
    sleep 0.1
  done ) > "$out/meminfo.txt" & bg+=($!)
renice -n 19 -p $! > /dev/null
cat /proc/loadavg > "$out/loadavg-before.txt"
"$bench" "$workload" --broker 127.0.0.1:$port --broker-pid "$pid" --runs 1 --json --message-bytes 256 --rate "$rate" \
  --seconds "$secs" --warmup 1 ${NO_LATENCY_LOG:---latency-log "$out/latency.txt"} | grep '^{' > "$out/bench.json"
cat /proc/loadavg > "$out/loadavg-after.txt"
echo 0 > "$T/tracing_on"
cat "$T/trace" > "$out/trace.txt"
grep -q "LOST\|entries-in-buffer" "$out/trace.txt" && head -3 "$out/trace.txt" | grep -i "entries" || true
for p in "${bg[@]}"; do kill "$p" 2>/dev/null || true; done; bg=()
curl -s 127.0.0.1:$http/metrics | grep -E '^txmq_(produce_latency|end_to_end_latency|io_loop_stall|store_(fsync|queue|commit))_seconds_(bucket|count)|^txmq_store_(fsyncs|commit_groups|operations)_total' > "$out/metrics.txt"
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
cp "$dir/data/LOG" "$out/rocksdb-LOG"
cat "$out/bench.json"
