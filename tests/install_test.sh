#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds examples/ as an out-of-tree project against
# it (find_package(txmq CONFIG)), builds the producer example a second time from pkg-config's
# flags alone, and runs both against the installed txmq-broker on free loopback ports.
# Usage: tests/install_test.sh BUILD_DIR SOURCE_DIR LIBDIR   (ctest install_test, integration)
set -euo pipefail
build=$1 src=$2 libdir=$3

tmp=$(mktemp -d /tmp/txmq-install-test.XXXXXX)
broker_pid=
cleanup() {
  if [[ -n $broker_pid ]] && kill -0 "$broker_pid" 2>/dev/null; then kill -KILL "$broker_pid"; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "install_test: FAIL: $*" >&2; exit 1; }
prefix=$tmp/prefix

echo "== cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
for f in bin/txmq-broker bin/txmq-relay bin/txmq include/txmq/v1/frame.pb.h include/txmq/producer/producer.h \
         include/txmq/consumer/consumer.h include/txmq/client/connection.h "$libdir/libtxmq_producer.a" \
         "$libdir/cmake/txmq/txmq-config.cmake" "$libdir/pkgconfig/txmq-producer.pc" \
         share/man/man1/txmq.1.gz share/man/man1/txmq-broker.1.gz share/man/man1/txmq-relay.1.gz \
         share/bash-completion/completions/txmq share/bash-completion/completions/txmq-relay; do
  [[ -e $prefix/$f ]] || fail "$f is not installed"
done
# Everything lands under the prefix: the package's system files (/etc, systemd units) are not
# part of a plain install (packaging/CMakeLists.txt).
if grep -v "^$prefix/" "$build/install_manifest.txt"; then fail "cmake --install wrote outside the prefix"; fi
# Nothing of the build or source tree may leak into what a user of the prefix sees.
if grep -rl -e "$build" -e "$src/" "$prefix/$libdir/cmake" "$prefix/$libdir/pkgconfig"; then
  fail "the installed package files name the build or source tree"
fi

echo "== examples/ out of tree, find_package(txmq CONFIG) from $prefix"
cmake -S "$src/examples" -B "$tmp/examples" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH="$prefix" \
  >"$tmp/examples-configure.log" || { cat "$tmp/examples-configure.log"; fail "configuring examples/"; }
cmake --build "$tmp/examples" -j2 >"$tmp/examples-build.log" 2>&1 || { cat "$tmp/examples-build.log"; fail "building examples/"; }

echo "== pkg-config --cflags --libs txmq-producer"
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
flags=$(pkg-config --cflags --libs txmq-producer) || fail "pkg-config does not resolve txmq-producer"
echo "$flags"
[[ $flags == *"-I$prefix/$libdir/pkgconfig/../../include"* || $flags == *"-I$prefix/include"* ]] ||
  fail "pkg-config's -I is not the prefix's include/"
for pc in txmq-client txmq-consumer; do pkg-config --exists "$pc" || fail "pkg-config does not resolve $pc"; done
# shellcheck disable=SC2086  # the flags are words
c++ -std=c++20 -O1 -o "$tmp/producer_example_pc" "$src/examples/producer_example.cc" $flags ||
  fail "the producer example does not build from pkg-config's flags"

echo "== the installed txmq-broker on free loopback ports"
"$prefix/bin/txmq-broker" --listen 127.0.0.1:0 --http 127.0.0.1:0 --data-dir "$tmp/data" >"$tmp/broker.log" 2>&1 &
broker_pid=$!
address=
for _ in $(seq 1 300); do  # up to 30 s for the "listening on HOST:PORT" line
  address=$(sed -n 's/.*txmq broker listening on \([0-9.]*:[0-9]*\) .*/\1/p' "$tmp/broker.log")
  [[ -n $address ]] && break
  kill -0 "$broker_pid" 2>/dev/null || { cat "$tmp/broker.log"; fail "txmq-broker exited"; }
  sleep 0.1
done
[[ -n $address ]] || { cat "$tmp/broker.log"; fail "txmq-broker did not log its address within 30 s"; }
echo "broker on $address (pid $broker_pid)"

for exe in "$tmp/examples/txmq_producer_example" "$tmp/producer_example_pc"; do
  echo "== $exe $address"
  out=$(timeout 60 "$exe" "$address") || { echo "$out"; cat "$tmp/broker.log"; fail "$exe failed"; }
  echo "$out"
  grep -q '^100 of 100 messages stored$' <<<"$out" || fail "$exe did not store its 100 messages"
done

kill -TERM "$broker_pid"
wait "$broker_pid" || { cat "$tmp/broker.log"; fail "txmq-broker did not stop cleanly on SIGTERM"; }
broker_pid=
echo "install_test: OK"
