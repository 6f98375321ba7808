#!/usr/bin/env bash
# hog.sh SIDE(A|B) WORKLOAD_ARGS...: a broker with (B) or without (A) low-priority background pools, two CPU hogs at nice 0 beside it
side=$1; shift
P=/work/ab/bgnice/txmq-broker; bench=/work/main/build/bin/txmq-bench
dir=$(mktemp -d /var/tmp/hog.XXXX); port=$((10000 + RANDOM % 20000)); http=$((port+1))
if [[ $side == B ]]; then export ${BENV:-TXMQ_PROTO_BG_LOW=1 TXMQ_PROTO_BG_HIGH=1}; fi
$P --data-dir $dir/d --listen 127.0.0.1:$port --http 127.0.0.1:$http > $dir/log 2>&1 & pid=$!
unset TXMQ_PROTO_BG_LOW TXMQ_PROTO_BG_HIGH
for _ in $(seq 100); do curl -sf 127.0.0.1:$http/healthz >/dev/null && break; sleep 0.1; done
hogs=()
if [[ ${HOGS:-2} -gt 0 ]]; then for i in $(seq ${HOGS:-2}); do (while :; do :; done) & hogs+=($!); done; fi
out=$($bench "$@" --broker 127.0.0.1:$port --broker-pid $pid --runs 1 --message-bytes 256 --json | tail -1)
for h in "${hogs[@]}"; do kill $h; done
stalls=$(grep -c "Stalling writes\|Stopping writes" $dir/d/LOG)
echo "{\"side\":\"$side\",\"stall_lines\":$stalls,\"r\":$out}"
kill $pid; wait $pid 2>/dev/null; rm -rf $dir
