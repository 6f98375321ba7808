#!/usr/bin/env bash
# One txmq-bench relay run against a fresh broker, sampled by sample.py (thirteenth round).
# Usage: run-one.sh BROKER BENCH RELAY [ROWS]   env: PG (libpq conninfo), PERF=1 (perf the relay
# and its backend for 1.5 s, 0.3 s into the drain; files in $OUT)
set -euo pipefail
broker_bin=$1; bench=$2; relay=$3; rows=${4:-200000}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /var/tmp/relayx-one.XXXXXX)
port=$((20000 + RANDOM % 20000)); http=$((port + 1))
"$broker_bin" --data-dir "$dir/data" --listen 127.0.0.1:$port --http 127.0.0.1:$http > "$dir/broker.log" 2>&1 &
bpid=$!
trap 'kill $bpid 2>/dev/null; wait $bpid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 600); do curl -sf "127.0.0.1:$http/healthz" > /dev/null 2>&1 && break; sleep 0.1; done
"$bench" relay --broker 127.0.0.1:$port --broker-pid $bpid --runs 1 --json --message-bytes 256 --pg "$PG" \
  --rows "$rows" --seconds 3 --relay "$relay" > "$dir/bench.out" 2> "$dir/bench.err" &
bench_pid=$!
"$here/sample.py" $bpid $bench_pid "$PG" 5 > "$dir/sample.out" &
spid=$!
# The txmq-relay the bench started (polled for up to 10 s).
relay_child() {
  local c
  for _ in $(seq 5000); do
    for c in $(cat /proc/$bench_pid/task/$bench_pid/children 2>/dev/null); do
      [[ $(cat /proc/$c/comm 2>/dev/null) == txmq-relay* ]] && { echo "$c"; return; }
    done
    sleep 0.002
  done
}
if [[ ${PERF:-0} == 1 ]]; then
  out=${OUT:-/var/tmp/relayx-perf}; mkdir -p "$out"
  rp=$(relay_child)
  sleep 0.3
  be=$(psql "$PG" -Atc "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'txmq-relay:bench-backlog%'")
  perf record -F 999 -g --call-graph dwarf,16384 -o "$out/relay.data" -p "$rp" -- sleep 1.5 > /dev/null 2>&1 &
  p1=$!
  perf record -F 999 -g --call-graph dwarf,16384 -o "$out/backend.data" -p "$be" -- sleep 1.5 > /dev/null 2>&1 &
  p2=$!
  wait $p1 $p2 || true
fi
if [[ ${PERF_DIRECT:-0} == 1 ]]; then  # the broker during the direct run, which follows the backlog relay's exit
  out=${OUT:-/var/tmp/relayx-perf}; mkdir -p "$out"
  rp=$(relay_child)
  while [[ -d /proc/$rp ]]; do sleep 0.005; done
  sleep 0.15
  perf record -F 999 -g --call-graph dwarf,16384 -o "$out/broker-direct.data" -p $bpid -- sleep 0.8 > /dev/null 2>&1
fi
wait $bench_pid
wait $spid
python3 - "$dir/bench.out" "$dir/sample.out" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import json, sys
b = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][0]
s = json.loads(open(sys.argv[2]).read())
rows = b["rows"]
per = lambda k: round(s[k] * 1e6 / rows, 2)
out = {"relay_rows_per_s": round(b["relay_rows_per_s"]), "direct_msgs_per_s": round(b["direct_msgs_per_s"]),
       "ratio": round(b["relay_rows_per_s"] / b["direct_msgs_per_s"], 3),
       "relay_cpu_us_per_row": b["relay_cpu_us_per_row"], "broker_cpu_us_per_row": b.get("broker_cpu_us_per_row"),
       "drain_wall_s": s["wall_s"], "us_per_row": {k[:-6]: per(k) for k in s if k.endswith("_cpu_s")},
       "relay_threads_us_per_row": {k: round(v * 1e6 / rows, 2) for k, v in s["relay_threads_s"].items() if v > 0},
       "main_thread": s["main_thread_states"],
       "direct_us_per_msg": {k[:-6]: round(v * 1e6 / rows, 2) for k, v in s["direct"].items() if k.endswith("_cpu_s")},
       "direct_wall_s": s["direct"]["wall_s"],
       "broker_threads_relay": {k.split("/")[0]: round(v * 1e6 / rows, 2) for k, v in s["broker_threads_s"].items() if v > 0.01},
       "broker_threads_direct": {k.split("/")[0]: round(v * 1e6 / rows, 2) for k, v in s["direct"]["broker_threads_s"].items() if v > 0.01}, "load1": float(sys.argv[3]),
       "relay_p50_ms": round(b["relay_p50_ms"], 2), "relay_p99_ms": round(b["relay_p99_ms"], 2)}
print(json.dumps(out))
PY
