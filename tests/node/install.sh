#!/usr/bin/env bash
# Installs the pinned Node.js test tools (package.json + package-lock.json beside this script)
# into DIR with `npm ci`, once per lock file: a stamp holding the lock file it installed skips
# the download when nothing changed. Usage: install.sh DIR
set -euo pipefail
src=$(cd "$(dirname "$0")" && pwd)
dir=$1
mkdir -p "$dir"
if [[ -d "$dir/node_modules" ]] && cmp -s "$src/package-lock.json" "$dir/node_modules/.txmq-installed-lock"; then
  echo "node tools: up to date in $dir"
  exit 0
fi
cp "$src/package.json" "$src/package-lock.json" "$dir/"
cd "$dir"
npm ci --no-audit --no-fund --ignore-scripts
cp package-lock.json node_modules/.txmq-installed-lock
echo "node tools: installed in $dir"
