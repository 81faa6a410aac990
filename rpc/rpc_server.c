/*
 * rpc_server.c: the server half of rpc.h over NNG 1.5. The framing, envelope
 * and deadline rules are in docs/wire-protocol.md.
 *
 * Requests arrive on connections framed by hand over plain sockets, a
 * thread each (rpc_server_stream.c), or, under LAPSE_RPC_SERVER=rep0, on a pool of rep0
 * contexts, each driven by one aio callback (the state machine drawn in
 * rpc.h, as NNG's demo/async/server.c); either way they feed a FIFO of
 * received requests that worker threads drain. Callbacks run on NNG's task threads and
 * never block there: they only move a context between states and push it onto
 * the queue. Coalesced frames are served in rpc_server_multi.c, and what
 * serving any call takes (decoding, running, packing and sending its reply)
 * is in rpc_server_call.c; what the three files share is in
 * rpc_server_int.h.
 */
#include "rpc.h"

#include <assert.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "rpc_internal.h"
#include "rpc_server_int.h"
#include "wire.h"

#define DEFAULT_CONTEXTS 64
#define DEFAULT_WORKERS 4

/* ===================================================================== */
/* Server                                                                 */
/* ===================================================================== */

static int nng_stopping(int rv)
{
    return rv == NNG_ECLOSED || rv == NNG_ECANCELED;
}

static void srv_ctx_cb(void *arg)
{
    srv_ctx *c = arg;
    int rv;

    switch (c->state) {
    case SRV_INIT:
        rpc_server_recv(c);
        break;
    case SRV_RECV:
        if ((rv = nng_aio_result(c->aio)) != 0) {
            if (nng_stopping(rv)) {
                return;
            }
            log_warn("rpc: receive failed: %s", nng_strerror(rv));
            rpc_server_recv(c);
            return;
        }
        nng_msg *in = nng_aio_get_msg(c->aio);
        nng_aio_set_msg(c->aio, NULL);
        c->arrived = clock_mono_now();
        c->state = SRV_QUEUED;
        rpc_server_take(c->srv, c, nng_msg_body(in), nng_msg_len(in));
        nng_msg_free(in);
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
        rpc_server_recv(c);
        break;
    case SRV_QUEUED:
    default:
        assert(!"rpc: aio completion while queued");
        break;
    }
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
        srv_job *j = s->head[lane];
        s->head[lane] = j->next;
        if (s->head[lane] == NULL) {
            s->tail[lane] = NULL;
        }
        j->next = NULL;
        pthread_mutex_unlock(&s->mu);
        if (j->ctx != NULL) {
            Lapse__Request *req = j->ctx->call;
            j->ctx->call = NULL;
            rpc_server_serve(s, j->ctx, req);
        } else if (j->idx == SRV_GROUP) {
            rpc_server_multi_group(s, j->multi);
        } else {
            rpc_server_multi_call(s, j->multi, j->idx);
        }
    }
}

/* rpc_server_open's phases. Each returns 0 or a LAPSE_* code with err
 * set; after a failed phase the caller closes s (rpc_server_close frees
 * what a phase made, by its flags). */

/* The options into s, and how many workers to start. */
static int take_options(rpc_server *s, const rpc_server_options *opt, int *workers, char *err,
                        size_t errlen)
{
    s->nctx = (opt != NULL && opt->contexts > 0) ? opt->contexts : DEFAULT_CONTEXTS;
    int want = (opt != NULL && opt->workers > 0) ? opt->workers : DEFAULT_WORKERS;
    if (opt != NULL && opt->nurgent > 0) {
        if (opt->nurgent > RPC_MAX_URGENT_CALLS || opt->urgent_calls == NULL) {
            set_err(err, errlen, "at most %d urgent calls", RPC_MAX_URGENT_CALLS);
            return LAPSE_EINVAL;
        }
        memcpy(s->urgent_calls, opt->urgent_calls, opt->nurgent * sizeof(uint32_t));
        s->nurgent = opt->nurgent;
        s->nurgent_workers = opt->urgent_workers > 0 ? opt->urgent_workers : 0;
    }
    s->quick = opt != NULL ? opt->quick : NULL;
    s->conn_thread = opt != NULL ? opt->conn_thread : NULL;
    if (opt != NULL && opt->batchable != NULL && opt->serve_many != NULL) {
        s->batchable = opt->batchable;
        s->serve_many = opt->serve_many;
    }
    *workers = want + s->nurgent_workers;
    s->wargs[0] = (srv_worker_arg){s, 0};
    s->wargs[1] = (srv_worker_arg){s, 1};
    return 0;
}

/* The lock and conditions of the work queues; sync_init says they exist. */
static int init_sync(rpc_server *s, char *err, size_t errlen)
{
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        set_err(err, errlen, "pthread_mutex_init failed");
        return LAPSE_ENOMEM;
    }
    int cv_ok = pthread_cond_init(&s->cv, NULL) == 0;
    if (!cv_ok || pthread_cond_init(&s->ucv, NULL) != 0) {
        if (cv_ok) {
            pthread_cond_destroy(&s->cv);
        }
        pthread_mutex_destroy(&s->mu);
        set_err(err, errlen, "pthread_cond_init failed");
        return LAPSE_ENOMEM;
    }
    s->sync_init = 1;
    return 0;
}

