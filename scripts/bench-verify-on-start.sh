#!/usr/bin/env bash
# How long a broker takes to listen again on a store of some size, with and without the checksum
# pass at start (verify_store_on_start, docs/configuration.md): fills a fresh store with
# `txmq-bench publish` (1 KiB messages, 100 per request) for SECONDS, stops the broker, then starts
# it ROUNDS times each way, with the page cache dropped (cold) and not (warm), and prints the times.
# Usage: scripts/bench-verify-on-start.sh BROKER BENCH [SECONDS (30)] [ROUNDS (3)]
B=$1; BENCH=$2; S=${3:-30}; R=${4:-3}
D=$(mktemp -d /tmp/vrfy.XXXX); PORT=17989
$B --data-dir $D/data --listen 127.0.0.1:$PORT > $D/broker.log 2>&1 &
P=$!
for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
$BENCH publish --broker 127.0.0.1:$PORT --batch 100 --in-flight 1000 --message-bytes 1024 --seconds $S --warmup 0 --runs 1 --broker-pid $P 2>&1 | tail -2
kill $P; wait $P
echo "store: $(du -sm $D/data | cut -f1) MB, $(ls $D/data/*.sst | wc -l) SST files"
start() {  # $1 = extra flag, $2 = cold|warm
  [[ $2 == cold ]] && { sync; echo 3 > /proc/sys/vm/drop_caches; }
  t0=$(date +%s.%N)
  $B --data-dir $D/data --listen 127.0.0.1:$PORT $1 > $D/b2.log 2>&1 &
  P=$!
  for i in $(seq 30000); do (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.01; done
  t1=$(date +%s.%N)
  kill $P; wait $P
  printf "%s %s %.2f s\n" "${1:-verify}" $2 $(echo "$t1 - $t0" | bc)
}
for r in $(seq $R); do
  for mode in cold warm; do
    start "" $mode
    start "--verify-store-on-start false" $mode
  done
done
rm -rf $D
