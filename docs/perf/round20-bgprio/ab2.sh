#!/usr/bin/env bash
# ab2.sh ROUNDS WORKLOAD ARGS...: BROKER_A against BROKER_B, nothing tweaked (tweak-ab.sh; HOGS=n
# busy loops beside each run). hog-adaptive.jsonl came from an earlier copy of this loop.
exec "$(dirname "$0")/tweak-ab.sh" "$1" "" true "${@:2}"
