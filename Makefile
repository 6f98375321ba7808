# The two commands of README.md. Each installs what is missing first (scripts/setup.sh).
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= 2
CTEST_ARGS ?=
# Rounds and seconds per run for `make bench`, e.g. make bench BENCH_ARGS="5 10"
BENCH_ARGS ?=

.PHONY: all setup configure build test unit soak bench bench-broker run run-cluster cluster-down package clean sanitize fuzz fuzz-build

# Flags for `make run`, e.g. make run ARGS="--durability async"
ARGS ?=

all: build

setup:
	@bash scripts/setup.sh

# GiB a cold build needs on BUILD_DIR's disk, ccache's share included, with some margin
# (README.md, "Two commands": the build 4.7 and ccache 0.5 measured); make test adds the fuzz
# build and the tests' temporary data (7.1 at its peak).
DISK_GIB ?= 6
test: DISK_GIB = 8

configure: setup
	@bash scripts/check-disk.sh $(BUILD_DIR) $(DISK_GIB) "make $(or $(MAKECMDGOALS),all)"
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j$(JOBS)

# Everything but the long soak runs (label `soak`): ctest 599–711 s on 2 cores after the build; then each
# fuzz target for 30 s in a clang build (label fuzz, fuzz/README.md) made at -O0 in
# $(FUZZ_TEST_DIR): a broker batch compiles in less than half its time at make fuzz's -O2.
# That build and then its label run at nice 19 while the gcc build's tests run: the tests leave the 2 cores
# about 70 % idle (they mostly wait on brokers, PostgreSQL and etcd), and the fuzz build is
# minutes of both cores that CI would otherwise spend after them (README.md, Testing). Their
# output goes to $(FUZZ_TEST_DIR)/build.log and $(FUZZ_TEST_DIR)/tests.log: the build's printed
# if it fails, the label's always.
FUZZ_TEST_DIR ?= build-fuzz-quick
test: build
	@mkdir -p $(FUZZ_TEST_DIR)
	@nice -n 19 sh -c '$(MAKE) --no-print-directory fuzz-build FUZZ_DIR=$(FUZZ_TEST_DIR) FUZZ_QUICK=ON \
	      > $(FUZZ_TEST_DIR)/build.log 2>&1 || exit 97; \
	    cd $(FUZZ_TEST_DIR) && ctest --output-on-failure -j$(JOBS) -L fuzz > tests.log 2>&1' & fuzz=$$!; \
	  (cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) -LE soak $(CTEST_ARGS)); tests=$$?; \
	  wait $$fuzz; fuzz_rc=$$?; \
	  if [ $$fuzz_rc -eq 97 ]; then cat $(FUZZ_TEST_DIR)/build.log; echo "make test: the fuzz build failed"; exit 1; fi; \
	  echo "make test: the fuzz label ($(FUZZ_TEST_DIR), beside the tests above):"; cat $(FUZZ_TEST_DIR)/tests.log; \
	  [ $$fuzz_rc -eq 0 ] || { echo "make test: a fuzz target failed"; exit 1; }; \
	  exit $$tests

unit: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) -L unit $(CTEST_ARGS)

# The libFuzzer targets (fuzz/README.md): a clang build in build-fuzz of the fuzz targets and
# the libraries they need only. `make fuzz` runs every target FUZZ_SECONDS (JOBS at once) and
# prints each one's executions; findings land in build-fuzz/fuzz/artifacts/.
FUZZ_DIR ?= build-fuzz
# ON: -O0 (-DTXMQ_FUZZ_QUICK, CMakeLists.txt), as make test builds them.
FUZZ_QUICK ?= OFF
FUZZ_SECONDS ?= 300
FUZZ_TARGETS = frame_dispatch config_toml webhook_parse outbox_row address_units
fuzz-build: setup
	@CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTXMQ_FUZZ=ON -DTXMQ_FUZZ_QUICK=$(FUZZ_QUICK) >/dev/null
	@cmake --build $(FUZZ_DIR) -j$(JOBS) --target txmq_fuzzers

fuzz: fuzz-build
	@mkdir -p $(FUZZ_DIR)/fuzz/logs
	@printf '%s\n' $(FUZZ_TARGETS) | xargs -P $(JOBS) -I{} sh -c \
	  'bash scripts/fuzz.sh $(FUZZ_DIR) {} $(FUZZ_SECONDS) > $(FUZZ_DIR)/fuzz/logs/{}.log 2>&1 \
	   && echo "fuzz {}: ok" || { echo "fuzz {}: FINDING (see $(FUZZ_DIR)/fuzz/logs/{}.log)"; exit 255; }'
	@for t in $(FUZZ_TARGETS); do \
	  printf '%-16s %s\n' $$t "$$(grep -h -E 'stat::number_of_executed_units|cov: ' $(FUZZ_DIR)/fuzz/logs/$$t.log | tail -2 | tr '\n' ' ')"; \
	done

# Everything built with gcc's AddressSanitizer + UndefinedBehaviorSanitizer in build-asan (UB
# halts at the first finding), then the unit and integration labels (README.md, Testing).
SANITIZE_DIR ?= build-asan
# Not meaningful instrumented: UBSan reports crash_report's deliberate null store before the
# SIGSEGV handler under test runs; install_test links the installed, instrumented libraries
# from an uninstrumented examples/ build (undefined __asan_/__ubsan_ symbols).
SANITIZE_SKIP ?= ^crash_report\.segv|^install_test$$
sanitize: setup
	@cmake -S . -B $(SANITIZE_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTXMQ_SANITIZE=address,undefined >/dev/null
	@cmake --build $(SANITIZE_DIR) -j$(JOBS)
	@cd $(SANITIZE_DIR) && ASAN_OPTIONS=abort_on_error=0:detect_stack_use_after_return=0 \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  ctest --output-on-failure -j$(JOBS) -L 'unit|integration' -E '$(SANITIZE_SKIP)' $(CTEST_ARGS)

soak: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -L soak $(CTEST_ARGS)

# txmq beside RabbitMQ, NATS JetStream and a PostgreSQL table queue (installs the peers when
# missing, runs them on loopback, writes docs/BENCHMARKS.md's peers section and a chart).
bench: build
	@BUILD_DIR=$(BUILD_DIR) bash scripts/bench-peers.sh $(BENCH_ARGS)

# The broker's own workloads alone, as JSON lines (docs/BENCHMARKS.md, issue #3).
bench-broker: build
	@BUILD_DIR=$(BUILD_DIR) bash scripts/bench-broker.sh

# The broker on its embedded default: RocksDB under ./data, wire protocol on 127.0.0.1:7878,
# admin HTTP (/healthz, /metrics) on 127.0.0.1:7879. Ctrl-C stops it cleanly.
run: build
	@$(BUILD_DIR)/bin/txmq-broker --data-dir ./data $(ARGS)

# etcd + three brokers on loopback, data under ./data-cluster (docs/cluster.md); stop them with
# `make cluster-down` (scripts/cluster.sh down). Broker flags: make run-cluster ARGS="..."
run-cluster: build
	@BUILD_DIR=$(BUILD_DIR) BROKER_ARGS="$(ARGS)" bash scripts/cluster.sh up

cluster-down:
	@BUILD_DIR=$(BUILD_DIR) bash scripts/cluster.sh down

# The Debian package: $(BUILD_DIR)/txmq_<version>_<arch>.deb (packaging/README.md).
package: build
	@cd $(BUILD_DIR) && cpack -G DEB

clean:
	@rm -rf $(BUILD_DIR)
