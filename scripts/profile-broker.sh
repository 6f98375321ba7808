#!/usr/bin/env bash
# Profiles txmq-broker under the hot-path workloads of issue #15 with `perf record` (Debian
# linux-perf) and writes, per workload, the top frames (self and with children) and a flame
# graph SVG to docs/perf/ (scripts/flamegraph.py; no FlameGraph package in Debian).
# Each workload gets a fresh broker on loopback with its data in a temporary directory; perf
# samples the broker only, for PROFILE_SECONDS while the workload runs (the consume workload:
# after its backlog is stored, so only fetch + ack is sampled).
# Usage: scripts/profile-broker.sh [WORKLOAD...]   (default: publish100 publish1 tx consume)
# Environment: BUILD_DIR (default build), OUT (default docs/perf), PROFILE_SECONDS (default 6),
#              CALL_GRAPH (default dwarf,16384; "fp" for frame pointers), FREQ (default 999).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BUILD_DIR:-build}/bin
out=${OUT:-docs/perf}
secs=${PROFILE_SECONDS:-6}
cg=${CALL_GRAPH:-dwarf,16384}
freq=${FREQ:-999}
workloads=("$@")
[[ ${#workloads[@]} -gt 0 ]] || workloads=(publish100 publish1 tx consume)
mkdir -p "$out"
dir=$(mktemp -d /var/tmp/txmq-profile.XXXXXX)
pid=""
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
port=$((20000 + RANDOM % 20000))
http=$((port + 1))

start_broker() {
  rm -rf "$dir/data"
  "$bin/txmq-broker" --data-dir "$dir/data" --listen 127.0.0.1:$port --http 127.0.0.1:$http > "$dir/broker.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do curl -sf "127.0.0.1:$http/healthz" > /dev/null 2>&1 && return; sleep 0.1; done
  echo "broker did not start" >&2; exit 1
}
stop_broker() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }
# perf report's lines without comments, blank lines and the padding of its columns.
tidy() { grep -v '^#' | grep -v '^$' | sed -e 's/[ -]*$//' -e 's/^\(.\{220\}\).*/\1/'; }
counter() { curl -sf "127.0.0.1:$http/metrics" | awk -v n="$1" '$1 == n { print int($2) }'; }

for w in "${workloads[@]}"; do
  start_broker
  common=(--broker 127.0.0.1:$port --broker-pid "$pid" --runs 1 --message-bytes 256)
  case $w in
    publish100) cmd=(publish "${common[@]}" --in-flight 1000 --batch 100 --seconds $((secs + 2)) --warmup 1 --topic prof) ;;
    publish1) cmd=(publish "${common[@]}" --in-flight 1000 --batch 1 --seconds $((secs + 2)) --warmup 1 --topic prof) ;;
    tx) cmd=(tx "${common[@]}" --in-flight 1000 --seconds $((secs + 2)) --warmup 1) ;;
    consume) cmd=(consume "${common[@]}" --in-flight 1000 --batch 100 --backlog 1000000 --topic prof) ;;
    *) echo "unknown workload $w" >&2; exit 1 ;;
  esac
  "$bin/txmq-bench" "${cmd[@]}" > "$dir/bench.out" 2>&1 &
  bench=$!
  if [[ $w == consume ]]; then
    # Sample the consumption only: wait until the backlog is stored.
    until [[ $(counter txmq_messages_in_total) -ge 1000000 ]]; do sleep 0.2; done
    sleep 0.5
  else
    sleep 1.5  # connect + warm-up
  fi
  perf record -q -F "$freq" -g --call-graph "$cg" -p "$pid" -o "$dir/perf.data" -- sleep "$secs" 2> /dev/null
  wait "$bench" || true
  echo "== $w: txmq-bench ${cmd[*]}" | tee "$out/$w.txt"
  cat "$dir/bench.out" >> "$out/$w.txt"
  { echo; echo "load: $(uptime | sed 's/.*load average/load average/')";
    echo; echo "== perf report --sort comm (share of the samples per thread)";
    perf report --no-inline -i "$dir/perf.data" --stdio --no-children -g none --sort comm 2> /dev/null | tidy | head -12
    echo; echo "== perf report --no-children (self), top 40";
    perf report --no-inline -i "$dir/perf.data" --stdio --no-children --percent-limit 0.7 -g none --sort symbol 2> /dev/null | tidy | head -40
    echo; echo "== perf report --children (inclusive), top 40";
    perf report --no-inline -i "$dir/perf.data" --stdio --children --percent-limit 3 -g none --sort symbol 2> /dev/null | tidy | head -40
  } >> "$out/$w.txt" || true  # head ends the pipes early (SIGPIPE under pipefail)
  # --no-inline: resolving inlined frames with addr2line takes minutes per profile.
  perf script --no-inline -i "$dir/perf.data" 2> /dev/null | python3 scripts/flamegraph.py --title "txmq-broker: $w" > "$out/$w.svg"
  stop_broker
done
