#!/usr/bin/env bash
# renice-tx.sh ROUNDS SECS THREADS NICE: tx (1,000 in flight) against a fresh broker per run, side B
# with THREADS (comma-separated thread names) reniced to NICE. The renice-*.jsonl files of this
# round were made by an earlier copy of round 15's renice-ab.sh for tx; this is the same through tweak-ab.sh.
set -euo pipefail
exec "$(dirname "$0")/tweak-ab.sh" "$1" "$3" "renice -n $4 -p" tx --in-flight 1000 --seconds "$2" --warmup 1
