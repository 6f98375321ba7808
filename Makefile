# The two commands of README.md. Each installs what is missing first (scripts/setup.sh).
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= 2
CTEST_ARGS ?=

.PHONY: all setup configure build test unit soak bench run clean

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

soak: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -L soak $(CTEST_ARGS)

bench: build
	@$(BUILD_DIR)/bin/txmq-bench storage

clean:
	@rm -rf $(BUILD_DIR)
