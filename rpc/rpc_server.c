/*
 * rpc_server.c: the server half of rpc.h over NNG 1.5. The framing, envelope
 * and deadline rules are in docs/wire-protocol.md.
 *
 * A pool of rep0 contexts, each driven by one aio callback (the state machine
 * drawn in rpc.h, as NNG's demo/async/server.c), feeding a FIFO of received
 * requests that worker threads drain. Callbacks run on NNG's task threads and
 * never block there: they only move a context between states and push it onto
 * the queue.
 */
#include "rpc.h"

#include <assert.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "rpc_internal.h"
#include "wire.h"

#define DEFAULT_CONTEXTS 64
#define DEFAULT_WORKERS 4

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


/* ===================================================================== */
/* Server                                                                 */
/* ===================================================================== */

typedef enum srv_state {
    SRV_INIT,   /* not started yet */
    SRV_RECV,   /* nng_ctx_recv pending */
    SRV_QUEUED, /* request received, waiting for (or held by) a worker */
    SRV_SEND    /* nng_ctx_send of the reply pending */
} srv_state;

typedef struct srv_worker_arg {
    struct rpc_server *s;
    int urgent_only;
} srv_worker_arg;

typedef struct srv_ctx {
    rpc_server *srv;
    srv_state state; /* written by whoever owns the context in that state */
    nng_aio *aio;    /* owned; its callback is srv_ctx_cb */
    nng_ctx ctx;
    int ctx_open;
    nng_msg *req;         /* the received request, owned while SRV_QUEUED */
    clock_mono arrived;   /* when req arrived: the start of its deadline */
    struct srv_ctx *next; /* link in the work queue */
} srv_ctx;

struct rpc_server {
    nng_socket sock;
    int sock_open;
    rpc_handler handler;
    void *arg;
    srv_ctx *ctxs; /* owned array of nctx */
    int nctx;
    pthread_t *workers; /* owned array; nworkers of them were started */
    int nworkers;
    int nurgent_workers;     /* the first nurgent_workers serve only the urgent lane */
    srv_worker_arg wargs[2]; /* [0] general workers', [1] urgent-only workers' */
    uint32_t urgent_calls[RPC_MAX_URGENT_CALLS];
    size_t nurgent;

    pthread_mutex_t mu;  /* guards the queues and closing */
    pthread_cond_t cv;   /* signalled when a queue grows or closing is set */
    pthread_cond_t ucv;  /* signalled when the urgent queue grows or closing is set */
    int sync_init;       /* mu, cv and ucv initialized */
    srv_ctx *head[2];    /* FIFOs of SRV_QUEUED contexts: [0] normal, [1] urgent */
    srv_ctx *tail[2];
    int closing;
};



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

static void srv_recv(srv_ctx *c)
{
    (void)srv_post(c, NULL);
}

/* Reads a varint at *p (< end) into *v. 0, or -1 when malformed. */
static int peek_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            return 0;
        }
    }
    return -1;
}

/* 1 when the request's protobuf bytes hold one of s's urgent calls as a
 * top-level field (a look at the tags only; a malformed request is not
 * urgent, and fails to decode in its turn). */
static int is_urgent(const rpc_server *s, const nng_msg *m)
{
    const uint8_t *p = nng_msg_body((nng_msg *)m);
    const uint8_t *end = p + nng_msg_len((nng_msg *)m);
    while (s->nurgent > 0 && p < end) {
        uint64_t key, skip = 0;
        if (peek_varint(&p, end, &key) != 0) {
            return 0;
        }
        for (size_t i = 0; i < s->nurgent; i++) {
            if (key >> 3 == s->urgent_calls[i]) {
                return 1;
            }
        }
        switch (key & 7) {
        case 0:
            if (peek_varint(&p, end, &skip) != 0) {
                return 0;
            }
            skip = 0;
            break;
        case 1:
            skip = 8;
            break;
        case 2:
            if (peek_varint(&p, end, &skip) != 0) {
                return 0;
            }
            break;
        case 5:
            skip = 4;
            break;
        default:
            return 0;
        }
        if (skip > (uint64_t)(end - p)) {
            return 0;
        }
        p += skip;
    }
    return 0;
}

