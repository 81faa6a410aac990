/*
 * rpc_client.c: the client half of rpc.h over NNG 1.5. The framing, envelope
 * and deadline rules are in docs/wire-protocol.md.
 *
 * One rpc_conn per peer (rpc_conn.c, NNG's stream API framed by hand),
 * which carries every call (rpc_client_int.h); with LAPSE_RPC_CLIENT=req0 in
 * the environment when a client opens, NNG's req0 instead: one socket per
 * peer, one nng_ctx and one aio per call, waited on synchronously by the
 * calling thread (kept to interoperate with and measure against). The exchanges under every call
 * are in rpc_client_exchange.c, coalesced single-item calls in rpc_coalesce.c; what the three files
 * share is in rpc_client_int.h.
 */
#include "rpc.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "rpc_client_int.h"
#include "rpc_internal.h"
#include "rpc_loop.h"
#include "wire.h"

#define RECONNECT_MIN_MS 20
#define RECONNECT_MAX_MS 500

/* ===================================================================== */
/* Client                                                                 */
/* ===================================================================== */

static void on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    (void)p;
    atomic_int *pipes = arg;
    atomic_fetch_add(pipes, ev == NNG_PIPE_EV_ADD_POST ? 1 : -1);
}

/* Opens peer pe's socket and starts its dialer to url, or with stream its
 * conn alone (every exchange then goes on it). Returns 0 or an error. */
static int open_peer(peer *pe, const char *url, int stream, rpc_loop *loop, char *err,
                     size_t errlen)
{
    nng_dialer d;
    int rv;
    if (stream) {
        if ((rv = rpc_conn_open_on(&pe->conn, url, loop)) != 0) {
            set_err(err, errlen, "cannot dial %s: %s", url, nng_strerror(rv));
            return rv == NNG_ENOMEM ? LAPSE_ENOMEM : LAPSE_EINVAL;
        }
        return 0;
    }
    if ((rv = nng_req0_open(&pe->sock)) != 0) {
        set_err(err, errlen, "nng_req0_open: %s", nng_strerror(rv));
        return from_nng(rv);
    }
    pe->open = 1;
    /* NNG_DURATION_INFINITE: req0 schedules its resend timer only for a
     * positive resend time, so requests are never resent on a timer. */
    if ((rv = nng_socket_set_ms(pe->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)) != 0 ||
        (rv = nng_socket_set_size(pe->sock, NNG_OPT_RECVMAXSZ, RPC_MAX_MESSAGE_BYTES)) != 0 ||
        (rv = nng_socket_set_ms(pe->sock, NNG_OPT_RECONNMINT, RECONNECT_MIN_MS)) != 0 ||
        (rv = nng_socket_set_ms(pe->sock, NNG_OPT_RECONNMAXT, RECONNECT_MAX_MS)) != 0 ||
        (rv = nng_pipe_notify(pe->sock, NNG_PIPE_EV_ADD_POST, on_pipe, &pe->pipes)) != 0 ||
        (rv = nng_pipe_notify(pe->sock, NNG_PIPE_EV_REM_POST, on_pipe, &pe->pipes)) != 0) {
        set_err(err, errlen, "socket options: %s", nng_strerror(rv));
        return from_nng(rv);
    }
    if ((rv = nng_dialer_create(&d, pe->sock, url)) != 0) {
        set_err(err, errlen, "bad address %s: %s", url, nng_strerror(rv));
        return rv == NNG_ENOMEM ? LAPSE_ENOMEM : LAPSE_EINVAL;
    }
    (void)nng_dialer_set_ms(d, NNG_OPT_RECONNMINT, RECONNECT_MIN_MS);
    (void)nng_dialer_set_ms(d, NNG_OPT_RECONNMAXT, RECONNECT_MAX_MS);
    (void)nng_dialer_set_size(d, NNG_OPT_RECVMAXSZ, RPC_MAX_MESSAGE_BYTES);
    /* Non-blocking: the dialer keeps retrying in the background and calls
     * made meanwhile wait in the socket's send queue. */
    if ((rv = nng_dialer_start(d, NNG_FLAG_NONBLOCK)) != 0) {
        int code = from_nng(rv);
        set_err(err, errlen, "cannot dial %s: %s", url, nng_strerror(rv));
        return code == LAPSE_ENOMEM ? code : LAPSE_EINVAL;
    }
    return 0;
}

