#!/usr/bin/env bash
# Twenty-first round: does this VM stop running while it writes and fsyncs? A spinner reads
# the clock in a loop for 4 s and counts the gaps over 2 ms it saw (time it did not run:
# spin.c); beside it nothing, a second spinner, or fsr.c appending 1 KiB and calling
# fdatasync at a paced RATE on /var/tmp. Builds both with gcc into a temporary directory.
# Usage: docs/perf/round21-machine/probe.sh > probe.txt
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
gcc -O2 -o "$tmp/spin" "$here/spin.c"; gcc -O2 -o "$tmp/fsr" "$here/fsr.c"
echo "$(date -u '+%F %T') $(uname -r); cpuidle driver: $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null)"
echo "spinner alone:              $("$tmp/spin" 4)"
echo "spinner + second spinner:   $("$tmp/spin" 4 & "$tmp/spin" 4 > /dev/null; wait)"
for rate in 500 1000 2000 3000 100000; do
  "$tmp/fsr" "$rate" 4 1024 > "$tmp/fsr.out" &
  s=$("$tmp/spin" 4)
  wait
  echo "spinner + fsync at $rate/s: $s; $(cat "$tmp/fsr.out")"
done
