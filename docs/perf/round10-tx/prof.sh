#!/usr/bin/env bash
# prof.sh BINDIR OUTDATA [secs]
set -euo pipefail
bin=$1; outd=$2; secs=${3:-6}
dir=$(mktemp -d /var/tmp/txp/run.XXXXXX)
port=$((20000 + RANDOM % 20000)); http=$((port + 1))
"$bin/txmq-broker" --data-dir "$dir/data" --listen 127.0.0.1:$port --http 127.0.0.1:$http > "$dir/broker.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do curl -sf "127.0.0.1:$http/healthz" > /dev/null 2>&1 && break; sleep 0.1; done
"$bin/txmq-bench" tx --broker 127.0.0.1:$port --broker-pid $pid --runs 1 --message-bytes 256 --in-flight 1000 --seconds $((secs+2)) --warmup 1 > "$dir/bench.out" 2>&1 &
b=$!
sleep 1.5
perf record -q -F 999 -g --call-graph dwarf,16384 -p $pid -o "$outd" -- sleep $secs 2>/dev/null
wait $b || true
cat "$dir/bench.out"; cat /proc/loadavg
