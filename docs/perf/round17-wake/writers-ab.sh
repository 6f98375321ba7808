#!/usr/bin/env bash
# writers-ab.sh OUT ROUNDS CLIENTS...: pgbench writers (one outbox row per transaction) while a
# relay publishes: A = main's relay on database a (schema 3), B = this branch's on b (schema 4).
set -u
out=$1; rounds=$2; shift 2
PG0=${PG0:-"host=127.0.0.1 port=25432 user=postgres"}
PGB=/usr/lib/postgresql/15/bin/pgbench
dir=$(mktemp -d /var/tmp/wab.XXXX)
${BROKER:-/work/ab/wake2/txmq-broker} --data-dir $dir/data --listen 127.0.0.1:24621 --http 127.0.0.1:24622 > $dir/log 2>&1 & p=$!
for _ in $(seq 100); do curl -sf 127.0.0.1:24622/healthz >/dev/null 2>&1 && break; sleep 0.1; done
${TXMQ:-/work/ab/wake2/txmq} topic create t --partitions 4 --broker 127.0.0.1:24621 >/dev/null 2>&1 || true
cat > $dir/ins.sql <<'SQL'
INSERT INTO txmq_outbox (topic, key, payload) VALUES ('t', 'k' || (random()*1000)::int, '\xabababab');
SQL
for r in $(seq $rounds); do for c in "$@"; do
  for side in $( ((r % 2)) && echo A B || echo B A); do
    if [ $side = A ]; then db=a; rb=${RELAY_A:-/work/ab/s24/txmq-relay}; else db=b; rb=${RELAY_B:-/work/ab/wake2/txmq-relay}; fi
    psql -q "$PG0 dbname=$db" -c "TRUNCATE txmq_outbox"
    $rb --pg "$PG0 dbname=$db" --broker 127.0.0.1:24621 --relay-id ab-$side --http 127.0.0.1:0 2> $dir/relay.log & rp=$!
    for _ in $(seq 200); do [ "$(psql -Atq "$PG0 dbname=$db" -c "select count(*) from pg_locks where locktype='advisory' and classid=1954049393")" = 16 ] && break; sleep 0.05; done
    res=$($PGB -n -f $dir/ins.sql -c $c -j 2 -T ${SECS:-8} -h 127.0.0.1 -p 25432 -U postgres $db 2>/dev/null)
    tps=$(echo "$res" | awk '/^tps/ {print $3}'); lat=$(echo "$res" | awk '/latency average/ {print $4}')
    for _ in $(seq 600); do [ "$(psql -Atq "$PG0 dbname=$db" -c "select count(*) from txmq_outbox")" = 0 ] && break; sleep 0.05; done
    left=$(psql -Atq "$PG0 dbname=$db" -c "select count(*) from txmq_outbox")
    kill $rp; wait $rp
    echo "{\"ab\":\"$side\",\"round\":$r,\"clients\":$c,\"tps\":$tps,\"latency_ms\":$lat,\"left\":$left,\"load1\":$(cut -d' ' -f1 /proc/loadavg)}" | tee -a $out
  done
done; done
kill $p; wait $p; rm -rf $dir
