#!/usr/bin/env bash
# One steady-rate run on a fresh broker: txmq-bench rate, 10,000 msg/s, 256 B, 8 s + 1 s warm-up,
# its JSON line, then the broker's fsync count. Usage: rate1.sh BROKER [BROKER_ARGS...]
# Environment: BENCH (txmq-bench, default build/bin/txmq-bench), LATLOG (a --latency-log file).
set -uo pipefail
broker=$1; shift; bench=${BENCH:-build/bin/txmq-bench}
dir=$(mktemp -d /var/tmp/rate1.XXXXXX); port=$((20000 + RANDOM % 20000)); http=$((port + 1))
"$broker" --data-dir "$dir/data" --listen 127.0.0.1:$port --http 127.0.0.1:$http "$@" > "$dir/broker.log" 2>&1 & pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do curl -sf 127.0.0.1:$http/healthz > /dev/null 2>&1 && break; sleep 0.1; done
"$bench" rate --broker 127.0.0.1:$port --broker-pid $pid --runs 1 --seconds 8 --warmup 1 --message-bytes 256 \
  --rate 10000 --json ${LATLOG:+--latency-log "$LATLOG"}
curl -sf 127.0.0.1:$http/metrics | grep -E '^txmq_store_fsyncs_total'
