#!/usr/bin/env bash
# tweak-ab.sh ROUNDS THREADS "TWEAK" WORKLOAD ARGS...: a fresh broker per run, sides alternating;
# side B with `TWEAK TID` applied to its threads named in THREADS (comma-separated; empty: none).
# BROKER_A / BROKER_B: each side's broker (default main's build, B as A); HOGS=n: n busy loops at
# nice 0 beside each run. Prints one JSON line per run, with the RocksDB LOG's stall lines and
# txmq_store_background_raised_total.
set -uo pipefail
rounds=$1; threads=$2; tweak=$3; shift 3; wl=("$@")
broker_a=${BROKER_A:-${BROKER:-/work/main/build/bin/txmq-broker}}; broker_b=${BROKER_B:-$broker_a}
bench=${BENCH:-/work/main/build/bin/txmq-bench}
one() {
  local side=$1 dir port http pid b=$broker_a
  [[ $side == B ]] && b=$broker_b
  dir=$(mktemp -d /var/tmp/tw.XXXX); port=$((10000 + RANDOM % 20000)); http=$((port+1))
  $b --data-dir $dir/d --listen 127.0.0.1:$port --http 127.0.0.1:$http > $dir/log 2>&1 & pid=$!
  for _ in $(seq 100); do curl -sf 127.0.0.1:$http/healthz >/dev/null && break; sleep 0.1; done
  if [[ $side == B && -n $threads ]]; then
    for t in /proc/$pid/task/*; do c=$(cat $t/comm); for n in ${threads//,/ }; do [[ $c == $n ]] && $tweak ${t##*/} >/dev/null; done; done
  fi
  local hogs=()
  for i in $(seq ${HOGS:-0}); do (while :; do :; done) & hogs+=($!); done
  out=$($bench "${wl[@]}" --broker 127.0.0.1:$port --broker-pid $pid --runs 1 --message-bytes 256 --json | tail -1)
  for h in "${hogs[@]}"; do kill $h; done
  stalls=$(grep -c "Stalling writes\|Stopping writes" $dir/d/LOG)
  raised=$(curl -s 127.0.0.1:$http/metrics | awk '$1=="txmq_store_background_raised_total"{print $2}')
  echo "{\"side\":\"$side\",\"load\":$(cut -d' ' -f1 /proc/loadavg),\"stall_lines\":$stalls,\"raised\":\"${raised}\",\"r\":$out}"
  kill $pid; wait $pid 2>/dev/null; rm -rf $dir
}
for r in $(seq $rounds); do if (( r % 2 )); then one A; one B; else one B; one A; fi; done
