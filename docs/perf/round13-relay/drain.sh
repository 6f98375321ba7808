#!/usr/bin/env bash
# A backlog drained by one txmq-relay alone (no direct or latency runs beside it), for per-statement
# and per-process figures (thirteenth round). Usage: drain.sh BROKER RELAY [ROWS]
# env: PG (libpq conninfo, pg_stat_statements loaded), PERF=1 (perf the relay and its backend for
# PERF_SECS, default 2, 0.3 s in; files in $OUT), STATEMENTS=1 (print pg_stat_statements).
# Prints one JSON line: rows/s (relay start to its last row deleted, from its /metrics), CPU µs per
# row of the relay, its backend, PostgreSQL as a whole, the broker; the main thread's states.
set -euo pipefail
broker_bin=$1; relay=$2; rows=${3:-200000}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /var/tmp/relayx-drain.XXXXXX)
bpid=""
rpid=""
trap '[[ -n $rpid ]] && kill $rpid 2>/dev/null; [[ -n $bpid ]] && kill $bpid 2>/dev/null; wait 2>/dev/null; [[ -n ${KEEP_LOG:-} ]] && cp "$dir/relay.log" "$KEEP_LOG"; rm -rf "$dir"' EXIT
# Random ports, so a taken one is tried again with others: until 2026-11-28 a broker that could not
# bind left this script to stop silently later, in the loop that reads the relay's metrics.
for attempt in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 10000)); http=$((port + 1)); rhttp=$((port + 2))
  "$broker_bin" --data-dir "$dir/data" --listen 127.0.0.1:$port --http 127.0.0.1:$http > "$dir/broker.log" 2>&1 &
  bpid=$!
  for _ in $(seq 600); do
    curl -sf "127.0.0.1:$http/healthz" > /dev/null 2>&1 && break
    kill -0 $bpid 2>/dev/null || break
    sleep 0.1
  done
  curl -sf "127.0.0.1:$http/healthz" > /dev/null 2>&1 && break
  kill $bpid 2>/dev/null; wait $bpid 2>/dev/null || true; bpid=""
  echo "drain.sh: the broker did not come up on ports $port/$http (attempt $attempt): $(tail -n 1 "$dir/broker.log")" >&2
  rm -rf "$dir/data"
done
[[ -n $bpid ]] || { echo "drain.sh: no broker; giving up" >&2; exit 1; }
topic=drain-$$
psql "$PG" -qAt > /dev/null <<SQL
TRUNCATE txmq_outbox;
INSERT INTO txmq_outbox (id, topic, key, payload) SELECT (lpad(to_hex($(date +%s%3N)::bigint + i / 1000), 12, '0')
  || '7000' || '8' || lpad(to_hex(i), 15, '0'))::uuid, '$topic', 'k' || (i % 1000), decode(repeat('ab', 256), 'hex')
  FROM generate_series(0, $rows - 1) i;
