#!/usr/bin/env bash
# The man pages and bash completions the build writes into BUILD_DIR/share from the programs'
# option tables (packaging/CMakeLists.txt, common/include/txmq/common/manual.h):
#  - `MANWIDTH=80 man --warnings -l` renders each page with nothing on stderr, and the page
#    lists options the program's --help lists;
#  - each completion script, sourced in bash, completes commands, subcommands, options (of the
#    command given and the global ones), fixed values and file names, as bash would call it
#    (COMP_WORDS, COMP_CWORD).
# Usage: tests/manual_test.sh BUILD_DIR   (ctest manual_test, label unit)
set -euo pipefail
build=$1
share=$build/share
tmp=$(mktemp -d /tmp/txmq-manual-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "manual_test: FAIL: $*" >&2; exit 1; }

echo "== man pages"
for program in txmq txmq-broker txmq-relay txmq-bench; do
  page=$share/man/man1/$program.1.gz
  [[ -s $page ]] || fail "$page is missing"
  MANWIDTH=80 man --warnings -l "$page" >"$tmp/$program.txt" 2>"$tmp/$program.err" || fail "man -l $page failed"
  [[ ! -s $tmp/$program.err ]] || { cat "$tmp/$program.err"; fail "man --warnings -l $page warned"; }
  grep -q "^NAME" "$tmp/$program.txt" || fail "$program.1 has no NAME section"
  # Every option --help prints is on the page (man may hyphenate a long one: unwrap first).
  text=$(sed -e 's/‐$//' "$tmp/$program.txt" | tr -s ' \n' ' ')
  case $program in
    txmq) help=$("$build/bin/txmq" --help; "$build/bin/txmq" webhook create --help) ;;
    txmq-bench) help=$("$build/bin/txmq-bench" publish --help; "$build/bin/txmq-bench" relay --help) ;;
    *) help=$("$build/bin/$program" --help) ;;
  esac
  count=0
  for flag in $(grep -oE -- '--[a-z][a-z0-9-]+' <<<"$help" | sort -u); do
    [[ $text == *"$flag"* ]] || fail "$program.1 lacks $flag, which --help lists"
    count=$((count + 1))
  done
  ((count >= 5)) || fail "only $count options found in $program --help"
  echo "$program.1: renders without warnings, $count options of --help on it"
done
grep -q "txmq tx checker --group PG" "$tmp/txmq.txt" || fail "txmq.1 lacks the tx checker synopsis"
grep -q "txmq-bench http-publish" "$tmp/txmq-bench.txt" || fail "txmq-bench.1 lacks the http-publish workload"

echo "== --help of every txmq-bench workload; unknown options name the help"
workloads=$(grep -F '"") COMPREPLY' "$share/bash-completion/completions/txmq-bench" | sed -E "s/.*-W '([^']+)'.*/\1/")
[[ $(wc -w <<<"$workloads") -ge 10 ]] || fail "the txmq-bench completion lists the workloads [$workloads]"
for workload in $workloads; do
  "$build/bin/txmq-bench" "$workload" --help >"$tmp/help" || fail "txmq-bench $workload --help exited $?"
  for flag in $(grep -oE -- '--[a-z][a-z0-9-]+' "$tmp/help" | sort -u); do
    [[ $(sed -e 's/‐$//' "$tmp/txmq-bench.txt" | tr -s ' \n' ' ') == *"$flag"* ]] || fail "txmq-bench.1 lacks $flag of $workload"
  done
  status=0
  "$build/bin/txmq-bench" "$workload" --no-such-option >/dev/null 2>"$tmp/err" || status=$?
  ((status == 2)) && grep -qF "Try 'txmq-bench $workload --help'" "$tmp/err" ||
    fail "txmq-bench $workload --no-such-option: exit $status, $(cat "$tmp/err")"
  echo "txmq-bench $workload --help: ok"
done
for program in txmq-relay txmq-broker; do
  status=0
  "$build/bin/$program" --no-such-option >/dev/null 2>"$tmp/err" || status=$?
  ((status == 2)) && grep -qF "$program --help" "$tmp/err" || fail "$program --no-such-option: exit $status, $(cat "$tmp/err")"
done
status=0
"$build/bin/txmq" topic create t --no-such-option >/dev/null 2>"$tmp/err" || status=$?
((status == 2)) && grep -qF "Try 'txmq topic create --help'" "$tmp/err" || fail "txmq topic create --no-such-option: $(cat "$tmp/err")"

echo "== bash completion"
# complete PROGRAM WORD... : the words bash would offer for the last WORD ("" = a new word).
complete_words() {
  local program=$1
  shift
  bash -c '
    source "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
    fn=$(complete -p "${COMP_WORDS[0]}" | sed -E "s/.* -F ([^ ]+) .*/\1/")
    "$fn" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf "%s\n" "${COMPREPLY[@]}" | sort' _ "$share/bash-completion/completions/$program" "$program" "$@"
}
# expect "PROGRAM WORD..." WANTED... : each WANTED is among the offered words.
expect() {
  local line=$1
  shift
  local -a words
  read -r -a words <<<"$line"
  [[ $line == *" " ]] && words+=("")
  local got
  got=$(complete_words "${words[@]}")
  for want in "$@"; do
    grep -qxF -- "$want" <<<"$got" || fail "completing '$line' offered [$(tr '\n' ' ' <<<"$got")], not '$want'"
  done
  echo "'$line' -> $(tr '\n' ' ' <<<"$got" | cut -c1-100)"
}
# expect_only "PROGRAM WORD..." WANTED... : exactly these.
expect_only() {
  local line=$1
  shift
  local -a words
  read -r -a words <<<"$line"
  [[ $line == *" " ]] && words+=("")
  local got want
  got=$(complete_words "${words[@]}")
  want=$(printf '%s\n' "$@" | sort)
  [[ $got == "$want" ]] || fail "completing '$line' offered [$(tr '\n' ' ' <<<"$got")], wanted [$*]"
  echo "'$line' -> $(tr '\n' ' ' <<<"$got")"
}

expect "txmq " topic produce consume group dlq tx outbox webhook principal acl
expect_only "txmq to" topic
expect_only "txmq topic cr" create
expect_only "txmq tx " list show commit rollback prepare checker
expect_only "txmq webhook rot" rotate-secret
expect_only "txmq topic create orders --pa" --partitions
# The value of a global option is not taken for the command.
expect_only "txmq --broker 127.0.0.1:7878 tx l" list
expect_only "txmq --json --timeout 500 dlq r" redrive
expect "txmq consume orders --" --group --max --wait --no-ack --broker --json --tls-ca --help
expect_only "txmq consume orders --no" --no-ack
expect_only "txmq group create g --from " earliest latest
expect_only "txmq tx list --state a" abandoned all
# Options of another command are not offered.
expect_only "txmq topic list --pa"
touch "$tmp/token-one" "$tmp/token-two"
expect_only "txmq --token-file $tmp/token-" "$tmp/token-one" "$tmp/token-two"
expect_only "txmq-relay --con" --config
expect "txmq-relay --" --pg --broker --poll-interval --tls-ca --token-file
expect_only "txmq-broker --data" --data-dir
expect_only "txmq-broker --durability " sync async
expect "txmq-bench " storage publish relay tx webhook http-publish report
expect_only "txmq-bench http-publish --conc" --concurrency
echo "manual_test: OK"
