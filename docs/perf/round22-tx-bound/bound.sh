#!/usr/bin/env bash
# Twenty-second round: how far a marker-only COMMIT could take transactions, as an upper bound.
# XP is a txmq-broker built with bound.diff applied (two switches read once at start, never
# meant to ship): XP_MARKER=1 stores the COMMIT's log record without body and headers (what a
# record referring to the prepared body would cost at most), XP_NOSETTLE=1 does not rewrite the
# transaction record at COMMIT (no durable outcome: unsound, a bound only). Per round, order
# reversed every second round: tx on base, marker, nosettle, both, then publish 1/req on base (the
# goal's denominator), each on a fresh broker by scripts/bench-thread-cpu.sh (per-thread CPU).
# Usage: XP=/path/to/txmq-broker BENCH=/path/to/txmq-bench bound.sh ROUNDS SECONDS > bound.txt
#        python3 summary.py bound.txt
set -euo pipefail
rounds=${1:-5}; secs=${2:-8}
repo=$(cd "$(dirname "$0")/../../.." && pwd)
wrap=$(mktemp -d); trap 'rm -rf "$wrap"' EXIT
for v in base marker nosettle both; do
  case $v in base) env="" ;; marker) env="XP_MARKER=1" ;; nosettle) env="XP_NOSETTLE=1" ;; both) env="XP_MARKER=1 XP_NOSETTLE=1" ;; esac
  printf '#!/bin/sh\nexec env %s "%s" "$@"\n' "$env" "$XP" > "$wrap/$v"; chmod +x "$wrap/$v"
done
order=(base:tx marker:tx nosettle:tx both:tx base:publish1)
for r in $(seq "$rounds"); do
  list=("${order[@]}"); (( r % 2 == 0 )) && mapfile -t list < <(printf '%s\n' "${order[@]}" | tac)
  for item in "${list[@]}"; do
    v=${item%%:*}; w=${item##*:}
    echo "== $v $w round $r load $(cut -d' ' -f1 /proc/loadavg)"
    "$repo/scripts/bench-thread-cpu.sh" "$wrap/$v" "$secs" "$w" 2>&1 | grep -E 'tx/s|^txmq |^(all|txmq-|rocksdb)|^(tx|msg)s:' || true
  done
done
