#!/usr/bin/env bash
# consumer-ab.sh OUT ROUNDS BENCH_A BENCH_B : txmq-bench relay (20,000 rows, latency at 2,000/s, 8 s), A and B alternating,
# the same broker and relay binaries; records the bench process's, the broker's and the machine's CPU seconds
# with the JSON line (BIN: the broker and relay's folder; ROWS, SECS; PostgreSQL on 127.0.0.1:25432).
set -u
out=$1; rounds=$2; A=$3; Bn=$4; BIN=${BIN:-build/bin}
for r in $(seq $rounds); do
  for side in A B; do
    if [[ $side == A ]]; then bench=$A; else bench=$Bn; fi
    dir=$(mktemp -d /var/tmp/cab.XXXX)
    $BIN/txmq-broker --data-dir $dir/data --listen 127.0.0.1:24601 --http 127.0.0.1:24602 > $dir/log 2>&1 & p=$!
    for _ in $(seq 100); do curl -sf 127.0.0.1:24602/healthz >/dev/null 2>&1 && break; sleep 0.1; done
    b0=$(awk '{print $14+$15}' /proc/$p/stat)
    busy0=$(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)
    line=$(/usr/bin/time -f "%U %S" -o $dir/time $bench relay --relay $BIN/txmq-relay --broker 127.0.0.1:24601 --broker-pid $p \
      --pg "host=127.0.0.1 port=25432 user=postgres dbname=postgres" --runs 1 --seconds ${SECS:-8} --rows ${ROWS:-20000} --rate 2000 --json 2>>$out.err)
    busy1=$(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)
    b1=$(awk '{print $14+$15}' /proc/$p/stat)
    echo "{\"side\":\"$side\",\"round\":$r,\"bench_cpu_s\":$(awk '{print $1+$2}' $dir/time),\"broker_cpu_s\":$(awk -v d=$((b1 - b0)) -v hz=$(getconf CLK_TCK) 'BEGIN { print d / hz }'),\"machine_cpu_s\":$(( (busy1 - busy0) / $(getconf CLK_TCK) )),\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",\"r\":$line}" >> $out
    kill $p; wait $p 2>/dev/null; rm -rf $dir
  done
done
