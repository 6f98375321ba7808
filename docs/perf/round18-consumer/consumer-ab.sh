#!/usr/bin/env bash
# consumer-ab.sh OUT ROUNDS BENCH_A BENCH_B : txmq-bench relay (20,000 rows, latency at 2,000/s, 8 s), A and B alternating,
# the same broker and relay binaries; records the bench process's CPU seconds with the JSON line.
set -u
out=$1; rounds=$2; A=$3; Bn=$4; BIN=${BIN:-/work/ab/s25-herd}
for r in $(seq $rounds); do
  for side in A B; do
    if [[ $side == A ]]; then bench=$A; else bench=$Bn; fi
    dir=$(mktemp -d /var/tmp/cab.XXXX)
    $BIN/txmq-broker --data-dir $dir/data --listen 127.0.0.1:24601 --http 127.0.0.1:24602 > $dir/log 2>&1 & p=$!
    for _ in $(seq 100); do curl -sf 127.0.0.1:24602/healthz >/dev/null 2>&1 && break; sleep 0.1; done
    line=$(/usr/bin/time -f "%U %S" -o $dir/time $bench relay --relay $BIN/txmq-relay --broker 127.0.0.1:24601 --broker-pid $p \
      --pg "host=127.0.0.1 port=25432 user=postgres dbname=postgres" --runs 1 --seconds 8 --rows 20000 --rate 2000 --json 2>>$out.err)
    echo "{\"side\":\"$side\",\"round\":$r,\"bench_cpu_s\":$(awk '{print $1+$2}' $dir/time),\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",\"r\":$line}" >> $out
    kill $p; wait $p 2>/dev/null; rm -rf $dir
  done
done
