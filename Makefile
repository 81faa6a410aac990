# Thin wrapper over CMake. The README's two commands: make cluster, make test.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX     ?= /usr/local

.PHONY: all deps build build-asan test test-fast test-asan cluster cluster-down \
        netns-up netns-down netns-status chaos bench fuzz install demo clean

all: build

deps:
	@./deploy/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DLAPSE_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)

# Every test, then every test again under ASan + UBSan (LeakSanitizer with
# cmake/lsan-nng.supp: one leak inside Debian's NNG 1.5.2). A test that skipped
# fails the target unless it carries the ctest label may-skip
# (cmake/check-skips.sh).
test: test-fast test-asan

test-fast: build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --output-junit ctest-junit.xml
	@./cmake/check-skips.sh $(BUILD) $(BUILD)/ctest-junit.xml

test-asan: build-asan
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/cmake/lsan-nng.supp \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS) --output-junit ctest-junit.xml
	@./cmake/check-skips.sh $(ASAN_BUILD) $(ASAN_BUILD)/ctest-junit.xml

# LAPSE_PORT=N moves the coordinator to N and node i to N+i,
# LAPSE_METRICS_PORT=M node i's metrics to M+i (defaults 7400 and 9400), for
# cluster and demo alike.
cluster: build
	@./deploy/local-cluster.sh up $(BUILD)/bin

# DynamoDB's SessionData TTL example on the local cluster (started first if
# needed, quietly): sessions due a few seconds ahead disappear while their
# TTL deletes arrive on the stream.
demo: build
	@./deploy/local-cluster.sh ensure $(BUILD)/bin
	@./deploy/demo.sh $(BUILD)/bin

cluster-down:
	@./deploy/local-cluster.sh down

# The same cluster spread over network namespaces joined by a bridge, one per
# host: two coordinators, three nodes each beside an etcd member (root only;
# docs/operations.md). Clients run in the coordinator's
# namespace: ./deploy/netns-cluster.sh lapse ARGS. State under $$LAPSE_HOME,
# else .lapse-netns. LAPSE_NETNS_NODES=N makes N node hosts (3 to 9; the
# etcd members stay three).
netns-up: build
	@./deploy/netns-cluster.sh up --bin-dir $(BUILD)/bin

netns-down:
	@./deploy/netns-cluster.sh down

netns-status:
	@./deploy/netns-cluster.sh status

# The daemons, the CLI, liblapse (.so and .a), lapse.h and lapse.pc under
# $(PREFIX) (bin/, lib/, include/lapse/, lib/pkgconfig/); DESTDIR stages a
# package (docs/operations.md, step 1).
install: build
	@DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

# The request path against Redis (docs/benchmarks.md, "The lean request path"):
# Redis alone first (redis-benchmark), then Lapse's workloads, then the ratios:
# once with 16 threads each making one call at a time, once with 16 calls kept
# in flight from callbacks (--async: redis-benchmark's own way of driving -c 16).
bench: build
	@bench/install-redis.sh
	@$(BUILD)/bin/lapse-bench --vs-redis --threads 16 --value-bytes 100 --seconds 10 \
	  --workloads put,batch-put,get --replication 1,3
	@$(BUILD)/bin/lapse-bench --vs-redis --threads 16 --value-bytes 100 --seconds 10 \
	  --workloads put,get --replication 1,3 --async
	@$(BUILD)/bin/lapse-bench --threads 1 --value-bytes 100 --seconds 10 --etcd 1 \
	  --workloads put,get --replication 1,3

# Long chaos profile (docs/chaos.md): 3 seeds of 540 s of mixed faults each (over
# a thousand faults in all), a
# report in $(BUILD)/chaos-report.txt and a summary here. CHAOS_SEED=S replays.
# As root the runs happen in network namespaces and include the partition
# fault; otherwise that fault is skipped (the first line says why). Tables keep
# CHAOS_REPLICATION copies (3, as make cluster's; 1 for the single-copy cluster).
CHAOS_REPLICATION ?= 3
chaos: build
	@$(BUILD)/bin/lapse-chaos --profile long --bin-dir $(BUILD)/bin \
	  --replication $(CHAOS_REPLICATION) \
	  --report $(BUILD)/chaos-report.txt $(if $(CHAOS_SEED),--seed $(CHAOS_SEED))

# The fuzz targets (cmake/fuzz-run.sh), FUZZ_SECONDS (default 300) each,
# each from its corpus in the repository, which grows by the new inputs that
# reach new code: commit rpc/fuzz/corpus, rpc/fuzz/frame_corpus, common/fuzz/corpus, expr/fuzz/corpus and
# dynamodb/fuzz/corpus afterwards. Then the gateway's HTTP request path
# (tests/dynamodb_fuzz_test.py, a black box on a real cluster) for as long,
# growing tests/fuzz/ddb_http by the requests whose answers had a new shape.
# make test runs them 20 s each without growing anything.
FUZZ_SECONDS ?= 300
fuzz: build
	@LAPSE_FUZZ_GROW=1 sh cmake/fuzz-run.sh fuzz_request rpc/fuzz_request.c rpc/fuzz/corpus \
	  $(CURDIR) $(BUILD)/proto $(BUILD)/fuzz/request $(FUZZ_SECONDS) rpc/fuzz/seeds.c
	@FUZZ_EXTRA_SRC=$(CURDIR)/rpc/rpc_frame.c FUZZ_EXTRA_LIBS=-lnng LAPSE_FUZZ_GROW=1 sh cmake/fuzz-run.sh fuzz_frame \
	  rpc/fuzz_frame.c rpc/fuzz/frame_corpus $(CURDIR) $(BUILD)/proto $(BUILD)/fuzz/frame $(FUZZ_SECONDS)
	@LAPSE_FUZZ_GROW=1 sh cmake/fuzz-run.sh fuzz_ddbjson common/fuzz_ddbjson.c common/fuzz/corpus \
	  $(CURDIR) $(BUILD)/proto $(BUILD)/fuzz/ddbjson $(FUZZ_SECONDS)
	@EXPR_GEN_DIR=$(BUILD)/expr/gen LAPSE_FUZZ_GROW=1 sh cmake/fuzz-run.sh fuzz_expr expr/fuzz_expr.c \
	  expr/fuzz/corpus $(CURDIR) $(BUILD)/proto $(BUILD)/fuzz/expr $(FUZZ_SECONDS)
	@FUZZ_EXTRA_SRC=$(CURDIR)/dynamodb/ddb_sigv4.c FUZZ_EXTRA_LIBS=-lcrypto LAPSE_FUZZ_GROW=1 \
	  sh cmake/fuzz-run.sh fuzz_sigv4 dynamodb/fuzz_sigv4.c dynamodb/fuzz/corpus \
	  $(CURDIR) $(BUILD)/proto $(BUILD)/fuzz/sigv4 $(FUZZ_SECONDS)
	@DDB_FUZZ_SECONDS=$(FUZZ_SECONDS) DDB_FUZZ_GROW=1 tests/dynamodb_test.sh pytest \
	  deploy/local-cluster.sh $(BUILD)/bin tests/dynamodb_fuzz_test.py

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