/* The worker threads and, unless stream, the rep0 socket and its
 * contexts. */
static int open_socket(rpc_server *s, int workers, int stream, char *err, size_t errlen)
{
    int rv;
    if ((s->workers = calloc((size_t)workers, sizeof *s->workers)) == NULL) {
        set_err(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    for (int i = 0; i < workers; i++) {
        srv_worker_arg *wa = &s->wargs[i < s->nurgent_workers];
        if (pthread_create(&s->workers[i], NULL, srv_worker, wa) != 0) {
            set_err(err, errlen, "pthread_create failed");
            return LAPSE_ENOMEM;
        }
        s->nworkers++;
    }
    if (stream) {
        return 0;
    }
    if ((rv = nng_rep0_open(&s->sock)) != 0) {
        set_err(err, errlen, "nng_rep0_open: %s", nng_strerror(rv));
        return from_nng(rv);
    }
    s->sock_open = 1;
    if ((rv = nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ, RPC_MAX_MESSAGE_BYTES)) != 0) {
        set_err(err, errlen, "set recv-size-max: %s", nng_strerror(rv));
        return from_nng(rv);
    }
    if ((s->ctxs = calloc((size_t)s->nctx, sizeof *s->ctxs)) == NULL) {
        set_err(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    for (int i = 0; i < s->nctx; i++) {
        srv_ctx *c = &s->ctxs[i];
        c->srv = s;
        c->state = SRV_INIT;
        if ((rv = nng_aio_alloc(&c->aio, srv_ctx_cb, c)) != 0 ||
            (rv = nng_ctx_open(&c->ctx, s->sock)) != 0) {
            set_err(err, errlen, "nng context: %s", nng_strerror(rv));
            return from_nng(rv);
        }
        c->ctx_open = 1;
    }
    return 0;
}

/* A listener on url, started. */
static int start_listening(rpc_server *s, const char *url, char *err, size_t errlen)
{
    nng_listener l;
    int rv = nng_listener_create(&l, s->sock, url);
    if (rv != 0) {
        set_err(err, errlen, "bad listen address %s: %s", url, nng_strerror(rv));
        return rv == NNG_ENOMEM ? LAPSE_ENOMEM : LAPSE_EINVAL;
    }
    (void)nng_listener_set_size(l, NNG_OPT_RECVMAXSZ, RPC_MAX_MESSAGE_BYTES);
    if ((rv = nng_listener_start(l, 0)) != 0) {
        return rpc_server_listen_failed(rv, url, err, errlen);
    }
    return 0;
}

int rpc_server_open(rpc_server **out, const char *url, const rpc_server_options *opt,
                    rpc_handler handler, void *arg, char *err, size_t errlen)
{
    *out = NULL;
    rpc_server *s = calloc(1, sizeof *s);
    if (s == NULL) {
        set_err(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    s->handler = handler;
    s->arg = arg;
    int workers = 0;
    int code = take_options(s, opt, &workers, err, errlen);
    if (code == 0) {
        code = init_sync(s, err, errlen);
    }
    if (code != 0) {
        free(s); /* nothing made yet that rpc_server_close would free */
        return code;
    }
    /* The stream transport (docs/wire-protocol.md, "The stream server"),
     * unless LAPSE_RPC_SERVER=rep0 asks for NNG's rep0 socket. */
    const char *tr = getenv("LAPSE_RPC_SERVER");
    int stream = tr == NULL || strcmp(tr, "rep0") != 0;
    if ((code = open_socket(s, workers, stream, err, errlen)) != 0 ||
        (code = stream ? rpc_server_stream_open(s, url, err, errlen)
                       : start_listening(s, url, err, errlen)) != 0) {
        rpc_server_close(s);
        return code;
    }
    for (int i = 0; i < s->nctx; i++) {
        srv_ctx_cb(&s->ctxs[i]); /* SRV_INIT: post the first receive */
    }
    *out = s;
    return 0;
}

void rpc_server_counts(rpc_server *s, rpc_server_count *out)
{
    out->frames = atomic_load(&s->frames);
    out->coalesced = atomic_load(&s->coalesced);
    out->calls = atomic_load(&s->calls);
    out->quick = atomic_load(&s->quick_calls);
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
     * (srv_post). The stream transport stops the same way. */
    if (s->stream != NULL) {
        rpc_server_stream_stop(s);
    }
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
            if (c->call != NULL) {
                lapse__request__free_unpacked(c->call, NULL);
                c->call = NULL;
            }
            if (c->multi != NULL) { /* a coalesced frame whose calls were still queued */
                rpc_server_multi_free(c->multi);
                c->multi = NULL;
            }
            if (c->aio != NULL) {
                if (c->ctx_open) {
                    (void)nng_ctx_close(c->ctx);
                }
                nng_aio_free(c->aio);
            }
        }
    }
    rpc_server_stream_free(s);
    if (s->sync_init) {
        pthread_cond_destroy(&s->cv);
        pthread_cond_destroy(&s->ucv);
        pthread_mutex_destroy(&s->mu);
    }
    free(s->ctxs);
    free(s->workers);
    free(s);
}
