#!/bin/sh
# run.sh: builds the request-decoder fuzz target with clang's libFuzzer and
# AddressSanitizer, writes a seed corpus of valid requests, and fuzzes for a
# bounded time. Registered as ctest fuzz_request_test.
#
# usage: run.sh SRC_ROOT GEN_DIR WORK_DIR [SECONDS]
#   SRC_ROOT  the repository root
#   GEN_DIR   where protoc-c put lapse.pb-c.[ch] (regenerated here if absent)
#   WORK_DIR  scratch directory for objects, binaries, corpus and crash files
# Exit: 0 no crash, 77 skipped (no clang or no libFuzzer runtime), else failed.
set -eu

SRC=$1
GEN=$2
WORK=$3
SECS=${4:-20}

skip() {
    echo "fuzz_request_test: SKIP: $*"
    exit 77
}

CLANG=${CLANG:-}
if [ -z "$CLANG" ]; then
    for c in clang clang-14 clang-15 clang-16 clang-17 clang-18; do
        if command -v "$c" >/dev/null 2>&1; then
            CLANG=$c
            break
        fi
    done
fi
[ -n "$CLANG" ] || skip "clang not found"

mkdir -p "$WORK/obj"
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)\n{ (void)d; (void)n; return 0; }\n' \
    >"$WORK/probe.c"
"$CLANG" -fsanitize=fuzzer,address "$WORK/probe.c" -o "$WORK/probe" >/dev/null 2>&1 ||
    skip "$CLANG cannot link -fsanitize=fuzzer (libclang-rt dev package missing?)"

if [ ! -f "$GEN/lapse.pb-c.c" ]; then
    mkdir -p "$WORK/gen"
    protoc-c --c_out="$WORK/gen" -I"$SRC/proto" "$SRC/proto/lapse.proto"
    GEN=$WORK/gen
fi

FLAGS="-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -I$GEN"
WARN="-Wall -Wextra -Werror -Wno-missing-braces"
INSTR="-fsanitize=fuzzer-no-link,address"

# The decoder and everything it calls: rpc/wire*.c, common/, the pure part of
# partition/, and the generated messages. Linked from an archive so only the
# objects needed are pulled in.
rm -f "$WORK/obj/"*.o "$WORK/libfuzzdeps.a"
for f in "$SRC"/common/*.c "$SRC/partition/pmap.c" "$SRC/partition/hash.c" "$SRC"/rpc/wire*.c; do
    case $f in *_test.c) continue ;; esac
    o="$WORK/obj/$(basename "$(dirname "$f")")_$(basename "$f" .c).o"
    "$CLANG" $FLAGS $WARN $INSTR -c "$f" -o "$o"
done
"$CLANG" $FLAGS $INSTR -Wno-unused-parameter -c "$GEN/lapse.pb-c.c" -o "$WORK/obj/lapse.pb-c.o"
ar rcs "$WORK/libfuzzdeps.a" "$WORK/obj/"*.o

LIBS="-lprotobuf-c -lxxhash -ljansson -lm -lpthread"
"$CLANG" $FLAGS $WARN -fsanitize=fuzzer,address "$SRC/rpc/fuzz_request.c" \
    "$WORK/libfuzzdeps.a" $LIBS -o "$WORK/fuzz_request"
"$CLANG" $FLAGS $WARN -fsanitize=address "$SRC/rpc/fuzz/seeds.c" \
    "$WORK/libfuzzdeps.a" $LIBS -o "$WORK/fuzz_seeds"

rm -rf "$WORK/seeds" "$WORK/corpus"
mkdir -p "$WORK/seeds" "$WORK/corpus"
"$WORK/fuzz_seeds" "$WORK/seeds"

# New inputs go to corpus/; seeds/ stays as generated. A crash, leak, timeout
# or out-of-memory makes libFuzzer exit non-zero and leaves the input in
# WORK as crash-*/leak-*/timeout-*/oom-*.
cd "$WORK"
exec ./fuzz_request -max_total_time="$SECS" -rss_limit_mb=1024 -timeout=10 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$WORK/" corpus seeds
