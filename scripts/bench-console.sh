#!/usr/bin/env bash
# The web console's page load time with 1,000 topics and 10,000 pending transactions
# (docs/BENCHMARKS.md): a broker of its own filled through the CLI, each page loaded in a fresh
# headless Chromium, medians of 3. Prints JSON lines.
# Usage: scripts/bench-console.sh [BUILD_DIR] [extra options of console_load_bench.py]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${BUILD_DIR:-$root/build}}
shift || true
exec /usr/bin/python3 "$root/tests/browser/console_load_bench.py" --bin-dir "$build/bin" "$@"
