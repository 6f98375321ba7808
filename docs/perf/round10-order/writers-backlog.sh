#!/usr/bin/env bash
# A backlog drained while writers commit: ROWS rows committed first, then a relay (RELAY) started
# while pgbench runs single-row outbox transactions at RATE/s on 4 connections. Prints the time
# from the relay's start until every backlog row is gone, and the relay's own read counters.
set -euo pipefail
RELAY=$1; ROWS=${ROWS:-300000}; RATE=${RATE:-2000}
PGC="host=127.0.0.1 port=55473 user=postgres dbname=bench"
d=$(mktemp -d /var/tmp/order-wb.XXXXXX)
port=$((30000 + RANDOM % 10000)); http=$((port + 1))
/work/main/build/bin/txmq-broker --data-dir $d/data --listen 127.0.0.1:$port --http 127.0.0.1:$http > $d/broker.log 2>&1 &
bpid=$!
trap 'kill $bpid 2>/dev/null; [[ -n ${rpid:-} ]] && kill $rpid 2>/dev/null; [[ -n ${wpid:-} ]] && kill $wpid 2>/dev/null; rm -rf $d' EXIT
for _ in $(seq 300); do curl -sf 127.0.0.1:$http/healthz > /dev/null 2>&1 && break; sleep 0.1; done
/work/wt-order/build/bin/txmq --broker 127.0.0.1:$port topic create wb --partitions 4 > /dev/null
psql "$PGC" -qc "TRUNCATE txmq_outbox"
psql "$PGC" -qc "INSERT INTO txmq_outbox (topic, key, payload) SELECT 'wb', 'k' || (i % 1000), convert_to(repeat('x', 256), 'UTF8') FROM generate_series(1, $ROWS) i"
psql "$PGC" -qc "VACUUM ANALYZE txmq_outbox"
top=$(psql "$PGC" -Atc "SELECT max(seq) FROM txmq_outbox")
echo "INSERT INTO txmq_outbox (topic, key, payload) VALUES ('wb', 'w' || (random() * 1000)::int, convert_to(repeat('y', 256), 'UTF8'));" > $d/w.sql
/usr/lib/postgresql/15/bin/pgbench -n -f $d/w.sql -c 4 -j 2 -R $RATE -T 60 "$PGC" > $d/pgbench.log 2>&1 &
wpid=$!
sleep 1  # writers running before the relay starts
t0=$(date +%s.%N)
"$RELAY" --pg "$PGC" --broker 127.0.0.1:$port --relay-id wb --http 127.0.0.1:0 > $d/relay.log 2>&1 &
rpid=$!
while [[ $(psql "$PGC" -Atc "SELECT count(*) FROM txmq_outbox WHERE seq <= $top") != 0 ]]; do sleep 0.1; done  # poll pace
t1=$(date +%s.%N)
kill $wpid; wait $wpid 2>/dev/null || true; wpid=""
kill $rpid; wait $rpid 2>/dev/null || true; rpid=""
echo "{\"relay\":\"$RELAY\",\"rows\":$ROWS,\"rate\":$RATE,\"backlog_s\":$(echo "$t1 - $t0" | bc),\"rows_per_s\":$(echo "$ROWS / ($t1 - $t0)" | bc),\"load1\":$(cut -d' ' -f1 /proc/loadavg),\"reads\":\"$(grep -o 'reads by start: .*' $d/relay.log | sed 's/reads by start: //')\"}"
