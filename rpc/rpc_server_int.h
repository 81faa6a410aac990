/*
 * rpc_server_int.h: what the server half of rpc.h shares between its
 * files, which call one way, down:
 *   rpc_server.c        the choice of transport, the rep0 contexts, the
 *                       work queues, the workers
 *   rpc_server_stream.c the default transport (rep0 only under
 *                       LAPSE_RPC_SERVER=rep0): connections framed by
 *                       hand over plain sockets, a thread each
 *   rpc_server_take.c   under both transports: taking a received request
 *                       and serving a plain one
 *   rpc_server_multi.c  coalesced frames served call by call
 *                       (docs/wire-protocol.md "Coalesced calls")
 *   rpc_server_call.c   under all: decoding, running and answering a call
 * A request's srv_ctx says where its reply goes: a rep0 context of
 * rpc_server.ctxs, or (stream) one request of a connection, made for it and
 * freed once answered; rpc_server_reply sends it either way.
 * Not part of the module's interface (rpc.h is).
 *
 * Thread-safety: the work queues and closing are guarded by rpc_server.mu;
 * a context is owned by whoever holds it in its state (srv_state); a
 * coalesced frame (srv_multi) by the calls not served yet, the last of
 * which (left reaching 0) finishes it.
 *
 * Invariants:
 *  1. A coalesced frame is answered once, by whichever of its calls is
 *     served last (left reaching 0: rpc_server_multi_call,
 *     rpc_server_multi_group), or freed by rpc_server_close when the server
 *     closes first.
 *  2. A call is served only before its deadline (srv_deadline), else
 *     answered ETIMEDOUT.
 */
#ifndef LAPSE_RPC_SERVER_INT_H
#define LAPSE_RPC_SERVER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "../common/arena.h"
#include "../common/clock.h"
#include "rpc.h"
#include "rpc_internal.h"

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

typedef struct srv_ctx srv_ctx;
typedef struct srv_multi srv_multi;
typedef struct srv_conn srv_conn;     /* rpc_server_stream.c's */
typedef struct srv_stream srv_stream; /* rpc_server_stream.c's */

#define SRV_GROUP SIZE_MAX /* srv_job.idx of a coalesced frame's group (serve_many) */

/* One unit of the workers' queue: a received frame (ctx), one call of a
 * coalesced frame (multi, idx), or its group of calls served together
 * (multi, SRV_GROUP). */
typedef struct srv_job {
    struct srv_job *next;
    srv_ctx *ctx;
    srv_multi *multi;
    size_t idx;
} srv_job;

struct srv_ctx {
    rpc_server *srv;
    srv_state state; /* written by whoever owns the context in that state */
    nng_aio *aio;    /* owned; its callback is srv_ctx_cb */
    nng_ctx ctx;
    int ctx_open;
    Lapse__Request *call; /* the received request, decoded, owned while queued */
    clock_mono arrived;   /* when it arrived: the start of its deadline */
    srv_job job;          /* its entry in the work queue */
    srv_multi *multi;     /* the coalesced frame being served, owned (else NULL) */
    /* A stream request: its connection, its request id (echoed in front of
     * the reply) and its place on the connection's list of requests. */
    srv_conn *conn;
    uint32_t id;
    srv_ctx *cprev, *cnext;
};

/* A coalesced frame being served (wire-protocol.md, "Coalesced calls"):
 * its calls, decoded, run one after another on the worker that took the
 * frame (the inline calls) or as jobs of their own on any worker; whoever
 * serves the last one packs the frame's reply. */
struct srv_multi {
    srv_ctx *c;
    Lapse__Request *env;      /* the frame, unpacked (owned) */
    size_t n;                 /* calls */
    atomic_size_t left;       /* calls not served yet */
    Lapse__Request **reqs;    /* per call: decoded (owned until served), or NULL */
    ProtobufCBinaryData *out; /* per call: the packed reply (malloc'd) */
    srv_job *jobs;            /* per call: its queue entry when it fans out */
    size_t *group;            /* the calls served together (serve_many), ngroup of them */
    size_t ngroup;
};

struct rpc_server {
    srv_stream *stream; /* the stream transport (else rep0: sock, ctxs) */
    /* Where a reply goes when not to a rep0 context (NULL: to one). */
    void (*reply)(srv_ctx *c, nng_msg *out);
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
    rpc_quick_fn quick;
    rpc_quick_fn conn_thread; /* asked only when stream is not NULL (rpc_server_on_conn_thread) */
    rpc_batchable_fn batchable;
    rpc_serve_many_fn serve_many;
    atomic_ulong frames, coalesced, calls, quick_calls; /* rpc_server_counts */

    pthread_mutex_t mu; /* guards the queues and closing */
    pthread_cond_t cv;  /* signalled when a queue grows or closing is set */
    pthread_cond_t ucv; /* signalled when the urgent queue grows or closing is set */
    int sync_init;      /* mu, cv and ucv initialized */
    srv_job *head[2];   /* FIFOs of work: [0] normal, [1] urgent */
    srv_job *tail[2];
    int closing;
};

/* The deadline of req, which arrived at arrived, in monotonic ms: its
 * timeout_ms (RPC_DEFAULT_TIMEOUT_MS when 0) from its arrival. */
