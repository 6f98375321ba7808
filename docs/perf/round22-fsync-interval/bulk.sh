#!/usr/bin/env bash
# bulk.sh BROKER quiet|bulk [BROKER_ARGS...]: `sync`, then one rate1.sh run; with "bulk", another
# process writes 128 MiB (dd conv=fsync) to /var/tmp from 4 s after the start, as a copied binary or
# a trace file does when the kernel writes it back. Prints p50/p99/p99.9 (ms).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd); broker=$1; mode=$2; shift 2
sync
if [[ $mode == bulk ]]; then (sleep 4; dd if=/dev/zero of=/var/tmp/bulk.$$ bs=1M count=128 conv=fsync 2>&1 | tail -1) & fi
"$here/rate1.sh" "$broker" "$@" | head -1 | python3 -c "
import sys, json; d = json.loads(sys.stdin.read()); print('p50 %.2f p99 %.2f p99.9 %.2f' % (d['p50_ms'], d['p99_ms'], d['p999_ms']))"
wait; rm -f /var/tmp/bulk.$$
