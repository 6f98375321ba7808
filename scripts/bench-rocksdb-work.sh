#!/usr/bin/env bash
# What RocksDB did behind one workload, counted from the broker's own LOG (independent of the
# machine's load, unlike rates and latencies): flushes and MB per column family, compactions and
# MB compacted per family, and memtable switches (each starts a new WAL, whose next fsync also
# syncs the directory). Fresh broker on loopback, data in a temporary directory (issue #15).
# Usage: scripts/bench-rocksdb-work.sh BROKER_BINARY WORKLOAD [SECONDS]
#        workloads: publish1 publish100 tx e2e   (1,000 in flight, 256-byte messages; e2e at 10,000/s)
# Environment: BENCH (txmq-bench binary, default build/bin/txmq-bench), TX_ARGS (extra arguments of
# the tx workload, e.g. "--txid v4"), KEEP_LOG (a path: the run's RocksDB LOG is copied there, for
# scripts/rocksdb-log-summary.py).
# shellcheck disable=SC2206
set -euo pipefail
broker=$1; w=$2; secs=${3:-8}; bench=${BENCH:-build/bin/txmq-bench}
dir=$(mktemp -d /var/tmp/txmq-rocksdb-work.XXXXXX); pid=""
trap '[[ -n $pid ]] && kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
port=$((20000 + RANDOM % 20000)); http=$((port + 1))
"$broker" --data-dir "$dir/data" --listen 127.0.0.1:$port --http 127.0.0.1:$http > "$dir/broker.log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "127.0.0.1:$http/healthz" > /dev/null 2>&1 && break; sleep 0.1; done
c=(--broker 127.0.0.1:$port --broker-pid $pid --runs 1 --message-bytes 256)
case $w in
  publish1) cmd=(publish "${c[@]}" --in-flight 1000 --batch 1 --seconds "$secs" --warmup 1 --topic work) ;;
  publish100) cmd=(publish "${c[@]}" --in-flight 1000 --batch 100 --seconds "$secs" --warmup 1 --topic work) ;;
  tx) cmd=(tx "${c[@]}" --in-flight 1000 --seconds "$secs" --warmup 1 ${TX_ARGS:-}) ;;
  e2e) cmd=(e2e "${c[@]}" --rate 10000 --seconds "$secs" --warmup 1) ;;
  *) echo "unknown workload $w" >&2; exit 1 ;;
esac
"$bench" "${cmd[@]}" | grep -E 'tx/s|^txmq ' || true
echo "store operations: $(curl -s "127.0.0.1:$http/metrics" | awk '$1 == "txmq_store_operations_total" { print $2 }')"
kill $pid; wait $pid 2>/dev/null || true; pid=""
log=$dir/data/LOG
[[ -n ${KEEP_LOG:-} ]] && cp "$log" "$KEEP_LOG"
grep 'table #.*bytes OK' "$log" | sed 's/.*\] \[\([a-z]*\)\].*: \([0-9]*\) bytes OK.*/\1 \2/' |
  awk '{ n[$1]++; b[$1] += $2 } END { for (k in n) printf "flush %s: %d, %.0f MB\n", k, n[k], b[k] / 1e6 }' | sort
grep 'compacted to' "$log" | sed 's/.*\] \[\([a-z]*\)\] compacted.*MB in(\([0-9.]*\), \([0-9.]*\).*out(\([0-9.]*\).*/\1 \2 \3 \4/' |
  awk '{ n[$1]++; i[$1] += $2 + $3; o[$1] += $4 } END { for (k in n) printf "compaction %s: %d, %.0f MB in, %.0f MB out\n", k, n[k], i[k], o[k] }' | sort
echo "memtable switches (flushes started): $(grep -c 'Flushing memtable' "$log" || true)"
