#!/usr/bin/env bash
# txmq-relay with extra flags from $RELAY_EXTRA (notify-ab.sh's B side: --poll-interval 5ms).
exec "${BIN:-/work/ab/s24}/txmq-relay" "$@" ${RELAY_EXTRA:-}
