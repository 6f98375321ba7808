#!/usr/bin/env bash
# The open after a crash under transactions (issue #15, nineteenth round): a fresh broker runs
# `txmq-bench tx` (1,000 in flight) for 3 s, is SIGKILLed mid-run, and is started again on the
# same directory; prints one line per run: seconds from the restart's exec to /healthz, the
# txmq_tx_prepared gauge after it, and the young transactions whose due entries that open wrote
# (its log line), for BROKER_A and BROKER_B alternating.
# Usage: docs/perf/round19-young/restart-after-kill.sh BROKER_A BROKER_B [ROUNDS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=${BENCH:-$here/../../../build/bin/txmq-bench}
rounds=${3:-3}
dir=$(mktemp -d /var/tmp/txmq-restart.XXXXXX)
pid=""
trap '[[ -n $pid ]] && kill -9 $pid 2>/dev/null; rm -rf "$dir"' EXIT
port=$((20000 + RANDOM % 20000)); http=$((port + 1))
start() {  # start BINARY: returns once /healthz answers; `secs` = the seconds it took
  local t0; t0=$(date +%s.%N)
  "$1" --data-dir "$dir/data" --listen 127.0.0.1:$port --http 127.0.0.1:$http >> "$dir/broker.log" 2>&1 &
  pid=$!
  for _ in $(seq 3000); do curl -sf "127.0.0.1:$http/healthz" > /dev/null 2>&1 && break; sleep 0.01; done
  secs=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.3f", a - b }')
}
for r in $(seq "$rounds"); do
  for side in A B; do
    [[ $side == A ]] && bin=$1 || bin=$2
    rm -rf "$dir/data" "$dir/broker.log"
    start "$bin"
    "$bench" tx --broker 127.0.0.1:$port --in-flight 1000 --seconds 6 --warmup 0 --runs 1 > /dev/null 2>&1 &
    bpid=$!
    sleep 3  # the load runs; then the crash, mid-run
    kill -9 $pid; wait $pid 2>/dev/null || true; pid=""
    kill $bpid 2>/dev/null; wait $bpid 2>/dev/null || true  # it would retry the dead broker
    start "$bin"
    prepared=$(curl -s "127.0.0.1:$http/metrics" | awk '$1 == "txmq_tx_prepared" {print $2}')
    echo "{\"round\":$r,\"side\":\"$side\",\"restart_s\":$secs,\"tx_prepared\":${prepared:-null},\"load1\":$(cut -d' ' -f1 /proc/loadavg)}"
    kill $pid; wait $pid 2>/dev/null || true; pid=""
  done
done
