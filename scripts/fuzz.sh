#!/usr/bin/env bash
# Runs one libFuzzer target of the TXMQ_FUZZ build (fuzz/README.md) for SECONDS over its seed
# corpus (fuzz/corpus/TARGET), its regressions (fuzz/regressions/TARGET, every input run first)
# and the corpus it grew in earlier runs (BUILD_DIR/fuzz/corpus/TARGET), then prints libFuzzer's
# final stats (executions, coverage). Exits non-zero on a finding; the input that caused it is
# written to BUILD_DIR/fuzz/artifacts/TARGET-crash-... (or -leak-, -timeout-, -oom-); for
# frame_dispatch also the inputs before it, BUILD_DIR/fuzz/artifacts/frame_dispatch-history.
# Usage: scripts/fuzz.sh BUILD_DIR TARGET SECONDS
set -euo pipefail
build=$(cd "$1" && pwd)
target=$2
seconds=$3
root=$(cd "$(dirname "$0")/.." && pwd)
work=$build/fuzz/corpus/$target
artifacts=$build/fuzz/artifacts
mkdir -p "$work" "$artifacts"
dirs=("$work" "$root/fuzz/corpus/$target")
if [[ -d $root/fuzz/regressions/$target ]]; then dirs+=("$root/fuzz/regressions/$target"); fi
# frame_dispatch keeps its store and service across inputs (fuzz/README.md), so most inputs end
# with more allocations than frees, and libFuzzer would then run a whole-heap leak scan after
# each: 60 % of the time went there. Without the per-input scan, LeakSanitizer still checks the
# whole heap when the run ends (a leak makes the run exit 1, without naming the input).
extra=()
history=""
if [[ $target == frame_dispatch ]]; then
  extra+=(-detect_leaks=0)
  # Its findings can depend on what earlier inputs left in the shared store: keep those inputs
  # (the harness's FRAME_DISPATCH_HISTORY), so that a finding can be replayed from files.
  history=$artifacts/$target-history
  export FRAME_DISPATCH_HISTORY=$history
fi
# -timeout: one input running 25 s is a finding (a hang); -rss_limit_mb: so is 2.5 GB.
# libFuzzer's progress lines (one per new input: "#N NEW ...", "NEW_FUNC ...") and protobuf's
# complaints about invalid UTF-8 in fuzzed strings are dropped from the output: thousands of
# them buried the one finding CI printed (its excerpt of the log cut out the exception that
# mattered). Everything else, the finding's report and the final stats, is kept.
set +e
"$build/bin/$target" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2560 -print_final_stats=1 \
  "${extra[@]}" -artifact_prefix="$artifacts/$target-" "${dirs[@]}" 2>&1 |
  grep -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse|RELOAD)[[:space:]]|^[[:space:]]+NEW_FUNC\[|contains invalid UTF-8 data when parsing'
status=${PIPESTATUS[0]}
if [[ -n $history ]]; then
  if [[ $status == 0 ]]; then
    rm -f "$history"
  else
    echo "fuzz.sh: the inputs before the finding, in order: $history; replay them with"
    echo "  FRAME_DISPATCH_REPLAY=$history $build/bin/$target"
  fi
fi
exit "$status"
