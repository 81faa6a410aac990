# Thin wrapper over CMake. The README's two commands: make cluster, make test.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build build-asan test test-fast test-asan cluster cluster-down chaos bench clean

all: build

deps:
	@./deploy/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DLAPSE_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)

# Every test, then every test again under ASan + UBSan.
test: test-fast test-asan

test-fast: build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-asan: build-asan
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

cluster: build
	@./deploy/local-cluster.sh up $(BUILD)/bin

cluster-down:
	@./deploy/local-cluster.sh down

bench: build
	@$(BUILD)/bin/lapse-bench

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
