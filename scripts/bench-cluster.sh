#!/usr/bin/env bash
# The "Cluster" figures of docs/BENCHMARKS.md, in one run on this machine: publish with 1,000
# messages in flight (256-byte bodies) against
#   - a 3-node RabbitMQ quorum-queue cluster (scripts/rabbitmq-cluster.sh; one confirm per message),
#   - txmq, 3 brokers + etcd (scripts/cluster.sh; replicas 1: replication is not built, so this
#     measures spreading partitions over three brokers, not replicated writes),
#   - txmq, one broker (the same-run single-node reference),
# ROUNDS rounds (default 3) with the systems alternating inside each round, SECONDS per run; the
# figures are medians over the rounds. Run as root (RabbitMQ as shared/notes/peers.md).
# Everything started is stopped by PID at the end, however the script ends.
#
# Usage: scripts/bench-cluster.sh [ROUNDS] [SECONDS]     Environment: BUILD_DIR (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
seconds=${2:-5}
build=${BUILD_DIR:-build}
bin=$build/bin
dir=$(mktemp -d /var/tmp/txmq-bench-cluster.XXXXXX)
say() { echo "bench-cluster: $*" >&2; }
[[ $(id -u) -eq 0 ]] || { say "run as root"; exit 1; }
[[ -x $bin/txmq-bench && -x $bin/txmq-broker ]] || { say "no $bin/txmq-bench or txmq-broker: build first"; exit 1; }

single_pid=""
cleanup() {
  set +e
  DIR=$dir/rabbitmq bash scripts/rabbitmq-cluster.sh down
  BUILD_DIR=$build DATA_DIR=$dir/txmq-cluster bash scripts/cluster.sh down
  if [[ -n $single_pid ]]; then kill "$single_pid" 2>/dev/null; wait "$single_pid" 2>/dev/null; fi
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rabbit=$(DIR=$dir/rabbitmq bash scripts/rabbitmq-cluster.sh up)
say "RabbitMQ cluster: $rabbit"
BUILD_DIR=$build DATA_DIR=$dir/txmq-cluster bash scripts/cluster.sh up >&2
txmq_cluster=127.0.0.1:7881,127.0.0.1:7882,127.0.0.1:7883
"$bin/txmq-broker" --data-dir "$dir/single" --listen 127.0.0.1:7890 --http 127.0.0.1:8890 > "$dir/single.log" 2>&1 &
single_pid=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:8890/healthz > /dev/null && break; sleep 0.2; done

results=$dir/results.jsonl
: > "$results"
common=(--json --runs 1 --seconds "$seconds" --warmup 1 --message-bytes 256 --in-flight 1000 --partitions 6)
for round in $(seq "$rounds"); do
  for s in rabbitmq-quorum txmq-cluster txmq-single; do
    case $s in
      rabbitmq-quorum) args=(--system rabbitmq-quorum --broker "${rabbit%%,*}" --batch 1) ;;
      txmq-cluster) args=(--system txmq --broker "$txmq_cluster" --batch 100) ;;
      txmq-single) args=(--system txmq --broker 127.0.0.1:7890 --batch 100) ;;
    esac
    say "round $round $s: $bin/txmq-bench publish ${args[*]} ${common[*]} --topic c$round --label $s"
    out=$("$bin/txmq-bench" publish "${args[@]}" "${common[@]}" --topic "c$round-$s" --label "$s" 2>> "$dir/bench.err") ||
      say "$s failed: $(tail -3 "$dir/bench.err" | tr '\n' ' ')"
    echo "$out" >> "$results"
    say "  $(echo "$out" | sed -n 's/.*"messages_per_s":\([0-9.E+-]*\).*"p99_ms":\([0-9.E+-]*\).*/\1 msg\/s p99 \2 ms/p')"
  done
done
python3 - "$results" <<'EOF'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith('{'):
        continue
    o = json.loads(line)
    runs.setdefault(o.get('label') or o['system'], []).append(o)
print(f"{'system':<18}{'runs':>5}{'msg/s (median)':>16}{'p50 ms':>9}{'p99 ms':>9}   per-run msg/s")
for label, rs in runs.items():
    rates = [r['messages_per_s'] for r in rs]
    med = statistics.median(rates)
    p50 = statistics.median(r.get('p50_ms', 0) for r in rs)
    p99 = statistics.median(r.get('p99_ms', 0) for r in rs)
    print(f"{label:<18}{len(rs):>5}{med:>16.0f}{p50:>9.2f}{p99:>9.2f}   {', '.join(f'{x:.0f}' for x in rates)}")
EOF
say "load: $(uptime)"
