#!/usr/bin/env bash
# relay-diag.sh OUT ROWS... : one broker; for each ROWS a bench relay run (1 run, 5 s), sampler alongside.
set -u
out=$1; shift
B=${BIN:-/work/ab/s24}
dir=$(mktemp -d /var/tmp/rd.XXXX)
$B/txmq-broker --data-dir $dir/data --listen 127.0.0.1:24601 --http 127.0.0.1:24602 > $dir/log 2>&1 & p=$!
for _ in $(seq 100); do curl -sf 127.0.0.1:24602/healthz >/dev/null 2>&1 && break; sleep 0.1; done
python3 $(dirname "$0")/sampler.py 127.0.0.1:24602 $out.samples $dir/stop & s=$!

for rows in "$@"; do
  echo "start rows=$rows $(date +%s.%N)" >> $out.phases
  $B/txmq-bench relay --broker 127.0.0.1:24601 --broker-pid $p --pg "host=127.0.0.1 port=25432 user=postgres dbname=${DB:-postgres}" --runs 1 --seconds 5 --rows $rows --rate ${RATE:-2000} --json >> $out.jsonl 2>>$out.err
  echo "end rows=$rows $(date +%s.%N)" >> $out.phases
done
touch $dir/stop; wait $s
kill $p; wait $p; rm -rf $dir
