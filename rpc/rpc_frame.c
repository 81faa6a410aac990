/* rpc_frame.c: the stream transport's framing (rpc_frame.h). */
#include "rpc_frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nng/nng.h>

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
    } else if (cap > RPC_FRAME_INBUF_KEEP && need <= RPC_FRAME_INBUF_MIN) {
        /* Only when what is pending fits: shrunk under a big message's
         * need (64 KiB of 5 MB in, say), the buffer would be full with the
         * message incomplete, and its reader could take no more. */
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
    buf_fini(&o->b);
    o->off = 0;
}

void rpc_frame_out_clear(rpc_frame_out *o)
{
    buf_clear(&o->b);
    o->off = 0;
}

int rpc_frame_out_flush(rpc_frame_out *o, int fd)
{
    while (o->off < o->b.len) {
        ssize_t k = send(fd, o->b.data + o->off, o->b.len - o->off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        }
        o->off += (size_t)k;
    }
    rpc_frame_out_clear(o);
    if (o->b.cap > RPC_FRAME_INBUF_KEEP) { /* a big message's room goes back */
        buf_fini(&o->b);
    }
    return 0;
}

void rpc_frame_wake(int efd)
{
    uint64_t one = 1;
    ssize_t n = write(efd, &one, sizeof one);
    (void)n; /* a full counter (never, in practice) wakes the poll all the same */
}

void rpc_frame_wake_drain(int efd)
{
    uint64_t count;
    ssize_t n = read(efd, &count, sizeof count);
    (void)n;
}

int rpc_frame_split_url(const char *url, char *host, size_t hostlen, char *port, size_t portlen)
{
    static const char scheme[] = "tcp://";
    if (strncmp(url, scheme, sizeof scheme - 1) != 0) {
        return strstr(url, "://") != NULL ? NNG_ENOTSUP : NNG_EADDRINVAL;
    }
    const char *h = url + sizeof scheme - 1, *colon;
    size_t hl;
    if (*h == '[') { /* [v6-address]:port */
        const char *close = strchr(h, ']');
        if (close == NULL || close[1] != ':') {
            return NNG_EADDRINVAL;
        }
        h++;
        hl = (size_t)(close - h);
        colon = close + 1;
    } else if ((colon = strrchr(h, ':')) == NULL) {
        return NNG_EADDRINVAL;
    } else {
        hl = (size_t)(colon - h);
    }
    const char *p = colon + 1;
    size_t pl = strlen(p);
    if (hl >= hostlen || pl == 0 || pl >= portlen || strspn(p, "0123456789") != pl ||
        atoi(p) > 65535) {
        return NNG_EADDRINVAL;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    memcpy(port, p, pl + 1);
    return 0;
}
