#!/bin/bash
# restart-ab.sh ROUNDS BURST_SECONDS: A = main's broker on a copy of seedA (format 1), B = this
# branch's broker on a copy of seedB (the same store, upgraded to format 2 by B once). Each run:
# copy the seed, start the broker, txmq-bench tx for BURST s, SIGKILL, time the restart until the
# port accepts, then time `txmq tx list --state prepared` 3x and read the gauges; alternating order.
set -u
R=${1:-3}; S=${2:-15}
D=/var/tmp/txidx; PORT=17993; HTTP=17994
A=/work/main/build/bin/txmq-broker; B=/work/wt-txidx/build/bin/txmq-broker
CLI=/work/main/build/bin/txmq; BENCH=/work/main/build/bin/txmq-bench
one() {  # LABEL BROKER SEED
  rm -rf $D/run; cp -a $3 $D/run
  $2 --data-dir $D/run --listen 127.0.0.1:$PORT --http 127.0.0.1:$HTTP > $D/run.log 2>&1 &
  local P=$!
  for i in $(seq 3000); do (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.02; done
  local burst=""
  if [[ $S -gt 0 ]]; then
    burst=$($BENCH tx --broker 127.0.0.1:$PORT --seconds $S --warmup 0 --runs 1 --broker-pid $P --in-flight 1000 --message-bytes 256 --json 2>/dev/null | grep '^{' | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(round(d["tx_per_s"]))' 2>/dev/null)
  fi
  local wal=$(du -cm $D/run/*.log 2>/dev/null | tail -1 | cut -f1)
  kill -9 $P; wait $P 2>/dev/null
  local load=$(cut -d' ' -f1 /proc/loadavg)
  local t0=$(date +%s.%N)
  $2 --data-dir $D/run --listen 127.0.0.1:$PORT --http 127.0.0.1:$HTTP > $D/run2.log 2>&1 &
  P=$!
  for i in $(seq 6000); do (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.01; done
  local t1=$(date +%s.%N)
  local lists=""
  for k in 1 2 3; do
    local l0=$(date +%s.%N); local n=$($CLI --broker 127.0.0.1:$PORT --json tx list --state prepared | wc -l); local l1=$(date +%s.%N)
    lists="$lists $(echo "($l1 - $l0)*1000" | bc | cut -d. -f1)"
  done
  local g=$(curl -s 127.0.0.1:$HTTP/metrics | grep -E '^txmq_tx_(prepared|abandoned_pending) ' | tr '\n' ' ')
  kill $P; wait $P 2>/dev/null
  echo "$1 restart_s=$(echo "$t1 - $t0" | bc) list_prepared_ms=[$lists ] prepared_listed=$n wal_mb=$wal burst_tx_s=$burst load=$load $g"
}
for r in $(seq $R); do
  if (( r % 2 )); then one A $A $D/seedA; one B $B $D/seedB; else one B $B $D/seedB; one A $A $D/seedA; fi
done
rm -rf $D/run
