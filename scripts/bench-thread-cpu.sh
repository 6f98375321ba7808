#!/usr/bin/env bash
# CPU per message of each broker thread (txmq-io, txmq-writer, txmq-syncer, RocksDB's flush
# thread rocksdb:high and compaction thread rocksdb:low) under publish, 100 per request, 1,000 in
# flight, 256-byte messages, with what RocksDB wrote meanwhile (scripts/rocksdb-log-summary.py on
# the broker's LOG). Fresh broker on loopback, data in a temporary directory (issue #15, tenth
# round). Compactions need runs of 20 s or more to show. WORKLOAD: publish100 (default), publish1,
# or tx (Prepare + COMMIT; the unit is then a transaction: issue #15, twelfth round).
# Usage: scripts/bench-thread-cpu.sh BROKER [SECONDS] [WORKLOAD]   Environment: BENCH (default build/bin/txmq-bench)
set -euo pipefail
broker=$1; secs=${2:-20}; workload=${3:-publish100}; bench=${BENCH:-build/bin/txmq-bench}
case $workload in
  publish100) run=(publish --batch 100 --topic cpu); counter=txmq_messages_in_total; unit=msg ;;
  publish1) run=(publish --batch 1 --topic cpu); counter=txmq_messages_in_total; unit=msg ;;
  tx) run=(tx); counter=txmq_tx_prepares_total; unit=tx ;;
  *) echo "unknown workload $workload (publish100, publish1, tx)" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /var/tmp/txmq-thread-cpu.XXXXXX); pid=""
trap '[[ -n $pid ]] && kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
port=$((20000 + RANDOM % 20000)); http=$((port + 1))
"$broker" --data-dir "$dir/data" --listen 127.0.0.1:$port --http 127.0.0.1:$http > "$dir/broker.log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "127.0.0.1:$http/healthz" > /dev/null 2>&1 && break; sleep 0.1; done
# CPU ticks per thread name (threads of one name summed).
ticks() { for t in /proc/$pid/task/*; do echo "$(tr ' ' _ < "$t/comm") $(awk '{ print $14 + $15 }' "$t/stat")"; done |
            awk '{ c[$1] += $2 } END { for (k in c) print k, c[k] }' | sort; }
messages() { curl -sf "127.0.0.1:$http/metrics" | awk -v c="$counter" '$1 == c { print int($2) }'; }
ticks > "$dir/cpu0"; m0=$(messages)
echo "load before: $(cat /proc/loadavg)"
"$bench" "${run[@]}" --broker 127.0.0.1:$port --broker-pid $pid --runs 1 --message-bytes 256 --in-flight 1000 \
  --seconds "$secs" --warmup 1 | grep -E '^txmq|tx/s' || true
ticks > "$dir/cpu1"; m1=$(messages)
echo "load after: $(cat /proc/loadavg)"
kill $pid; wait $pid 2>/dev/null || true; pid=""
n=$((m1 - m0)); echo "${unit}s: $n"
join "$dir/cpu0" "$dir/cpu1" | awk -v n="$n" -v u="$unit" -v hz="$(getconf CLK_TCK)" '
  { d = ($3 - $2) / hz; tot += d; printf "%-14s %7.2f s %6.3f us/%s\n", $1, d, d * 1e6 / n, u }
  END { printf "%-14s %7.2f s %6.3f us/%s\n", "all", tot, tot * 1e6 / n, u }'
python3 "$here/rocksdb-log-summary.py" "$dir/data/LOG"
