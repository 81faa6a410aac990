/*
 * rpc_server_stream.c: the server half of rpc.h over NNG's stream API, the
 * default transport (docs/wire-protocol.md, "The stream server"; rep0 is
 * kept under LAPSE_RPC_SERVER=rep0): the wire a rep0 socket speaks, framed by hand, as
 * rpc_conn.c does for the client. Requests are taken, served and answered
 * by the code both transports share (rpc_server_take.c); only where the
 * bytes come from and where a reply goes (stream_reply) are here.
 *
 * A listener accepts connections in a loop. A connection sends rep0's
 * header and checks the peer's (req0), then reads into a buffer of at least
 * RPC_FRAME_INBUF_MIN (rpc_frame.h), takes every complete message in it (a request of its own, an
 * srv_ctx made for it, with its id), keeps the partial tail and reads on.
 * Replies are appended to the connection's pending bytes; one send is in
 * flight at a time and carries whatever came meanwhile. A connection with
 * rpc_server_options.contexts requests unanswered reads no more until one
 * is (back-pressure, as rep0's pool of contexts gives).
 *
 * Thread-safety: a connection's send and receive callbacks and the workers
 * answering its requests run concurrently; srv_conn.mu guards its state
 * and output, its input is the receive path's alone. srv_stream.mu guards
 * the lists of connections.
 *
 * Invariants:
 *  1. A connection is freed only when it failed (its stream closed), has
 *     neither a send nor a receive posted, and no request refers to it
 *     (nreq == 0): a request answered after its connection failed drops
 *     its reply. It is freed by reap_cb (never from its own aio's callback)
 *     or, once the server closes, by rpc_server_stream_free.
 *  2. Once srv_stream.closing is set, the lists of connections no longer
 *     change: the accept callback frees what it accepts, and a connection
 *     becoming dead stays where it is for rpc_server_stream_free.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "../common/buf.h"
#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "rpc.h"
#include "rpc_frame.h"
#include "rpc_internal.h"
#include "rpc_server_int.h"

#define HELLO_TIMEOUT_MS 10000 /* a peer that sends no header by then is closed */
#define ACCEPT_RETRY_MS 10     /* after a failed accept (out of descriptors, say) */

struct srv_conn {
    srv_conn *prev, *next; /* on srv_stream.conns, or next on srv_stream.dead */
    rpc_server *s;
    pthread_mutex_t mu; /* guards what follows but the input */
    nng_stream *st;
    nng_aio *send_aio, *recv_aio;
    int failed;        /* the stream is closed */
    int paused;        /* no receive posted: nreq reached max_reqs */
    int dead;          /* invariant 1 reached: on its way to be freed */
    int recv_busy;     /* a receive is posted on st */
    size_t nreq;       /* requests taken and not answered */
    srv_ctx *reqs;     /* those requests (cprev, cnext) */
    rpc_frame_out out; /* replies written and to write */
    int up;            /* the peer's header was read (the receive path's) */
    uint8_t *in;       /* received bytes: inlen of incap (the receive path's) */
    size_t inlen, incap;
};

struct srv_stream {
    rpc_server *s;
    nng_stream_listener *l;
    nng_aio *accept_aio;
    nng_aio *reap_aio;  /* frees the dead connections (reap_cb) */
    pthread_mutex_t mu; /* guards what follows */
    int mu_init;
    srv_conn *conns; /* live connections */
    srv_conn *dead;  /* connections to free */
    int reaping;     /* reap_aio is posted */
    int pausing;     /* accept_aio sleeps ACCEPT_RETRY_MS, then accepts */
    size_t max_reqs; /* a connection's requests unanswered before it stops reading */
    int closing;
};

/* ===================================================================== */
/* Helpers                                                                */
/* ===================================================================== */

/* ===================================================================== */
/* A connection                                                           */
/* ===================================================================== */

static void conn_free(srv_conn *c)
{
    if (c->send_aio != NULL) {
        nng_aio_free(c->send_aio);
    }
    if (c->recv_aio != NULL) {
        nng_aio_free(c->recv_aio);
    }
    if (c->st != NULL) {
        nng_stream_free(c->st);
    }
    pthread_mutex_destroy(&c->mu);
    rpc_frame_out_fini(&c->out);
    free(c->in);
    free(c);
}

/* Closes c's stream, which ends the send and receive posted on it. REQUIRES:
 * c->mu held. */
static void fail_locked(srv_conn *c)
{
    if (!c->failed) {
        c->failed = 1;
        buf_clear(&c->out.pending);
        nng_stream_close(c->st);
    }
}

