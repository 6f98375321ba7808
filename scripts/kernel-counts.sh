#!/usr/bin/env bash
# Kernel work per message of txmq-broker and of txmq-bench under one workload (issue #15, ninth
# round): system calls, context switches, wake-ups and CPU per thread, from `perf stat
# --per-thread` on both processes over the same window, divided by the messages the broker
# stored in that window (txmq_messages_in_total before and after).
# Usage: scripts/kernel-counts.sh BROKER [BENCH] [WORKLOAD]   (WORKLOAD: publish1 (default), publish100, tx)
# For tx the unit is a transaction (Prepare + COMMIT, 1,000 in flight): txmq_tx_prepares_total.
# Environment: SECONDS_MEASURED (perf window, default 5), OUT (directory for the raw perf stat
# files and the table, default a temporary one that is printed), BENCH_ARGS (extra txmq-bench arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
broker=$1
bench=${2:-build/bin/txmq-bench}
workload=${3:-publish1}
secs=${SECONDS_MEASURED:-5}
dir=$(mktemp -d /var/tmp/txmq-kcounts.XXXXXX)
out=${OUT:-$dir/out}
mkdir -p "$out"
pid=""; bpid=""
cleanup() {
  [[ -n $bpid ]] && kill "$bpid" 2>/dev/null && wait "$bpid" 2>/dev/null
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  # With OUT the raw files are there: nothing of the temporary directory is kept.
  if [[ -n ${OUT:-} ]]; then rm -rf "$dir"; else rm -rf "$dir/data"; fi
}
trap cleanup EXIT
port=$((20000 + RANDOM % 20000)); http=$((port + 1))
"$broker" --data-dir "$dir/data" --listen 127.0.0.1:$port --http 127.0.0.1:$http > "$dir/broker.log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "127.0.0.1:$http/healthz" > /dev/null 2>&1 && break; sleep 0.1; done
counter() { curl -sf "127.0.0.1:$http/metrics" | awk -v n="$1" '$1 == n { print int($2) }'; }
unit=txmq_messages_in_total
case $workload in
  publish1) batch=1 ;;
  publish100) batch=100 ;;
  tx) unit=txmq_tx_prepares_total ;;
  *) echo "unknown workload $workload" >&2; exit 1 ;;
esac
if [[ $workload == tx ]]; then
  # shellcheck disable=SC2086  # BENCH_ARGS: several arguments
  "$bench" tx --broker 127.0.0.1:$port --broker-pid $pid --runs 1 --message-bytes 256 --in-flight 1000 \
    --seconds $((secs + 3)) --warmup 1 ${BENCH_ARGS:-} > "$out/bench.out" 2>&1 &
else
  # shellcheck disable=SC2086  # BENCH_ARGS: several arguments
  "$bench" publish --broker 127.0.0.1:$port --broker-pid $pid --runs 1 --message-bytes 256 --in-flight 1000 \
    --batch $batch --seconds $((secs + 3)) --warmup 1 --topic kc ${BENCH_ARGS:-} > "$out/bench.out" 2>&1 &
fi
bpid=$!
sleep 2
# Tracepoints that this kernel lacks are left out (perf stat refuses unknown events).
events=task-clock,context-switches,cpu-migrations
known=$(perf list 2>/dev/null)
for e in raw_syscalls:sys_enter sched:sched_wakeup syscalls:sys_enter_futex syscalls:sys_enter_epoll_wait \
         syscalls:sys_enter_epoll_pwait syscalls:sys_enter_write syscalls:sys_enter_writev syscalls:sys_enter_read \
         syscalls:sys_enter_sendmsg syscalls:sys_enter_sendto syscalls:sys_enter_recvfrom syscalls:sys_enter_recvmsg \
         syscalls:sys_enter_fdatasync syscalls:sys_enter_fsync syscalls:sys_enter_pwrite64 syscalls:sys_enter_timerfd_settime; do
  grep -q "^  $e " <<< "$known" && events+=",$e"
done
m0=$(counter $unit); g0=$(counter txmq_store_commit_groups_total); f0=$(counter txmq_store_fsyncs_total)
perf stat -x, --per-thread -e "$events" -p "$pid" -o "$out/broker.stat" -- sleep "$secs" &
p1=$!
perf stat -x, --per-thread -e "$events" -p "$bpid" -o "$out/bench.stat" -- sleep "$secs" &
p2=$!
wait $p1 $p2
m1=$(counter $unit); g1=$(counter txmq_store_commit_groups_total); f1=$(counter txmq_store_fsyncs_total)
wait "$bpid" || true; bpid=""
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
{
  echo "workload: $workload; broker: $broker; bench: $bench; load: $(cut -d' ' -f1-3 /proc/loadavg)"
  grep -E '^\{|msg/s|tx/s|messages' "$out/bench.out" | head -3
  echo "unit: $unit (\"per message\" below is per $( [[ $workload == tx ]] && echo transaction || echo message ))"
  echo "commit groups: $((g1 - g0)), fsyncs: $((f1 - f0)) in the window"
  python3 scripts/kernel-counts.py "$((m1 - m0))" "$secs" "$out/broker.stat" "$out/bench.stat"
} | tee "$out/table.txt"
echo "raw files: $out" >&2