static int nng_stopping(int rv)
{
    return rv == NNG_ECLOSED || rv == NNG_ECANCELED;
}

static void srv_ctx_cb(void *arg)
{
    srv_ctx *c = arg;
    rpc_server *s = c->srv;
    int rv;

    switch (c->state) {
    case SRV_INIT:
        srv_recv(c);
        break;
    case SRV_RECV:
        if ((rv = nng_aio_result(c->aio)) != 0) {
            if (nng_stopping(rv)) {
                return;
            }
            log_warn("rpc: receive failed: %s", nng_strerror(rv));
            srv_recv(c);
            return;
        }
        c->req = nng_aio_get_msg(c->aio);
        nng_aio_set_msg(c->aio, NULL);
        c->arrived = clock_mono_now();
        pthread_mutex_lock(&s->mu);
        if (s->closing) {
            pthread_mutex_unlock(&s->mu);
            nng_msg_free(c->req);
            c->req = NULL;
            return;
        }
        c->state = SRV_QUEUED;
        c->next = NULL;
        int lane = is_urgent(s, c->req);
        if (s->tail[lane] != NULL) {
            s->tail[lane]->next = c;
        } else {
            s->head[lane] = c;
        }
        s->tail[lane] = c;
        pthread_cond_signal(&s->cv);
        if (lane) {
            pthread_cond_signal(&s->ucv);
        }
        pthread_mutex_unlock(&s->mu);
        break;
    case SRV_SEND:
        if ((rv = nng_aio_result(c->aio)) != 0) {
            /* A failed send leaves the message with us. */
            nng_msg_free(nng_aio_get_msg(c->aio));
            nng_aio_set_msg(c->aio, NULL);
            if (nng_stopping(rv)) {
                return;
            }
            log_warn("rpc: reply send failed: %s", nng_strerror(rv));
        } else {
            nng_aio_set_msg(c->aio, NULL); /* the socket owns it now */
        }
        srv_recv(c);
        break;
    case SRV_QUEUED:
    default:
        assert(!"rpc: aio completion while queued");
        break;
    }
}

/* Packs resp into a new message. A reply over the size limit is replaced by
 * an ETOOBIG reply. Returns NULL on OOM. */
static nng_msg *pack_reply(Lapse__Response *resp, arena *a)
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
    nng_msg *m;
    if (nng_msg_alloc(&m, n) != 0) {
        return NULL;
    }
    lapse__response__pack(resp, nng_msg_body(m));
    return m;
}

/* Decodes and checks the request in c->req, runs the handler and sends the
 * reply. Called on a worker thread; the context is SRV_QUEUED on entry. */
static void srv_serve(rpc_server *s, srv_ctx *c)
{
    nng_msg *in = c->req;
    c->req = NULL;
    const void *data = nng_msg_body(in);
    size_t len = nng_msg_len(in);

    arena a;
    arena_init(&a);
    Lapse__Response resp = LAPSE__RESPONSE__INIT;
    Lapse__Request *req = NULL;

    if (wire_check_nesting(&lapse__request__descriptor, data, len, WIRE_MAX_NESTING) != 0 ||
        (req = lapse__request__unpack(NULL, len, data)) == NULL) {
        rpc_set_error(&resp, &a, LAPSE_EPROTO, "malformed request (%zu bytes)", len);
    } else if (req->version != RPC_PROTOCOL_VERSION) {
        rpc_set_error(&resp, &a, LAPSE_EPROTO,
                      "protocol version %u not supported (this server: %d)", (unsigned)req->version,
                      RPC_PROTOCOL_VERSION);
    } else if (req->body_case == LAPSE__REQUEST__BODY__NOT_SET) {
        rpc_set_error(&resp, &a, LAPSE_EPROTO, "request has no call in its body");
    } else {
        int64_t budget_ms =
            req->timeout_ms != 0 ? (int64_t)req->timeout_ms : RPC_DEFAULT_TIMEOUT_MS;
        int64_t deadline_ms = c->arrived.ms + budget_ms;
        if (clock_mono_now().ms >= deadline_ms) {
            rpc_set_error(&resp, &a, LAPSE_ETIMEDOUT,
                          "deadline of %lld ms passed before the request was served",
                          (long long)budget_ms);
        } else {
            s->handler(s->arg, req, &resp, &a, deadline_ms);
        }
    }

    nng_msg *out = pack_reply(&resp, &a);
    lapse__request__free_unpacked(req, NULL);
    arena_fini(&a);
    nng_msg_free(in);

    if (out == NULL) {
        /* Out of memory: drop the request; the caller times out. */
        log_error("rpc: out of memory packing a reply; request dropped");
        srv_recv(c);
        return;
    }
    (void)srv_post(c, out);
}

