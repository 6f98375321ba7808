#!/usr/bin/env bash
# scripts/cluster.sh (docs/cluster.md "Running three brokers"): `up` starts etcd and three
# brokers on free loopback ports with their data and PID files under DATA_DIR, and they form a
# cluster (three nodes in `txmq cluster status --json`); a second `up` starts nothing new;
# `down` stops every process by its PID file and removes the files. Label `cluster`.
# Usage: cluster_script_test.sh BUILD_DIR. Exit 77 (skipped) without /usr/bin/etcd.
set -euo pipefail
build=$1
root="$(cd "$(dirname "$0")/.." && pwd)"
command -v etcd > /dev/null || { echo "no etcd (scripts/setup.sh installs etcd-server): skipped"; exit 77; }
data=$(mktemp -d /tmp/txmq-cluster-script.XXXXXX)

# A random base in [FROM, FROM + 3,000) with BASE..BASE+3 free (etcd listens on BASE and BASE+1,
# broker N on BASE+N), below the ephemeral range. The three bases come from disjoint windows so
# that they cannot overlap each other.
free_base() {
  local base p ok
  while :; do
    base=$(($1 + RANDOM % 3000))
    ok=1
    for p in $base $((base + 1)) $((base + 2)) $((base + 3)); do
      [[ -z $(ss -Htan "( sport = :$p )" 2>/dev/null) ]] || ok=0
    done
    ((ok)) && { echo "$base"; return; }
  done
}
# Claims BASE..BASE+3 against other test processes until this script ends: the flock files
# of the C++ and Python tests' free_port (tests/support/broker_process.cc), so none of them
# starts a server on a port picked here before cluster.sh binds it. Fails if one is claimed.
claims=${TMPDIR:-/tmp}/txmq-test-ports
mkdir -p "$claims"
claim_base() {
  local p fd
  for p in $1 $(($1 + 1)) $(($1 + 2)) $(($1 + 3)); do
    exec {fd}>"$claims/$p"
    flock -n "$fd" || return 1
  done
}
# In this shell, not in $(...), for the claims to last: sets picked.
pick_base() {
  while :; do
    picked=$(free_base "$1")
    claim_base "$picked" && return
  done
}
pick_base 20000; BROKER_PORT=$picked
pick_base 23010; HTTP_PORT=$picked
pick_base 26020; ETCD_PORT=$picked
export BUILD_DIR=$build DATA_DIR=$data BROKER_PORT HTTP_PORT ETCD_PORT
cleanup() {
  local f
  for f in "$data"/*.pid; do [[ -f $f ]] && kill -9 "$(cat "$f")" 2>/dev/null; done
  rm -rf "$data"
}
trap cleanup EXIT
fail() { echo "FAILED: $*" >&2; tail -n 5 "$data"/*.log >&2 || true; exit 1; }

bash "$root/scripts/cluster.sh" up > "$data/up.out" || fail "cluster.sh up exited $?"
pids=()
for f in etcd broker-1 broker-2 broker-3; do
  [[ -f $data/$f.pid ]] || fail "no $f.pid"
  kill -0 "$(cat "$data/$f.pid")" || fail "$f is not running"
  pids+=("$(cat "$data/$f.pid")")
done
list="127.0.0.1:$((BROKER_PORT + 1)),127.0.0.1:$((BROKER_PORT + 2)),127.0.0.1:$((BROKER_PORT + 3))"
grep -q "export TXMQ_BROKER=$list" "$data/up.out" || fail "up did not print the bootstrap list: $(cat "$data/up.out")"
# The nodes register on their leases within a moment; wait for all three (up to 20 s).
for _ in $(seq 100); do
  nodes=$(TXMQ_BROKER=$list "$build/bin/txmq" --json cluster status |
    python3 -c 'import json,sys; print(len(json.loads(sys.stdin.read())["nodes"]))' 2>/dev/null || echo 0)
  [[ $nodes == 3 ]] && break
  sleep 0.2
done
[[ $nodes == 3 ]] || fail "cluster status lists $nodes nodes, not 3"

bash "$root/scripts/cluster.sh" up > "$data/up2.out" || fail "a second up exited $?"
for f in etcd broker-1 broker-2 broker-3; do
  grep -qx "${pids[0]}\|${pids[1]}\|${pids[2]}\|${pids[3]}" "$data/$f.pid" || fail "a second up replaced $f"
done
bash "$root/scripts/cluster.sh" status > "$data/status.out" || fail "cluster.sh status exited $?"
grep -q "broker 3: runs" "$data/status.out" || fail "status does not say broker 3 runs: $(cat "$data/status.out")"

bash "$root/scripts/cluster.sh" down > /dev/null || fail "cluster.sh down exited $?"
for p in "${pids[@]}"; do
  kill -0 "$p" 2>/dev/null && fail "process $p still runs after down"
done
ls "$data"/*.pid > /dev/null 2>&1 && fail "PID files left after down: $(ls "$data"/*.pid)"
echo "cluster.sh up/status/down: OK"
