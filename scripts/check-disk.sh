#!/usr/bin/env bash
# Warns, before make builds, when the disk that will hold BUILD_DIR has less room than the
# build still needs. A full disk otherwise ends the build minutes later with the linker's
# "Bus error" (lld writes its output through mmap), which does not say what is wrong.
# A warning only: the figures are estimates (README.md, "Two commands"), and an up-to-date build
# needs nothing more.
# Usage: scripts/check-disk.sh DIR NEED_GIB WHAT
set -euo pipefail
dir=$1 need_gib=$2 what=$3

# DIR may not exist yet: ask about the nearest directory that does.
probe=$dir
while [[ ! -e $probe ]]; do probe=$(dirname "$probe"); done
free_kib=$(df -Pk "$probe" | awk 'NR == 2 { print $4 }')
# What is already built counts towards the need.
have_kib=0
if [[ -d $dir ]]; then have_kib=$(du -sk "$dir" | cut -f1); fi
need_kib=$(( need_gib * 1024 * 1024 - have_kib ))
if (( need_kib > free_kib )); then
  gib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1048576 }'; }
  echo "check-disk: warning: $(gib "$free_kib") GiB free on the disk of $dir, and $what" \
       "needs about $(gib "$need_kib") GiB more (README.md, \"Two commands\"). A full disk ends the" \
       "build with the linker's \"Bus error\"." >&2
fi
