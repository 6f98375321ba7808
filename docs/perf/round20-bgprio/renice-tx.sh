#!/usr/bin/env bash
# renice-tx.sh ROUNDS SECS THREADS NICE: tx (1,000 in flight) against a fresh broker per run, side B with THREADS reniced
set -uo pipefail
rounds=$1; secs=$2; threads=$3; nv=$4
b=${BROKER:-build/bin/txmq-broker}; bench=${BENCH:-build/bin/txmq-bench}
one() {
  local side=$1 dir port http pid
  dir=$(mktemp -d /var/tmp/rn.XXXX); port=$((10000 + RANDOM % 20000)); http=$((port+1))
  $b --data-dir $dir/d --listen 127.0.0.1:$port --http 127.0.0.1:$http > $dir/log 2>&1 & pid=$!
  for _ in $(seq 100); do curl -sf 127.0.0.1:$http/healthz >/dev/null && break; sleep 0.1; done
  if [[ $side == B ]]; then
    for t in /proc/$pid/task/*; do c=$(cat $t/comm); for n in ${threads//,/ }; do [[ $c == $n ]] && renice -n $nv -p ${t##*/} >/dev/null; done; done
  fi
  out=$($bench tx --broker 127.0.0.1:$port --broker-pid $pid --runs 1 --message-bytes 256 --in-flight 1000 --seconds $secs --warmup 1 --json | tail -1)
  echo "{\"side\":\"$side\",\"load\":$(cut -d' ' -f1 /proc/loadavg),\"r\":$out}"
  kill $pid; wait $pid 2>/dev/null; rm -rf $dir
}
for r in $(seq $rounds); do if (( r % 2 )); then one A; one B; else one B; one A; fi; done
