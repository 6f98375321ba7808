#!/usr/bin/env bash
# profile-tx.sh BROKER OUT.data [workload-secs]   (BENCH: the txmq-bench binary, default the repository's build/bin/txmq-bench;
# round 14 ran it with /work/ab/tx3/txmq-bench, round 15 with its worktree's)
set -euo pipefail
broker=$1; out=$2; secs=${3:-12}
dir=$(mktemp -d /var/tmp/tx3-prof.XXXXXX)
port=$((20000 + RANDOM % 20000)); http=$((port+1))
"$broker" --data-dir $dir/data --listen 127.0.0.1:$port --http 127.0.0.1:$http > $dir/broker.log 2>&1 &
pid=$!
# A failing bench (set -e) must not leave the broker running (session 25 found one left behind).
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do curl -sf 127.0.0.1:$http/healthz >/dev/null 2>&1 && break; sleep 0.1; done
"${BENCH:-$(dirname "$0")/../../../build/bin/txmq-bench}" tx --broker 127.0.0.1:$port --broker-pid $pid --runs 1 --message-bytes 256 --in-flight 1000 --seconds $secs --warmup 1 > $dir/bench.out 2>&1 &
bp=$!
sleep 4
perf record -F 999 -g --call-graph dwarf,16384 -o $out -p $pid -- sleep 5 2>/dev/null >/dev/null
wait $bp; cat $dir/bench.out
kill $pid; wait $pid 2>/dev/null || true
