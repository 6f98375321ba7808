#!/usr/bin/env bash
# Issue #15's "no regression elsewhere": the storage, webhook and recovery figures of two builds,
# A and B, in alternating rounds (A first in odd rounds), each figure on a fresh store or broker.
# Usage: ab-other.sh A_DIR B_DIR ROUNDS > out.jsonl   (each DIR holds txmq-broker and txmq-bench)
# Every line: {"side": "A"|"B", "round": N, "figure": ..., plus the bench's own JSON}.
set -euo pipefail
a=$1; b=$2; rounds=${3:-3}
work=$(mktemp -d /var/tmp/ab-other.XXXXXX)
bpid=""
trap '[[ -n $bpid ]] && kill $bpid 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
tag() { python3 -c 'import json,sys
side, rnd, fig = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for line in sys.stdin:
    line = line.strip()
    if line.startswith("{"):
        d = json.loads(line); d.update(side=side, round=rnd, figure=fig); print(json.dumps(d))' "$@"; }
start_broker() {  # DIR: a fresh broker on random free ports, loopback webhooks allowed if it knows the flag
  local dir=$1 extra=()
  # The help read whole first: `--help | grep -q` under pipefail fails when grep stops reading
  # early (SIGPIPE), and a broker without the flag refuses loopback receivers (issue #12).
  local help; help=$("$dir/txmq-broker" --help 2>&1 || true)
  [[ $help == *--webhook-allow-private* ]] && extra+=(--webhook-allow-private)
  for _ in 1 2 3 4 5; do
    port=$((10000 + RANDOM % 20000)); http=$((port + 1))
    rm -rf "$work/data"
    "$dir/txmq-broker" --data-dir "$work/data" --listen 127.0.0.1:$port --http 127.0.0.1:$http "${extra[@]}" > "$work/broker.log" 2>&1 &
    bpid=$!
    for _ in $(seq 300); do
      curl -sf 127.0.0.1:$http/healthz > /dev/null 2>&1 && return 0
      kill -0 $bpid 2>/dev/null || break
      sleep 0.1
    done
    kill $bpid 2>/dev/null; wait $bpid 2>/dev/null || true; bpid=""
  done
  echo "ab-other.sh: no broker from $dir: $(tail -n 2 "$work/broker.log")" >&2; exit 1
}
stop_broker() { kill $bpid; wait $bpid 2>/dev/null || true; bpid=""; }
one() {  # SIDE DIR ROUND
  local side=$1 dir=$2 r=$3
  rm -rf "$work/storage"
  "$dir/txmq-bench" storage --writers 1,16,256,1024 --seconds 3 --runs 1 --dir "$work/storage" --json | tag "$side" "$r" storage ||
    echo "ab-other.sh: $side round $r: storage failed" >&2
  start_broker "$dir"
  # A figure that fails is said on stderr and left out; the rounds go on.
  "$dir/txmq-bench" webhook --broker 127.0.0.1:$port --messages 20000 --rate 200 --seconds 3 --runs 1 --json | tag "$side" "$r" webhook ||
    { echo "ab-other.sh: $side round $r: webhook failed; the broker's log:"; tail -n 30 "$work/broker.log"; } >&2
  stop_broker
  start_broker "$dir"
  "$dir/txmq-bench" tx --mode recovery --orphans 10000 --runs 1 --broker 127.0.0.1:$port --json | tag "$side" "$r" recovery ||
    echo "ab-other.sh: $side round $r: recovery failed" >&2
  stop_broker
}
for r in $(seq "$rounds"); do
  if (( r % 2 )); then one A "$a" "$r"; one B "$b" "$r"; else one B "$b" "$r"; one A "$a" "$r"; fi
done
