#!/usr/bin/env bash
# A three-broker txmq cluster on this machine (docs/cluster.md "Running three brokers"): one
# etcd (Debian's etcd-server) and three txmq-broker processes on loopback, data under
# ./data-cluster (DATA_DIR), each process stopped by its PID file.
#
#   scripts/cluster.sh up       start etcd and brokers 1-3 (idempotent: what runs is left alone)
#   scripts/cluster.sh down     stop them (SIGTERM, then SIGKILL after 15 s), by PID
#   scripts/cluster.sh status   which run, and `txmq cluster status` when they do
#
# Ports (override with the variables): etcd ETCD_PORT (23790; its peer port +1), broker N
# listens on 127.0.0.1:$((BROKER_PORT + N)) (7880 + N) and serves HTTP on
# 127.0.0.1:$((HTTP_PORT + N)) (8880 + N). Clients: TXMQ_BROKER=127.0.0.1:7881,127.0.0.1:7882,127.0.0.1:7883.
# Extra broker flags: BROKER_ARGS="--durability async".
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
DATA_DIR="${DATA_DIR:-$PWD/data-cluster}"
ETCD_PORT="${ETCD_PORT:-23790}"
BROKER_PORT="${BROKER_PORT:-7880}"
HTTP_PORT="${HTTP_PORT:-8880}"
NODES="${NODES:-3}"
BROKER_ARGS="${BROKER_ARGS:-}"
ETCD_BIN="${ETCD_BIN:-$(command -v etcd || echo /usr/bin/etcd)}"
BROKER_BIN="$BUILD_DIR/bin/txmq-broker"
TXMQ_BIN="$BUILD_DIR/bin/txmq"
ETCD_URL="http://127.0.0.1:$ETCD_PORT"

bootstrap_list() {
  local out="" n
  for n in $(seq 1 "$NODES"); do out+="${out:+,}127.0.0.1:$((BROKER_PORT + n))"; done
  echo "$out"
}

# Whether the process of PID file $1 runs.
alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Waits up to $2 seconds for `$1` (a command) to succeed.
wait_for() {
  local deadline=$((SECONDS + $2))
  until eval "$1" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then return 1; fi
    sleep 0.2
  done
}

up() {
  [[ -x "$ETCD_BIN" ]] || { echo "no etcd at $ETCD_BIN: run scripts/setup.sh (Debian etcd-server)" >&2; exit 1; }
  [[ -x "$BROKER_BIN" ]] || { echo "no $BROKER_BIN: build first (make build)" >&2; exit 1; }
  mkdir -p "$DATA_DIR"
  if alive "$DATA_DIR/etcd.pid"; then
    echo "etcd already runs (pid $(cat "$DATA_DIR/etcd.pid"))"
  else
    "$ETCD_BIN" --name txmq-etcd --data-dir "$DATA_DIR/etcd" \
      --listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
      --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
      --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
      --initial-cluster "txmq-etcd=http://127.0.0.1:$((ETCD_PORT + 1))" \
      >"$DATA_DIR/etcd.log" 2>&1 &
    echo $! >"$DATA_DIR/etcd.pid"
    if ! wait_for "curl -sf $ETCD_URL/health" 20; then
      echo "etcd did not become healthy in 20 s; see $DATA_DIR/etcd.log" >&2
      exit 1
    fi
    echo "etcd up on $ETCD_URL (pid $(cat "$DATA_DIR/etcd.pid"))"
  fi
  local n
  for n in $(seq 1 "$NODES"); do
    local pidf="$DATA_DIR/broker-$n.pid"
    if alive "$pidf"; then
      echo "broker $n already runs (pid $(cat "$pidf"))"
      continue
    fi
    # shellcheck disable=SC2086 # BROKER_ARGS is a list of flags
    "$BROKER_BIN" --cluster-etcd "$ETCD_URL" --node-id "$n" \
      --listen "127.0.0.1:$((BROKER_PORT + n))" --http "127.0.0.1:$((HTTP_PORT + n))" \
      --data-dir "$DATA_DIR/node-$n" $BROKER_ARGS >"$DATA_DIR/broker-$n.log" 2>&1 &
    echo $! >"$pidf"
  done
  for n in $(seq 1 "$NODES"); do
    if ! wait_for "curl -sf http://127.0.0.1:$((HTTP_PORT + n))/healthz" 30; then
      echo "broker $n did not answer /healthz in 30 s; see $DATA_DIR/broker-$n.log" >&2
      exit 1
    fi
    echo "broker $n up on 127.0.0.1:$((BROKER_PORT + n)) (pid $(cat "$DATA_DIR/broker-$n.pid"), HTTP 127.0.0.1:$((HTTP_PORT + n)))"
  done
  echo "export TXMQ_BROKER=$(bootstrap_list)"
}

# SIGTERM the process of PID file $1 ($2 names it), SIGKILL after 15 s; removes the file.
stop_one() {
  local pidf="$1" what="$2" pid
  [[ -f "$pidf" ]] || return 0
  pid="$(cat "$pidf")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    if ! wait_for "! kill -0 $pid" 15; then
      echo "$what (pid $pid) still runs 15 s after SIGTERM: SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    echo "$what stopped (pid $pid)"
  fi
  rm -f "$pidf"
}

down() {
  local n
  # Brokers first (a clean stop revokes their leases), etcd last.
  for n in $(seq 1 "$NODES"); do stop_one "$DATA_DIR/broker-$n.pid" "broker $n"; done
  stop_one "$DATA_DIR/etcd.pid" "etcd"
}

status() {
  local running=0 n
  if alive "$DATA_DIR/etcd.pid"; then echo "etcd: runs (pid $(cat "$DATA_DIR/etcd.pid"))"; else echo "etcd: stopped"; fi
  for n in $(seq 1 "$NODES"); do
    if alive "$DATA_DIR/broker-$n.pid"; then
      echo "broker $n: runs (pid $(cat "$DATA_DIR/broker-$n.pid"), 127.0.0.1:$((BROKER_PORT + n)))"
      running=1
    else
      echo "broker $n: stopped"
    fi
  done
  if ((running)) && [[ -x "$TXMQ_BIN" ]]; then
    TXMQ_BROKER="$(bootstrap_list)" "$TXMQ_BIN" cluster status
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
