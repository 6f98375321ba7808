#!/bin/sh
# txmq-bench at nice -10 (round 15: the load generator's own waits for a CPU)
exec nice -n -10 "$(dirname "$0")/../../../build/bin/txmq-bench" "$@"
