#!/usr/bin/env bash
# runpub.sh BROKER OUT SECS BATCH: fresh broker, publish --batch BATCH for SECS; RocksDB LOG kept (L0 files, stalls)
set -euo pipefail
broker=$1; out=$2; secs=$3; batch=$4
dir=$(mktemp -d /var/tmp/tx4/pub.XXXXXX)
port=$((20000 + RANDOM % 20000)); http=$((port+1))
"$broker" --data-dir $dir/data --listen 127.0.0.1:$port --http 127.0.0.1:$http > $dir/broker.log 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf 127.0.0.1:$http/healthz >/dev/null 2>&1 && break; sleep 0.1; done
echo "load $(cut -d' ' -f1-3 /proc/loadavg)" > $out.info
/work/ab/s22/txmq-bench publish --broker 127.0.0.1:$port --broker-pid $pid --runs 1 --json --message-bytes 256 --in-flight 1000 --batch $batch --seconds $secs --warmup 1 --topic ab >> $out.info 2>&1
cp $dir/data/LOG $out.rocksdb.LOG
echo "load-after $(cut -d' ' -f1-3 /proc/loadavg)" >> $out.info
kill $pid; wait $pid 2>/dev/null || true
rm -rf $dir
