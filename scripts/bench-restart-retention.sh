#!/usr/bin/env bash
# A publish-only broker restarted, then publishing under a short retention: what stays on disk
# and what RocksDB rewrote (issue #15, docs/BENCHMARKS.md "Eleventh round: the transaction
# snapshot"). Phase 1 publishes FIRST seconds and stops the broker (SIGTERM); phase 2 restarts it
# on the same directory and publishes SECOND seconds; the live table bytes per column family are
# taken while it still runs, after one more retention interval, then the LOGs of both runs are
# summed (flushes, compactions by reason). Publish 100 per request, 1,000 in flight, 256 bytes.
# Usage: scripts/bench-restart-retention.sh BROKER_BINARY [FIRST] [SECOND] [RETENTION]
# Environment: BENCH (txmq-bench binary, default build/bin/txmq-bench).
set -euo pipefail
broker=$1; first=${2:-10}; second=${3:-20}; retention=${4:-5s}; bench=${BENCH:-build/bin/txmq-bench}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /var/tmp/txmq-restart-retention.XXXXXX); pid=""
trap '[[ -n $pid ]] && kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
port=$((20000 + RANDOM % 20000)); http=$((port + 1))
start() {
  "$broker" --data-dir "$dir/data" --listen 127.0.0.1:$port --http 127.0.0.1:$http \
    --retention "$retention" --retention-interval 1s >> "$dir/broker.log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do curl -sf "127.0.0.1:$http/healthz" > /dev/null 2>&1 && return; sleep 0.1; done
  echo "the broker did not start" >&2; cat "$dir/broker.log" >&2; exit 1
}
publish() {
  "$bench" publish --broker 127.0.0.1:$port --broker-pid $pid --runs 1 --message-bytes 256 \
    --in-flight 1000 --batch 100 --seconds "$1" --warmup 1 --topic work | grep -E '^txmq ' || true
}
start; publish "$first"
echo "phase 1 live tables:"; "$here/rocksdb-live-tables.py" "$dir/data"
kill $pid; wait $pid 2>/dev/null || true; pid=""
start; publish "$second"
sleep 2  # one more retention pass (interval 1 s) over what phase 2 left: a measurement, not a synchronization
echo "phase 2 live tables (broker running):"; "$here/rocksdb-live-tables.py" "$dir/data"
kill $pid; wait $pid 2>/dev/null || true; pid=""
cat $(ls -tr "$dir"/data/LOG.old.* 2>/dev/null) "$dir/data/LOG" > "$dir/all.log"
"$here/rocksdb-log-summary.py" "$dir/all.log"
