#!/bin/sh
# fuzz-run.sh: builds a libFuzzer target with clang and AddressSanitizer and
# fuzzes it for a bounded time from the repository's corpus. Registered as
# ctests (fuzz_request_test, fuzz_frame_test, fuzz_ddbjson_test, fuzz_expr_test, fuzz_sigv4_test: 20 s each,
# in make test) and
# run longer by `make fuzz`, which grows the corpus.
#
# usage: fuzz-run.sh NAME TARGET_C CORPUS SRC_ROOT GEN_DIR WORK_DIR SECONDS [SEEDS_C]
#   NAME      the target's name (fuzz_request, fuzz_frame, fuzz_ddbjson, ...): binaries and
#             messages
#   TARGET_C  the source defining LLVMFuzzerTestOneInput
#   CORPUS    the repository's corpus for it (rpc/fuzz/corpus,
#             common/fuzz/corpus): read, never written, unless
#             LAPSE_FUZZ_GROW=1
#   SRC_ROOT  the repository root
#   GEN_DIR   where protoc-c put lapse.pb-c.[ch] (regenerated here if absent)
#   WORK_DIR  scratch directory for objects, binaries, new inputs and crash
#             files (emptied of old inputs first)
#   SECONDS   how long to fuzz
#   SEEDS_C   optional: a program that writes more seeds into the directory
#             it is given (rpc/fuzz/seeds.c: one valid request of each kind,
#             made from today's messages, so seeds follow the protocol)
# LAPSE_FUZZ_GROW=1: after the run, the new inputs that reach code the
# corpus does not are merged into CORPUS (libFuzzer -merge=1), to be
# committed.
# Exit: 0 no crash, 77 skipped (no clang or no libFuzzer runtime), else failed.
set -eu

NAME=$1
TARGET=$2
CORPUS=$3
SRC=$4
GEN=$5
WORK=$6
SECS=$7
SEEDS_C=${8:-}

skip() {
    echo "$NAME: SKIP: $*"
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
[ -d "$CORPUS" ] || {
    echo "$NAME: no corpus directory $CORPUS" >&2
    exit 1
}
# Absolute paths: the fuzzer runs in WORK.
mkdir -p "$WORK"
abs() { (cd "$(dirname "$1")" && echo "$(pwd)/$(basename "$1")"); }
CORPUS=$(abs "$CORPUS")
TARGET=$(abs "$TARGET")
WORK=$(abs "$WORK")
[ -z "$SEEDS_C" ] || SEEDS_C=$(abs "$SEEDS_C")

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

# What the targets call: rpc/wire*.c, common/, the pure part of partition/,
# and the generated messages. Linked from an archive so only the objects
# needed are pulled in.
rm -f "$WORK/obj/"*.o "$WORK/libfuzzdeps.a"
for f in "$SRC"/common/*.c "$SRC/placement/pmap.c" "$SRC/placement/pmap_place.c" "$SRC/placement/hash.c" "$SRC"/rpc/wire*.c; do
    case $f in *_test.c | */fuzz_*.c) continue ;; esac
    o="$WORK/obj/$(basename "$(dirname "$f")")_$(basename "$f" .c).o"
    "$CLANG" $FLAGS $WARN $INSTR -c "$f" -o "$o"
done
"$CLANG" $FLAGS $INSTR -Wno-unused-parameter -c "$GEN/lapse.pb-c.c" -o "$WORK/obj/lapse.pb-c.o"
# The expression parser (fuzz_expr): expr/ and what re2c and lemon generated
# into EXPR_GEN_DIR (set by expr/CMakeLists.txt) at build time.
if [ -n "${EXPR_GEN_DIR:-}" ]; then
    for f in "$SRC"/expr/*.c; do
        case $f in *_test.c | */fuzz_*.c) continue ;; esac
        "$CLANG" $FLAGS $WARN $INSTR -I"$EXPR_GEN_DIR" -c "$f" -o "$WORK/obj/expr_$(basename "$f" .c).o"
    done
    "$CLANG" $FLAGS $INSTR -I"$SRC/expr" -c "$EXPR_GEN_DIR/expr_lex.c" -o "$WORK/obj/expr_gen_lex.o"
    "$CLANG" $FLAGS $INSTR -I"$SRC/expr" -w -c "$EXPR_GEN_DIR/expr_gram.c" -o "$WORK/obj/expr_gen_gram.o"
    FLAGS="$FLAGS -I$SRC/expr"
fi
# More sources and libraries a target needs (fuzz_sigv4: dynamodb/ddb_sigv4.c
# and libcrypto), from FUZZ_EXTRA_SRC and FUZZ_EXTRA_LIBS.
for f in ${FUZZ_EXTRA_SRC:-}; do
    "$CLANG" $FLAGS $WARN $INSTR -c "$f" -o "$WORK/obj/extra_$(basename "$f" .c).o"
done
ar rcs "$WORK/libfuzzdeps.a" "$WORK/obj/"*.o

LIBS="-lprotobuf-c -lxxhash -ljansson -lm -lpthread ${FUZZ_EXTRA_LIBS:-}"
"$CLANG" $FLAGS $WARN -fsanitize=fuzzer,address "$TARGET" "$WORK/libfuzzdeps.a" $LIBS \
    -o "$WORK/$NAME"

rm -rf "$WORK/seeds" "$WORK/new"
mkdir -p "$WORK/seeds" "$WORK/new"
if [ -n "$SEEDS_C" ]; then
    "$CLANG" $FLAGS $WARN -fsanitize=address "$SEEDS_C" "$WORK/libfuzzdeps.a" $LIBS \
        -o "$WORK/${NAME}_seeds"
    "$WORK/${NAME}_seeds" "$WORK/seeds"
fi

# New inputs go to new/; the corpus and seeds/ are only read. A crash, leak,
# timeout or out-of-memory makes libFuzzer exit non-zero and leaves the
# input in WORK as crash-*/leak-*/timeout-*/oom-*.
cd "$WORK"
echo "$NAME: $(ls "$CORPUS" | wc -l) corpus inputs, $(ls seeds | wc -l) seeds, $SECS s"
./"$NAME" -max_total_time="$SECS" -rss_limit_mb=1024 -timeout=10 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$WORK/" new "$CORPUS" seeds
if [ "${LAPSE_FUZZ_GROW:-0}" = 1 ]; then
    before=$(ls "$CORPUS" | wc -l)
    ./"$NAME" -merge=1 -rss_limit_mb=1024 -timeout=10 -max_len=65536 "$CORPUS" new seeds
    echo "$NAME: corpus $CORPUS grew from $before to $(ls "$CORPUS" | wc -l) inputs"
fi
