#!/usr/bin/env bash
# Twenty-first round: does what ran just before a steady-rate run move its p99?
# Alternates scripts/bench-peers.sh without (SETTLE=0) and with (SETTLE=1) the settle step,
# PAIRS times, on the steady-rate workload only, and keeps each run's raw lines here as
# settle0-N.jsonl / settle1-N.jsonl. bench-peers.sh rewrites docs/BENCHMARKS.md's peers
# section, docs/bench-peers.png and docs/bench-peers.jsonl: they are put back at the end.
# Usage: docs/perf/round21-machine/settle-ab.sh [PAIRS] [ROUNDS]   (SYSTEMS as bench-peers.sh)
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=docs/perf/round21-machine
restore() { git checkout -- docs/BENCHMARKS.md docs/bench-peers.png docs/bench-peers.jsonl; }
trap restore EXIT
for i in $(seq "${1:-2}"); do
  for settle in 0 1; do
    SETTLE=$settle WORKLOADS=${WORKLOADS:-rate} scripts/bench-peers.sh "${2:-4}" 5 2> "$out/settle$settle-$i.log" > /dev/null
    cp docs/bench-peers.jsonl "$out/settle$settle-$i.jsonl"
  done
done
