#!/usr/bin/env bash
# Screenshots of every web console page into docs/console/ (1280x800, and phone-sized ones),
# taken by headless Chromium against a broker of their own with sample data.
# Usage: scripts/console-screenshots.sh [BUILD_DIR] [OUT_DIR]   (needs scripts/setup.sh's
# chromium, chromium-driver, python3-selenium, and a built txmq-broker and txmq)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${BUILD_DIR:-$root/build}}
out=${2:-$root/docs/console}
exec /usr/bin/python3 "$root/tests/browser/console_screenshots.py" --bin-dir "$build/bin" --out "$out"
