#!/usr/bin/env bash
# A/B comparison of two txmq-broker binaries on a busy machine, where absolute figures are
# noise: runs each workload against A, then B (the order alternating every round), a fresh
# broker per run, and prints one JSON line per run (txmq-bench --json, with "ab":"A"|"B").
# Compare medians of the ratios B/A of msg/s and of broker CPU µs/msg.
# Usage: scripts/bench-ab.sh BROKER_A BROKER_B [ROUNDS] [SECONDS] [WORKLOAD...]
#        workloads: publish100 publish1 tx consume relay (default all but relay)
# Environment: BENCH (txmq-bench binary, default build/bin/txmq-bench), BACKLOG (consume, 200000),
# WARMUP (seconds before the measured ones, default 1; a longer one lets the transaction family
# reach the SST levels a store that has run a while has: issue #15, sixth round), SEED (a data
# directory copied as each run's starting store instead of an empty one, e.g. one that ran
# 500,000 transactions: a store that has run a while; it must open with both brokers),
# BENCH_ARGS_A / BENCH_ARGS_B (extra txmq-bench arguments for that side's runs, e.g. the same
# broker on both sides with BENCH_ARGS_A="--txid v4" BENCH_ARGS_B="--txid v7": a client-side A/B),
# BENCH_A / BENCH_B (that side's txmq-bench binary, default BENCH: an A/B of two clients, e.g. the
# same broker on both sides and two builds of txmq-bench), ENV_A / ENV_B (environment assignments for
# that side's broker: the same binary on both sides with ENV_B="TXMQ_IO_SPIN_US=50", say).
# relay (txmq-bench relay, one run per side: backlog rows/s beside the direct rate, latency at
# 2,000 rows/s): PG (libpq conninfo of a database the bench may fill, required), RELAY_A and
# RELAY_B (the txmq-relay binaries of each side; default: beside BENCH), ROWS (backlog, 200000),
# PG_A / PG_B (that side's database instead of PG: two outbox schema versions side by side).
set -euo pipefail
a=$1; b=$2; rounds=${3:-3}; secs=${4:-5}; shift 4 || shift $#
workloads=("$@")
[[ ${#workloads[@]} -gt 0 ]] || workloads=(publish100 publish1 tx consume)
bench_default=${BENCH:-build/bin/txmq-bench}
backlog=${BACKLOG:-200000}
warmup=${WARMUP:-1}
dir=$(mktemp -d /var/tmp/txmq-ab.XXXXXX)
pid=""
trap '[[ -n $pid ]] && kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
port=$((20000 + RANDOM % 20000)); http=$((port + 1))
one() {  # one LABEL BINARY WORKLOAD
  rm -rf "$dir/data"
  # Dirty pages of other files (a binary just copied, a trace just written) are written back 30 s
  # later and can hold the broker's fsyncs for hundreds of ms (docs/BENCHMARKS.md, twenty-second
  # round): write them now, before the run.
  sync
  [[ -n ${SEED:-} ]] && cp -a "$SEED" "$dir/data"
  local e; [[ $1 == A ]] && e=${ENV_A:-} || e=${ENV_B:-}
  # shellcheck disable=SC2086  # word splitting wanted: several assignments
  env $e "$2" --data-dir "$dir/data" --listen 127.0.0.1:$port --http 127.0.0.1:$http > "$dir/broker.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do curl -sf "127.0.0.1:$http/healthz" > /dev/null 2>&1 && break; sleep 0.1; done
  # CPU spent opening the store (a SEED is checksummed at open), left out of the per-message CPU.
  local cpu0; cpu0=$(awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' /proc/$pid/stat)
  local c=(--broker 127.0.0.1:$port --broker-pid $pid --runs 1 --json --message-bytes 256)
  local extra; [[ $1 == A ]] && extra=${BENCH_ARGS_A:-} || extra=${BENCH_ARGS_B:-}
  local bench; [[ $1 == A ]] && bench=${BENCH_A:-$bench_default} || bench=${BENCH_B:-$bench_default}
  # shellcheck disable=SC2206  # word splitting wanted: several arguments
  c+=($extra)
  local out
  case $3 in
    publish100) out=$("$bench" publish "${c[@]}" --in-flight 1000 --batch 100 --seconds "$secs" --warmup "$warmup" --topic ab) ;;
    publish1) out=$("$bench" publish "${c[@]}" --in-flight 1000 --batch 1 --seconds "$secs" --warmup "$warmup" --topic ab) ;;
    tx) out=$("$bench" tx "${c[@]}" --in-flight 1000 --seconds "$secs" --warmup "$warmup") ;;
    consume) out=$("$bench" consume "${c[@]}" --in-flight 1000 --batch 100 --backlog "$backlog" --topic ab) ;;
    relay)
      local rb; [[ $1 == A ]] && rb=${RELAY_A:-} || rb=${RELAY_B:-}
      local db; [[ $1 == A ]] && db=${PG_A:-${PG:-}} || db=${PG_B:-${PG:-}}
      out=$("$bench" relay --broker 127.0.0.1:$port --broker-pid $pid --runs 1 --json --message-bytes 256 \
              --pg "${db:?PG (or PG_A and PG_B) must name the database for the relay workload}" --rows "${ROWS:-200000}" \
              --seconds "$secs" ${rb:+--relay "$rb"}) ;;
  esac
  kill $pid; wait $pid 2>/dev/null || true; pid=""
  echo "$out" | grep '^{' | sed "s/^{/{\"ab\":\"$1\",\"workload_ab\":\"$3\",\"seconds\":$secs,\"warmup\":$warmup,\"load1\":$(cut -d' ' -f1 /proc/loadavg),\"broker_cpu_at_start_s\":$cpu0,/"
}
for r in $(seq "$rounds"); do
  for w in "${workloads[@]}"; do
    if (( r % 2 )); then one A "$a" "$w"; one B "$b" "$w"; else one B "$b" "$w"; one A "$a" "$w"; fi
  done
done
