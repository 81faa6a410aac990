/*
 * rpc_client.c: the client half of rpc.h over NNG 1.5. The framing, envelope
 * and deadline rules are in docs/wire-protocol.md.
 *
 * One req0 socket per peer, one nng_ctx and one aio per call, waited on
 * synchronously by the calling thread.
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
#include "rpc_internal.h"
#include "wire.h"

#define RECONNECT_MIN_MS 20
#define RECONNECT_MAX_MS 500

/* ===================================================================== */
/* Client                                                                 */
/* ===================================================================== */

#define MAX_PEERS 8      /* URLs in one client's list */
#define PICK_WAIT_MS 200 /* how long a call waits for any peer of a list to connect */

/* One req0 socket with one dialer per peer URL: a list is several sockets,
 * never several dialers on one socket (each peer's connection is managed
 * apart, as for a single URL). A call goes to the current peer while it has
 * a connection, else to the first peer that has one; a call that times out
 * moves the current peer on, so a stalled peer costs one timeout. */
typedef struct peer {
    nng_socket sock;
    int open;         /* sock was opened */
    atomic_int pipes; /* connected pipes, from NNG's pipe notifications */
} peer;

typedef struct waiter waiter;
typedef struct frame frame;

struct rpc_client {
    peer peers[MAX_PEERS];
    int npeers;
    atomic_int cur; /* the peer calls go to while it works */
    char *url;      /* owned: the list as given */

    /* Coalescing (rpc_call): frames in flight, and the calls waiting for
     * one of them to come back, oldest first. */
    pthread_mutex_t cmu;
    pthread_cond_t idle; /* signalled when a frame ends */
    int inflight;
    waiter *qhead, *qtail;
    frame *free_frames; /* frames not out, each with its aio (and context) */
    frame *dead_frames; /* frames whose exchange failed: their context may still
                           wait for a reply, so it is closed, never reused */
};

static void on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    (void)p;
    atomic_int *pipes = arg;
    atomic_fetch_add(pipes, ev == NNG_PIPE_EV_ADD_POST ? 1 : -1);
}

/* Opens peer pe's socket and starts its dialer to url. Returns 0 or an
 * error. */