/* 1 when c just became dead (invariant 1): the caller buries it after
 * unlocking. REQUIRES: c->mu held. */
static int dead_locked(srv_conn *c)
{
    if (c->failed && !c->dead && !c->out.busy && !c->recv_busy && c->nreq == 0) {
        c->dead = 1;
        return 1;
    }
    return 0;
}

/* Moves the dead connection c to the dead list for reap_cb, or, the server
 * closing, leaves it for rpc_server_stream_free (invariant 2). */
static void bury(srv_conn *c)
{
    srv_stream *t = c->s->stream;
    pthread_mutex_lock(&t->mu);
    if (!t->closing) {
        if (c->prev != NULL) {
            c->prev->next = c->next;
        } else {
            t->conns = c->next;
        }
        if (c->next != NULL) {
            c->next->prev = c->prev;
        }
        c->prev = NULL;
        c->next = t->dead;
        t->dead = c;
        if (!t->reaping) {
            t->reaping = 1;
            nng_sleep_aio(0, t->reap_aio);
        }
    }
    pthread_mutex_unlock(&t->mu);
}

/* reap_aio: frees the dead connections; waiting for their callbacks to
 * return is safe here, on an aio not theirs. */
static void reap_cb(void *arg)
{
    srv_stream *t = arg;
    pthread_mutex_lock(&t->mu);
    srv_conn *list = t->dead;
    t->dead = NULL;
    t->reaping = 0;
    pthread_mutex_unlock(&t->mu);
    while (list != NULL) {
        srv_conn *c = list;
        list = c->next;
        conn_free(c);
    }
}

/* Reads up to want bytes after the input. REQUIRES: c->mu held, not failed. */
static void post_recv_locked(srv_conn *c, size_t want)
{
    c->recv_busy = 1;
    nng_iov iov = {.iov_buf = c->in + c->inlen, .iov_len = want};
    (void)nng_aio_set_iov(c->recv_aio, 1, &iov);
    nng_stream_recv(c->st, c->recv_aio);
}

/* send_aio: a write ended (perhaps part of it: the rest goes on). */
static void send_cb(void *arg)
{
    srv_conn *c = arg;
    int rv = nng_aio_result(c->send_aio);
    pthread_mutex_lock(&c->mu);
    int ok = rv == 0 && !c->failed;
    if (rpc_frame_out_sent(&c->out, ok, c->st, c->send_aio)) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    if (!ok) {
        fail_locked(c);
    } else if (c->out.pending.len > 0) {
        rpc_frame_out_start(&c->out, c->st, c->send_aio);
    }
    int dead = dead_locked(c);
    pthread_mutex_unlock(&c->mu);
    if (dead) {
        bury(c);
    }
}

/* Where a stream request's reply goes (rpc_server.reply): appended to its
 * connection's pending bytes behind its id, and sent unless a send is out;
 * dropped when the connection failed. out NULL (out of memory packing it)
 * closes the connection (rpc.h invariant 1). Frees r. */
static void stream_reply(srv_ctx *r, nng_msg *out)
{
    srv_conn *c = r->conn;
    pthread_mutex_lock(&c->mu);
    if (r->cprev != NULL) {
        r->cprev->cnext = r->cnext;
    } else {
        c->reqs = r->cnext;
    }
    if (r->cnext != NULL) {
        r->cnext->cprev = r->cprev;
    }
    c->nreq--;
    if (c->paused && !c->failed && c->nreq < c->s->stream->max_reqs) {
        c->paused = 0;
        post_recv_locked(c, c->incap - c->inlen);
    }
    if (!c->failed) {
        size_t n = out != NULL ? nng_msg_len(out) : 0;
        if (out == NULL || rpc_frame_append(&c->out.pending, r->id, nng_msg_body(out), n) != 0) {
            fail_locked(c);
        } else {
            if (!c->out.busy) {
                rpc_frame_out_start(&c->out, c->st, c->send_aio);
            }
        }
    }
    int dead = dead_locked(c);
    pthread_mutex_unlock(&c->mu);
    if (out != NULL) {
        nng_msg_free(out);
    }
    free(r);
    if (dead) {
        bury(c);
    }
}

/* Takes the complete messages in c->in, each a request of its own. Returns
 * how many bytes they took, or SIZE_MAX for a message no req0 peer sends
 * (or no memory): then the connection closes. */
