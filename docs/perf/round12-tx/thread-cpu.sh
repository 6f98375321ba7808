#!/usr/bin/env bash
# Per-thread broker CPU and RocksDB work during a txmq-bench tx (or publish 1/req) run on a fresh broker.
# Usage: thread-cpu.sh BROKER [SECONDS] [tx|pub]   Environment: BENCH (txmq-bench binary)
set -euo pipefail
broker=$1; secs=${2:-10}; wl=${3:-tx}; bench=${BENCH:-build/bin/txmq-bench}
dir=$(mktemp -d /var/tmp/txcpu.XXXXXX); pid=""
trap '[[ -n $pid ]] && kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
port=$((20000 + RANDOM % 20000)); http=$((port + 1))
"$broker" --data-dir "$dir/data" --listen 127.0.0.1:$port --http 127.0.0.1:$http > "$dir/broker.log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "127.0.0.1:$http/healthz" > /dev/null 2>&1 && break; sleep 0.1; done
ticks() { for t in /proc/$pid/task/*; do echo "$(tr ' ' _ < "$t/comm") $(awk '{ print $14 + $15 }' "$t/stat")"; done |
            awk '{ c[$1] += $2 } END { for (k in c) print k, c[k] }' | sort; }
ticks > "$dir/cpu0"; t0=$(date +%s.%N)
if [[ $wl == tx ]]; then
  /usr/bin/time -f "bench cpu %U+%S s wall %e" "$bench" tx --broker 127.0.0.1:$port --message-bytes 256 --in-flight 1000 --seconds "$secs" --warmup 1 2>&1 | grep -E "txmq|bench cpu|tx/s" || true
else
  /usr/bin/time -f "bench cpu %U+%S s wall %e" "$bench" publish --broker 127.0.0.1:$port --runs 1 --message-bytes 256 --in-flight 1000 --batch 1 --seconds "$secs" --warmup 1 --topic cpu 2>&1 | grep -E "txmq|bench cpu|tx/s" || true
fi
ticks > "$dir/cpu1"; t1=$(date +%s.%N)
echo "load: $(cat /proc/loadavg)"
kill $pid; wait $pid 2>/dev/null || true; pid=""
python3 "$(dirname "$0")/../../../scripts/rocksdb-log-summary.py" "$dir/data/LOG" | head -40
join "$dir/cpu0" "$dir/cpu1" | awk -v w="$(echo "$t1 - $t0" | bc)" -v hz="$(getconf CLK_TCK)" '
  { d = ($3 - $2) / hz; tot += d; printf "%-14s %7.2f s  %5.1f%% of wall\n", $1, d, 100*d/w }
  END { printf "%-14s %7.2f s  %5.1f%% of wall (wall %.1f s)\n", "all", tot, 100*tot/w, w }'
