/*
 * rpc_frame_test.c: the receive buffer's sizing (rpc_frame_keep_tail), as
 * a reader takes a big message in pieces: it grows to the message's size,
 * never shrinks under the part of a message still to come (a buffer shrunk
 * to 64 KiB holding 64 KiB of a 5 MB message was full with the message
 * incomplete, and the connection failed: rpc_conn_test's big_reply, once
 * in a few dozen runs), and shrinks back once what is left fits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../common/buf.h"
#include "rpc_frame.h"

enum { BIG = 5 * 1000 * 1000 };

/* A buffer of cap bytes that starts a message whose body is n bytes (an id
 * with its top bit set, then zeros). */
static uint8_t *partial(size_t cap, uint64_t n)
{
    uint8_t *in = calloc(1, cap);
    assert_non_null(in);
    buf_put_u64be(in, n);
    buf_put_u32be(in + 8, 0x80000001u);
    return in;
}

static void grows_to_the_message_and_never_under_what_is_left(void **state)
{
    (void)state;
    /* The first piece: 20,000 bytes of a big message in a new buffer. */
    size_t cap = RPC_FRAME_INBUF_MIN, len = 20000;
    uint8_t *in = partial(cap, BIG);
    assert_int_equal(rpc_frame_keep_tail(&in, &len, &cap, 0), 0);
    assert_int_equal(cap, 8 + (size_t)BIG);
    /* More pieces, to exactly 64 KiB in: the buffer keeps the message's
     * size (it used to shrink to 64 KiB here, full and incomplete). */
    len = RPC_FRAME_INBUF_MIN;
    assert_int_equal(rpc_frame_keep_tail(&in, &len, &cap, 0), 0);
    assert_int_equal(cap, 8 + (size_t)BIG);
    assert_true(cap > len);
    /* Under 64 KiB in, the same. */
    len = 30000;
    assert_int_equal(rpc_frame_keep_tail(&in, &len, &cap, 0), 0);
    assert_int_equal(cap, 8 + (size_t)BIG);
    /* The message whole and taken, with 100 bytes of a small one behind
     * it (in a buffer that had room for them): back to 64 KiB, those bytes
     * kept at the front. */
    cap = 8 + (size_t)BIG + 100;
    in = realloc(in, cap);
    assert_non_null(in);
    len = cap;
    buf_put_u64be(in + 8 + BIG, 200);
    buf_put_u32be(in + 16 + BIG, 0x80000002u);
    assert_int_equal(rpc_frame_keep_tail(&in, &len, &cap, 8 + (size_t)BIG), 0);
    assert_int_equal(len, 100);
    assert_int_equal(cap, RPC_FRAME_INBUF_MIN);
    assert_int_equal(buf_get_u64be(in), 200);
    assert_int_equal(buf_get_u32be(in + 8), 0x80000002u);
    free(in);
}

/* A big buffer whose next message is bigger than 64 KiB but smaller than
 * the buffer: kept at least that message's size. */
static void never_shrinks_under_the_next_message(void **state)
{
    (void)state;
    size_t cap = 8 + (size_t)BIG, len = RPC_FRAME_INBUF_MIN;
    uint8_t *in = partial(cap, 200000);
    assert_int_equal(rpc_frame_keep_tail(&in, &len, &cap, 0), 0);
    assert_true(cap >= 8 + 200000);
    free(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grows_to_the_message_and_never_under_what_is_left),
        cmocka_unit_test(never_shrinks_under_the_next_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