static size_t take_messages(srv_conn *c)
{
    size_t off = 0, len;
    uint32_t id;
    int got;
    while ((got = rpc_frame_next(c->in + off, c->inlen - off, &id, &len)) == 1) {
        srv_ctx *r = calloc(1, sizeof *r);
        if (r == NULL) {
            return SIZE_MAX;
        }
        r->srv = c->s;
        r->state = SRV_QUEUED;
        r->conn = c;
        r->id = id;
        r->arrived = clock_mono_now();
        pthread_mutex_lock(&c->mu);
        if (c->failed) {
            pthread_mutex_unlock(&c->mu);
            free(r);
            return SIZE_MAX;
        }
        r->cnext = c->reqs;
        if (c->reqs != NULL) {
            c->reqs->cprev = r;
        }
        c->reqs = r;
        c->nreq++;
        pthread_mutex_unlock(&c->mu);
        rpc_server_take(c->s, r, c->in + off + RPC_FRAME_HDR, len);
        off += RPC_FRAME_HDR + len;
    }
    return got < 0 ? SIZE_MAX : off;
}

/* recv_aio: bytes came in (or the stream failed). */
static void recv_cb(void *arg)
{
    srv_conn *c = arg;
    int rv = nng_aio_result(c->recv_aio);
    int ok = rv == 0;
    size_t want = 0;
    if (ok) {
        c->inlen += nng_aio_count(c->recv_aio);
    }
    if (ok && !c->up) {
        if (c->inlen < RPC_FRAME_HELLO) {
            want = RPC_FRAME_HELLO - c->inlen;
        } else if (memcmp(c->in, rpc_frame_hello_req0, RPC_FRAME_HELLO) != 0) {
            ok = 0;
        } else {
            c->up = 1;
            c->inlen = 0;
            want = c->incap;
            nng_aio_set_timeout(c->recv_aio, NNG_DURATION_INFINITE);
        }
    } else if (ok) {
        size_t used = take_messages(c);
        if (used == SIZE_MAX) {
            ok = 0;
        } else {
            /* Keep the partial tail, and make room for the whole of it. */
            ok = rpc_frame_keep_tail(&c->in, &c->inlen, &c->incap, used) == 0;
            want = c->incap - c->inlen;
        }
    }
    pthread_mutex_lock(&c->mu);
    if (ok && !c->failed) {
        if (c->up && c->nreq >= c->s->stream->max_reqs) {
            c->recv_busy = 0; /* stream_reply reads on (back-pressure, as rep0's contexts) */
            c->paused = 1;
        } else {
            post_recv_locked(c, want);
        }
        pthread_mutex_unlock(&c->mu);
        return;
    }
    c->recv_busy = 0;
    fail_locked(c);
    int dead = dead_locked(c);
    pthread_mutex_unlock(&c->mu);
    if (dead) {
        bury(c);
    }
}

/* A connection on st (taken): sends rep0's header, reads the peer's. */
static void conn_start(srv_stream *t, nng_stream *st)
{
    srv_conn *c = calloc(1, sizeof *c);
    if (c == NULL || pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        nng_stream_free(st);
        return;
    }
    c->s = t->s;
    c->st = st;
    c->incap = RPC_FRAME_INBUF_MIN;
    if ((c->in = malloc(c->incap)) == NULL ||
        buf_append(&c->out.sending, rpc_frame_hello_rep0, RPC_FRAME_HELLO) != 0 ||
        nng_aio_alloc(&c->send_aio, send_cb, c) != 0 ||
        nng_aio_alloc(&c->recv_aio, recv_cb, c) != 0) {
        conn_free(c);
        return;
    }
    (void)nng_stream_set_bool(st, NNG_OPT_TCP_NODELAY, true);
    pthread_mutex_lock(&t->mu);
    if (t->closing) {
        pthread_mutex_unlock(&t->mu);
        conn_free(c);
        return;
    }
    c->next = t->conns;
    if (t->conns != NULL) {
        t->conns->prev = c;
    }
    t->conns = c;
    pthread_mutex_lock(&c->mu);
    rpc_frame_out_post(&c->out, c->st, c->send_aio); /* the header */
    nng_aio_set_timeout(c->recv_aio, HELLO_TIMEOUT_MS);
    post_recv_locked(c, 8);
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&t->mu);
}

