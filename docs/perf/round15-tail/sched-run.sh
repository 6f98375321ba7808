#!/usr/bin/env bash
# schedrun.sh "ENV" OUT: rate async run; perf sched record 3 s from second 3
e=$1; out=$2
dir=$(mktemp -d /var/tmp/t15s.XXXX); port=$((20000 + RANDOM % 20000)); http=$((port+1))
env $e ${BIN:-build/bin}/txmq-broker --data-dir $dir/d --listen 127.0.0.1:$port --http 127.0.0.1:$http --durability async > $dir/log 2>&1 & pid=$!
for _ in $(seq 100); do curl -sf 127.0.0.1:$http/healthz >/dev/null && break; sleep 0.1; done
${BIN:-build/bin}/txmq-bench rate --broker 127.0.0.1:$port --broker-pid $pid --runs 1 --json --message-bytes 256 --rate 10000 --seconds 8 --warmup 1 > $dir/bench.out &
bp=$!
sleep 3; perf sched record -o $out.data -- sleep 3 2>/dev/null >/dev/null
wait $bp; grep '^{' $dir/bench.out | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print({k:d[k] for k in ("p50_ms","p99_ms","p999_ms","broker_cpu_us_per_msg")})'
kill $pid; wait $pid 2>/dev/null; rm -rf $dir
perf sched latency -i $out.data --sort max 2>/dev/null | grep -E "txmq|Task|----" | head -12
