#!/usr/bin/env bash
# Read-process-write throughput (docs/BENCHMARKS.md "Read-process-write"): `txmq-bench tx --mode
# rpw` against
#   - txmq, 3 brokers + etcd (scripts/cluster.sh, its own ports and data dir), topics of 3
#     partitions on 3 replicas: the home leader holds each input on its partition's leader at
#     Prepare, takes the holds again before the COMMIT, acks them after it (docs/cluster.md);
#   - txmq, one broker: the acks are applied in the COMMIT's own write,
# ROUNDS rounds (default 3), the two systems alternating inside each round, SECONDS measured per
# run after a 2 s warm-up; the figures are medians over the rounds. Each run fills 30,000 keyed
# inputs and has 4 workers each fetch up to 10 deliveries and commit one transaction of an output
# per input plus the acks. The cluster row also gives the broker-to-broker connections opened
# (txmq_peer_connections_opened_total, all three brokers, whole run).
# Everything started is stopped by PID at the end, however the script ends.
#
# Usage: scripts/bench-rpw.sh [ROUNDS] [SECONDS]
# Environment: BUILD_DIR (default build); SYSTEMS (default "txmq-cluster txmq-single").
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
seconds=${2:-10}
build=${BUILD_DIR:-build}
systems=${SYSTEMS:-txmq-cluster txmq-single}
bin=$build/bin
dir=$(mktemp -d /var/tmp/txmq-bench-rpw.XXXXXX)
say() { echo "bench-rpw: $*" >&2; }
[[ -x $bin/txmq-bench && -x $bin/txmq-broker ]] || { say "no $bin/txmq-bench or txmq-broker: build first"; exit 1; }

# Ports of its own, so that it runs beside `make run-cluster` and bench-cluster.sh.
cluster_env=(BUILD_DIR="$build" DATA_DIR="$dir/cluster" ETCD_PORT=24790 BROKER_PORT=7780 HTTP_PORT=8780)
cluster=127.0.0.1:7781,127.0.0.1:7782,127.0.0.1:7783
single=127.0.0.1:7790
single_pid=""
cleanup() {
  set +e
  env "${cluster_env[@]}" bash scripts/cluster.sh down > /dev/null
  if [[ -n $single_pid ]]; then kill "$single_pid" 2>/dev/null; wait "$single_pid" 2>/dev/null; fi
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

env "${cluster_env[@]}" bash scripts/cluster.sh up >&2
"$bin/txmq-broker" --data-dir "$dir/single" --listen "$single" --http 127.0.0.1:8790 > "$dir/single.log" 2>&1 &
single_pid=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:8790/healthz > /dev/null && break; sleep 0.2; done

results=$dir/results.jsonl
: > "$results"
common=(--mode rpw --json --runs 1 --seconds "$seconds" --warmup 2 --workers 4 --batch 10 --inputs 30000
        --partitions 3 --message-bytes 256)
for round in $(seq "$rounds"); do
  for s in $systems; do
    case $s in
      txmq-cluster) args=(--broker "$cluster" --replicas 3) ;;
      txmq-single) args=(--broker "$single") ;;
      *) say "unknown system $s"; exit 1 ;;
    esac
    say "round $round $s: $bin/txmq-bench tx ${common[*]} ${args[*]}"
    if ! out=$("$bin/txmq-bench" tx "${common[@]}" "${args[@]}" 2>> "$dir/bench.err"); then
      say "$s failed, left out of the medians: $(tail -3 "$dir/bench.err" | tr '\n' ' ')"
      continue
    fi
    echo "{\"label\":\"$s\",\"load1\":$(cut -d' ' -f1 /proc/loadavg),${out#\{}" >> "$results"
    say "  $out"
  done
done
opened=0
for n in 1 2 3; do
  v=$(curl -sf "http://127.0.0.1:$((8780 + n))/metrics" | awk '$1 == "txmq_peer_connections_opened_total" {print $2}')
  opened=$((opened + ${v%.*}))
done
python3 - "$results" "$opened" <<'EOF'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    o = json.loads(line)
    runs.setdefault(o['label'], []).append(o)
print(f"{'system':<14}{'runs':>5}{'tx/s':>8}{'inputs/s':>10}{'p50 ms':>8}{'p99 ms':>8}{'failed':>7}{'load1':>7}   per-run inputs/s")
for label, rs in runs.items():
    med = lambda k: statistics.median(r[k] for r in rs)
    print(f"{label:<14}{len(rs):>5}{med('tx_per_s'):>8.0f}{med('inputs_per_s'):>10.0f}{med('p50_ms'):>8.2f}"
          f"{med('p99_ms'):>8.2f}{sum(r['failed'] for r in rs):>7}{med('load1'):>7.1f}   "
          f"{', '.join(str(round(r['inputs_per_s'])) for r in rs)}")
if 'txmq-cluster' in runs:
    print(f"cluster: broker-to-broker connections opened over the whole run (txmq_peer_connections_opened_total): {sys.argv[2]}")
EOF
say "load: $(uptime)"
