# The two commands of README.md. Each installs what is missing first (scripts/setup.sh).
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= 2
CTEST_ARGS ?=
# Rounds and seconds per run for `make bench`, e.g. make bench BENCH_ARGS="5 10"
BENCH_ARGS ?=

.PHONY: all setup configure build test unit soak bench bench-broker run package clean sanitize

# Flags for `make run`, e.g. make run ARGS="--durability async"
ARGS ?=

all: build

setup:
	@bash scripts/setup.sh

configure: setup
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j$(JOBS)

# Everything but the long soak runs (label `soak`), within 20 minutes on 2 cores.
test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) -LE soak $(CTEST_ARGS)

unit: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) -L unit $(CTEST_ARGS)

# Everything built with gcc's AddressSanitizer + UndefinedBehaviorSanitizer in build-asan (UB
# halts at the first finding), then the unit and integration labels (README.md, Testing).
SANITIZE_DIR ?= build-asan
sanitize: setup
	@cmake -S . -B $(SANITIZE_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTXMQ_SANITIZE=address,undefined >/dev/null
	@cmake --build $(SANITIZE_DIR) -j$(JOBS)
	@cd $(SANITIZE_DIR) && ASAN_OPTIONS=abort_on_error=0:detect_stack_use_after_return=0 \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  ctest --output-on-failure -j$(JOBS) -L 'unit|integration' $(CTEST_ARGS)

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

# The Debian package: $(BUILD_DIR)/txmq_<version>_<arch>.deb (packaging/README.md).
package: build
	@cd $(BUILD_DIR) && cpack -G DEB

clean:
	@rm -rf $(BUILD_DIR)
