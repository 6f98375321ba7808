#!/usr/bin/env bash
# renice-rate.sh OUT ROUNDS (BIN: the broker and bench folder, default build/bin): txmq-bench rate 10,000/s, 8 s; side A as built (syncer nice -10), side B the syncer reniced to 0.
set -u
out=$1; rounds=$2; B=${BIN:-build/bin}; here=$(cd "$(dirname "$0")" && pwd)
for r in $(seq $rounds); do
  for side in A B; do
    dir=$(mktemp -d /var/tmp/rr.XXXX)
    $B/txmq-broker --data-dir $dir/data --listen 127.0.0.1:24801 --http 127.0.0.1:24802 > $dir/log 2>&1 & p=$!
    for _ in $(seq 100); do curl -sf 127.0.0.1:24802/healthz >/dev/null 2>&1 && break; sleep 0.1; done
    if [[ $side == B ]]; then for t in /proc/$p/task/*; do [[ $(cat $t/comm) == txmq-syncer ]] && renice -n 0 -p $(basename $t) >/dev/null; done; fi
    $B/txmq-bench rate --broker 127.0.0.1:24801 --broker-pid $p --runs 1 --seconds 8 --rate 10000 --json > $dir/out 2>&1 & bp=$!
    python3 "$here/ctx.py" $p 3 4 > $dir/ctx
    wait $bp
    echo "{\"side\":\"$side\",\"round\":$r,\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",\"writer_invol\":$(awk '/txmq-writer/{print $6}' $dir/ctx),\"broker_vol\":$(awk '/^all/{print $3}' $dir/ctx),\"r\":$(grep '^{' $dir/out | tail -1)}" >> $out
    kill $p; wait $p 2>/dev/null; rm -rf $dir
  done
done
