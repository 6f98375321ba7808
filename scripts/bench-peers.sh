#!/usr/bin/env bash
# Measures txmq beside the brokers a user would pick instead (issue #7): RabbitMQ 3.10 (quorum
# and classic durable queues), NATS JetStream 2.9 (file storage) and a PostgreSQL 15 table used
# as a queue, with the same workloads, message size and acknowledgement semantics
# (txmq-bench --system ...). Every server runs on loopback only, with its data in one
# temporary directory, and is stopped by its PID when the script ends, however it ends.
# Systems alternate within each round, so a disturbance (another build, the virtual disk's
# fsync rate drifting) hits all of them alike; the tables report medians over the rounds.
#
# Writes the tables between <!-- peers:begin --> and <!-- peers:end --> in docs/BENCHMARKS.md
# (the rest of the file is left alone), docs/bench-peers.png, and the raw JSON lines beside
# the PNG (docs/bench-peers.jsonl).
#
# Usage: scripts/bench-peers.sh [ROUNDS] [SECONDS]     (defaults: 3 rounds of 5 s per run)
# Environment: BUILD_DIR (default build), BACKLOG (consume backlog, default 200000),
#              SYSTEMS (default "txmq rabbitmq-quorum rabbitmq-classic nats pgqueue"),
#              WORKLOADS (default "publish rate e2e consume tx relay"),
#              SETTLE=0 starts each run right after the previous one ends (no settle, below),
#              KEEP=1 keeps the temporary directory and the logs.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
seconds=${2:-5}
build=${BUILD_DIR:-build}
bin=$build/bin
backlog=${BACKLOG:-200000}
read -r -a systems <<< "${SYSTEMS:-txmq rabbitmq-quorum rabbitmq-classic nats pgqueue}"
doc=docs/BENCHMARKS.md
png=docs/bench-peers.png
raw=docs/bench-peers.jsonl
pg_bin=/usr/lib/postgresql/15/bin

say() { echo "bench-peers: $*" >&2; }
has() { local s; for s in "${systems[@]}"; do [[ $s == "$1"* ]] && return 0; done; return 1; }

# --- the peers' servers, from Debian, only when missing ---------------------------------------
need=()
for p in rabbitmq-server nats-server gnuplot-nox postgresql-15 curl; do
  [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true) == "install ok installed" ]] || need+=("$p")
