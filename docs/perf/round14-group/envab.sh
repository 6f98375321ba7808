#!/usr/bin/env bash
# envab.sh ROUNDS SECS "ENV_A" "ENV_B" [bench args]: same broker binary, env differs per side, publish workload
set -uo pipefail
rounds=$1; secs=$2; ea=$3; eb=$4; shift 4
broker=${BROKER:-/work/main/build/bin/txmq-broker}; bench=${BENCH:-/work/main/build/bin/txmq-bench}
for r in $(seq $rounds); do
  for side in A B; do
    [[ $side == A ]] && e=$ea || e=$eb
    dir=$(mktemp -d /var/tmp/eab.XXXX); port=$((20000 + RANDOM % 20000)); http=$((port+1))
    env $e $broker --data-dir $dir/d --listen 127.0.0.1:$port --http 127.0.0.1:$http > $dir/log 2>&1 & pid=$!
    for _ in $(seq 100); do curl -sf 127.0.0.1:$http/healthz >/dev/null && break; sleep 0.1; done
    out=$($bench ${WL:-publish} --broker 127.0.0.1:$port --broker-pid $pid --runs 1 --json --message-bytes 256 --in-flight 1000 --seconds $secs --warmup 1 "$@" | grep '^{')
    echo "$out" | sed "s/^{/{\"ab\":\"$side\",\"env\":\"$e\",\"load1\":$(cut -d' ' -f1 /proc/loadavg),/"
    kill $pid; wait $pid 2>/dev/null; rm -rf $dir
  done
done
