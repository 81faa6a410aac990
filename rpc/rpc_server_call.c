/*
 * rpc_server_call.c: what serving any call of the server half of rpc.h
 * takes: decoding and checking a request, running the handler before the
 * request's deadline, packing the reply and posting it (or the next
 * receive) on the call's context, and queueing work. rpc_server.c (the
 * contexts, queues and workers) and rpc_server_multi.c (coalesced frames)
 * are built on it and it on neither, so the three files call one way; what
 * they share is in rpc_server_int.h.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "rpc.h"
#include "rpc_internal.h"
#include "rpc_server_int.h"
#include "wire.h"

void rpc_set_error(Lapse__Response *resp, arena *a, int code, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);

    resp->status = (Lapse__Status)code;
    resp->message = (char *)"";
    if (n < 0) {
        return;
    }
    if ((size_t)n < sizeof small) {
        char *m = arena_strndup(a, small, (size_t)n);
        if (m != NULL) {
            resp->message = m;
        }
        return;
    }
    char *m = arena_alloc(a, (size_t)n + 1);
    if (m == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(m, (size_t)n + 1, fmt, ap);
    va_end(ap);
    resp->message = m;
}

/* Posts the next operation on c's context unless the server is closing.
 * Posting under mu closes a race: NNG 1.5.2 can panic ("pthread_mutex_lock:
 * Invalid argument") when nng_ctx_send or nng_ctx_recv runs concurrently
 * with nng_close on the socket. rpc_server_close sets closing under mu before
 * it closes the socket, so every post either precedes the close or is
 * skipped. Returns 0 if posted, -1 if skipped (msg, if any, is freed). */
static int srv_post(srv_ctx *c, nng_msg *msg)
{
    rpc_server *s = c->srv;
    pthread_mutex_lock(&s->mu);
    if (s->closing) {
        pthread_mutex_unlock(&s->mu);
        if (msg != NULL) {
            nng_msg_free(msg);
        }
        return -1;
    }
    if (msg != NULL) {
        nng_aio_set_msg(c->aio, msg);
        c->state = SRV_SEND;
        nng_ctx_send(c->ctx, c->aio);
    } else {
        c->state = SRV_RECV;
        nng_ctx_recv(c->ctx, c->aio);
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void rpc_server_recv(srv_ctx *c)
{
    (void)srv_post(c, NULL);
}

/* Appends j to lane's FIFO. REQUIRES: s->mu held. */
void rpc_server_push(rpc_server *s, srv_job *j, int lane)
{
    j->next = NULL;
    if (s->tail[lane] != NULL) {
        s->tail[lane]->next = j;
    } else {
        s->head[lane] = j;
    }
    s->tail[lane] = j;
}

/* Readies resp for packing: a reply over the size limit is replaced by an
 * ETOOBIG reply. Returns its packed size. */
size_t rpc_server_reply_size(Lapse__Response *resp, arena *a)
{
    if (resp->message == NULL) {
        resp->message = (char *)"";
    }
    size_t n = lapse__response__get_packed_size(resp);
    if (n > RPC_MAX_MESSAGE_BYTES) {
        uint64_t pmv = resp->pmap_version;
        Lapse__Response small = LAPSE__RESPONSE__INIT;
        small.pmap_version = pmv;
        rpc_set_error(&small, a, LAPSE_ETOOBIG, "reply of %zu bytes exceeds the %u-byte limit", n,
                      (unsigned)RPC_MAX_MESSAGE_BYTES);
        *resp = small;
        n = lapse__response__get_packed_size(resp);
    }
    return n;
}

/* Packs resp into a new message. NULL on OOM. */
nng_msg *rpc_server_pack_reply(Lapse__Response *resp, arena *a)
{
    size_t n = rpc_server_reply_size(resp, a);
    nng_msg *m;
    if (nng_msg_alloc(&m, n) != 0) {
        return NULL;
    }
    lapse__response__pack(resp, nng_msg_body(m));
    return m;
}

/* Decodes one request and checks its envelope; a call of a coalesced frame
 * (in_multi) may not be a frame itself. NULL, with resp's error set, when
 * it is not one to serve. */
Lapse__Request *rpc_server_decode(const void *data, size_t len, int in_multi, Lapse__Response *resp,
                                  arena *a)
{
    Lapse__Request *req = NULL;
    if (wire_check_nesting(&lapse__request__descriptor, data, len, WIRE_MAX_NESTING) != 0 ||
        (req = lapse__request__unpack(NULL, len, data)) == NULL) {
        rpc_set_error(resp, a, LAPSE_EPROTO, "malformed request (%zu bytes)", len);
        return NULL;
    }
    if (req->version != RPC_PROTOCOL_VERSION) {
        rpc_set_error(resp, a, LAPSE_EPROTO, "protocol version %u not supported (this server: %d)",
                      (unsigned)req->version, RPC_PROTOCOL_VERSION);
    } else if (req->body_case == LAPSE__REQUEST__BODY__NOT_SET) {
        rpc_set_error(resp, a, LAPSE_EPROTO, "request has no call in its body");
    } else if (in_multi && req->body_case == LAPSE__REQUEST__BODY_MULTI) {
        rpc_set_error(resp, a, LAPSE_EPROTO, "a coalesced call may not hold calls itself");
    } else {
        return req;
    }
    lapse__request__free_unpacked(req, NULL);
    return NULL;
}

/* Runs the handler for req unless its deadline (from its arrival) passed. */
void rpc_server_run(rpc_server *s, const Lapse__Request *req, clock_mono arrived,
                    Lapse__Response *resp, arena *a)
{
    atomic_fetch_add_explicit(&s->calls, 1, memory_order_relaxed);
    int64_t deadline_ms = srv_deadline(req, arrived);
    if (clock_mono_now().ms >= deadline_ms) {
        rpc_set_error(resp, a, LAPSE_ETIMEDOUT,
                      "deadline of %lld ms passed before the request was served",
                      (long long)(deadline_ms - arrived.ms));
        return;
    }
    s->handler(s->arg, req, resp, a, deadline_ms);
}

/* Packs reply and sends it on c (in freed), or drops the request on OOM. */
void rpc_server_reply(srv_ctx *c, nng_msg *out)
{
    if (out == NULL) {
        log_error("rpc: out of memory packing a reply; request dropped");
    }
    if (c->srv->reply != NULL) {
        c->srv->reply(c, out);
        return;
    }
    if (out == NULL) {
        /* Out of memory: drop the request; the caller times out. */
        rpc_server_recv(c);
        return;
    }
    (void)srv_post(c, out);
}

int rpc_server_is_quick(const rpc_server *s, const Lapse__Request *req)
{
    return s->quick != NULL && s->quick(s->arg, req);
}

int rpc_server_on_conn_thread(const rpc_server *s, const Lapse__Request *req)
{
    return s->stream != NULL && s->conn_thread != NULL && s->conn_thread(s->arg, req);
}
