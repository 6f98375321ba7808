#!/usr/bin/env bash
# run.sh BROKER OUTPREFIX SECS [bench args...]: fresh broker, tx bench with a latency log, /metrics after
set -euo pipefail
broker=$1; out=$2; secs=$3; shift 3
dir=$(mktemp -d /var/tmp/tx4/run.XXXXXX)
port=$((20000 + RANDOM % 20000)); http=$((port+1))
"$broker" --data-dir $dir/data --listen 127.0.0.1:$port --http 127.0.0.1:$http > $dir/broker.log 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf 127.0.0.1:$http/healthz >/dev/null 2>&1 && break; sleep 0.1; done
python3 docs/perf/round15-tx/sampler.py $pid $out.samples 0.1 &
echo "load $(cut -d' ' -f1-3 /proc/loadavg)" > $out.info
/work/wt-tx/build/bin/txmq-bench tx --broker 127.0.0.1:$port --broker-pid $pid --runs 1 --message-bytes 256 --in-flight 1000 --seconds $secs --warmup 1 --latency-log $out.lat "$@" >> $out.info 2>&1
curl -s 127.0.0.1:$http/metrics > $out.metrics
cp $dir/data/LOG $out.rocksdb.LOG 2>/dev/null || true
echo "load-after $(cut -d' ' -f1-3 /proc/loadavg)" >> $out.info
kill $pid; wait $pid 2>/dev/null || true
rm -rf $dir
