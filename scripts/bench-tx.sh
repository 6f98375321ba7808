#!/usr/bin/env bash
# Transactional-message figures of docs/BENCHMARKS.md "Transactions" (issue #4), on this
# machine, in one run: txmq-bench tx --mode noop (Prepare + EndTx, 1,000 in flight), --mode pg
# (a PostgreSQL local transaction with the barrier row per tx, beside pgbench running the same
# inserts, alternating), --mode recovery (10,000 orphans settled by a returning producer).
# Starts its own broker and PostgreSQL cluster on loopback ports with data in one temporary
# directory and stops both by PID when it ends.
#
# Usage: scripts/bench-tx.sh [RUNS] [SECONDS]   (defaults 3 runs of 5 s)
# Environment: BUILD_DIR (default build), THREADS (pg mode, default 32), ORPHANS (10000).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
seconds=${2:-5}
bin=${BUILD_DIR:-build}/bin
threads=${THREADS:-32}
orphans=${ORPHANS:-10000}
pg_bin=/usr/lib/postgresql/15/bin
[[ -x $bin/txmq-bench && -x $bin/txmq-broker ]] || { echo "bench-tx: no $bin/txmq-bench: run make build" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "bench-tx: run as root (PostgreSQL runs as the postgres user through runuser)" >&2; exit 1; }

dir=$(mktemp -d /var/tmp/txmq-bench-tx.XXXXXX)
chmod 755 "$dir"
broker_pid=""
cleanup() {
  set +e
  [[ -n $broker_pid ]] && kill "$broker_pid" && wait "$broker_pid" 2>/dev/null
  [[ -d $dir/pg ]] && runuser -u postgres -- "$pg_bin/pg_ctl" -D "$dir/pg" -m fast -w stop >/dev/null 2>&1
  rm -rf "$dir"
}
trap cleanup EXIT
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}

port=$(free_port)
"$bin/txmq-broker" --data-dir "$dir/data" --listen "127.0.0.1:$port" --http "127.0.0.1:$(free_port)" \
  > "$dir/broker.log" 2>&1 &
broker_pid=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done

pg_port=$(free_port)
mkdir "$dir/pg" "$dir/sock" && chown postgres "$dir/pg" "$dir/sock"
runuser -u postgres -- "$pg_bin/initdb" -D "$dir/pg" -U postgres -A trust --no-locale -E UTF8 > /dev/null
runuser -u postgres -- "$pg_bin/pg_ctl" -D "$dir/pg" -l "$dir/sock/pg.log" -w \
  -o "-p $pg_port -k $dir/sock -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on -c max_connections=300" \
  start > /dev/null
conn="host=127.0.0.1 port=$pg_port user=postgres dbname=postgres"

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin/txmq-bench" tx --mode noop --broker "127.0.0.1:$port" --in-flight 1000 --runs "$runs" --seconds "$seconds" --broker-pid "$broker_pid"
"$bin/txmq-bench" tx --mode noop --broker "127.0.0.1:$port" --in-flight 1 --connections 1 --runs "$runs" --seconds "$seconds"
"$bin/txmq-bench" tx --mode pg --broker "127.0.0.1:$port" --pg "$conn" --threads "$threads" --runs "$runs" --seconds "$seconds"
"$bin/txmq-bench" tx --mode recovery --broker "127.0.0.1:$port" --orphans "$orphans" --runs "$runs"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
