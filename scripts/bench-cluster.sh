#!/usr/bin/env bash
# The "Cluster" figures of docs/BENCHMARKS.md, in one run on this machine: publish with 1,000
# messages in flight (256-byte bodies) against
#   - a 3-node RabbitMQ quorum-queue cluster (scripts/rabbitmq-cluster.sh; one confirm per message),
#   - txmq, 3 brokers + etcd (scripts/cluster.sh), each run's topic created with REPLICAS
#     replicas (default 3, so min_insync_replicas 2: a produce is answered once every ISR member
#     fsynced it); the table prints the replicas and the smallest ISR the cluster reported,
#   - txmq, one broker (the same-run single-node reference),
# ROUNDS rounds (default 3) with the systems alternating inside each round, SECONDS per run; the
# figures are medians over the rounds. "cpu us/msg" is the user+system CPU time of the system's
# processes over the measured seconds (for the cluster: all three brokers, not etcd) per
# acknowledged message. Run as root (RabbitMQ as shared/notes/peers.md).
# Everything started is stopped by PID at the end, however the script ends.
#
# Usage: scripts/bench-cluster.sh [ROUNDS] [SECONDS]
# Environment: BUILD_DIR (default build); REPLICAS (default 3); SYSTEMS (default
# "rabbitmq-quorum txmq-cluster txmq-single"); COMPARE_BUILD="DIR [DIR2]" adds "txmq-cluster-B"
# (and "-C"): another 3-broker cluster (its own etcd; brokers on ports 7981-7983, then 8081-8083)
# from DIR's binaries, for A/B in the same run, with the same txmq-bench.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
seconds=${2:-5}
build=${BUILD_DIR:-build}
replicas=${REPLICAS:-3}
read -r -a compare <<< "${COMPARE_BUILD:-}"
systems=${SYSTEMS:-rabbitmq-quorum txmq-cluster txmq-single}
letters=(B C)
(( ${#compare[@]} <= 2 )) || { echo "bench-cluster: COMPARE_BUILD takes at most two build dirs" >&2; exit 1; }
for i in "${!compare[@]}"; do systems+=" txmq-cluster-${letters[$i]}"; done
# The compared cluster i (0, 1): its environment for scripts/cluster.sh.
compare_env() {
  echo "BUILD_DIR=${compare[$1]} DATA_DIR=$dir/txmq-cluster-${letters[$1]} ETCD_PORT=$((23890 + 100 * $1))" \
       "BROKER_PORT=$((7980 + 100 * $1)) HTTP_PORT=$((8980 + 100 * $1))"
}

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
  for i in "${!compare[@]}"; do env $(compare_env "$i") bash scripts/cluster.sh down; done
  if [[ -n $single_pid ]]; then kill "$single_pid" 2>/dev/null; wait "$single_pid" 2>/dev/null; fi
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rabbit=""
if [[ " $systems " == *" rabbitmq-quorum "* ]]; then
  rabbit=$(DIR=$dir/rabbitmq bash scripts/rabbitmq-cluster.sh up)
  say "RabbitMQ cluster: $rabbit"
fi
BUILD_DIR=$build DATA_DIR=$dir/txmq-cluster bash scripts/cluster.sh up >&2
txmq_cluster=127.0.0.1:7881,127.0.0.1:7882,127.0.0.1:7883
for i in "${!compare[@]}"; do
  # shellcheck disable=SC2046 # compare_env is a list of VAR=value words
  env $(compare_env "$i") bash scripts/cluster.sh up >&2
done
# The PIDs whose CPU time is counted for each system (comma-separated, for --broker-pid).
pids_of() {
  local f out=""
  for f in "$@"; do [[ -f $f ]] && out+="${out:+,}$(cat "$f")"; done
  echo "$out"
}
"$bin/txmq-broker" --data-dir "$dir/single" --listen 127.0.0.1:7890 --http 127.0.0.1:8890 > "$dir/single.log" 2>&1 &
single_pid=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:8890/healthz > /dev/null && break; sleep 0.2; done

results=$dir/results.jsonl
: > "$results"
common=(--json --runs 1 --seconds "$seconds" --warmup 1 --message-bytes 256 --in-flight 1000 --partitions 6)
for round in $(seq "$rounds"); do
  for s in $systems; do
    case $s in
      rabbitmq-quorum) args=(--system rabbitmq-quorum --broker "${rabbit%%,*}" --batch 1
                             --broker-pid "$(pids_of "$dir"/rabbitmq/node-{1,2,3}/server.pid)") ;;
      txmq-cluster) args=(--system txmq --broker "$txmq_cluster" --batch 100 --replicas "$replicas"
                          --broker-pid "$(pids_of "$dir"/txmq-cluster/broker-{1,2,3}.pid)") ;;
      txmq-cluster-[BC]) i=$([[ $s == *B ]] && echo 0 || echo 1); base=$((7980 + 100 * i))
                         args=(--system txmq --broker 127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2)),127.0.0.1:$((base + 3)) --batch 100
                               --replicas "$replicas" --broker-pid "$(pids_of "$dir/txmq-cluster-${letters[$i]}"/broker-{1,2,3}.pid)") ;;
      txmq-single) args=(--system txmq --broker 127.0.0.1:7890 --batch 100 --broker-pid "$single_pid") ;;
      *) say "unknown system $s"; exit 1 ;;
    esac
    say "round $round $s: $bin/txmq-bench publish ${args[*]} ${common[*]} --topic c$round --label $s"
    # A failed run (the bench exits non-zero: refused produces, a broker gone) is left out of the
    # medians: its JSON still carries a rate, counted over whatever was answered, refusals included.
    err=$dir/bench-$round-$s.err
    if ! out=$("$bin/txmq-bench" publish "${args[@]}" "${common[@]}" --topic "c$round-$s" --label "$s" 2> "$err"); then
      say "$s failed, left out of the medians: $(tail -3 "$err" | tr '\n' ' ')"
      cat "$err" >> "$dir/bench.err"
      continue
    fi
    cat "$err" >> "$dir/bench.err"
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
print(f"{'system':<18}{'replicas':>9}{'ISR':>5}{'runs':>5}{'msg/s (median)':>16}{'p50 ms':>9}{'p99 ms':>9}"
      f"{'cpu us/msg':>11}{'load1':>7}   per-run msg/s")
