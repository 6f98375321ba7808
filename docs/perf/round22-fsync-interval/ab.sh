#!/usr/bin/env bash
# ab.sh BROKER ROUNDS: alternating rounds (order reversed every second one) of rate1.sh without and
# with --min-fsync-interval 1ms, `sync` before each run; then the medians (summary.py mfi-ab.txt).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd); broker=$1; rounds=${2:-6}
for r in $(seq "$rounds"); do
  if (( r % 2 )); then order="A B"; else order="B A"; fi
  for v in $order; do
    args=(); [[ $v == B ]] && args=(--min-fsync-interval 1ms)
    sync; echo "$v $r $("$here/rate1.sh" "$broker" "${args[@]}" | tr '\n' ' ')"
  done
done
