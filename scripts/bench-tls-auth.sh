#!/usr/bin/env bash
# Issue #12: publish with 1,000 in flight against a plaintext broker without auth and a broker
# serving TLS with auth on (the client verifies the certificate and sends a token), alternating,
# same build, same machine. Certificates and the admin token are made for the run.
# Usage: BUILD_DIR=build scripts/bench-tls-auth.sh
set -euo pipefail
B=${BUILD_DIR:-build}/bin; B=$(cd "$B" && pwd)
D=$(mktemp -d /tmp/tlsauth.XXXX)
cd $D
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=test-ca -keyout ca.key -out ca.pem 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost -keyout srv.key -out srv.csr 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > ext.cnf
openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile ext.cnf -out srv.pem 2>/dev/null
TOKEN=txmq_$(openssl rand -hex 24); echo "$TOKEN" > admin.token
$B/txmq-broker --data-dir $D/plain --listen 127.0.0.1:18978 --http 127.0.0.1:18979 > plain.log 2>&1 & P1=$!
$B/txmq-broker --data-dir $D/sec --listen 127.0.0.1:18988 --http 127.0.0.1:18989 --tls-cert-file srv.pem --tls-key-file srv.key --auth --admin-token-file admin.token > sec.log 2>&1 & P2=$!
trap 'kill $P1 $P2' EXIT
for i in $(seq 50); do curl -s 127.0.0.1:18979/healthz >/dev/null && curl -sk https://127.0.0.1:18989/healthz >/dev/null && break; sleep 0.2; done
for r in 1 2 3; do
  echo "run $r plain: $($B/txmq-bench publish --in-flight 1000 --batch 100 --seconds 5 --runs 1 --broker 127.0.0.1:18978 --topic p$r 2>&1 | tail -1)"
  echo "run $r tls+auth: $($B/txmq-bench publish --in-flight 1000 --batch 100 --seconds 5 --runs 1 --broker 127.0.0.1:18988 --tls-ca ca.pem --token $TOKEN --topic s$r 2>&1 | tail -1)"
done
