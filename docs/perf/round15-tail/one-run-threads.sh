#!/usr/bin/env bash
# one.sh "ENV" WORKLOAD [broker args]: one broker, one bench run, per-thread CPU and switches
e=$1; w=$2; shift 2
dir=$(mktemp -d /var/tmp/t15.XXXX); port=$((20000 + RANDOM % 20000)); http=$((port+1))
env $e ${BIN:-build/bin}/txmq-broker --data-dir $dir/d --listen 127.0.0.1:$port --http 127.0.0.1:$http "$@" > $dir/log 2>&1 & pid=$!
for _ in $(seq 100); do curl -sf 127.0.0.1:$http/healthz >/dev/null && break; sleep 0.1; done
snap() { for t in /proc/$pid/task/*; do echo "$(cat $t/comm) $(awk '{print $14+$15}' $t/stat) $(grep -E '^(non)?voluntary' $t/status | awk '{s+=$2} END{print s}')"; done | sort; }
snap > $dir/s0
${BIN:-build/bin}/txmq-bench $w --broker 127.0.0.1:$port --broker-pid $pid --runs 1 --json --message-bytes 256 --rate 10000 --seconds 8 --warmup 1 | grep '^{' | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print({k:d[k] for k in ("p50_ms","p99_ms","p999_ms","broker_cpu_us_per_msg")})'
snap > $dir/s1
join <(awk '{a[$1]+=$2; c[$1]+=$3} END{for(k in a) print k, a[k], c[k]}' $dir/s0 | sort) <(awk '{a[$1]+=$2; c[$1]+=$3} END{for(k in a) print k, a[k], c[k]}' $dir/s1 | sort) | awk '{d=$4-$2; s=$5-$3; if (d>0||s>100) printf "  %-16s cpu %5.2f s  switches %d\n", $1, d/100, s}'
kill $pid; wait $pid 2>/dev/null; rm -rf $dir