int rpc_client_open(rpc_client **out, const char *url, char *err, size_t errlen)
{
    return rpc_client_open_on(out, url, NULL, err, errlen);
}

int rpc_client_open_on(rpc_client **out, const char *url, rpc_loop *loop, char *err, size_t errlen)
{
    int code;

    *out = NULL;
    rpc_client *c = calloc(1, sizeof *c);
    if (c == NULL || (c->url = strdup(url)) == NULL || pthread_mutex_init(&c->cmu, NULL) != 0) {
        if (c != NULL) {
            free(c->url);
        }
        free(c);
        set_err(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    clock_cond_init_mono(&c->idle);
    const char *mode = getenv("LAPSE_RPC_CLIENT");
    c->stream = mode == NULL || strcmp(mode, "req0") != 0;
    for (const char *p = url;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma != NULL ? (size_t)(comma - p) : strlen(p);
        char one[512];
        if (n == 0 || n >= sizeof(one) || c->npeers == RPC_CLIENT_MAX_PEERS) {
            code = LAPSE_EINVAL;
            set_err(err, errlen,
                    "bad address list \"%s\": an empty or over-long entry, or "
                    "more than %d",
                    url, RPC_CLIENT_MAX_PEERS);
            goto fail;
        }
        memcpy(one, p, n);
        one[n] = '\0';
        if ((code = open_peer(&c->peers[c->npeers++], one, c->stream, loop, err, errlen)) != 0) {
            goto fail;
        }
        if (comma == NULL) {
            break;
        }
        p = comma + 1;
    }
    c->driven = c->stream && rpc_loop_is_driven(loop) ? loop : NULL;
    *out = c;
    return 0;

fail:
    rpc_client_close(c);
    return code;
}

void rpc_fini(void)
{
    nng_fini();
}

void rpc_client_close(rpc_client *c)
{
    if (c == NULL) {
        return;
    }
    rpc_coalesce_idle_close(c);
    for (int i = 0; i < c->npeers; i++) {
        if (c->peers[i].open) {
            nng_close(c->peers[i].sock);
        }
        rpc_conn_close(c->peers[i].conn);
    }
    rpc_coalesce_close(c);
    pthread_cond_destroy(&c->idle);
    pthread_mutex_destroy(&c->cmu);
    free(c->url);
    free(c);
}

int rpc_client_connected(rpc_client *c, int wait_ms)
{
    clock_mono until = clock_mono_after_ms(wait_ms);
    for (;;) {
        for (int i = 0; i < c->npeers; i++) {
            if (rpc_client_peer_up(c, i)) {
                return 1;
            }
        }
        if (clock_mono_remaining_ms(until) <= 0) {
            return 0;
        }
        clock_sleep_ms(1);
    }
}

const char *rpc_client_url(const rpc_client *c)
{
    return c->url;
}

/* Decodes a reply message (consumed) into mc->resp / mc->rv. */
static void decode_reply(rpc_multi_call *mc, nng_msg *reply)
{
    size_t len;
    Lapse__Response *r = rpc_client_unpack_reply(NULL, reply, &len);
    mc->rv = rpc_client_take_reply(mc->client->url, r, len, &mc->resp, mc->err, sizeof(mc->err));
}

void rpc_call_many(rpc_multi_call *calls, size_t n, int timeout_ms)
{
    exchange one;
    exchange *xs = n <= 1 ? &one : calloc(n, sizeof(*xs));
    if (timeout_ms <= 0) {
        timeout_ms = RPC_DEFAULT_TIMEOUT_MS;
    }
    for (size_t i = 0; i < n; i++) {
        calls[i].resp = NULL;
        calls[i].rv = xs == NULL ? LAPSE_ENOMEM : 0;
        set_err(calls[i].err, sizeof(calls[i].err), xs == NULL ? "out of memory" : "");
    }
    if (xs == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        rpc_multi_call *mc = &calls[i];
        exchange *x = &xs[i];
        memset(x, 0, sizeof(*x));
        x->client = mc->client;
        x->err = mc->err;
        x->errlen = sizeof(mc->err);
        mc->rv = rpc_client_pack_request(mc->req, timeout_ms, &x->msg, x->err, x->errlen);
    }
    rpc_client_exchange_all(xs, n, timeout_ms);
    for (size_t i = 0; i < n; i++) {
        if (xs[i].msg != NULL && xs[i].rv != 0) {
            calls[i].rv = xs[i].rv;
        } else if (xs[i].reply != NULL) {
            decode_reply(&calls[i], xs[i].reply);
        }
    }
    if (xs != &one) {
        free(xs);
    }
}

int rpc_call(rpc_client *c, Lapse__Request *req, int timeout_ms, Lapse__Response **resp, char *err,
             size_t errlen)
{
    if (timeout_ms <= 0) {
        timeout_ms = RPC_DEFAULT_TIMEOUT_MS;
    }
    if (rpc_single_item_call(req) && c->driven == NULL) {
        return rpc_coalesce_call(c, req, timeout_ms, resp, err, errlen);
    }
    rpc_multi_call mc;
    mc.client = c;
    mc.req = req;
    rpc_call_many(&mc, 1, timeout_ms);
    *resp = mc.resp;
    if (mc.rv != 0) {
        set_err(err, errlen, "%s", mc.err);
    }
    return mc.rv;
}

int rpc_call_async(rpc_client *c, Lapse__Request *req, int timeout_ms, rpc_done_fn done, void *arg,
                   char *err, size_t errlen)
{
    if (!rpc_single_item_call(req) || done == NULL || c->driven != NULL) {
        set_err(err, errlen,
                "only single-item calls are made asynchronously, on a client no caller drives");
        return LAPSE_EINVAL;
    }
    return rpc_coalesce_call_async(c, req, timeout_ms > 0 ? timeout_ms : RPC_DEFAULT_TIMEOUT_MS,
                                   done, arg, err, errlen);
}

int rpc_call_raw(rpc_client *c, const void *data, size_t len, int timeout_ms, void **reply,
                 size_t *reply_len, char *err, size_t errlen)
{
    int rv;
    exchange x = {.client = c, .err = err, .errlen = errlen};
    *reply = NULL;
    *reply_len = 0;
    if (timeout_ms <= 0) {
        timeout_ms = RPC_DEFAULT_TIMEOUT_MS;
    }
    if ((rv = rpc_client_new_msg(&x.msg, len, err, errlen)) != 0) {
        return rv;
    }
    if (len > 0) {
        memcpy(nng_msg_body(x.msg), data, len);
    }
    rpc_client_exchange_all(&x, 1, timeout_ms);
    if (x.rv != 0) {
        return x.rv;
    }
    size_t n = nng_msg_len(x.reply);
    void *copy = malloc(n > 0 ? n : 1);
    if (copy == NULL) {
        nng_msg_free(x.reply);
        set_err(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    memcpy(copy, nng_msg_body(x.reply), n);
    nng_msg_free(x.reply);
    *reply = copy;
    *reply_len = n;
    return 0;
}

/* protobuf-c allocations from an arena, freed with it. */
static void *arena_pb_alloc(void *data, size_t size)
{
    return arena_alloc(data, size > 0 ? size : 1);
}

static void arena_pb_free(void *data, void *p)
{
    (void)data;
    (void)p; /* the arena frees everything at once */
}

int rpc_forward(rpc_client *c, const Lapse__Request *req, int timeout_ms, Lapse__Response *resp,
                arena *a, char *err, size_t errlen)
{
    if (timeout_ms <= 0) {
        timeout_ms = RPC_DEFAULT_TIMEOUT_MS;
    }
    Lapse__Request copy = *req; /* shallow: only the envelope's fields change */
    exchange x = {.client = c, .err = err, .errlen = errlen};
    int rv = rpc_client_pack_request(&copy, timeout_ms, &x.msg, err, errlen);
    if (rv != 0) {
        return rv;
    }
    rpc_client_exchange_all(&x, 1, timeout_ms);
    if (x.rv != 0) {
        return x.rv;
    }
    ProtobufCAllocator alloc = {arena_pb_alloc, arena_pb_free, a};
    size_t len;
    Lapse__Response *r = rpc_client_unpack_reply(&alloc, x.reply, &len);
    if (r == NULL) {
        set_err(err, errlen, "%s: undecodable reply (%zu bytes)", c->url, len);
        return LAPSE_EPROTO;
    }
    *resp = *r;
    return 0;
}