static int open_peer(peer *pe, const char *url, char *err, size_t errlen)
{
    nng_dialer d;
    int rv;
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
    for (const char *p = url;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma != NULL ? (size_t)(comma - p) : strlen(p);
        char one[512];
        if (n == 0 || n >= sizeof(one) || c->npeers == MAX_PEERS) {
            code = LAPSE_EINVAL;
            set_err(err, errlen,
                    "bad address list \"%s\": an empty or over-long entry, or "
                    "more than %d",
                    url, MAX_PEERS);
            goto fail;
        }
        memcpy(one, p, n);
        one[n] = '\0';
        if ((code = open_peer(&c->peers[c->npeers++], one, err, errlen)) != 0) {
            goto fail;
        }
        if (comma == NULL) {
            break;
        }
        p = comma + 1;
    }
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

static void frames_idle_close(rpc_client *c);
static void frames_close(rpc_client *c);

void rpc_client_close(rpc_client *c)
{
    if (c == NULL) {
        return;
    }
    frames_idle_close(c);
    for (int i = 0; i < c->npeers; i++) {
        if (c->peers[i].open) {
            nng_close(c->peers[i].sock);
        }
    }
    frames_close(c);
    pthread_cond_destroy(&c->idle);
    pthread_mutex_destroy(&c->cmu);
    free(c->url);
    free(c);
}

/* The peer a call goes to: the current one while it is connected, else the
 * first connected one after it (which becomes current), else the current
 * one (the call waits for its connection). */
static int pick_peer(rpc_client *c)
{
    int cur = atomic_load(&c->cur);
    if (c->npeers == 1) {
        return cur;
    }
    /* Just after the open nothing is connected yet: a live peer on the
     * same network connects in a millisecond or so, a dead one never. */
    clock_mono until = clock_mono_after_ms(PICK_WAIT_MS);
    do {
        for (int k = 0; k < c->npeers; k++) {
            int j = (cur + k) % c->npeers;
            if (atomic_load(&c->peers[j].pipes) > 0) {
                if (j != cur) {
                    atomic_compare_exchange_strong(&c->cur, &cur, j);
                }
                return j;
            }
        }
        clock_sleep_ms(1);
    } while (clock_mono_remaining_ms(until) > 0);
    return cur;
}

/* A call to peer i timed out: the next one tries the next peer. */
static void peer_failed(rpc_client *c, int i)
{
    int expect = i;
    atomic_compare_exchange_strong(&c->cur, &expect, (i + 1) % c->npeers);
}

int rpc_client_connected(rpc_client *c, int wait_ms)
{
    clock_mono until = clock_mono_after_ms(wait_ms);
    for (;;) {
        for (int i = 0; i < c->npeers; i++) {
            if (atomic_load(&c->peers[i].pipes) > 0) {
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

/* One message exchange of a group: msg (consumed) goes to client; on return
 * reply holds the reply message (caller frees) or rv a Lapse code with err. */
typedef struct exchange {
    rpc_client *client;
    int peer; /* the peer it went to */
    nng_msg *msg;
    nng_msg *reply;
    int rv;
    char *err;
    size_t errlen;
} exchange;

static void exchange_fail(exchange *x, int nrv, int timeout_ms)
{
    int code = from_nng(nrv);
    if (nrv == NNG_ETIMEDOUT && x->client->npeers > 1) {
        peer_failed(x->client, x->peer);
    }
    x->rv = code == LAPSE_EINVAL ? LAPSE_EUNAVAILABLE : code;
    if (nrv == NNG_ETIMEDOUT) {
        set_err(x->err, x->errlen, "%s: no reply within %d ms", x->client->url, timeout_ms);
    } else {
        set_err(x->err, x->errlen, "%s: %s", x->client->url, nng_strerror(nrv));
    }
}

/*
 * The exchanges of one exchange_all, each driven by its aio's callback: a
 * send's completion posts the receive on NNG's thread, and the last reply
 * (or failure) in wakes the caller, who sleeps once however many there are.
 */
typedef struct xgroup {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t left; /* exchanges not ended; guarded by mu */
} xgroup;

typedef struct inflight {
    xgroup *g;
    nng_ctx ctx;
    nng_aio *aio;
    int open;      /* ctx opened */
    int started;   /* sent: ends in inflight_cb */
    int receiving; /* the send completed and a receive is posted */
    int rv;        /* NNG's result */
    clock_mono deadline;
    nng_msg *reply;
} inflight;

static void inflight_end(inflight *f, int rv)
{
    xgroup *g = f->g;
    pthread_mutex_lock(&g->mu);
    f->rv = rv;
    if (--g->left == 0) {
        pthread_cond_signal(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
}

/* An exchange's send on ctx completed with rv: on success, sets
 * *receiving (before the receive is posted: its completion may run at
 * once, on another thread) and posts the receive of the reply; on failure,
 * frees the message the send left with us and returns 0. The deadline may
 * have passed while the send waited for its (dead) peer; the reply may be
 * in by now, and a receive with a zero timeout still takes a reply the
 * context holds. */
static int send_done(nng_aio *aio, nng_ctx ctx, int rv, clock_mono deadline, int *receiving)
{
    if (rv != 0) {
        nng_msg_free(nng_aio_get_msg(aio));
        nng_aio_set_msg(aio, NULL);
        return 0;
    }
    *receiving = 1;
    int64_t left = clock_mono_remaining_ms(deadline);
    nng_aio_set_timeout(aio, left > 0 ? (nng_duration)left : NNG_DURATION_ZERO);
    nng_ctx_recv(ctx, aio);
    return 1;
}

static void inflight_cb(void *arg)
{
    inflight *f = arg;
    int rv = nng_aio_result(f->aio);
    if (!f->receiving) {
        if (!send_done(f->aio, f->ctx, rv, f->deadline, &f->receiving)) {
            inflight_end(f, rv);
        }
        return;
    }
    if (rv == 0) {
        f->reply = nng_aio_get_msg(f->aio);
        nng_aio_set_msg(f->aio, NULL);
    }
    inflight_end(f, rv);
}

/*
 * Runs n exchanges at once, each on its own context, so n messages to n
 * peers take about one round trip, bounded by the one shared deadline.
 * Exchanges whose msg is NULL are skipped (their rv is left as it is).
 */
static void exchange_all(exchange *xs, size_t n, int timeout_ms)
{
    inflight one;
    inflight *fl = n <= 1 ? &one : calloc(n, sizeof(*fl));
    clock_mono deadline = clock_mono_after_ms(timeout_ms);
    int nrv;
    if (fl == NULL) {
        for (size_t i = 0; i < n; i++) {
            if (xs[i].msg != NULL) {
                nng_msg_free(xs[i].msg);
                xs[i].rv = LAPSE_ENOMEM;
                set_err(xs[i].err, xs[i].errlen, "out of memory");
            }
        }
        return;
    }
    memset(fl, 0, (n ? n : 1) * sizeof(*fl));
    xgroup g = {.left = 0};
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    for (size_t i = 0; i < n; i++) {
        exchange *x = &xs[i];
        inflight *f = &fl[i];
        if (x->msg == NULL) {
            continue;
        }
        x->reply = NULL;
        x->rv = 0;
        x->peer = pick_peer(x->client);
        f->g = &g;
        f->deadline = deadline;
        if ((nrv = nng_ctx_open(&f->ctx, x->client->peers[x->peer].sock)) != 0 ||
            (f->open = 1, nrv = nng_aio_alloc(&f->aio, inflight_cb, f)) != 0) {
            nng_msg_free(x->msg);
            exchange_fail(x, nrv, timeout_ms);
            continue;
        }
        (void)nng_ctx_set_ms(f->ctx, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
        int64_t left = clock_mono_remaining_ms(deadline);
        nng_aio_set_timeout(f->aio, left > 0 ? (nng_duration)left : NNG_DURATION_ZERO);
        nng_aio_set_msg(f->aio, x->msg);
        f->started = 1;
        pthread_mutex_lock(&g.mu);
        g.left++;
        pthread_mutex_unlock(&g.mu);
        nng_ctx_send(f->ctx, f->aio);
    }
    pthread_mutex_lock(&g.mu);
    while (g.left > 0) {
        pthread_cond_wait(&g.cv, &g.mu);
    }
    pthread_mutex_unlock(&g.mu);
    for (size_t i = 0; i < n; i++) {
        inflight *f = &fl[i];
        if (f->aio != NULL) {
            nng_aio_free(f->aio); /* waits for its callback to return */
        }
        if (f->open) {
            (void)nng_ctx_close(f->ctx);
        }
        if (f->started) {
            if (f->rv == 0) {
                xs[i].reply = f->reply;
            } else {
                exchange_fail(&xs[i], f->rv, timeout_ms);
            }
        }
    }
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.mu);
    if (fl != &one) {
        free(fl);
    }
}

/* Decodes a reply message (consumed) into mc->resp / mc->rv. */
/* Unpacks reply (consumed) with alloc (NULL: malloc), after the nesting
 * check every frame from the network gets. NULL when it does not decode;
 * *len gets its size. */
static Lapse__Response *unpack_reply(ProtobufCAllocator *alloc, nng_msg *reply, size_t *len)
{
    const void *data = nng_msg_body(reply);
    *len = nng_msg_len(reply);
    Lapse__Response *r = NULL;
    if (wire_check_nesting(&lapse__response__descriptor, data, *len, WIRE_MAX_NESTING) == 0) {
        r = lapse__response__unpack(alloc, *len, data);
    }
    nng_msg_free(reply);
    return r;
}

/* Takes a decoded reply r (NULL: undecodable, len bytes) from url into
 * *resp / the returned status, as rpc_call's. */
static int take_reply(const char *url, Lapse__Response *r, size_t len, Lapse__Response **resp,
                      char *err, size_t errlen)
{
    *resp = NULL;
    if (r == NULL) {
        set_err(err, errlen, "%s: undecodable reply (%zu bytes)", url, len);
        return LAPSE_EPROTO;
    }
    int status = wire_status_from_pb((int)r->status);
    if (status != LAPSE_OK) {
        if ((int)r->status != status) {
            set_err(err, errlen, "%s: unknown status %d in reply: %s", url, (int)r->status,
                    r->message != NULL ? r->message : "");
        } else {
            set_err(err, errlen, "%s", r->message != NULL ? r->message : "");
        }
    }
    *resp = r;
    return status;
}

static void decode_reply(rpc_multi_call *mc, nng_msg *reply)
{
    size_t len;
    Lapse__Response *r = unpack_reply(NULL, reply, &len);
    mc->rv = take_reply(mc->client->url, r, len, &mc->resp, mc->err, sizeof(mc->err));
}

/* Copies len bytes into a new message. 0, LAPSE_ETOOBIG or LAPSE_ENOMEM. */
static int new_msg(nng_msg **out, size_t len, char *err, size_t errlen)
{
    *out = NULL;
    if (len > RPC_MAX_MESSAGE_BYTES) {
        set_err(err, errlen, "message of %zu bytes exceeds the %u-byte limit", len,
                (unsigned)RPC_MAX_MESSAGE_BYTES);
        return LAPSE_ETOOBIG;
    }
    if (nng_msg_alloc(out, len) != 0) {
        set_err(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    return 0;
}

/* Fills req's envelope (version, timeout_ms) and packs it into a new *out.
 * Returns 0, LAPSE_ETOOBIG or LAPSE_ENOMEM with err set. */
static int pack_request(Lapse__Request *req, int timeout_ms, nng_msg **out, char *err,
                        size_t errlen)
{
    req->version = RPC_PROTOCOL_VERSION;
    req->timeout_ms = (uint32_t)timeout_ms;
    size_t len = lapse__request__get_packed_size(req);
    int rv = new_msg(out, len, err, errlen);
    if (rv == 0) {
        lapse__request__pack(req, nng_msg_body(*out));
    }
    return rv;
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
        mc->rv = pack_request(mc->req, timeout_ms, &x->msg, x->err, x->errlen);
    }
    exchange_all(xs, n, timeout_ms);
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

/* ===================================================================== */
/* Coalescing                                                             */
/* ===================================================================== */

/*
 * Single-item calls made at once by many threads through one client share
 * frames (docs/wire-protocol.md, "Coalesced calls"). A call packs its
 * request and, when the client has no frame out (COALESCE_INFLIGHT), sends
 * it at once as a plain request, with any calls queued meanwhile as one
 * coalesced frame; else it queues. Frames are driven by their aio callback
 * on NNG's thread: when a frame's reply is in, the callback hands each call
 * its reply, wakes it, and sends the queue as the next frame itself, so a
 * call costs its caller one sleep and no thread relays a frame. A frame out
 * for longer than COALESCE_STALL_MS (a write waiting for its copies, a
 * stalled peer) holds no one up: a call queued that long sends the queue in
 * a frame of its own. Each call keeps its own deadline, and a frame's
 * timeout is the shortest left among its calls.
 *
 * One frame in flight, not more: measured with lapse-bench (16 threads,
 * docs/benchmarks.md), two cost a third more CPU per call for no more
 * throughput, as frames then carry about half as many calls.
 */

#define COALESCE_INFLIGHT 1           /* frames in flight per client, normally */
#define COALESCE_STALL_MS 1           /* the longest a call waits for a frame to be back */
#define COALESCE_MAX_BYTES (1u << 20) /* of the calls of one frame */
#define CLOSE_WAIT_MS 2000            /* rpc_client_close: for frames still out */

/* A call is queued, then sent in a frame, then done. */
typedef enum { W_QUEUED, W_SENT, W_DONE } waiter_state;

/* One coalescable call, on its caller's stack. */
struct waiter {
    waiter *next; /* in the client's queue, then in its frame */
    nng_msg *msg; /* the packed request; consumed when its frame goes */
    clock_mono deadline;
    waiter_state state; /* guarded by the client's cmu */
    pthread_cond_t cv;  /* signalled on W_DONE */
    Lapse__Response *resp;
    int rv;
    char err[512];
};

/* One frame's exchange, driven by its aio's callback (frame_cb); kept on
 * the client's free list between frames, with its context. */
struct frame {
    rpc_client *c;
    frame *next_free;
    nng_aio *aio;
    nng_ctx ctx;
    int ctx_open;
    int peer; /* the peer ctx was opened on */
    int receiving;
    int stale;     /* the exchange failed: ctx may hold a request never answered */
    waiter *batch; /* the frame's calls */
    size_t n;
    int timeout_ms;
    clock_mono deadline;
};

/* 1 for the calls that coalesce: single-item reads and writes, small and
 * quick, made by many threads at once. */
static int coalescable(const Lapse__Request *req)
{
    switch (req->body_case) {
    case LAPSE__REQUEST__BODY_GET_ITEM:
    case LAPSE__REQUEST__BODY_PUT_ITEM:
    case LAPSE__REQUEST__BODY_DELETE_ITEM:
    case LAPSE__REQUEST__BODY_UPDATE_ITEM:
        return 1;
    default:
        return 0;
    }
}

static void waiter_fail(waiter *w, int rv, const char *what)
{
    w->rv = rv;
    w->resp = NULL;
    set_err(w->err, sizeof(w->err), "%s", what);
}

/* Takes the calls of c's queue into a frame after first (may be NULL),
 * within the limits; calls whose deadline passed are finished with
 * ETIMEDOUT instead. Returns the frame's first call. REQUIRES: c->cmu. */
static waiter *take_batch(rpc_client *c, waiter *first)
{
    waiter *head = first, *tail = first;
    size_t n = first != NULL, bytes = first != NULL ? nng_msg_len(first->msg) : 0;
    if (first != NULL) {
        first->next = NULL;
        first->state = W_SENT;
    }
    while (c->qhead != NULL && n < RPC_MAX_COALESCED) {
        waiter *w = c->qhead;
        if (n > 0 && bytes + nng_msg_len(w->msg) > COALESCE_MAX_BYTES) {
            break;
        }
        c->qhead = w->next;
        if (c->qhead == NULL) {
            c->qtail = NULL;
        }
        w->next = NULL;
        if (clock_mono_remaining_ms(w->deadline) <= 0) {
            nng_msg_free(w->msg);
            w->msg = NULL;
            waiter_fail(w, LAPSE_ETIMEDOUT, "no reply in time (the call waited for a frame)");
            w->state = W_DONE;
            pthread_cond_signal(&w->cv);
            continue;
        }
        w->state = W_SENT;
        if (tail != NULL) {
            tail->next = w;
        } else {
            head = w;
        }
        tail = w;
        n++;
        bytes += nng_msg_len(w->msg);
    }
    return head;
}

/* Takes w out of c's queue. REQUIRES: c->cmu held, w queued. */
static void queue_remove(rpc_client *c, waiter *w)
{
    waiter **pp = &c->qhead;
    waiter *prev = NULL;
    while (*pp != w) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    *pp = w->next;
    if (c->qtail == w) {
        c->qtail = prev;
    }
    w->next = NULL;
}

/* The message of f's calls: the one call's own request, or a coalesced
 * frame of them all. Consumes the calls' messages; NULL on OOM or a frame
 * over the size limit, with err set. */
static nng_msg *frame_msg(frame *f, char *err, size_t errlen)
{
    if (f->n == 1) {
        nng_msg *m = f->batch->msg;
        f->batch->msg = NULL;
        return m;
    }
    ProtobufCBinaryData calls[RPC_MAX_COALESCED];
    size_t i = 0;
    for (waiter *w = f->batch; w != NULL; w = w->next, i++) {
        calls[i].data = nng_msg_body(w->msg);
        calls[i].len = nng_msg_len(w->msg);
    }
    Lapse__MultiRequest multi = LAPSE__MULTI_REQUEST__INIT;
    multi.n_calls = f->n;
    multi.calls = calls;
    Lapse__Request env = LAPSE__REQUEST__INIT;
    env.body_case = LAPSE__REQUEST__BODY_MULTI;
    env.multi = &multi;
    nng_msg *m = NULL;
    (void)pack_request(&env, f->timeout_ms, &m, err, errlen);
    for (waiter *w = f->batch; w != NULL; w = w->next) {
        nng_msg_free(w->msg);
        w->msg = NULL;
    }
    return m;
}

/* Hands each call of f its reply out of reply (consumed; NULL when rv, a
 * Lapse code, says why there is none, with err). */
static void frame_answer(frame *f, nng_msg *reply, int rv, const char *err)
{
    rpc_client *c = f->c;
    if (rv == 0 && f->n == 1) {
        size_t len;
        Lapse__Response *r = unpack_reply(NULL, reply, &len);
        waiter *w = f->batch;
        w->rv = take_reply(c->url, r, len, &w->resp, w->err, sizeof(w->err));
        return;
    }
    Lapse__Response *r = NULL;
    char why[512];
    snprintf(why, sizeof(why), "%s", err);
    if (rv == 0) {
        size_t len;
        Lapse__Response *whole;
        r = unpack_reply(NULL, reply, &len);
        rv = take_reply(c->url, r, len, &whole, why, sizeof(why));
        if (rv == 0 &&
            (r->body_case != LAPSE__RESPONSE__BODY_MULTI || r->multi->n_replies != f->n)) {
            rv = LAPSE_EPROTO;
            snprintf(why, sizeof(why), "%s: a coalesced frame of %zu calls got another reply",
                     c->url, f->n);
        }
    }
    size_t i = 0;
    for (waiter *w = f->batch; w != NULL; w = w->next, i++) {
        if (rv != 0) {
            waiter_fail(w, rv, why);
            continue;
        }
        const ProtobufCBinaryData *b = &r->multi->replies[i];
        Lapse__Response *one = NULL;
        if (wire_check_nesting(&lapse__response__descriptor, b->data, b->len, WIRE_MAX_NESTING) ==
            0) {
            one = lapse__response__unpack(NULL, b->len, b->data);
        }
        w->rv = take_reply(c->url, one, b->len, &w->resp, w->err, sizeof(w->err));
    }
    rpc_response_free(r);
}

static void frame_send(frame *f, waiter *batch, int may_wait);
static frame *frame_new(rpc_client *c);
static void frames_fail(rpc_client *c, waiter *batch, int rv, const char *why);

/* Ends f: its calls are answered (frame_answer) and woken; the queue, if
 * any, goes out as the next frame on f, else f goes back to the list. */
static void frame_end(frame *f, nng_msg *reply, int nrv, int rv, const char *err)
{
    rpc_client *c = f->c;
    char why[512];
    if (nrv != 0) {
        exchange x = {.client = c, .peer = f->peer, .err = why, .errlen = sizeof(why)};
        exchange_fail(&x, nrv, f->timeout_ms);
        rv = x.rv;
        err = why;
    }
    frame_answer(f, reply, rv, err);
    pthread_mutex_lock(&c->cmu);
    for (waiter *w = f->batch; w != NULL;) {
        waiter *next = w->next; /* w may be gone once woken and unlocked */
        w->state = W_DONE;
        pthread_cond_signal(&w->cv);
        w = next;
    }
    f->batch = NULL;
    waiter *next = take_batch(c, NULL);
    f->stale = nrv != 0;
    frame *out = f;
    if (f->stale) {
        /* Its context is closed by a caller's thread (frame_get), never by
         * its own callback, which closing it would wait for. */
        f->next_free = c->dead_frames;
        c->dead_frames = f;
        out = NULL;
        if (next != NULL && (out = c->free_frames) != NULL) {
            c->free_frames = out->next_free;
        }
    }
    if (next == NULL) {
        c->inflight--;
        if (out != NULL) {
            out->next_free = c->free_frames;
            c->free_frames = out;
        }
        pthread_cond_broadcast(&c->idle);
    }
    pthread_mutex_unlock(&c->cmu);
    if (next != NULL) {
        if (out == NULL && (out = frame_new(c)) == NULL) {
            frames_fail(c, next, LAPSE_ENOMEM, "out of memory");
            return;
        }
        frame_send(out, next, 0);
    }
}

static void frame_cb(void *arg)
{
    frame *f = arg;
    int nrv = nng_aio_result(f->aio);
    if (!f->receiving) {
        if (!send_done(f->aio, f->ctx, nrv, f->deadline, &f->receiving)) {
            frame_end(f, NULL, nrv, 0, "");
        }
        return;
    }
    nng_msg *reply = NULL;
    if (nrv == 0) {
        reply = nng_aio_get_msg(f->aio);
        nng_aio_set_msg(f->aio, NULL);
    }
    frame_end(f, reply, nrv, 0, "");
}

static void frame_free(frame *f)
{
    nng_aio_free(f->aio); /* waits for a callback still running */
    if (f->ctx_open) {
        (void)nng_ctx_close(f->ctx);
    }
    free(f);
}

/* A new frame of c (NULL on OOM). */
static frame *frame_new(rpc_client *c)
{
    frame *f = calloc(1, sizeof(*f));
    if (f != NULL) {
        f->c = c;
        if (nng_aio_alloc(&f->aio, frame_cb, f) != 0) {
            free(f);
            f = NULL;
        }
    }
    return f;
}

/* A frame to send on, from the caller's thread: one from c's list, else a
 * new one (NULL on OOM). Frees the frames whose exchange failed. */
static frame *frame_get(rpc_client *c)
{
    pthread_mutex_lock(&c->cmu);
    frame *f = c->free_frames;
    if (f != NULL) {
        c->free_frames = f->next_free;
    }
    frame *dead = c->dead_frames;
    c->dead_frames = NULL;
    pthread_mutex_unlock(&c->cmu);
    while (dead != NULL) {
        frame *next = dead->next_free;
        frame_free(dead);
        dead = next;
    }
    return f != NULL ? f : frame_new(c);
}

/* Ends the calls from batch with rv (c->inflight counted for them). */
static void frames_fail(rpc_client *c, waiter *batch, int rv, const char *why)
{
    pthread_mutex_lock(&c->cmu);
    for (waiter *w = batch; w != NULL;) {
        waiter *next = w->next;
        nng_msg_free(w->msg);
        w->msg = NULL;
        waiter_fail(w, rv, why);
        w->state = W_DONE;
        pthread_cond_signal(&w->cv);
        w = next;
    }
    c->inflight--;
    pthread_cond_broadcast(&c->idle);
    pthread_mutex_unlock(&c->cmu);
}

/* Sends the calls from batch on as frame f. may_wait: the caller's thread,
 * which may wait for a peer of a list to connect (pick_peer); NNG's thread
 * takes the current peer. */
static void frame_send(frame *f, waiter *batch, int may_wait)
{
    rpc_client *c = f->c;
    char err[512] = "";
    int64_t left = INT64_MAX;
    f->batch = batch;
    f->n = 0;
    for (waiter *w = batch; w != NULL; w = w->next, f->n++) {
        int64_t l = clock_mono_remaining_ms(w->deadline);
        left = l < left ? l : left;
    }
    f->timeout_ms = left > 0 ? (int)left : 1;
    f->deadline = clock_mono_after_ms(f->timeout_ms);
    f->receiving = 0;
    int peer = may_wait ? pick_peer(c) : atomic_load(&c->cur);
    int nrv = 0;
    if (f->ctx_open && f->peer != peer) {
        (void)nng_ctx_close(f->ctx);
        f->ctx_open = 0;
    }
    if (!f->ctx_open) {
        if ((nrv = nng_ctx_open(&f->ctx, c->peers[peer].sock)) == 0) {
            f->ctx_open = 1;
            f->peer = peer;
            (void)nng_ctx_set_ms(f->ctx, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
        }
    }
    f->peer = peer;
    nng_msg *m = frame_msg(f, err, sizeof(err));
    if (nrv != 0 || m == NULL) {
        nng_msg_free(m);
        frame_end(f, NULL, nrv, nrv != 0 ? 0 : LAPSE_ENOMEM, err[0] ? err : "out of memory");
        return;
    }
    nng_aio_set_timeout(f->aio, f->timeout_ms);
    nng_aio_set_msg(f->aio, m);
    nng_ctx_send(f->ctx, f->aio);
}

/* Sends batch (c->inflight counted for it already) as a new frame, from
 * the caller's thread. REQUIRES: c->cmu not held. */
static void frame_start(rpc_client *c, waiter *batch)
{
    frame *f = frame_get(c);
    if (f != NULL) {
        frame_send(f, batch, 1);
    } else {
        frames_fail(c, batch, LAPSE_ENOMEM, "out of memory");
    }
}

/* Before the sockets close: waits for the callbacks of the frames not out
 * to return, then closes their contexts (NNG waits for a socket's contexts
 * when it closes it). A frame's caller is woken from its callback, which
 * may still be inside NNG (posting the receive of an earlier step) when the
 * caller returns; NNG 1.5.2 panics ("pthread_mutex_lock: Invalid
 * argument") when that runs against a socket being closed. */
static void frames_idle_close(rpc_client *c)
{
    pthread_mutex_lock(&c->cmu);
    frame *lists[2] = {c->free_frames, c->dead_frames};
    pthread_mutex_unlock(&c->cmu);
    for (int list = 0; list < 2; list++) {
        for (frame *f = lists[list]; f != NULL; f = f->next_free) {
            nng_aio_stop(f->aio); /* never from its own callback: a caller's thread */
            if (f->ctx_open) {
                (void)nng_ctx_close(f->ctx);
                f->ctx_open = 0;
            }
        }
    }
}

/* After the sockets closed: waits (bounded) for the frames still out,
 * which end with ECLOSED, then frees every frame. */
static void frames_close(rpc_client *c)
{
    pthread_mutex_lock(&c->cmu);
    struct timespec until = clock_mono_abstime(CLOSE_WAIT_MS);
    while (c->inflight > 0 && pthread_cond_timedwait(&c->idle, &c->cmu, &until) == 0) {
    }
    frame *lists[2] = {c->free_frames, c->dead_frames};
    c->free_frames = c->dead_frames = NULL;
    pthread_mutex_unlock(&c->cmu);
    for (int list = 0; list < 2; list++) {
        for (frame *f = lists[list]; f != NULL;) {
            frame *next = f->next_free;
            frame_free(f);
            f = next;
        }
    }
}

/* rpc_call of a coalescable call. */
static int call_coalesced(rpc_client *c, Lapse__Request *req, int timeout_ms,
                          Lapse__Response **resp, char *err, size_t errlen)
{
    waiter w = {.state = W_QUEUED};
    *resp = NULL;
    int rv = pack_request(req, timeout_ms, &w.msg, err, errlen);
    if (rv != 0) {
        return rv;
    }
    w.deadline = clock_mono_after_ms(timeout_ms);
    clock_cond_init_mono(&w.cv);

    pthread_mutex_lock(&c->cmu);
    if (c->inflight < COALESCE_INFLIGHT) {
        c->inflight++;
        waiter *batch = take_batch(c, &w);
        pthread_mutex_unlock(&c->cmu);
        frame_start(c, batch);
        pthread_mutex_lock(&c->cmu);
    } else {
        if (c->qtail != NULL) {
            c->qtail->next = &w;
        } else {
            c->qhead = &w;
        }
        c->qtail = &w;
    }
    clock_mono stall = clock_mono_after_ms(COALESCE_STALL_MS);
    while (w.state == W_QUEUED) {
        int64_t wait_ms = clock_mono_remaining_ms(stall);
        struct timespec ts = clock_mono_abstime(wait_ms > 0 ? wait_ms : 0);
        if (pthread_cond_timedwait(&w.cv, &c->cmu, &ts) == 0 || w.state != W_QUEUED ||
            clock_mono_remaining_ms(stall) > 0) {
            continue;
        }
        /* The frame out is slow (a write waiting for its copies, a peer
         * stalled): this call and those queued after it go in a frame of
         * their own, so no call waits behind another's. */
        queue_remove(c, &w);
        if (clock_mono_remaining_ms(w.deadline) <= 0) {
            nng_msg_free(w.msg);
            w.msg = NULL;
            waiter_fail(&w, LAPSE_ETIMEDOUT, "no reply in time (the call waited for a frame)");
            w.state = W_DONE;
            break;
        }
        c->inflight++;
        waiter *batch = take_batch(c, &w);
        pthread_mutex_unlock(&c->cmu);
        frame_start(c, batch);
        pthread_mutex_lock(&c->cmu);
    }
    while (w.state != W_DONE) {
        pthread_cond_wait(&w.cv, &c->cmu);
    }
    pthread_mutex_unlock(&c->cmu);
    pthread_cond_destroy(&w.cv);
    *resp = w.resp;
    if (w.rv != 0) {
        set_err(err, errlen, "%s", w.err);
    }
    return w.rv;
}

int rpc_call(rpc_client *c, Lapse__Request *req, int timeout_ms, Lapse__Response **resp, char *err,
             size_t errlen)
{
    if (timeout_ms <= 0) {
        timeout_ms = RPC_DEFAULT_TIMEOUT_MS;
    }
    if (coalescable(req)) {
        return call_coalesced(c, req, timeout_ms, resp, err, errlen);
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

void rpc_response_free(Lapse__Response *resp)
{
    if (resp != NULL) {
        lapse__response__free_unpacked(resp, NULL);
    }
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
    if ((rv = new_msg(&x.msg, len, err, errlen)) != 0) {
        return rv;
    }
    if (len > 0) {
        memcpy(nng_msg_body(x.msg), data, len);
    }
    exchange_all(&x, 1, timeout_ms);
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
    int rv = pack_request(&copy, timeout_ms, &x.msg, err, errlen);
    if (rv != 0) {
        return rv;
    }
    exchange_all(&x, 1, timeout_ms);
    if (x.rv != 0) {
        return x.rv;
    }
    ProtobufCAllocator alloc = {arena_pb_alloc, arena_pb_free, a};
    size_t len;
    Lapse__Response *r = unpack_reply(&alloc, x.reply, &len);
    if (r == NULL) {
        set_err(err, errlen, "%s: undecodable reply (%zu bytes)", c->url, len);
        return LAPSE_EPROTO;
    }
    *resp = *r;
    return 0;
}