for label, rs in runs.items():
    rates = [r['messages_per_s'] for r in rs]
    med = statistics.median(rates)
    p50 = statistics.median(r.get('p50_ms', 0) for r in rs)
    p99 = statistics.median(r.get('p99_ms', 0) for r in rs)
    cpu = statistics.median(r.get('broker_cpu_us_per_msg', 0) for r in rs)
    load = statistics.median(r.get('load1', 0) for r in rs)
    # The replicas and the smallest ISR the cluster's Metadata reported for the run's topic
    # ("-": not a txmq cluster); min_insync_replicas is derived: 2 from 3 replicas, else 1.
    reps = ','.join(sorted({str(r['replicas']) for r in rs if 'replicas' in r})) or '-'
    isr = ','.join(sorted({str(r['min_isr_size']) for r in rs if 'min_isr_size' in r})) or '-'
    print(f"{label:<18}{reps:>9}{isr:>5}{len(rs):>5}{med:>16.0f}{p50:>9.2f}{p99:>9.2f}{cpu:>11.1f}{load:>7.1f}   "
          f"{', '.join(f'{x:.0f}' for x in rates)}")
print("replicas/ISR: the run's topic as Metadata answered (ISR: the smallest over its partitions); "
      "min_insync_replicas is derived from replicas: 2 from 3, else 1 (docs/cluster.md)")
EOF
say "load: $(uptime)"
