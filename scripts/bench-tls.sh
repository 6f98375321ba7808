#!/usr/bin/env bash
# TLS against plaintext (docs/BENCHMARKS.md, issue #12): `txmq-bench publish` with 1,000 in
# flight against two fresh brokers on loopback, one plaintext and one serving TLS with a
# certificate made here by openssl, runs alternating (plain, TLS, plain, TLS, ...) so that both
# see the same machine; prints each run's JSON line, then the medians and their ratio.
# Usage: scripts/bench-tls.sh [RUNS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
seconds=${2:-5}
bin=${BUILD_DIR:-build}/bin
dir=$(mktemp -d /var/tmp/txmq-bench-tls.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$dir"' EXIT

(cd "$dir" &&
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 2 \
    -subj "/CN=txmq bench CA" &&
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr \
    -subj "/CN=localhost" &&
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > san.ext &&
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 \
    -extfile san.ext) > "$dir/openssl.log" 2>&1

start() {  # start NAME PORT HTTP [ARGS...]
  local name=$1 port=$2 http=$3
  shift 3
  "$bin/txmq-broker" --data-dir "$dir/$name" --listen 127.0.0.1:$port --http 127.0.0.1:$http "$@" \
    > "$dir/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    curl -sfk "https://127.0.0.1:$http/healthz" >/dev/null 2>&1 && return
    curl -sf "http://127.0.0.1:$http/healthz" >/dev/null 2>&1 && return
    sleep 0.1
  done
  echo "broker $name did not start" >&2
  exit 1
}
start plain 17978 17979
start tls 17988 17989 --tls-cert-file "$dir/server.pem" --tls-key-file "$dir/server.key"

pub() { "$bin/txmq-bench" publish --in-flight 1000 --batch 100 --seconds "$seconds" --runs 1 --json "$@"; }
for i in $(seq "$runs"); do
  pub --broker 127.0.0.1:17978 --topic plain$i --label plain | tee -a "$dir/plain.jsonl"
  pub --broker 127.0.0.1:17988 --topic tls$i --label tls --tls-ca "$dir/ca.pem" | tee -a "$dir/tls.jsonl"
done
python3 - "$dir/plain.jsonl" "$dir/tls.jsonl" <<'PY'
import json, statistics, sys
def median(path):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    return statistics.median(r["messages_per_s"] for r in rows), [round(r["messages_per_s"]) for r in rows]
(p, pr), (t, tr) = median(sys.argv[1]), median(sys.argv[2])
print(json.dumps({"plain_msg_per_s": round(p), "tls_msg_per_s": round(t), "tls_over_plain": round(t / p, 3),
                  "plain_runs": pr, "tls_runs": tr}))
PY
