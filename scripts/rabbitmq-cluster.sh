#!/usr/bin/env bash
# A 3-node RabbitMQ 3.10 cluster on loopback, for the cluster figures of docs/BENCHMARKS.md
# ("Cluster"): nodes rabbit1@localhost .. rabbit3@localhost, each with its own AMQP port,
# distribution port and data directory, one private epmd, one Erlang cookie; nodes 2 and 3
# join node 1. A quorum queue declared on it gets a member on each node (3 replicas, a majority
# of 2 confirms a publish). Run as root (as shared/notes/peers.md: the real server script,
# not the /usr/sbin wrapper). Everything is stopped by PID.
#
#   scripts/rabbitmq-cluster.sh up      start and join the three nodes; prints the AMQP addresses
#   scripts/rabbitmq-cluster.sh down    rabbitmqctl shutdown each node, then SIGKILL what is left, by PID
#   scripts/rabbitmq-cluster.sh status  cluster_status of node 1
#
# DIR (default /var/tmp/txmq-rabbitmq-cluster) holds the data, logs and PID files. AMQP ports:
# AMQP_PORT + N (default 5670 + N: 5671, 5672, 5673); distribution ports DIST_PORT + N (25670 + N);
# epmd on EPMD_PORT (4370).
set -euo pipefail

DIR="${DIR:-/var/tmp/txmq-rabbitmq-cluster}"
AMQP_PORT="${AMQP_PORT:-5670}"
DIST_PORT="${DIST_PORT:-25670}"
EPMD_PORT="${EPMD_PORT:-4370}"
RABBIT_BIN=/usr/lib/rabbitmq/bin
ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"

say() { echo "rabbitmq-cluster: $*" >&2; }

# The environment of node N (every node shares HOME, hence the Erlang cookie, and epmd).
node_env() {
  local n=$1 d="$DIR/node-$1"
  echo HOME="$DIR/home" RABBITMQ_NODENAME="rabbit$n@localhost" RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" \
    RABBITMQ_MNESIA_BASE="$d/mnesia" RABBITMQ_LOG_BASE="$d/log" RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" \
    RABBITMQ_DIST_PORT="$((DIST_PORT + n))" ERL_EPMD_ADDRESS=127.0.0.1 ERL_EPMD_PORT="$EPMD_PORT"
}

ctl() {  # ctl N ARGS...: rabbitmqctl against node N
  local n=$1; shift
  # shellcheck disable=SC2046 # node_env prints VAR=VALUE words without spaces
  env $(node_env "$n") "RABBITMQ_CTL_ERL_ARGS=$ERL_ARGS" "$RABBIT_BIN/rabbitmqctl" -n "rabbit$n@localhost" "$@"
}

up() {
  [[ $(id -u) -eq 0 ]] || { say "run as root"; exit 1; }
  [[ -x $RABBIT_BIN/rabbitmq-server ]] || { say "no RabbitMQ: apt-get install rabbitmq-server"; exit 1; }
  mkdir -p "$DIR/home"
  if [[ ! -f $DIR/home/.erlang.cookie ]]; then
    head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$DIR/home/.erlang.cookie"
    chmod 400 "$DIR/home/.erlang.cookie"
  fi
  if [[ -f $DIR/epmd.pid ]] && kill -0 "$(cat "$DIR/epmd.pid")" 2>/dev/null; then
    say "epmd already runs"
  else
    env ERL_EPMD_ADDRESS=127.0.0.1 epmd -port "$EPMD_PORT" > "$DIR/epmd.log" 2>&1 &
    echo $! > "$DIR/epmd.pid"
  fi
  local n
  for n in 1 2 3; do
    local d="$DIR/node-$n"
    if [[ -f $d/server.pid ]] && kill -0 "$(cat "$d/server.pid")" 2>/dev/null; then
      say "node $n already runs"
      continue
    fi
    mkdir -p "$d/mnesia" "$d/log"
    echo '[].' > "$d/enabled_plugins"
    printf 'listeners.tcp.default = 127.0.0.1:%s\nloopback_users.guest = true\n' "$((AMQP_PORT + n))" > "$d/rabbitmq.conf"
    # shellcheck disable=SC2046
    env $(node_env "$n") "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=$ERL_ARGS" "$RABBIT_BIN/rabbitmq-server" \
      > "$d/stdout.log" 2>&1 &
    echo $! > "$d/server.pid"
  done
  for n in 1 2 3; do
    # await_startup fails at once while the node's VM is not reachable yet: retry it.
    local deadline=$((SECONDS + 120))
    until ctl "$n" await_startup > /dev/null 2>&1; do
      if ((SECONDS >= deadline)); then
        say "node $n did not start in 120 s; see $DIR/node-$n/stdout.log"
        exit 1
      fi
      sleep 1
    done
    # The server script runs the Erlang VM as its child: keep its PID to stop it should the
    # shutdown fail.
    pgrep -P "$(cat "$DIR/node-$n/server.pid")" > "$DIR/node-$n/vm.pid" || true
  done
  for n in 2 3; do
    if ctl "$n" cluster_status 2>/dev/null | grep -q "rabbit1@localhost"; then continue; fi
    ctl "$n" stop_app > /dev/null
    ctl "$n" join_cluster rabbit1@localhost > /dev/null
    ctl "$n" start_app > /dev/null
  done
  ctl 1 cluster_status | sed -n '/Running Nodes/,/Versions/p' | grep -v '^$' >&2 || true
  echo "127.0.0.1:$((AMQP_PORT + 1)),127.0.0.1:$((AMQP_PORT + 2)),127.0.0.1:$((AMQP_PORT + 3))"
}

down() {
  local n p
  for n in 3 2 1; do
    [[ -f $DIR/node-$n/server.pid ]] || continue
    ctl "$n" shutdown > /dev/null 2>&1 || true
    for p in $(cat "$DIR/node-$n/server.pid" "$DIR/node-$n/vm.pid" 2>/dev/null); do
      for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
      kill -9 "$p" 2>/dev/null || true
    done
    rm -f "$DIR/node-$n/server.pid" "$DIR/node-$n/vm.pid"
    say "node $n stopped"
  done
  if [[ -f $DIR/epmd.pid ]]; then
    kill "$(cat "$DIR/epmd.pid")" 2>/dev/null || true
    rm -f "$DIR/epmd.pid"
    say "epmd stopped"
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) ctl 1 cluster_status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
