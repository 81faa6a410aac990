/* rpc_frame.c: the stream transport's framing (rpc_frame.h). */
#include "rpc_frame.h"

#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "rpc.h"

const uint8_t rpc_frame_hello_req0[RPC_FRAME_HELLO] = {0x00, 'S',  'P',  0x00,
                                                       0x00, 0x30, 0x00, 0x00};
const uint8_t rpc_frame_hello_rep0[RPC_FRAME_HELLO] = {0x00, 'S',  'P',  0x00,
                                                       0x00, 0x31, 0x00, 0x00};

int rpc_frame_append(buf *b, uint32_t id, const void *body, size_t len)
{
    if (buf_reserve(b, RPC_FRAME_HDR + len) != 0) {
        return LAPSE_ENOMEM;
    }
    /* Room was made: the appends cannot fail. */
    (void)buf_append_u64be(b, 4 + (uint64_t)len);
    (void)buf_append_u32be(b, id);
    (void)buf_append(b, body, len);
    return 0;
}

int rpc_frame_next(const uint8_t *in, size_t avail, uint32_t *id, size_t *len)
{
    if (avail < 8) {
        return 0;
    }
    uint64_t n = buf_get_u64be(in);
    if (n < 4 || n > RPC_MAX_MESSAGE_BYTES) {
        return -1;
    }
    if (avail - 8 < n) {
        return 0;
    }
    *id = buf_get_u32be(in + 8);
    if ((*id & 0x80000000u) == 0) {
        return -1;
    }
    *len = (size_t)n - 4;
    return 1;
}

int rpc_frame_keep_tail(uint8_t **in, size_t *inlen, size_t *incap, size_t used)
{
    memmove(*in, *in + used, *inlen - used);
    *inlen -= used;
    /* <= RPC_MAX_MESSAGE_BYTES + 8: the length was checked when it came */
    size_t need = *inlen >= 8 ? 8 + (size_t)buf_get_u64be(*in) : RPC_FRAME_INBUF_MIN;
    size_t cap = *incap;
    if (need > cap) {
        cap = need;
    } else if (cap > RPC_FRAME_INBUF_KEEP && *inlen <= RPC_FRAME_INBUF_MIN) {
        cap = RPC_FRAME_INBUF_MIN;
    }
    if (cap != *incap) {
        uint8_t *p = realloc(*in, cap);
        if (p == NULL) {
            return LAPSE_ENOMEM;
        }
        *in = p;
        *incap = cap;
    }
    return 0;
}

void rpc_frame_out_fini(rpc_frame_out *o)
{
    buf_fini(&o->pending);
    buf_fini(&o->sending);
}

/* Posts sending's bytes from sent on. */
static void out_post_rest(rpc_frame_out *o, nng_stream *st, nng_aio *aio)
{
    nng_iov iov = {.iov_buf = o->sending.data + o->sent, .iov_len = o->sending.len - o->sent};
    (void)nng_aio_set_iov(aio, 1, &iov);
    nng_stream_send(st, aio);
}

void rpc_frame_out_post(rpc_frame_out *o, nng_stream *st, nng_aio *aio)
{
    o->sent = 0;
    o->busy = 1;
    out_post_rest(o, st, aio);
}

void rpc_frame_out_start(rpc_frame_out *o, nng_stream *st, nng_aio *aio)
{
    buf t = o->sending;
    o->sending = o->pending;
    o->pending = t;
    buf_clear(&o->pending);
    rpc_frame_out_post(o, st, aio);
}

int rpc_frame_out_sent(rpc_frame_out *o, int ok, nng_stream *st, nng_aio *aio)
{
    if (ok) {
        o->sent += nng_aio_count(aio);
        if (o->sent < o->sending.len) {
            out_post_rest(o, st, aio);
            return 1;
        }
    }
    buf_clear(&o->sending);
    o->busy = 0;
    return 0;
}