/* accept_aio: a connection came (or the listener closed); accepts the next. */
static void accept_cb(void *arg)
{
    srv_stream *t = arg;
    int rv = nng_aio_result(t->accept_aio);
    int pause = 0;
    if (t->pausing) { /* the pause after a failed accept ended */
        t->pausing = 0;
    } else if (rv == 0) {
        conn_start(t, nng_aio_get_output(t->accept_aio, 0));
    } else if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
        return;
    } else {
        log_warn("rpc: accept failed: %s", nng_strerror(rv));
        pause = 1;
    }
    pthread_mutex_lock(&t->mu);
    if (t->closing) {
        /* nothing more */
    } else if (pause) {
        t->pausing = 1;
        nng_sleep_aio(ACCEPT_RETRY_MS, t->accept_aio);
    } else {
        nng_stream_listener_accept(t->l, t->accept_aio);
    }
    pthread_mutex_unlock(&t->mu);
}

/* ===================================================================== */
/* Interface (rpc_server_int.h)                                           */
/* ===================================================================== */

int rpc_server_stream_open(rpc_server *s, const char *url, char *err, size_t errlen)
{
    srv_stream *t = calloc(1, sizeof *t);
    if (t == NULL) {
        set_err(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    s->stream = t;
    s->reply = stream_reply;
    t->s = s;
    t->max_reqs = (size_t)s->nctx; /* rpc_server_options.contexts, per connection here */
    s->nctx = 0;                   /* no rep0 contexts */
    if (pthread_mutex_init(&t->mu, NULL) != 0) {
        set_err(err, errlen, "pthread_mutex_init failed");
        return LAPSE_ENOMEM;
    }
    t->mu_init = 1;
    int rv;
    if ((rv = nng_aio_alloc(&t->accept_aio, accept_cb, t)) != 0 ||
        (rv = nng_aio_alloc(&t->reap_aio, reap_cb, t)) != 0) {
        set_err(err, errlen, "nng_aio_alloc: %s", nng_strerror(rv));
        return LAPSE_ENOMEM;
    }
    if ((rv = nng_stream_listener_alloc(&t->l, url)) != 0) {
        set_err(err, errlen, "bad listen address %s: %s", url, nng_strerror(rv));
        return rv == NNG_ENOMEM ? LAPSE_ENOMEM : LAPSE_EINVAL;
    }
    if ((rv = nng_stream_listener_listen(t->l)) != 0) {
        return rpc_server_listen_failed(rv, url, err, errlen);
    }
    nng_stream_listener_accept(t->l, t->accept_aio);
    return 0;
}

void rpc_server_stream_stop(rpc_server *s)
{
    srv_stream *t = s->stream;
    if (t == NULL || !t->mu_init) {
        return;
    }
    pthread_mutex_lock(&t->mu);
    t->closing = 1; /* invariant 2 from here */
    pthread_mutex_unlock(&t->mu);
    if (t->l != NULL) {
        nng_stream_listener_close(t->l);
    }
    if (t->accept_aio != NULL) {
        nng_aio_stop(t->accept_aio);
    }
    if (t->reap_aio != NULL) {
        nng_aio_stop(t->reap_aio);
    }
    for (srv_conn *c = t->conns; c != NULL; c = c->next) {
        pthread_mutex_lock(&c->mu);
        fail_locked(c);
        pthread_mutex_unlock(&c->mu);
    }
    /* Each stop waits for the aio's callback; with the connection failed,
     * none posts anything more. */
    for (srv_conn *c = t->conns; c != NULL; c = c->next) {
        nng_aio_stop(c->send_aio);
        nng_aio_stop(c->recv_aio);
    }
}

void rpc_server_stream_free(rpc_server *s)
{
    srv_stream *t = s->stream;
    if (t == NULL) {
        return;
    }
    srv_conn *lists[2] = {t->conns, t->dead};
    for (int k = 0; k < 2; k++) {
        while (lists[k] != NULL) {
            srv_conn *c = lists[k];
            lists[k] = c->next;
            /* Requests still queued when the workers stopped. */
            while (c->reqs != NULL) {
                srv_ctx *r = c->reqs;
                c->reqs = r->cnext;
                if (r->call != NULL) {
                    lapse__request__free_unpacked(r->call, NULL);
                }
                if (r->multi != NULL) {
                    rpc_server_multi_free(r->multi);
                }
                free(r);
            }
            conn_free(c);
        }
    }
    if (t->accept_aio != NULL) {
        nng_aio_free(t->accept_aio);
    }
    if (t->reap_aio != NULL) {
        nng_aio_free(t->reap_aio);
    }
    if (t->l != NULL) {
        nng_stream_listener_free(t->l);
    }
    if (t->mu_init) {
        pthread_mutex_destroy(&t->mu);
    }
    free(t);
    s->stream = NULL;
}
