/*
 * fuzz_frame.c: libFuzzer target for the stream transport's framing
 * (rpc_frame.h), the bytes every daemon's port and every client's
 * connection read by hand since the stream transport became the default.
 *
 * An input is 8 bytes of seed, then a byte stream as a peer might send it
 * after the handshake. The stream is read as rpc_server_stream.c and
 * rpc_conn.c read it: into a buffer of RPC_FRAME_INBUF_MIN bytes to start
 * with (or, as the seed says, of a few bytes), each read at most the
 * buffer's free room (here a size the seed draws), every complete message taken (rpc_frame_next),
 * the partial tail kept and the buffer sized for it (rpc_frame_keep_tail). Invariants:
 *  1. the messages taken (ids, lengths, bodies) and the place where the
 *     stream is refused are those of the whole stream parsed at once, for
 *     any sizes of the reads;
 *  2. after the tail is kept the buffer has room for one more byte (a read
 *     of zero bytes would wait for ever);
 *  3. a message taken, written again with rpc_frame_append, gives its own
 *     bytes back.
 * AddressSanitizer checks every access on the way.
 *
 * Built and run by cmake/fuzz-run.sh (ctest fuzz_frame_test, make fuzz;
 * corpus rpc/fuzz/frame_corpus/) with clang -fsanitize=fuzzer,address.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "rpc_frame.h"

#define SEED_BYTES 8
#define MAX_MESSAGES 4096 /* an input of 64 KiB holds at most 5,461 */

typedef struct taken {
    size_t off; /* of the message in the stream */
    uint32_t id;
    size_t len; /* of its body */
} taken;

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_frame: invariant failed: %s\n", what);
        abort();
    }
}

/* Parses the whole stream at once into ref (at most MAX_MESSAGES); *bad_at
 * is the offset of the message refused, or SIZE_MAX. Returns the count. */
static size_t parse_whole(const uint8_t *s, size_t n, taken *ref, size_t *bad_at)
{
    size_t k = 0, off = 0;
    *bad_at = SIZE_MAX;
    while (k < MAX_MESSAGES) {
        uint32_t id;
        size_t len;
        int r = rpc_frame_next(s + off, n - off, &id, &len);
        if (r == 0) {
            break;
        }
        if (r < 0) {
            *bad_at = off;
            break;
        }
        ref[k++] = (taken){.off = off, .id = id, .len = len};
        off += RPC_FRAME_HDR + len;
    }
    return k;
}

/* Invariant 3 for message m of stream s. */
static void check_rewrite(const uint8_t *s, const taken *m)
{
    buf b;
    buf_init(&b);
    must(rpc_frame_append(&b, m->id, s + m->off + RPC_FRAME_HDR, m->len) == 0, "append");
    must(b.len == RPC_FRAME_HDR + m->len && memcmp(b.data, s + m->off, b.len) == 0,
         "a message written again gives its own bytes");
    buf_fini(&b);
}

/* The size of the next read: the seed's generator (xorshift64) picks
 * between one byte, a few, up to 4 KiB, and all the room there is. */
static size_t next_read(uint64_t *x, size_t room)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    size_t pick;
    switch (*x % 4) {
    case 0:
        pick = 1;
        break;
    case 1:
        pick = 1 + (size_t)((*x >> 8) % 16);
        break;
    case 2:
        pick = 1 + (size_t)((*x >> 8) % 4096);
        break;
    default:
        pick = room;
        break;
    }
    return pick < room ? pick : room;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < SEED_BYTES) {
        return 0;
    }
    uint64_t x = buf_get_u64be(data) | 1; /* xorshift needs a non-zero state */
    const uint8_t *s = data + SEED_BYTES;
    size_t n = size - SEED_BYTES;

    static taken ref[MAX_MESSAGES];
    size_t bad_at;
    size_t nref = parse_whole(s, n, ref, &bad_at);
    if (nref == MAX_MESSAGES) {
        return 0; /* more than this target follows; not an input libFuzzer makes */
    }

    /* The transport starts with RPC_FRAME_INBUF_MIN; half the inputs start
     * with a few bytes instead, so that inputs under libFuzzer's 64 KiB also
     * need the buffer grown for a message. */
    size_t incap = (x & 2) != 0 ? 1 + (size_t)((x >> 2) % 256) : RPC_FRAME_INBUF_MIN;
    size_t inlen = 0, pos = 0, k = 0;
    uint8_t *in = malloc(incap);
    must(in != NULL, "malloc");
    int refused = 0;
    while (pos < n && !refused) {
        size_t take = next_read(&x, incap - inlen);
        if (take > n - pos) {
            take = n - pos;
        }
        memcpy(in + inlen, s + pos, take);
        inlen += take;
        pos += take;
        size_t used = 0;
        for (;;) {
            uint32_t id;
            size_t len;
            int r = rpc_frame_next(in + used, inlen - used, &id, &len);
            if (r == 0) {
                break;
            }
            size_t at = pos - inlen + used; /* the message's offset in the stream */
            if (r < 0) {
                must(at == bad_at, "refused where the whole stream is refused");
                refused = 1;
                break;
            }
            must(k < nref && ref[k].off == at && ref[k].id == id && ref[k].len == len,
                 "the message the whole stream has there");
            must(memcmp(in + used + RPC_FRAME_HDR, s + at + RPC_FRAME_HDR, len) == 0,
                 "the body the whole stream has there");
            check_rewrite(s, &ref[k]);
            k++;
            used += RPC_FRAME_HDR + len;
        }
        if (!refused) {
            must(rpc_frame_keep_tail(&in, &inlen, &incap, used) == 0, "keep_tail");
            must(incap > inlen, "room to read after the tail is kept");
        }
    }
    if (!refused) {
        must(k == nref, "every message of the whole stream taken");
        must(bad_at == SIZE_MAX, "refused nowhere when the whole stream is refused nowhere");
    }
    free(in);
    return 0;
}