static inline int64_t srv_deadline(const Lapse__Request *req, clock_mono arrived)
{
    int64_t budget_ms = req->timeout_ms != 0 ? (int64_t)req->timeout_ms : RPC_DEFAULT_TIMEOUT_MS;
    return arrived.ms + budget_ms;
}

/* What rpc_server_open returns when listening on url failed with NNG's rv
 * (either transport): LAPSE_EUNAVAILABLE for an address in use or a time-out,
 * else the code of rv; err says why. */
static inline int rpc_server_listen_failed(int rv, const char *url, char *err, size_t errlen)
{
    if (rv == NNG_EADDRINUSE) {
        set_err(err, errlen, "address in use: %s", url);
        return LAPSE_EUNAVAILABLE;
    }
    set_err(err, errlen, "cannot listen on %s: %s", url, nng_strerror(rv));
    int code = from_nng(rv);
    return code == LAPSE_ETIMEDOUT ? LAPSE_EUNAVAILABLE : code;
}

/* ---- rpc_server_call.c ---- */

/* Posts the next receive on c's context unless the server is closing. */
void rpc_server_recv(srv_ctx *c);

/* Readies resp for packing: a reply over the size limit is replaced by an
 * ETOOBIG reply. Returns its packed size. */
size_t rpc_server_reply_size(Lapse__Response *resp, arena *a);

/* Packs resp into a new message (caller frees, or sends). NULL on OOM. */
nng_msg *rpc_server_pack_reply(Lapse__Response *resp, arena *a);

/* Decodes one request and checks its envelope; a call of a coalesced frame
 * (in_multi) may not be a frame itself. The request (caller frees with
 * lapse__request__free_unpacked), or NULL, with resp's error set, when it
 * is not one to serve. */
Lapse__Request *rpc_server_decode(const void *data, size_t len, int in_multi, Lapse__Response *resp,
                                  arena *a);

/* Runs the handler for req unless its deadline (srv_deadline) passed, in
 * which case resp gets ETIMEDOUT. Counts the call. */
void rpc_server_run(rpc_server *s, const Lapse__Request *req, clock_mono arrived,
                    Lapse__Response *resp, arena *a);

/* Sends out (taken) as c's reply (by s->reply when set), or drops the
 * request when out is NULL (out of memory packing it): a rep0 caller times
 * out, a stream connection closes. */
void rpc_server_reply(srv_ctx *c, nng_msg *out);

/* Appends j to lane's FIFO. REQUIRES: s->mu held. */
void rpc_server_push(rpc_server *s, srv_job *j, int lane);

/* 1 when req is a quick call (rpc_server_options.quick), served on the
 * thread that received it. */
int rpc_server_is_quick(const rpc_server *s, const Lapse__Request *req);
/* 1 when req may be served on the thread of the stream connection that
 * brought it (rpc_server_options.conn_thread; never under rep0). */
int rpc_server_on_conn_thread(const rpc_server *s, const Lapse__Request *req);

/* ---- rpc_server_take.c ---- */

/* Takes a request received on c (data, len: borrowed, decoded before this
 * returns) on the NNG thread that received it: a request that fails to
 * decode is answered here, a quick call served here, a coalesced frame
 * started here; anything else queued for the workers, in its lane (or, the
 * server closing, left unanswered and held by no job). */
void rpc_server_take(rpc_server *s, srv_ctx *c, const void *data, size_t len);

/* Runs the handler for req (taken) and sends its reply on c. */
void rpc_server_serve(rpc_server *s, srv_ctx *c, Lapse__Request *req);

/* ---- rpc_server_stream.c ---- */

/* Listens on url (a plain socket) and serves connections (s->stream,
 * s->reply set). 0 or a LAPSE_* code with err set; rpc_server_close frees
 * what was made. REQUIRES: s's workers and queues made. */
int rpc_server_stream_open(rpc_server *s, const char *url, char *err, size_t errlen);

/* Stops accepting, shuts every connection down and waits for their threads.
 * REQUIRES: s->closing set; then the workers joined before
 * rpc_server_stream_free. */
void rpc_server_stream_stop(rpc_server *s);

/* Frees the connections and the requests still queued on them. Accepts a
 * half-open s->stream. */
void rpc_server_stream_free(rpc_server *s);

/* ---- rpc_server_multi.c ---- */

/* Starts serving the coalesced frame env (taken) on the thread that
 * received it: decodes its calls, queues those that are not quick as work
 * of their own, and serves the quick ones here. Returns the reply to send
 * now when the frame fails as a whole, else NULL. */
nng_msg *rpc_server_multi_start(rpc_server *s, srv_ctx *c, Lapse__Request *env);

/* Serves call i of m (decoded, or with its error reply packed already) and
 * finishes the frame if it was the last. */
void rpc_server_multi_call(rpc_server *s, srv_multi *m, size_t i);

/* Serves m's group of calls together (serve_many), each answered
 * ETIMEDOUT alone when its deadline passed while queued, and finishes the
 * frame if they were the last. */
void rpc_server_multi_group(rpc_server *s, srv_multi *m);

/* Frees m with what its calls still hold (m->c is left alone). */
void rpc_server_multi_free(srv_multi *m);

#endif /* LAPSE_RPC_SERVER_INT_H */
