#!/usr/bin/env bash
# ab2.sh ROUNDS WORKLOAD ARGS...: BROKER_A vs BROKER_B, fresh broker per run, alternating; HOGS=n busy loops at nice 0 beside each run.
set -uo pipefail
rounds=$1; shift; wl=("$@")
bench=${BENCH:-/work/main/build/bin/txmq-bench}
one() {
  local side=$1 dir port http pid b
  b=$BROKER_A; [[ $side == B ]] && b=$BROKER_B
  dir=$(mktemp -d /var/tmp/ab2.XXXX); port=$((10000 + RANDOM % 20000)); http=$((port+1))
  $b --data-dir $dir/d --listen 127.0.0.1:$port --http 127.0.0.1:$http > $dir/log 2>&1 & pid=$!
  for _ in $(seq 100); do curl -sf 127.0.0.1:$http/healthz >/dev/null && break; sleep 0.1; done
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