/* A worker: the urgent lane first; an urgent-only worker no other. */
static void *srv_worker(void *arg)
{
    const srv_worker_arg *wa = arg;
    rpc_server *s = wa->s;
    const int urgent_only = wa->urgent_only;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->closing && s->head[1] == NULL && (urgent_only || s->head[0] == NULL)) {
            pthread_cond_wait(urgent_only ? &s->ucv : &s->cv, &s->mu);
        }
        if (s->closing) {
            pthread_mutex_unlock(&s->mu);
            return NULL;
        }
        int lane = s->head[1] != NULL;
        srv_ctx *c = s->head[lane];
        s->head[lane] = c->next;
        if (s->head[lane] == NULL) {
            s->tail[lane] = NULL;
        }
        c->next = NULL;
        pthread_mutex_unlock(&s->mu);
        srv_serve(s, c);
    }
}


int rpc_server_open(rpc_server **out, const char *url, const rpc_server_options *opt,
                    rpc_handler handler, void *arg, char *err, size_t errlen)
{
    int rv;
    int code;
    nng_listener l;

    *out = NULL;
    rpc_server *s = calloc(1, sizeof *s);
    if (s == NULL) {
        set_err(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    s->handler = handler;
    s->arg = arg;
    s->nctx = (opt != NULL && opt->contexts > 0) ? opt->contexts : DEFAULT_CONTEXTS;
    int want_workers = (opt != NULL && opt->workers > 0) ? opt->workers : DEFAULT_WORKERS;
    if (opt != NULL && opt->nurgent > 0) {
        if (opt->nurgent > RPC_MAX_URGENT_CALLS || opt->urgent_calls == NULL) {
            free(s);
            set_err(err, errlen, "at most %d urgent calls", RPC_MAX_URGENT_CALLS);
            return LAPSE_EINVAL;
        }
        memcpy(s->urgent_calls, opt->urgent_calls, opt->nurgent * sizeof(uint32_t));
        s->nurgent = opt->nurgent;
        s->nurgent_workers = opt->urgent_workers > 0 ? opt->urgent_workers : 0;
    }
    want_workers += s->nurgent_workers;
    s->wargs[0] = (srv_worker_arg){s, 0};
    s->wargs[1] = (srv_worker_arg){s, 1};
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        free(s);
        set_err(err, errlen, "pthread_mutex_init failed");
        return LAPSE_ENOMEM;
    }
    int cv_ok = pthread_cond_init(&s->cv, NULL) == 0;
    if (!cv_ok || pthread_cond_init(&s->ucv, NULL) != 0) {
        if (cv_ok) {
            pthread_cond_destroy(&s->cv);
        }
        pthread_mutex_destroy(&s->mu);
        free(s);
        set_err(err, errlen, "pthread_cond_init failed");
        return LAPSE_ENOMEM;
    }
    s->sync_init = 1;

    if ((rv = nng_rep0_open(&s->sock)) != 0) {
        code = from_nng(rv);
        set_err(err, errlen, "nng_rep0_open: %s", nng_strerror(rv));
        goto fail;
    }
    s->sock_open = 1;
    if ((rv = nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ, RPC_MAX_MESSAGE_BYTES)) != 0) {
        code = from_nng(rv);
        set_err(err, errlen, "set recv-size-max: %s", nng_strerror(rv));
        goto fail;
    }

    code = LAPSE_ENOMEM;
    if ((s->ctxs = calloc((size_t)s->nctx, sizeof *s->ctxs)) == NULL ||
        (s->workers = calloc((size_t)want_workers, sizeof *s->workers)) == NULL) {
        set_err(err, errlen, "out of memory");
        goto fail;
    }
    for (int i = 0; i < s->nctx; i++) {
        srv_ctx *c = &s->ctxs[i];
        c->srv = s;
        c->state = SRV_INIT;
        if ((rv = nng_aio_alloc(&c->aio, srv_ctx_cb, c)) != 0 ||
            (rv = nng_ctx_open(&c->ctx, s->sock)) != 0) {
            code = from_nng(rv);
            set_err(err, errlen, "nng context: %s", nng_strerror(rv));
            goto fail;
        }
        c->ctx_open = 1;
    }
    for (int i = 0; i < want_workers; i++) {
        srv_worker_arg *wa = &s->wargs[i < s->nurgent_workers];
        if (pthread_create(&s->workers[i], NULL, srv_worker, wa) != 0) {
            set_err(err, errlen, "pthread_create failed");
            goto fail;
        }
        s->nworkers++;
    }

    if ((rv = nng_listener_create(&l, s->sock, url)) != 0) {
        code = (rv == NNG_ENOMEM) ? LAPSE_ENOMEM : LAPSE_EINVAL;
        set_err(err, errlen, "bad listen address %s: %s", url, nng_strerror(rv));
        goto fail;
    }
    (void)nng_listener_set_size(l, NNG_OPT_RECVMAXSZ, RPC_MAX_MESSAGE_BYTES);
    if ((rv = nng_listener_start(l, 0)) != 0) {
        if (rv == NNG_EADDRINUSE) {
            code = LAPSE_EUNAVAILABLE;
            set_err(err, errlen, "address in use: %s", url);
        } else {
            code = from_nng(rv);
            if (code == LAPSE_ETIMEDOUT) {
                code = LAPSE_EUNAVAILABLE;
            }
            set_err(err, errlen, "cannot listen on %s: %s", url, nng_strerror(rv));
        }
        goto fail;
    }

    for (int i = 0; i < s->nctx; i++) {
        srv_ctx_cb(&s->ctxs[i]); /* SRV_INIT: post the first receive */
    }
    *out = s;
    return 0;

fail:
    rpc_server_close(s);
    return code;
}

