#!/usr/bin/env bash
# Runs the broker workloads of docs/BENCHMARKS.md against a fresh broker on loopback, with its
# data in a temporary directory, and prints one JSON line per workload (medians of --runs).
# Usage: scripts/bench-broker.sh [RUNS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
seconds=${2:-5}
bin=${BUILD_DIR:-build}/bin
dir=$(mktemp -d /var/tmp/txmq-bench.XXXXXX)
port=17878
http=17879
"$bin/txmq-broker" --data-dir "$dir/data" --listen 127.0.0.1:$port --http 127.0.0.1:$http \
  > "$dir/broker.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  curl -sf "127.0.0.1:$http/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
b() { "$bin/txmq-bench" "$@" --broker 127.0.0.1:$port --broker-pid $pid --json; }
b publish --in-flight 1000 --batch 100 --seconds "$seconds" --runs "$runs" --topic pub1000
b publish --in-flight 1 --batch 1 --seconds "$seconds" --runs "$runs" --topic pub1
b rate --rate 10000 --seconds "$seconds" --runs "$runs" --topic rate10k
b e2e --rate 10000 --seconds "$seconds" --runs "$runs" --topic e2e10k
b consume --backlog 1000000 --runs "$runs" --topic backlog
# Resident memory with 10,000,000 stored messages (after the runs above stored ~5M more).
b fill --backlog 10000000 --runs 1 --topic ten-million
