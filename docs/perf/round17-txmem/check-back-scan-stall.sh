#!/usr/bin/env bash
# scan-stall.sh BIN OUT SECS: fresh broker, tx bench for SECS at 1,000 in flight; every second the
# io loop's longest stall so far and the stall histogram's count above 50 ms.
set -u
bin=$1; out=$2; secs=${3:-80}
dir=$(mktemp -d /var/tmp/ss.XXXX)
$bin/txmq-broker --data-dir $dir/data --listen 127.0.0.1:24631 --http 127.0.0.1:24632 > $dir/log 2>&1 & p=$!
for _ in $(seq 100); do curl -sf 127.0.0.1:24632/healthz >/dev/null 2>&1 && break; sleep 0.1; done
$bin/txmq-bench tx --broker 127.0.0.1:24631 --in-flight 1000 --seconds $secs --warmup 0 --json > $out.bench 2>&1 & b=$!
t0=$(date +%s)
while kill -0 $b 2>/dev/null; do
  m=$(curl -sf 127.0.0.1:24632/metrics)
  echo "$(( $(date +%s) - t0 )) $(echo "$m" | awk '/^txmq_io_loop_stall_max_seconds/ {print $2}') $(echo "$m" | awk '/^txmq_io_loop_stall_seconds_bucket\{le="0.05"\}/ {a=$2} /^txmq_io_loop_stall_seconds_count/ {c=$2} END {print c-a}')" >> $out
  sleep 1
done
cp $dir/data/LOG $out.rocksdb.LOG 2>/dev/null
kill $p; wait $p; rm -rf $dir
