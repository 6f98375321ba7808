#!/usr/bin/env bash
# notify-ab.sh OUT ROUNDS: A = trigger with pg_notify, relay poll 1s; B = trigger without, relay --poll-interval $POLL.
set -u
out=$1; rounds=$2
PG="host=127.0.0.1 port=25432 user=postgres dbname=postgres"
B=${BIN:-/work/ab/s24}  # the build of main (schema 3) these runs used
dir=$(mktemp -d /var/tmp/rd.XXXX)
$B/txmq-broker --data-dir $dir/data --listen 127.0.0.1:24601 --http 127.0.0.1:24602 > $dir/log 2>&1 & p=$!
for _ in $(seq 100); do curl -sf 127.0.0.1:24602/healthz >/dev/null 2>&1 && break; sleep 0.1; done
pgcpu() { local t=0; for f in /proc/[0-9]*/stat; do read -r line < $f 2>/dev/null || continue; case "$line" in *"(postgres)"*) set -- ${line#*) }; t=$((t + ${12} + ${13}));; esac; done; echo $t; }
fn() { psql -q "$PG" -c "CREATE OR REPLACE FUNCTION txmq_outbox_route() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN NEW.shard := ((hashtext(coalesce(NEW.key, NEW.id::text))::bigint % 16) + 16) % 16; $1 RETURN NEW; END \$\$;"; }
for r in $(seq $rounds); do
  for side in A B; do
    if [ $side = A ]; then fn "PERFORM pg_notify('txmq_outbox', NEW.shard::text);"; extra=""; else fn ""; extra="--poll-interval ${POLL:-5ms}"; fi
    c0=$(pgcpu); t0=$(date +%s.%N)
    res=$(RELAY_EXTRA="$extra" $B/txmq-bench relay --relay "$(dirname "$0")/relay-wrap.sh" --broker 127.0.0.1:24601 --pg "$PG" --runs 1 --seconds 5 --rows ${ROWS:-2000} --json 2>>$out.err)
    c1=$(pgcpu); t1=$(date +%s.%N)
    echo "{\"side\":\"$side\",\"round\":$r,\"pg_cpu_pct\":$(echo "($c1-$c0)/($t1-$t0)" | bc -l),\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",\"res\":$res}" >> $out.jsonl
  done
done
fn "PERFORM pg_notify('txmq_outbox', NEW.shard::text);"
kill $p; wait $p; rm -rf $dir
