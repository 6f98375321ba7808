#!/usr/bin/env bash
# Builds the .deb with CPack (as `make package` does, into a temporary directory), checks its
# control data (dpkg-deb -I) and contents (dpkg-deb -c), then unpacks it (dpkg -x) and runs the
# packaged txmq-broker with the shipped /etc/txmq/broker.toml, adjusted to a temporary data
# directory and free loopback ports, until the packaged readiness check and /healthz say ready.
# Also: the man pages render without warnings, the bash completion completes, and the packaged
# relay starts from the shipped /etc/txmq/relay-example.toml (what txmq-relay@.service reads).
# Usage: tests/package_test.sh BUILD_DIR   (ctest package_test, label integration)
set -euo pipefail
build=$1

tmp=$(mktemp -d /tmp/txmq-package-test.XXXXXX)
broker_pid=
relay_pid=
cleanup() {
  if [[ -n $broker_pid ]] && kill -0 "$broker_pid" 2>/dev/null; then kill -KILL "$broker_pid"; fi
  if [[ -n $relay_pid ]] && kill -0 "$relay_pid" 2>/dev/null; then kill -KILL "$relay_pid"; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "package_test: FAIL: $*" >&2; exit 1; }

echo "== cpack -G DEB"
cpack --config "$build/CPackConfig.cmake" -G DEB -B "$tmp/out" >"$tmp/cpack.log" 2>&1 || { cat "$tmp/cpack.log"; fail "cpack"; }
debs=("$tmp"/out/*.deb)
[[ ${#debs[@]} -eq 1 && -f ${debs[0]} ]] || fail "cpack made ${#debs[@]} .deb files, expected 1"
deb=${debs[0]}
echo "$deb"

echo "== dpkg-deb -I"
dpkg-deb -I "$deb" | tee "$tmp/info"
field() { dpkg-deb -f "$deb" "$1"; }
[[ $(field Package) == txmq ]] || fail "Package is not txmq"
depends=$(field Depends)
for dep in adduser curl libpq5 libprotobuf libssl3 libboost-json1.81.0 libstdc++6; do
  [[ $depends == *"$dep"* ]] || fail "Depends lacks $dep: $depends"
done
for script in postinst prerm postrm conffiles; do
  grep -qE "^ +[0-9]+ bytes, +[0-9]+ lines +\*? +$script( |$)" "$tmp/info" || fail "control archive lacks $script"
done
dpkg-deb --ctrl-tarfile "$deb" | tar -x -C "$tmp" ./conffiles ./postinst ./prerm ./postrm
grep -qx /etc/txmq/broker.toml "$tmp/conffiles" || fail "/etc/txmq/broker.toml is not a conffile"
grep -qx /etc/txmq/relay-example.toml "$tmp/conffiles" || fail "/etc/txmq/relay-example.toml is not a conffile"
grep -q 'adduser --system --group' "$tmp/postinst" || fail "postinst does not create the txmq system user"
grep -q 'install -d -m 0700 -o txmq -g txmq /var/lib/txmq' "$tmp/postinst" || fail "postinst does not create /var/lib/txmq 0700"
for script in postinst prerm postrm; do sh -n "$tmp/$script" || fail "$script is not valid sh"; done

echo "== dpkg-deb -c"
dpkg-deb -c "$deb" | awk '{print $6}' >"$tmp/contents"
for f in ./usr/bin/txmq-broker ./usr/bin/txmq-relay ./usr/bin/txmq \
         ./usr/lib/libtxmq_producer.a ./usr/lib/libtxmq_consumer.a ./usr/lib/libtxmq_client.a \
         ./usr/include/txmq/producer/producer.h ./usr/include/txmq/v1/frame.pb.h \
         ./usr/lib/cmake/txmq/txmq-config.cmake ./usr/lib/pkgconfig/txmq-producer.pc \
         ./etc/txmq/broker.toml ./etc/txmq/relay-example.toml ./usr/lib/txmq/txmq-broker-wait-ready \
         ./lib/systemd/system/txmq-broker.service ./lib/systemd/system/txmq-relay@.service \
         ./usr/share/man/man1/txmq.1.gz ./usr/share/man/man1/txmq-broker.1.gz ./usr/share/man/man1/txmq-relay.1.gz \
         ./usr/share/bash-completion/completions/txmq ./usr/share/bash-completion/completions/txmq-broker \
         ./usr/share/bash-completion/completions/txmq-relay; do
  grep -qxF "$f" "$tmp/contents" || fail "the package lacks $f"
done
if grep -E '^\./usr/local/|^\./var/' "$tmp/contents"; then fail "the package ships files under /usr/local or /var"; fi
echo "$(wc -l <"$tmp/contents") entries"

echo "== dpkg -x"
root=$tmp/root
dpkg -x "$deb" "$root"
unit=$root/lib/systemd/system/txmq-broker.service
relay_unit=$root/lib/systemd/system/txmq-relay@.service
grep -qx 'ExecStart=/usr/bin/txmq-broker --config /etc/txmq/broker.toml' "$unit" || fail "unexpected ExecStart in $unit"
grep -qx 'ExecStartPost=/usr/lib/txmq/txmq-broker-wait-ready /etc/txmq/broker.toml 60' "$unit" || fail "no readiness check in $unit"
grep -qx 'User=txmq' "$unit" || fail "the broker does not run as txmq"
grep -qx 'ExecStart=/usr/bin/txmq-relay --config /etc/txmq/relay-%i.toml' "$relay_unit" ||
  fail "the relay unit does not run txmq-relay --config /etc/txmq/relay-%i.toml"
if grep -q EnvironmentFile "$relay_unit"; then fail "the relay unit still reads an environment file"; fi
grep -qx 'data_dir = "/var/lib/txmq"' "$root/etc/txmq/broker.toml" || fail "broker.toml's data_dir is not /var/lib/txmq"
if command -v systemd-analyze >/dev/null; then
  # Only the binaries' absence on this host may be reported (they are in $root, not in /usr).
  (cd "$root/lib/systemd/system" && systemd-analyze verify --man=no txmq-broker.service txmq-relay@.service 2>&1 || true) |
    grep -vE 'Command /usr/(bin/txmq-(broker|relay)|lib/txmq/txmq-broker-wait-ready) is not executable' >"$tmp/verify" || true
  [[ ! -s $tmp/verify ]] || { cat "$tmp/verify"; fail "systemd-analyze verify"; }
fi
"$root/usr/bin/txmq-relay" --help >/dev/null || fail "the packaged txmq-relay --help"
"$root/usr/bin/txmq" --help >/dev/null || fail "the packaged txmq --help"

echo "== man pages and bash completion"
for program in txmq txmq-broker txmq-relay; do
  MANWIDTH=80 man --warnings -l "$root/usr/share/man/man1/$program.1.gz" >"$tmp/$program.txt" 2>"$tmp/$program.err" ||
    fail "man -l $program.1.gz"
  [[ ! -s $tmp/$program.err ]] || { cat "$tmp/$program.err"; fail "man --warnings -l $program.1.gz warned"; }
  grep -q "^SYNOPSIS" "$tmp/$program.txt" || fail "$program.1.gz has no SYNOPSIS"
done
grep -q -- "--config FILE" "$tmp/txmq-relay.txt" || fail "txmq-relay.1 does not describe --config"
completed=$(bash -c 'source "$1"; COMP_WORDS=(txmq topic cr); COMP_CWORD=2; _txmq_complete; echo "${COMPREPLY[*]}"' _ \
  "$root/usr/share/bash-completion/completions/txmq")
[[ $completed == create ]] || fail "the packaged completion offered '$completed' for 'txmq topic cr'"

echo "== the packaged relay with the shipped relay-example.toml"
# Its pg and broker are overridden (flags win over the file) so that nothing on this host is
# reached; every other setting of the example is read. Started = the file parsed.
"$root/usr/bin/txmq-relay" --config "$root/etc/txmq/relay-example.toml" --pg "host=127.0.0.1 port=1 dbname=none" \
  --broker 127.0.0.1:1 --http 127.0.0.1:0 >"$tmp/relay.log" 2>&1 &
relay_pid=$!
for _ in $(seq 100); do
  grep -q 'starting: broker 127.0.0.1:1, batch 500' "$tmp/relay.log" && break
  kill -0 "$relay_pid" 2>/dev/null || break
  sleep 0.1
done
grep -q 'starting: broker 127.0.0.1:1, batch 500' "$tmp/relay.log" || { cat "$tmp/relay.log"; fail "the relay did not start from relay-example.toml"; }
kill -TERM "$relay_pid"
wait "$relay_pid" || { cat "$tmp/relay.log"; fail "txmq-relay did not stop cleanly on SIGTERM"; }
relay_pid=

echo "== the packaged broker with the shipped config, on free ports and a temporary data dir"
# Below the range of outgoing connections' local ports, which another test's connection could take.
# free_port's claims on them end with its python3; this script claims them again (the same
# flock files, tests/support/broker_process.cc) until it ends, so no other test process starts
# a server on them. Another process may claim one in between: then two other ports.
claims=${TMPDIR:-/tmp}/txmq-test-ports
for attempt in 1 2 3; do
  # $(...), not < <(...): bash waits for python3 to exit, and so for its claims to end.
  read -r port http_port <<<"$(PYTHONPATH="$(dirname "$0")/python" python3 -c '
from txmq_testing import free_port
print(free_port(), free_port())')"
  exec 8>"$claims/$port" 9>"$claims/$http_port"
  if flock -n 8 && flock -n 9; then break; fi
  exec 8>&- 9>&-
  [[ $attempt -lt 3 ]] || fail "ports $port and $http_port were claimed by other tests three times"
done
config=$tmp/broker.toml
sed -e "s|^listen = .*|listen = \"127.0.0.1:$port\"|" -e "s|^http = .*|http = \"127.0.0.1:$http_port\"|" \
    -e "s|^data_dir = .*|data_dir = \"$tmp/data\"|" "$root/etc/txmq/broker.toml" >"$config"
{ grep -q "^data_dir = \"$tmp/data\"$" "$config" && grep -q "^http = \"127.0.0.1:$http_port\"$" "$config"; } ||
  fail "could not adjust the shipped broker.toml"
"$root/usr/bin/txmq-broker" --config "$config" >"$tmp/broker.log" 2>&1 8>&- 9>&- &
broker_pid=$!
"$root/usr/lib/txmq/txmq-broker-wait-ready" "$config" 30 || { cat "$tmp/broker.log"; fail "the readiness check"; }
health=$(curl -fsS "http://127.0.0.1:$http_port/healthz") || fail "/healthz"
[[ $health == ok ]] || fail "/healthz answered '$health'"
grep -q "listening on 127.0.0.1:$port .*data in $tmp/data" "$tmp/broker.log" || { cat "$tmp/broker.log"; fail "the broker did not use the config"; }
"$root/usr/bin/txmq" --help >/dev/null
kill -TERM "$broker_pid"
wait "$broker_pid" || { cat "$tmp/broker.log"; fail "txmq-broker did not stop cleanly on SIGTERM"; }
broker_pid=
echo "package_test: OK"
