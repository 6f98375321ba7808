#!/usr/bin/env bash
# steady-vs-nats.sh ROUNDS SECS: issue #15's "steady 10,000/s p99 ≤ 1.5x NATS" with more rounds
# than make bench's three: per round, in rotating order, txmq durable (a fresh broker, default
# settings), the same with --low-priority-background false (the broker before round 20), txmq
# --durability async and NATS JetStream 2.9 (file storage), `txmq-bench rate` at 10,000 msg/s,
# one 256-byte message per request. One JSON line per run on stdout.
set -euo pipefail
rounds=${1:-8}; secs=${2:-8}
bin=${BUILD_DIR:-build}/bin
dir=$(mktemp -d /var/tmp/steady-nats.XXXXXX); pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$dir"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
nport=$(port); nhttp=$(port)
printf 'listen: 127.0.0.1:%s\nhttp: 127.0.0.1:%s\nserver_name: txmq_bench\njetstream { store_dir: "%s/js", max_memory_store: 1GB, max_file_store: 20GB }\n' \
  "$nport" "$nhttp" "$dir" > "$dir/nats.conf"
nats-server -c "$dir/nats.conf" > "$dir/nats.log" 2>&1 & npid=$!; pids+=($npid)
for _ in $(seq 100); do curl -sf "127.0.0.1:$nhttp/healthz?js-enabled-only=true" > /dev/null && break; sleep 0.1; done
txmq() {  # txmq DURABILITY LOW_PRIORITY_BACKGROUND
  local p h pid label=txmq-$1; p=$(port); h=$(port); rm -rf "$dir/data"
  [[ $2 == false ]] && label=$label-normal-priority
  "$bin/txmq-broker" --data-dir "$dir/data" --listen 127.0.0.1:$p --http 127.0.0.1:$h --durability "$1" \
    --low-priority-background "$2" > "$dir/broker.log" 2>&1 & pid=$!
  for _ in $(seq 100); do curl -sf 127.0.0.1:$h/healthz > /dev/null && break; sleep 0.1; done
  "$bin/txmq-bench" rate --broker 127.0.0.1:$p --broker-pid $pid --json --runs 1 --seconds "$secs" --warmup 1 \
    --message-bytes 256 --rate 10000 --label "$label" | tail -1
  kill $pid; wait $pid 2>/dev/null || true
}
nats() {
  "$bin/txmq-bench" rate --system nats --broker 127.0.0.1:$nport --broker-pid $npid --json --runs 1 --seconds "$secs" \
    --warmup 1 --message-bytes 256 --rate 10000 --topic peers --label nats | tail -1
}
systems=("txmq sync true" "txmq sync false" "txmq async true" "nats")
for r in $(seq "$rounds"); do
  for i in 0 1 2 3; do
    s=${systems[$(( (i + r) % 4 ))]}
    out=$($s)
    echo "{\"round\":$r,\"load1\":$(cut -d' ' -f1 /proc/loadavg),\"r\":$out}"
  done
done
