#!/usr/bin/env bash
# The tail at a steady 10,000 msg/s, A/B: scripts/bench-rate-ab.sh BROKER_A BROKER_B [ROUNDS]
# runs `txmq-bench rate --rate 10000 --seconds 8 --warmup 1` (one message per request) against
# a fresh broker per run, order alternating per round, and prints per run the bench's JSON line
# (with "ab":"A"|"B") followed by the broker's stage histograms as comment lines ("# A ..."):
# txmq_produce_latency_seconds, txmq_store_queue/commit/fsync_seconds (docs/BENCHMARKS.md, #15).
# Environment: BENCH (txmq-bench binary, default build/bin/txmq-bench); WORKLOAD=e2e measures
# publish -> consume with acks at the same rate instead (txmq-bench e2e); BROKER_ARGS (extra broker
# arguments for both sides, e.g. "--durability async"); BROKER_ARGS_A / BROKER_ARGS_B (that side's
# only: the same binary on both sides with BROKER_ARGS_B="--min-fsync-interval 1ms"); ENV_A / ENV_B (environment assignments for
# that side's broker, e.g. the same binary on both sides with ENV_B="TXMQ_IO_SPIN_US=50"); BENCH_A /
# BENCH_B (that side's txmq-bench, default BENCH: e.g. one run at another nice level).
# RATE: messages per second (default 10000).
set -euo pipefail
a=$1; b=$2; rounds=${3:-3}; bench=${BENCH:-build/bin/txmq-bench}; workload=${WORKLOAD:-rate}
dir=$(mktemp -d /var/tmp/txmq-rate.XXXXXX); port=$((20000 + RANDOM % 20000)); http=$((port + 1)); pid=""
trap '[[ -n $pid ]] && kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
one() {
  rm -rf "$dir/data"
  # Other files' dirty pages, written back 30 s later, can hold the broker's fsyncs for hundreds
  # of ms (docs/BENCHMARKS.md, twenty-second round): written now, before the run.
  sync
  local e; [[ $1 == A ]] && e=${ENV_A:-} || e=${ENV_B:-}
  local side; [[ $1 == A ]] && side=${BROKER_ARGS_A:-} || side=${BROKER_ARGS_B:-}
  # shellcheck disable=SC2086  # word splitting wanted: several assignments / arguments
  env $e "$2" --data-dir "$dir/data" --listen 127.0.0.1:$port --http 127.0.0.1:$http ${BROKER_ARGS:-} $side > "$dir/broker.log" 2>&1 & pid=$!
  for _ in $(seq 100); do curl -sf "127.0.0.1:$http/healthz" > /dev/null 2>&1 && break; sleep 0.1; done
  local b; [[ $1 == A ]] && b=${BENCH_A:-$bench} || b=${BENCH_B:-$bench}
  out=$("$b" "$workload" --broker 127.0.0.1:$port --broker-pid $pid --runs 1 --json --message-bytes 256 --rate "${RATE:-10000}" --seconds 8 --warmup 1)
  echo "$out" | grep '^{' | sed "s/^{/{\"ab\":\"$1\",\"workload_ab\":\"$workload\",\"seconds\":8,\"env\":\"$e\",\"broker_args\":\"$side\",/"
  curl -s 127.0.0.1:$http/metrics | grep -E '^txmq_(produce_latency|store_(fsync|queue|commit))_seconds_(bucket|count)' | sed "s/^/# $1 /"
  kill $pid; wait $pid 2>/dev/null || true; pid=""
}
for r in $(seq "$rounds"); do
  if (( r % 2 )); then one A "$a"; one B "$b"; else one B "$b"; one A "$a"; fi
done