void rpc_server_close(rpc_server *s)
{
    if (s == NULL) {
        return;
    }
    if (s->sync_init) {
        pthread_mutex_lock(&s->mu);
        s->closing = 1;
        pthread_cond_broadcast(&s->cv);
        pthread_cond_broadcast(&s->ucv);
        pthread_mutex_unlock(&s->mu);
    }
    /* Stop receiving: pending receives and sends complete with ECLOSED and
     * their callbacks do not re-arm; with closing set, nothing new is posted
     * (srv_post). */
    if (s->sock_open) {
        nng_close(s->sock);
    }
    /* Wait for running handlers; a reply sent after the close fails with
     * ECLOSED and its callback frees the message. */
    for (int i = 0; i < s->nworkers; i++) {
        pthread_join(s->workers[i], NULL);
    }
    if (s->ctxs != NULL) {
        for (int i = 0; i < s->nctx; i++) {
            if (s->ctxs[i].aio != NULL) {
                nng_aio_stop(s->ctxs[i].aio);
            }
        }
        /* Nothing runs now. Free requests still queued, then the contexts. */
        for (int i = 0; i < s->nctx; i++) {
            srv_ctx *c = &s->ctxs[i];
            if (c->req != NULL) {
                nng_msg_free(c->req);
                c->req = NULL;
            }
            if (c->aio != NULL) {
                if (c->ctx_open) {
                    (void)nng_ctx_close(c->ctx);
                }
                nng_aio_free(c->aio);
            }
        }
    }
    if (s->sync_init) {
        pthread_cond_destroy(&s->cv);
        pthread_cond_destroy(&s->ucv);
        pthread_mutex_destroy(&s->mu);
    }
    free(s->ctxs);
    free(s->workers);
    free(s);
}
