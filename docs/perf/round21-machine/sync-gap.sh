#!/usr/bin/env bash
# Twenty-first round: fewer fsyncs a second at 10,000 msg/s. BROKER is a build with
# sync-gap-prototype.diff (TXMQ_SYNC_GAP_US=N: the syncer starts an fsync at least N µs after
# the previous one began and takes every group queued meanwhile; no sync on the writer).
# Rounds alternate the gaps; each run is a fresh broker and `txmq-bench rate` for 8 s at
# 10,000/s (RATE), 256 B, one message per request; then the broker's fsync histogram
# (fsyncs_per_s: over the run's 9 s, warm-up included).
# Usage: docs/perf/round21-machine/sync-gap.sh BROKER [ROUNDS] [GAPS...] > sync-gap.txt
set -euo pipefail
broker=$1; rounds=${2:-2}; shift $(( $# < 2 ? $# : 2 ))
gaps=(0 500 700 1000)
(($#)) && gaps=("$@")
bench=${BENCH:-build/bin/txmq-bench}
dir=$(mktemp -d /var/tmp/txmq-gap.XXXXXX); port=$((20000 + RANDOM % 20000)); http=$((port + 1)); pid=""
trap '[[ -n $pid ]] && kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
echo "gap_us p50 p90 p99 p99.9 (ms) broker_cpu_us_per_msg fsyncs fsyncs_per_s fsyncs_over_5ms"
for r in $(seq "$rounds"); do
  for g in "${gaps[@]}"; do
    rm -rf "$dir/data"
    TXMQ_SYNC_GAP_US=$g "$broker" --data-dir "$dir/data" --listen 127.0.0.1:$port --http 127.0.0.1:$http > "$dir/broker.log" 2>&1 & pid=$!
    for _ in $(seq 100); do curl -sf 127.0.0.1:$http/healthz > /dev/null && break; sleep 0.1; done
    line=$("$bench" rate --system txmq --broker 127.0.0.1:$port --broker-pid $pid --json --runs 1 --seconds 8 --warmup 1 \
      --message-bytes 256 --in-flight 1000 --batch 1 --rate "${RATE:-10000}" --topic gap | grep '^{')
    curl -s 127.0.0.1:$http/metrics > "$dir/metrics"
    kill $pid; wait $pid || true; pid=""
    python3 - "$g" "$line" "$dir/metrics" <<'PY'
import json, sys
g, line, metrics = sys.argv[1], json.loads(sys.argv[2]), open(sys.argv[3]).read().splitlines()
val = lambda name: next(float(l.split()[-1]) for l in metrics if l.startswith(name))
n, under5 = val('txmq_store_fsync_seconds_count'), val('txmq_store_fsync_seconds_bucket{le="0.005"}')
print(g, *(round(line[k], 2) for k in ('p50_ms', 'p90_ms', 'p99_ms', 'p999_ms', 'broker_cpu_us_per_msg')),
      int(n), round(n / 9), int(n - under5))
PY
  done
done
