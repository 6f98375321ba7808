#!/usr/bin/env bash
# procmon.sh OUT STOP: every second, CPU ticks per process name (top 8).
while [ ! -e "$2" ]; do
  echo "T $(date +%s)"; for f in /proc/[0-9]*/stat; do read -r l < $f 2>/dev/null || continue; c=${l#*(}; c=${c%%)*}; r=${l##*) }; set -- $r; echo "$c $(( ${12} + ${13} ))"; done | awk '{a[$1]+=$2} END {for (k in a) print k, a[k]}'
  sleep 1
done > "$1"
