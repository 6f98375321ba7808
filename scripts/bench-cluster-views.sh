#!/usr/bin/env bash
# Latency of the admin HTTP API's cluster views (docs/cluster.md "The admin HTTP API and the
# console in a cluster"; docs/BENCHMARKS.md "Cluster"): etcd + 3 brokers (scripts/cluster.sh,
# own ports and a temporary data directory), 3 topics of 3 partitions on 3 replicas (leaders
# spread over the nodes) and PREPARED transactions homed in every partition; then RUNS rounds of
# REQUESTS sequential GETs of /v1/topics and of /v1/transactions?state=prepared through node 1
# (curl, one connection per request, as a console or a script would make them). Prints, per
# path and round, the median and the 90th percentile in ms, and the median over the rounds.
#
# Usage: scripts/bench-cluster-views.sh [RUNS (5)] [REQUESTS (50)]
#   BUILD_DIR=DIR   the brokers from DIR/bin (default: ./build), to compare two builds;
#   TXMQ=PATH       the CLI (default: ./build/bin/txmq).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
RUNS="${1:-5}"
REQUESTS="${2:-50}"
TXMQ="${TXMQ:-$ROOT/build/bin/txmq}"
export DATA_DIR
DATA_DIR="$(mktemp -d /tmp/txmq-views.XXXXXX)"
export ETCD_PORT="${ETCD_PORT:-24890}" BROKER_PORT="${BROKER_PORT:-17980}" HTTP_PORT="${HTTP_PORT:-18980}"
export BROKER_ARGS="--node-lease-ttl 5s --tx-timeout 1h"
export TXMQ_BROKER="127.0.0.1:$((BROKER_PORT + 1)),127.0.0.1:$((BROKER_PORT + 2)),127.0.0.1:$((BROKER_PORT + 3))"
cleanup() {
  "$ROOT/scripts/cluster.sh" down >/dev/null 2>&1 || true
  rm -rf "$DATA_DIR"
}
trap cleanup EXIT

"$ROOT/scripts/cluster.sh" up >/dev/null
for t in views-a views-b views-c; do
  deadline=$((SECONDS + 60))
  until "$TXMQ" topic create "$t" --partitions 3 --replicas 3 >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { echo "topic $t not created in 60 s" >&2; exit 1; }
    sleep 0.5
  done
done
# Every partition led and its ISR whole before measuring.
deadline=$((SECONDS + 60))
until "$TXMQ" --json cluster status | python3 -c "
import json, sys
ps = [p for p in json.load(sys.stdin)['partitions'] if p['topic'].startswith('views-')]
sys.exit(0 if len(ps) == 9 and all(p['leader'] > 0 and len(p['isr']) == 3 for p in ps) else 1)" 2>/dev/null; do
  ((SECONDS < deadline)) || { echo "partitions not whole in 60 s" >&2; exit 1; }
  sleep 0.5
done
# PREPARED transactions, keys spread over the partitions (left undecided: tx_timeout 1h). `tx
# prepare` goes to the node named, which must lead the key's home partition: each node is tried.
for i in $(seq 1 30); do
  deadline=$((SECONDS + 30))
  until for n in 1 2 3; do
      "$TXMQ" --broker "127.0.0.1:$((BROKER_PORT + n))" tx prepare views-a "body-$i" --group pg --key "k$i" \
        >/dev/null 2>&1 && break
      false
    done; do
    ((SECONDS < deadline)) || { echo "tx prepare $i failed for 30 s" >&2; exit 1; }
    sleep 0.2
  done
done
leaders="$("$TXMQ" --json cluster status | python3 -c "
import json, sys
print(sorted({p['leader'] for p in json.load(sys.stdin)['partitions'] if p['topic'].startswith('views-')}))")"
echo "== 3 topics x 3 partitions (replicas 3), 30 PREPARED transactions; leaders: nodes $leaders; asked: node 1"
echo "   brokers: $BUILD_DIR/bin/txmq-broker; load: $(cut -d' ' -f1-3 /proc/loadavg)"

URL="http://127.0.0.1:$((HTTP_PORT + 1))"
# One round: REQUESTS GETs of $1, each checked complete; prints "median p90" in ms.
round() {
  local path="$1" out="$DATA_DIR/times"
  : >"$out"
  for _ in $(seq 1 "$REQUESTS"); do
    curl -sf -o "$DATA_DIR/body" -w '%{time_total}\n' "$URL$path" >>"$out"
    python3 -c "
import json, sys
b = json.load(open(sys.argv[1]))
sys.exit(0 if b.get('cluster', {}).get('complete') else 1)" "$DATA_DIR/body" ||
      { echo "incomplete answer for $path: $(head -c 600 "$DATA_DIR/body")" >&2; exit 1; }
  done
  python3 -c "
import statistics, sys
t = sorted(float(x) * 1000 for x in open(sys.argv[1]))
print(f'{statistics.median(t):.2f} {t[int(0.9 * (len(t) - 1))]:.2f}')" "$out"
}

for path in /v1/topics "/v1/transactions?state=prepared"; do
  round "$path" >/dev/null  # warm-up
  medians=()
  for run in $(seq 1 "$RUNS"); do
    read -r med p90 <<<"$(round "$path")"
    medians+=("$med")
    echo "$path round $run: median $med ms, p90 $p90 ms ($REQUESTS requests)"
  done
  echo "$path: median of the $RUNS round medians $(printf '%s\n' "${medians[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}') ms"
done
echo "   load after: $(cut -d' ' -f1-3 /proc/loadavg)"
