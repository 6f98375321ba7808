#!/usr/bin/env bash
# Installs the Debian 12 packages txmq needs to build and test, and nothing else.
# Idempotent: when every package is present it only checks and exits.
# Runs as root (or through sudo when available).
set -euo pipefail

packages=(
  build-essential cmake ccache pkg-config
  # the linker (CMakeLists.txt, TXMQ_LLD): a fifth of GNU ld's time for the test executables
  lld
  libboost1.81-dev libboost-json1.81-dev libboost-program-options1.81-dev libboost-url1.81-dev
  librocksdb-dev libprotobuf-dev protobuf-compiler
  libpq-dev postgresql postgresql-15
  libgtest-dev libgmock-dev libbenchmark-dev
  libssl-dev openssl procps
  # link_cut_test (label fault) makes a network namespace and a veth pair with ip(8)
  iproute2
  libtomlplusplus-dev
  # txmq-broker's allocator (tcmalloc_minimal; broker/CMakeLists.txt says why)
  libgoogle-perftools-dev
  librabbitmq-dev libnats-dev
  # make package (dpkg-shlibdeps), its readiness check and tests (/healthz, free ports)
  dpkg-dev curl python3
  # manual_test and package_test render the generated man pages (man --warnings -l)
  man-db groff-base
  # the web console's browser tests (ctest -L browser) and scripts/console-screenshots.sh:
  # headless Chromium driven by selenium from the system Python (/usr/bin/python3)
  chromium chromium-driver python3-selenium
  # The Python examples' wire client (protoc --python_out needs the protobuf runtime)
  python3-protobuf
  # make fuzz and the fuzz label of make test: clang 14 with libFuzzer's runtime
  clang-14 libclang-rt-14-dev
  # cluster mode's coordinator (DESIGN.md §8) and the `cluster` label's tests: etcd 3.4
  etcd-server
  # etcdctl: cluster_security_test reads what etcd holds (no token, only its hash)
  etcd-client
)
# Node.js and npm run the OpenAPI validator and the Standard Webhooks library in the tests
# (tests/node, pinned by its package-lock.json). Debian's nodejs + npm, unless a node and npm
# are already installed (another distribution's nodejs package bundles npm and conflicts with
# Debian's npm package).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  # dpkg-query prints "install ok installed" only for a fully installed package.
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing missing packages: ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then sudo_cmd=(sudo); else
    echo "setup: must run as root (or with sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
# Boost 1.81 replaces Debian's default 1.74 -dev packages; that is expected (Asio coroutines
# need 1.81 with GCC 12).
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
# The postgresql package may start a system cluster; tests run their own private clusters,
# so the system one is not needed, but leaving it running does no harm.
echo "setup: done"
