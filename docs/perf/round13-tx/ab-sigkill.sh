#!/usr/bin/env bash
# Alternating A/B of two broker binaries, a fresh broker per run, SIGKILLed at the end (the
# memtable-thread prototype does not shut down cleanly, so scripts/bench-ab.sh waits forever).
# Usage: A=BROKER_A B=BROKER_B [BENCH=build/bin/txmq-bench] ab-sigkill.sh ROUNDS SECONDS tx|publish1...
# One JSON line per run; scripts/ab-summary.py summarises.
rounds=$1; secs=$2; shift 2
bench=${BENCH:-build/bin/txmq-bench}
for r in $(seq $rounds); do
  for w in "$@"; do
    if (( r % 2 )); then order="A B"; else order="B A"; fi
    for side in $order; do
      dir=$(mktemp -d /var/tmp/proto.XXXX); port=$((20000 + RANDOM % 20000)); http=$((port+1))
      "${!side}" --data-dir $dir/d --listen 127.0.0.1:$port --http 127.0.0.1:$http > $dir/log 2>&1 & pid=$!
      for _ in $(seq 100); do curl -sf 127.0.0.1:$http/healthz >/dev/null && break; sleep 0.1; done
      case $w in tx) run=(tx);; publish1) run=(publish --batch 1 --topic ab);; esac
      out=$($bench "${run[@]}" --broker 127.0.0.1:$port --broker-pid $pid --runs 1 --json --message-bytes 256 --in-flight 1000 --seconds $secs --warmup 2 | grep '^{')
      kill -9 $pid; wait $pid 2>/dev/null; rm -rf $dir
      echo "$out" | sed "s/^{/{\"ab\":\"$side\",\"workload_ab\":\"$w\",\"load1\":$(cut -d' ' -f1 /proc/loadavg),/"
    done
  done
done