done
if ((${#need[@]})); then
  say "installing ${need[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  # rabbitmq-server's package would start a system-wide node; policy-rc.d keeps it from doing
  # so where the image has one, and otherwise it is stopped below before it matters.
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${need[@]}"
fi
[[ -x $bin/txmq-bench && -x $bin/txmq-broker ]] || { say "no $bin/txmq-bench or txmq-broker: run make build (or set BUILD_DIR)"; exit 1; }
[[ $(id -u) -eq 0 ]] || { say "run as root: PostgreSQL's cluster runs as the postgres user through runuser"; exit 1; }

# --- one temporary directory; everything started is stopped by PID on exit --------------------
dir=$(mktemp -d /var/tmp/txmq-peers.XXXXXX)
chmod 755 "$dir"  # the postgres user must reach its cluster below it
pids=()
rabbit_env=()
pg_data=""
cleanup() {
  set +e
  if ((${#rabbit_env[@]})); then env "${rabbit_env[@]}" /usr/lib/rabbitmq/bin/rabbitmqctl shutdown >/dev/null 2>&1; fi
  [[ -n $pg_data ]] && runuser -u postgres -- "$pg_bin/pg_ctl" -D "$pg_data" -m fast -w stop >/dev/null 2>&1
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
  done
  if [[ ${KEEP:-0} == 1 ]]; then say "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free loopback port, below the kernel's ephemeral range (so no outgoing connection holds it),
# that no socket uses, whether listening or connected.
free_port() {
  local p low
  low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  while :; do
    p=$((20000 + RANDOM % (low - 20000)))
    [[ -z $(ss -Htan "( sport = :$p )" 2>/dev/null) ]] || continue
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}
wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local limit=$1 what=$2; shift 2
  for _ in $(seq $((limit * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  say "$what did not come up within ${limit}s; logs in $dir (KEEP=1 keeps them)"
  KEEP=1
  exit 1
}

declare -A addr pid
# txmq: the broker under test, default settings (acknowledge after fsync). txmq has no way to
# delete a topic, so where the peers drop their queue, stream or table after each run, txmq is
# restarted on an empty data directory before each run: every system starts each run empty,
# none carries the previous runs' data into its compactions or checkpoints.
port=$(free_port); http=$(free_port)
txmq_durability=sync
fresh_txmq() {  # fresh_txmq [sync|async]
  local old=${pid[txmq]:-} p keep=()
  txmq_durability=${1:-sync}
  if [[ -n $old ]]; then
    kill "$old" 2>/dev/null
    for _ in $(seq 300); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
    for p in "${pids[@]}"; do [[ $p == "$old" ]] || keep+=("$p"); done
    pids=("${keep[@]}")
    rm -rf "$dir/txmq"
  fi
  txmq_used=0
  "$bin/txmq-broker" --data-dir "$dir/txmq" --listen "127.0.0.1:$port" --http "127.0.0.1:$http" \
    --durability "$txmq_durability" >> "$dir/txmq.log" 2>&1 &
  pids+=($!); pid[txmq]=$!; addr[txmq]=127.0.0.1:$port
  wait_for 30 txmq-broker curl -sf "127.0.0.1:$http/healthz"
}
# Before each workload on txmq: a fresh broker unless the current one has not served any yet
# (and runs with the durability wanted, sync unless named).
use_fresh_txmq() {
  if [[ $txmq_used == 1 || $txmq_durability != "${1:-sync}" ]]; then fresh_txmq "${1:-sync}"; fi
  txmq_used=1
}
fresh_txmq

if has rabbitmq; then
  # As shared/notes/peers.md: the real server script (the /usr/sbin wrapper switches users and
  # writes to /var/log), our own epmd on a private port so that its PID is ours to stop.
  r=$dir/rabbitmq
  mkdir -p "$r/mnesia" "$r/log"
  echo '[].' > "$r/enabled_plugins"
  amqp=$(free_port); dist=$(free_port); epmd_port=$(free_port)
  printf 'listeners.tcp.default = 127.0.0.1:%s\nloopback_users.guest = true\n' "$amqp" > "$r/rabbitmq.conf"
  rabbit_env=(HOME="$r" RABBITMQ_NODENAME=rabbit@localhost RABBITMQ_CONFIG_FILE="$r/rabbitmq.conf"
    RABBITMQ_MNESIA_BASE="$r/mnesia" RABBITMQ_LOG_BASE="$r/log" RABBITMQ_ENABLED_PLUGINS_FILE="$r/enabled_plugins"
    RABBITMQ_DIST_PORT="$dist" ERL_EPMD_ADDRESS=127.0.0.1 ERL_EPMD_PORT="$epmd_port"
    "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}"
    "RABBITMQ_CTL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}")
  env ERL_EPMD_ADDRESS=127.0.0.1 epmd -port "$epmd_port" > "$dir/epmd.log" 2>&1 &
  pids+=($!)
  env "${rabbit_env[@]}" /usr/lib/rabbitmq/bin/rabbitmq-server > "$r/stdout.log" 2>&1 &
  pids+=($!); pid[rabbitmq]=$!; addr[rabbitmq]=127.0.0.1:$amqp
  wait_for 120 rabbitmq-server env "${rabbit_env[@]}" /usr/lib/rabbitmq/bin/rabbitmqctl await_startup
  # The script runs the Erlang VM as its child: stop that too should the shutdown fail.
  pids+=($(pgrep -P "${pid[rabbitmq]}" || true))
fi

if has nats; then
  n=$dir/nats
  mkdir -p "$n"
  nport=$(free_port); nhttp=$(free_port)
  printf 'listen: 127.0.0.1:%s\nhttp: 127.0.0.1:%s\nserver_name: txmq_bench\njetstream { store_dir: "%s/js", max_memory_store: 1GB, max_file_store: 20GB }\n' \
    "$nport" "$nhttp" "$n" > "$n/nats.conf"
  nats-server -c "$n/nats.conf" > "$n/nats.log" 2>&1 &
  pids+=($!); pid[nats]=$!; addr[nats]=127.0.0.1:$nport
  wait_for 30 nats-server curl -sf "127.0.0.1:$nhttp/healthz?js-enabled-only=true"
fi

if has pgqueue; then
  # A private cluster as the postgres user: durable settings spelled out (they are the
  # defaults), socket in our directory, TCP on loopback only.
  pg_data=$dir/pg/data
  mkdir -p "$dir/pg/sock"
  chown -R postgres "$dir/pg"
  runuser -u postgres -- "$pg_bin/initdb" -D "$pg_data" -A trust -U postgres > "$dir/pg/initdb.log" 2>&1
  pgport=$(free_port)
  runuser -u postgres -- "$pg_bin/pg_ctl" -D "$pg_data" -l "$dir/pg/pg.log" -w -t 60 -o \
    "-c listen_addresses=127.0.0.1 -p $pgport -k $dir/pg/sock -c fsync=on -c synchronous_commit=on -c max_connections=200" \
    start > /dev/null
  pid[pgqueue]=$(head -1 "$pg_data/postmaster.pid")
  pids+=("${pid[pgqueue]}")
  addr[pgqueue]="host=127.0.0.1 port=$pgport user=postgres dbname=postgres"
fi

# --- the machine, as the results will quote it --------------------------------------------------
fsync_rate=$("$bin/txmq-bench" storage --writers 1 --seconds 2 --warmup 0.5 --runs 1 --json --dir "$dir/fsync-probe" |
  sed -n 's/.*"raw_fsync".*"fsyncs_per_s":\([0-9.E+-]*\).*/\1/p' | awk '{printf "%d", $1}')
rm -rf "$dir/fsync-probe"
cpu_model=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
say "machine: $(nproc) cores, $cpu_model; append+fdatasync ${fsync_rate}/s; $(uptime)"

# --- the runs ------------------------------------------------------------------------------------
results=$dir/results.jsonl
: > "$results"
uptimes=()
read -r -a workloads <<< "${WORKLOADS:-publish rate e2e consume tx relay}"
wants() { local w; for w in "${workloads[@]}"; do [[ $w == "$1" ]] && return 0; done; return 1; }

# Before each measured run, what the previous one left behind finishes first: PostgreSQL's
# checkpoint of the WAL its last run wrote (spread over minutes otherwise), the page cache's
# dirty pages, a server's garbage collection. Then the machine must be idle (under 10 % of its
# CPU busy over half a second), or 20 s have passed. Without it each run could share the disk
# and cores with its predecessor's aftermath, and the rotation alone kept every system behind
# the same neighbour in every round (txmq's latency rows behind the PostgreSQL queue's, which
# falls behind at 10,000 commits a second). On the twenty-first round's machine it changed
# nothing measurable (BENCHMARKS.md, twenty-first round); it waited 0.5 s a run in the median,
# at most 5 s.
settle_seconds=()
# user … steal (guest time is counted in user already); busy = all but idle and iowait.
cpu_busy_total() { awk '/^cpu /{t=0; for (i=2;i<=9;i++) t+=$i; print t-$5-$6, t}' /proc/stat; }
settle() {
  [[ ${SETTLE:-1} == 1 ]] || return 0
  local start b0 t0 b1 t1 waited
  start=${EPOCHREALTIME/./}  # microseconds since the epoch, without a fork
  if [[ -n $pg_data ]]; then
    "$pg_bin/psql" -q -h 127.0.0.1 -p "$pgport" -U postgres -d postgres -c CHECKPOINT > /dev/null 2>&1 ||
      say "CHECKPOINT failed (the run goes on)"
  fi
  sync
  while :; do
    read -r b0 t0 < <(cpu_busy_total)
    sleep 0.5  # the sampling window, not a wait for an event
    read -r b1 t1 < <(cpu_busy_total)
    (((b1 - b0) * 10 < t1 - t0)) && break
    if ((${EPOCHREALTIME/./} - start > 20000000)); then
      say "the machine did not settle within 20 s; measuring anyway"
      break
    fi
  done
  waited=$(((${EPOCHREALTIME/./} - start) / 100000))  # tenths of a second
  settle_seconds+=("$((waited / 10)).$((waited % 10))")
}
run() {  # run SYSTEM WORKLOAD [extra flags]
  local s=$1 w=$2; shift 2
  local key=${s%%-*}  # rabbitmq-quorum and rabbitmq-classic share one server
  local batch=100 label=$s
  # RabbitMQ and NATS publish one message per frame and confirm each; a batch there only groups
  # completions, so they publish singly (their latency is then per message, never per batch).
  [[ $s == rabbitmq* || $s == nats ]] && batch=1
  # txmq-single: txmq with one message per produce request, as RabbitMQ and NATS publish, to
  # show what txmq's figures owe to its multi-message requests.
  [[ $s == txmq-single ]] && { batch=1; s=txmq; }
  # txmq-async: txmq acknowledging before fsync (--durability async), as NATS 2.9 does: the
  # like-for-like row for NATS's latency (rate and e2e only).
  local durability=sync
  [[ $s == txmq-async ]] && { durability=async; s=txmq; }
  if [[ $key == txmq ]]; then use_fresh_txmq "$durability"; fi
  settle
  local out
  if out=$("$bin/txmq-bench" "$w" --system "$s" --broker "${addr[$key]}" --broker-pid "${pid[$key]}" --json --runs 1 \
      --seconds "$seconds" --warmup 1 --message-bytes 256 --in-flight 1000 --batch "$batch" --topic peers --label "$label" "$@" 2> "$dir/run.err"); then :; else
    # A failed run prints no line (or one with errors); its reason must reach the person.
    say "$label $w failed or reported errors: $(tail -3 "$dir/run.err" | tr '\n' ' ')"
  fi
  cat "$dir/run.err" >> "$dir/bench.err"
  [[ -n $out ]] && echo "$out" >> "$results"
  say "round $round $w $label: $(echo "$out" | sed -n 's/.*"messages_per_s":\([0-9.E+-]*\).*"p99_ms":\([0-9.E+-]*\).*/\1 msg\/s p99 \2 ms/p')"
}
# Workloads that other parts of txmq bring along, run when this txmq-bench has them.
optional() {  # optional WORKLOAD [flags...]: passes only the flags its --help names
  local w=$1; shift
  local help
  help=$("$bin/txmq-bench" "$w" --help 2>/dev/null) || return 1
  local args=() a
  for a in "$@"; do
    local flag=${a%%=*}
    grep -q -- "$flag" <<< "$help" && args+=("$a")
  done
  local out
  settle
  out=$("$bin/txmq-bench" "$w" "${args[@]}" 2>> "$dir/bench.err") || say "$w reported errors"
  grep '^{' <<< "$out" >> "$results" || true
}
have_relay=no; have_tx=no
"$bin/txmq-bench" relay --help > /dev/null 2>&1 && have_relay=yes
"$bin/txmq-bench" tx --help > /dev/null 2>&1 && have_tx=yes
[[ $have_relay == yes ]] || say "txmq-bench relay is not there yet: the relay vs PostgreSQL queue comparison is skipped"
[[ $have_tx == yes ]] || say "txmq-bench tx is not there yet: the transaction workload is skipped"

for round in $(seq "$rounds"); do
  # Rotate the order each round so that no system always runs first (or right after a fill),
  # and reverse it every second round: a rotation alone keeps each system behind the same one.
  order=("${systems[@]:$(( (round - 1) % ${#systems[@]} ))}" "${systems[@]:0:$(( (round - 1) % ${#systems[@]} ))}")
  if ((round % 2 == 0)); then
    reversed=()
    for ((i = ${#order[@]} - 1; i >= 0; i--)); do reversed+=("${order[i]}"); done
    order=("${reversed[@]}")
  fi
  for w in publish rate e2e consume; do
    wants "$w" || continue
    for s in "${order[@]}"; do
      if [[ $w == consume ]]; then run "$s" consume --backlog "$backlog"; else run "$s" "$w" --rate 10000; fi
      if [[ $w == publish && $s == txmq ]]; then run txmq-single publish; fi
      if [[ ($w == rate || $w == e2e) && $s == txmq ]]; then run txmq-async "$w" --rate 10000; fi
    done
  done
  if [[ $have_tx == yes ]] && wants tx; then
    use_fresh_txmq
    optional tx --broker="${addr[txmq]}" --broker-pid="${pid[txmq]}" --json --runs=1 --seconds="$seconds" --message-bytes=256
  fi
  if [[ $have_relay == yes && -n $pg_data ]] && wants relay; then
    use_fresh_txmq
    optional relay --pg="${addr[pgqueue]}" --broker="${addr[txmq]}" --broker-pid="${pid[txmq]}" --json --runs=1 \
      --seconds="$seconds" --message-bytes=256 --rows="$backlog"
  fi
  uptimes+=("round $round: $(uptime | sed 's/.*load average/load average/')")
done

# --- tables, chart, and the section of docs/BENCHMARKS.md ----------------------------------------
"$bin/txmq-bench" report "$results" --markdown "$dir/tables.md" --plot-data "$dir/plot.dat"
cp "$results" "$raw"
gnuplot <<EOF || say "gnuplot could not draw $png (WORKLOADS without publish or consume leave it no data)"
set terminal pngcairo size 1100,460 font ",10"
set output "$png"
set multiplot layout 1,2 title "txmq and its peers on one machine ($(nproc) cores, 256-byte messages, medians of $rounds rounds)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set xtics rotate by -20
set key below
set title "Throughput (msg/s)"
set format y "%.0s%c"
plot "$dir/plot.dat" using 2:xtic(1) title "publish, 1,000 in flight", '' using 3 title "consume with acks"
set title "Latency at 10,000 msg/s (ms, log scale)"
set logscale y
set yrange [0.1:*]
set format y "%g"
plot "$dir/plot.dat" using (\$4 > 0 ? \$4 : 1/0):xtic(1) title "publish p50", '' using (\$5 > 0 ? \$5 : 1/0) title "publish p99", '' using (\$6 > 0 ? \$6 : 1/0) title "publish→delivery p99"
unset multiplot
EOF

section=$dir/section.md
{
  echo "<!-- peers:begin -->"
  echo "<!-- Written by scripts/bench-peers.sh; a rerun replaces this whole section, up to the end marker. -->"
  echo
  echo "Run of $(date -u '+%Y-%m-%d %H:%M UTC'): \`scripts/bench-peers.sh $rounds $seconds\` (backlog $backlog)."
  echo "Machine: $(nproc) cores ($cpu_model), $(free -g | awk '/^Mem:/{print $2}') GiB; raw append+fdatasync of the"
  echo "data disk measured by \`txmq-bench storage\` just before: ${fsync_rate}/s."
  echo "Versions: txmq $(git rev-parse --short HEAD 2>/dev/null || echo '?'), RabbitMQ $(dpkg-query -W -f='${Version}' rabbitmq-server),"
  echo "nats-server $(dpkg-query -W -f='${Version}' nats-server), PostgreSQL $(dpkg-query -W -f='${Version}' postgresql-15)."
  echo "Load while it ran (others may be using the machine): ${uptimes[*]}."
  if [[ ${SETTLE:-1} == 1 ]]; then
    echo "Before each run the previous one's aftermath was let finish (PostgreSQL CHECKPOINT, sync, then under"
    echo "10 % CPU busy for half a second, at most 20 s): waits of $(printf '%s\n' "${settle_seconds[@]}" |
      sort -n | awk '{a[NR]=$1} END{printf "%s–%s s, median %s s", a[1], a[NR], a[int((NR+1)/2)]}')."
  else
    echo "SETTLE=0: each run started right after the previous one ended."
  fi
  echo
  echo "Each row: \`txmq-bench WORKLOAD --system SYSTEM --runs 1 --seconds $seconds --warmup 1 --message-bytes 256"
  echo "--in-flight 1000 --batch B --rate 10000 --backlog $backlog --json\`, B = 100 for txmq and pgqueue (one produce"
  echo "request or one multi-row INSERT), 1 for RabbitMQ and NATS (one confirm per message). Broker MiB is the"
  echo "proportional set size of the server's process tree at the end of the run; CPU µs/msg is its CPU time over"
  echo "the measured part divided by the messages. NATS JetStream 2.9 acknowledges before fsync (it cannot be"
  echo "told to sync every write): its rows are a speed reference, not a durability peer. txmq-async is txmq"
  echo "started with \`--durability async\` (it too acknowledges before fsync), run beside NATS for the latency rows."
  [[ $have_relay == yes ]] || echo "The relay comparison was skipped: this txmq-bench has no \`relay\` workload yet."
  [[ $have_tx == yes ]] || echo "The transaction workload was skipped: this txmq-bench has no \`tx\` workload yet."
  cat "$dir/tables.md"
  echo
  echo "![txmq and its peers]($(basename "$png"))"
  echo
  echo "<!-- peers:end -->"
} > "$section"
if grep -q '<!-- peers:begin -->' "$doc"; then
  # Replace only what lies between the markers (inclusive).
  awk -v section="$section" '
    /<!-- peers:begin -->/ { while ((getline line < section) > 0) print line; skip = 1; next }
    /<!-- peers:end -->/ { skip = 0; next }
    !skip { print }' "$doc" > "$dir/doc.md"
  cat "$dir/doc.md" > "$doc"
else
  { echo; echo "## Peers: RabbitMQ, NATS JetStream, PostgreSQL as a queue (issue #7)"; echo; cat "$section"; } >> "$doc"
fi
cat "$dir/tables.md"
say "wrote $doc (peers section), $png and $raw"
