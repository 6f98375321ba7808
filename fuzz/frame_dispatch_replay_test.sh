#!/usr/bin/env bash
# frame_dispatch's replay (fuzz/README.md "frame_dispatch keeps its store"): a run over the seed
# corpus with FRAME_DISPATCH_HISTORY keeps its inputs; FRAME_DISPATCH_REPLAY of that file runs
# them again in a fresh world and meets the same state: every request gets an answer of the same
# kind, error code and repeat markers as in the recorded run (FRAME_DISPATCH_TRACE on both), the
# seeds' duplicate produces and already resolved transactions included. A history cut short
# is refused with exit 2 and a message naming the byte. Label fuzz (runs in the fuzz build).
# Usage: frame_dispatch_replay_test.sh BUILD_DIR
set -euo pipefail
bin=$1/bin/frame_dispatch
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/txmq-replay.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*" >&2; exit 1; }

# What a trace line says of each answer that depends on the state earlier inputs left and not on
# timing or chance: the answer's kind, its error code, and the markers of a repeat (a duplicate
# produce, an already resolved or rolled-back transaction). Left out: ids, tokens and times
# (random or clock-made), error texts (a map's order picks which bad header is named), and what
# a Fetch returns (a deadline may pass between two inputs in one run and not in the other).
answers() {
  grep '^< ' "$1" | sed -E 's/^< correlation_id: [0-9]+ //' | while IFS= read -r line; do
    echo "$(grep -oE '^[a-z_]+ \{( code: [A-Z_]+)?' <<< "$line")" \
         "$(grep -oE 'duplicate: true|already_resolved: true|state: [A-Z_]+' <<< "$line" | tr '\n' ' ')"
  done
}

# -runs=0: each seed input once, in libFuzzer's order, then exit.
FRAME_DISPATCH_TRACE=1 FRAME_DISPATCH_HISTORY=$work/history "$bin" -runs=0 -detect_leaks=0 \
  "$root/fuzz/corpus/frame_dispatch" > "$work/recorded.log" 2>&1 || fail "the recording run exited $?: $(tail -5 "$work/recorded.log")"
[[ -s $work/history ]] || fail "FRAME_DISPATCH_HISTORY wrote nothing"
answers "$work/recorded.log" > "$work/recorded.answers"
recorded=$(wc -l < "$work/recorded.answers")
((recorded >= 10)) || fail "the recording run answered $recorded requests; the seed corpus has more"
# The seeds build on each other (a produce repeated, a transaction resolved twice): without that
# state in the replay, these answers would differ.
grep -q "duplicate: true" "$work/recorded.answers" && grep -q "TX_ALREADY_RESOLVED" "$work/recorded.answers" ||
  fail "the recorded run met no state of an earlier input (no duplicate produce, no resolved transaction)"

FRAME_DISPATCH_TRACE=1 FRAME_DISPATCH_REPLAY=$work/history "$bin" > "$work/replayed.log" 2>&1 ||
  fail "the replay exited $?: $(tail -5 "$work/replayed.log")"
grep -q "no finding" "$work/replayed.log" || fail "the replay did not report its end: $(tail -3 "$work/replayed.log")"
answers "$work/replayed.log" > "$work/replayed.answers"
diff "$work/recorded.answers" "$work/replayed.answers" > "$work/diff" ||
  fail "the replay answered differently from the recorded run: $(head -20 "$work/diff")"

# A history cut inside an input is not one.
head -c $(($(stat -c %s "$work/history") - 3)) "$work/history" > "$work/cut"
set +e
FRAME_DISPATCH_REPLAY=$work/cut "$bin" > "$work/cut.log" 2>&1
rc=$?
set -e
((rc == 2)) || fail "a cut history exited $rc, not 2"
grep -q "is not a FRAME_DISPATCH_HISTORY file (cut at byte" "$work/cut.log" || fail "a cut history: $(cat "$work/cut.log")"
echo "frame_dispatch replay: $recorded answers recorded and replayed alike; a cut history refused"
