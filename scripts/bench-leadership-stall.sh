#!/usr/bin/env bash
# How long a node's io thread is busy when it starts leading a partition with a large group
# state (docs/cluster.md "Leadership changes on the io thread"): etcd + 3 brokers
# (scripts/cluster.sh, own ports and a temporary data directory), a replicas-3 topic of one
# partition, a group with DEAD_LETTERS dead letters (delivered once, never acked: max_attempts 1),
# then RUNS times: the leader SIGKILLed, and the new leader's log line "starting to lead took N ms
# on the io thread" read, with the largest io-loop stall of that failover
# (txmq_io_loop_stall_seconds, the bucket bound of the largest observation since the kill);
# the killed node is restarted and back in the ISR before the next run.
#
# Usage: scripts/bench-leadership-stall.sh [DEAD_LETTERS (100000)] [RUNS (3)]
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
DEAD="${1:-100000}"
RUNS="${2:-3}"
export DATA_DIR
DATA_DIR="$(mktemp -d /tmp/txmq-stall.XXXXXX)"
export ETCD_PORT="${ETCD_PORT:-24790}" BROKER_PORT="${BROKER_PORT:-17880}" HTTP_PORT="${HTTP_PORT:-18880}"
export BROKER_ARGS="--node-lease-ttl 3s --replica-lag-max 4s --ack-deadline 500ms --max-attempts 1 --retry-schedule 100ms"
TXMQ="$BUILD_DIR/bin/txmq"
export TXMQ_BROKER="127.0.0.1:$((BROKER_PORT + 1)),127.0.0.1:$((BROKER_PORT + 2)),127.0.0.1:$((BROKER_PORT + 3))"
cleanup() {
  "$ROOT/scripts/cluster.sh" down >/dev/null 2>&1 || true
  rm -rf "$DATA_DIR"
}
trap cleanup EXIT

"$ROOT/scripts/cluster.sh" up >/dev/null
deadline=$((SECONDS + 60))
until "$TXMQ" topic create stall --partitions 1 --replicas 3 >/dev/null 2>&1; do
  ((SECONDS < deadline)) || { echo "topic stall not created in 60 s (is the cluster up?)" >&2; exit 1; }
  sleep 0.5
done

# field FIELD of partition 0 in `txmq --json cluster status`
partition() {
  "$TXMQ" --json cluster status | python3 -c "
import json, sys
for p in json.load(sys.stdin)['partitions']:
    if p['topic'] == 'stall': print(p['$1'] if not isinstance(p['$1'], list) else len(p['$1']))"
}
wait_whole() {
  local deadline=$((SECONDS + 60))
  until [[ "$(partition isr 2>/dev/null)" == 3 ]]; do
    ((SECONDS < deadline)) || { echo "ISR not whole in 60 s" >&2; exit 1; }
    sleep 0.2
  done
}
wait_whole

echo "== $DEAD messages, delivered once and never acked (dead letters after 500 ms)"
start=$SECONDS
seq "$DEAD" | "$TXMQ" produce stall >/dev/null
"$TXMQ" consume stall --group g --max "$DEAD" --no-ack --wait 5000 >/dev/null
deadline=$((SECONDS + 300))
until [[ "$("$TXMQ" --json group describe g | python3 -c "
import json, sys
print(json.load(sys.stdin).get('dead_letters', 0))" 2>/dev/null)" -ge "$DEAD" ]]; do
  ((SECONDS < deadline)) || { echo "fewer than $DEAD dead letters after 300 s" >&2; "$TXMQ" group describe g >&2; exit 1; }
  sleep 1
done
echo "filled in $((SECONDS - start)) s"

# The largest bucket bound of txmq_io_loop_stall_seconds whose count grew between two scrapes.
scrape() { curl -sf "http://127.0.0.1:$((HTTP_PORT + $1))/metrics" | grep '^txmq_io_loop_stall_seconds_bucket' || true; }
# txmq_io_loop_stall_max_seconds of node $1 (the longest stall since it started), in ms.
stall_max_ms() {
  curl -sf "http://127.0.0.1:$((HTTP_PORT + $1))/metrics" |
    awk '/^txmq_io_loop_stall_max_seconds / {printf "%.1f", $2 * 1000}' || true
}
largest_new() {
  python3 -c "
import re, sys
def parse(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r'.*le=\"([^\"]+)\"\} (\S+)', line)
        if m: out[m.group(1)] = float(m.group(2))
    return out
a, b = parse(open(sys.argv[1]).read()), parse(open(sys.argv[2]).read())
bounds = sorted((float(k) if k != '+Inf' else float('inf'), k) for k in b)
total = b.get('+Inf', 0.0) - a.get('+Inf', 0.0)
# cumulative buckets: the largest observation is at most the first bound that holds them all
print(next((v for v, k in bounds if b[k] - a.get(k, 0.0) >= total), 0.0))" "$1" "$2"
}

for run in $(seq 1 "$RUNS"); do
  leader="$(partition leader)"
  others=()
  for n in 1 2 3; do [[ $n == "$leader" ]] || others+=("$n"); done
    for n in "${others[@]}"; do
    scrape "$n" >"$DATA_DIR/before-$n"
    stall_max_ms "$n" >"$DATA_DIR/max-before-$n"
    wc -l <"$DATA_DIR/broker-$n.log" >"$DATA_DIR/mark-$n"
  done
  kill -KILL "$(cat "$DATA_DIR/broker-$leader.pid")"
  rm -f "$DATA_DIR/broker-$leader.pid"
  deadline=$((SECONDS + 30))
  until new="$(partition leader 2>/dev/null)" && [[ -n $new && $new != "$leader" && $new != -1 ]]; do
    ((SECONDS < deadline)) || { echo "no new leader in 30 s" >&2; exit 1; }
    sleep 0.2
  done
  line=""
  deadline=$((SECONDS + 30))
  until line="$(tail -n +"$(($(cat "$DATA_DIR/mark-$new") + 1))" "$DATA_DIR/broker-$new.log" | grep -m1 'stall/0: starting to lead took')"; do
    ((SECONDS < deadline)) || { echo "node $new logged no leadership timing (it logs only take-overs of 5 ms or more)" >&2; break; }
    sleep 0.2
  done
  sleep 1  # let the probe observe the loop after the take-over
  scrape "$new" >"$DATA_DIR/after-$new"
  echo "run $run: node $leader killed, node $new leads; ${line#*: }; largest stall bucket since the kill: $(largest_new "$DATA_DIR/before-$new" "$DATA_DIR/after-$new") s; txmq_io_loop_stall_max_seconds of node $new: $(cat "$DATA_DIR/max-before-$new") ms before the kill, $(stall_max_ms "$new") ms after"
  "$ROOT/scripts/cluster.sh" up >/dev/null
  wait_whole
done
