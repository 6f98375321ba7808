#!/bin/bash
# base store: main's broker, txmq-bench tx for $1 seconds, clean stop
B=/work/main/build; D=/var/tmp/txidx; PORT=17991
$B/bin/txmq-broker --data-dir $D/base --listen 127.0.0.1:$PORT --http 127.0.0.1:17992 > $D/base.log 2>&1 &
P=$!
for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
$B/bin/txmq-bench tx --broker 127.0.0.1:$PORT --seconds $1 --warmup 0 --runs 1 --broker-pid $P --in-flight 1000 --message-bytes 256 2>&1 | tail -3
kill $P; wait $P
echo "store $(du -sm $D/base | cut -f1) MB"