VACUUM ANALYZE txmq_outbox;
SELECT pg_stat_statements_reset();
SQL
pg_cpu() {  # CPU seconds of every postgres process now
  local hz; hz=$(getconf CLK_TCK)
  for p in $(pgrep -x postgres); do awk -v hz="$hz" '{ print ($14 + $15) / hz }' /proc/$p/stat 2>/dev/null; done | awk '{ s += $1 } END { print s + 0 }'
}
threads() {  # "name cpu_s" per thread of $1
  local hz; hz=$(getconf CLK_TCK)
  for t in /proc/$1/task/*; do sed -E 's/^[0-9]+ \(([^)]*)\) /\1 /' $t/stat 2>/dev/null | awk -v hz="$hz" '{ print $1, ($13 + $14) / hz }'; done
}
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' /proc/$1/stat; }
threads $bpid > "$dir/bthreads0"
pg0=$(pg_cpu); b0=$(cpu $bpid); idle0=$(awk '/^cpu /{ print ($5 + $6) / 100 }' /proc/stat)
t0=$(date +%s.%N)
"$relay" --pg "$PG" --broker 127.0.0.1:$port --relay-id drain-$$ --http 127.0.0.1:$rhttp ${RELAY_ARGS:-} > "$dir/relay.log" 2>&1 &
rpid=$!
states="$dir/states"
bg=()
( while kill -0 $rpid 2>/dev/null; do
    s=$(awk '{ print $3 }' /proc/$rpid/task/$rpid/stat 2>/dev/null || true)
    if [[ $s == R ]]; then echo running; else awk '{ print $1 }' /proc/$rpid/task/$rpid/syscall 2>/dev/null || true; fi
    sleep 0.005
  done > "$states" ) &
bg+=($!)
if [[ ${PERF:-0} == 1 ]]; then
  ( sleep 0.3
    be=$(psql "$PG" -Atc "SELECT pid FROM pg_stat_activity WHERE application_name = 'txmq-relay:drain-$$'")
    out=${OUT:-/var/tmp/relayx-perf}; mkdir -p "$out"
    perf record -F 999 -g --call-graph dwarf,16384 -o "$out/relay.data" -p $rpid -- sleep "${PERF_SECS:-2}" > /dev/null 2>&1 &
    perf record -F 999 -g --call-graph dwarf,16384 -o "$out/backend.data" -p "$be" -- sleep "${PERF_SECS:-2}" > /dev/null 2>&1 &
    [[ ${PERF_BROKER:-0} == 1 ]] && perf record -F 999 -g --call-graph dwarf,16384 -o "$out/broker.data" -p $bpid -- sleep "${PERF_SECS:-2}" > /dev/null 2>&1 &
    wait ) &
  bg+=($!)
fi
be=""
published=0
while (( published < rows )); do
  sleep 0.02
  [[ -z $be ]] && be=$(psql "$PG" -Atc "SELECT pid FROM pg_stat_activity WHERE application_name = 'txmq-relay:drain-$$'")
  kill -0 $rpid 2>/dev/null || { echo "drain.sh: the relay exited: $(tail -n 3 "$dir/relay.log")" >&2; exit 1; }
  published=$(curl -sf "127.0.0.1:$rhttp/metrics" | awk '/^txmq_relay_rows_published_total/ { print int($2) }' || true)
  published=${published:-0}
done
t1=$(date +%s.%N)
threads $bpid > "$dir/bthreads1"
rc=$(cpu $rpid); bec=$(cpu "$be"); bc=$(cpu $bpid); pg1=$(pg_cpu); idle1=$(awk '/^cpu /{ print ($5 + $6) / 100 }' /proc/stat)
kill $rpid; wait $rpid 2>/dev/null || true; rpid=""
wait "${bg[@]}"
python3 - "$rows" "$t0" "$t1" "$rc" "$bec" "$pg0" "$pg1" "$b0" "$bc" "$idle0" "$idle1" "$states" "$(cut -d' ' -f1 /proc/loadavg)" "$dir/bthreads0" "$dir/bthreads1" <<'PY'
import json, sys, collections
rows = int(sys.argv[1]); t0, t1 = float(sys.argv[2]), float(sys.argv[3])
rc, bec, pg0, pg1, b0, bc, i0, i1 = map(float, sys.argv[4:12])
names = {"7": "poll", "271": "ppoll", "202": "futex", "running": "running"}
st = collections.Counter(names.get(l.strip(), "other") for l in open(sys.argv[12]) if l.strip())
n = sum(st.values()) or 1
us = lambda s: round(s * 1e6 / rows, 2)
def load(f):
    out = collections.Counter()
    for l in open(f):
        name, v = l.rsplit(" ", 1)
        out[name] += float(v)
    return out
b0t, b1t = load(sys.argv[14]), load(sys.argv[15])
bt = {k: us(v - b0t.get(k, 0)) for k, v in b1t.items() if v - b0t.get(k, 0) > 0.01}
print(json.dumps({"rows_per_s": round(rows / (t1 - t0)), "wall_s": round(t1 - t0, 3),
                  "us_per_row": {"relay": us(rc), "backend": us(bec), "postgres": us(pg1 - pg0), "broker": us(bc - b0),
                                 "idle": us(i1 - i0)},
                  "broker_threads": bt,
                  "main_thread": {k: round(v / n, 3) for k, v in st.most_common()}, "load1": float(sys.argv[13])}))
PY
if [[ ${STATEMENTS:-0} == 1 ]]; then
  psql "$PG" -c "SELECT calls, rows, round(total_exec_time::numeric, 1) AS total_ms, round(mean_exec_time::numeric, 2) AS mean_ms,
    shared_blks_hit AS hit, left(regexp_replace(query, '\s+', ' ', 'g'), 70) AS query FROM pg_stat_statements
    WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC LIMIT 8"
fi
