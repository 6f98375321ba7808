#!/usr/bin/env bash
# Checks the two layout rules of README.md's "Layout" section that a compiler does not:
#  1. dependencies point one way: a component includes the public headers of the components
#     below it only (protocol <- common <- storage <- broker; protocol <- common <- cluster
#     <- broker, beside storage; protocol <- common <- client <- libs <- relay, cli;
#     protocol <- pg <- libs);
#  2. no hand-written source file is over 800 lines, and one over 600 says in its opening
#     comment why it is one piece (the words "one piece" within its first 20 lines).
# Prints every violation and exits 1 if there is any. Run by ctest (layout_check, label unit).
# Usage: scripts/check-layout.sh [REPO_ROOT]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

# folder -> the include prefixes (txmq/<name>/) its files may use. Generated protobuf headers
# count as their owner's: txmq/v1/ is protocol's, txmq/storage/v1/ storage's.
declare -A allowed=(
  [protocol]="protocol v1"
  [common]="protocol v1 common"
  [storage]="protocol v1 common storage"
  # Cluster mode's control plane sits beside storage: neither knows the other.
  [cluster]="protocol v1 common cluster"
  [broker]="protocol v1 common storage cluster broker"
  [client]="protocol v1 common client"
  [pg]="protocol v1 pg"
  [producer-lib]="protocol v1 common client pg producer"
  [consumer-lib]="protocol v1 common client pg consumer"
  [outbox-relay]="protocol v1 common client pg producer relay"
  [cli]="protocol v1 common client pg producer consumer cli"
  [examples]="protocol v1 common client pg producer consumer"
  [bench]="protocol v1 common storage client pg producer consumer"
  # The libFuzzer targets drive the broker and the relay's row decoding (fuzz/README.md).
  [fuzz]="protocol v1 common storage broker client pg producer relay"
)

failures=0
fail() {
  echo "$1"
  failures=$((failures + 1))
}

for component in "${!allowed[@]}"; do
  [[ -d $component ]] || continue
  # Unit tests may use their component's private headers and test helpers, but no component
  # above it either.
  while IFS=: read -r file line include; do
    name=${include#*txmq/}
    name=${name%%/*}
    ok=false
    for a in ${allowed[$component]}; do
      [[ $name == "$a" ]] && ok=true
    done
    $ok || fail "$file:$line: $component must not include txmq/$name/ (dependencies point one way; README.md, Layout)"
  done < <(grep -rnoE '^#include "txmq/[a-z_]+/' "$component" --include='*.h' --include='*.cc' |
           sed -E 's/#include "//')
done

while read -r lines file; do
  [[ $file == total ]] && continue
  if (( lines > 800 )); then
    fail "$file: $lines lines; split it along its seams (at most 800)"
  elif (( lines > 600 )) && ! head -n 20 "$file" | grep -q 'one piece'; then
    fail "$file: $lines lines; say in its opening comment why it is one piece, or split it"
  fi
done < <(if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then git ls-files '*.cc' '*.h'
         else find . -path ./build -prune -o \( -name '*.cc' -o -name '*.h' \) -print; fi | xargs wc -l)

if (( failures > 0 )); then
  echo "check-layout: $failures violation(s)"
  exit 1
fi
echo "check-layout: dependencies one way, no source file over 800 lines"
