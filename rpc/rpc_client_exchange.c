/*
 * rpc_client_exchange.c: the exchanges under every client call of rpc.h:
 * which peer of a list a call goes to, a group of requests sent at once and
 * waited for together (rpc_client_exchange_all), packing a request and
 * taking its reply. rpc_client.c (the client and its calls) and
 * rpc_coalesce.c (coalesced frames) are built on it and it on neither, so
 * the three files call one way; what they share is in rpc_client_int.h.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "rpc.h"
#include "rpc_client_int.h"
#include "rpc_internal.h"
#include "rpc_loop.h"
#include "wire.h"

#define PICK_WAIT_MS 200 /* how long a call waits for any peer of a list to connect */

int rpc_client_peer_up(rpc_client *c, int i)
{
    if (c->stream) {
        return rpc_conn_connected(c->peers[i].conn);
    }
    return atomic_load(&c->peers[i].pipes) > 0;
}

/* The peer a call goes to: the current one while it is connected, else the
 * first connected one after it (which becomes current), else the current
 * one (the call waits for its connection). */
int rpc_client_pick_peer(rpc_client *c)
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
            if (rpc_client_peer_up(c, j)) {
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

void rpc_client_exchange_fail(exchange *x, int nrv, int timeout_ms)
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
    size_t left;        /* exchanges not ended; guarded by mu */
    size_t left_driven; /* of those, on a client of a driven loop; guarded by mu */
} xgroup;

typedef struct inflight {
    xgroup *g;
    nng_ctx ctx;
    nng_aio *aio;
    int open;      /* ctx opened (not for a call on a conn) */
    int started;   /* sent: ends in inflight_cb */
    int receiving; /* the send completed and a receive is posted */
    int driven;    /* on a client of a driven loop */
    int rv;        /* NNG's result */
    clock_mono deadline;
    nng_msg *reply;
} inflight;

static void inflight_end(inflight *f, int rv)
{
    xgroup *g = f->g;
    pthread_mutex_lock(&g->mu);
    f->rv = rv;
    g->left_driven -= f->driven != 0;
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
int rpc_client_send_done(nng_aio *aio, nng_ctx ctx, int rv, clock_mono deadline, int *receiving)
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
        if (!rpc_client_send_done(f->aio, f->ctx, rv, f->deadline, &f->receiving)) {
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

/* A call on a conn ended: the reply is copied into a message, as req0's. */
static void conn_done(void *arg, int rv, const void *reply, size_t len)
{
    inflight *f = arg;
    if (rv == 0) {
        if (nng_msg_alloc(&f->reply, len) != 0) {
            f->reply = NULL;
            rv = NNG_ENOMEM;
        } else if (len > 0) {
            memcpy(nng_msg_body(f->reply), reply, len);
        }
    }
    inflight_end(f, rv);
}

/* rpc_loop_drive's done: every exchange of the group (arg) on the driven
 * loop has ended. */
static int driven_done(void *arg)
{
    xgroup *g = arg;
    pthread_mutex_lock(&g->mu);
    int done = g->left_driven == 0;
    pthread_mutex_unlock(&g->mu);
    return done;
}

/* Starts exchange x on its peer's conn. 1 when started (it ends in
 * conn_done), else 0 with x failed. Consumes x->msg. */
static int start_on_conn(exchange *x, inflight *f, xgroup *g, int timeout_ms)
{
    rpc_conn *conn = x->client->peers[x->peer].conn;
    f->driven = x->client->driven != NULL;
    pthread_mutex_lock(&g->mu);
    g->left++;
    g->left_driven += f->driven != 0;
    pthread_mutex_unlock(&g->mu);
    int nrv =
        rpc_conn_call(conn, nng_msg_body(x->msg), nng_msg_len(x->msg), f->deadline, conn_done, f);
    nng_msg_free(x->msg); /* the conn copied it */
    if (nrv != 0) {
        pthread_mutex_lock(&g->mu);
        g->left--;
        g->left_driven -= f->driven != 0;
        pthread_mutex_unlock(&g->mu);
        rpc_client_exchange_fail(x, nrv, timeout_ms);
        return 0;
    }
    return 1;
}

/*
 * Runs n exchanges at once, each on its own context, so n messages to n
 * peers take about one round trip, bounded by the one shared deadline.
 * Exchanges whose msg is NULL are skipped (their rv is left as it is).
 */
void rpc_client_exchange_all(exchange *xs, size_t n, int timeout_ms)
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
        x->peer = rpc_client_pick_peer(x->client);
        f->g = &g;
        f->deadline = deadline;
        if (x->client->stream) {
            f->started = start_on_conn(x, f, &g, timeout_ms);
            continue;
        }
        if ((nrv = nng_ctx_open(&f->ctx, x->client->peers[x->peer].sock)) != 0 ||
            (f->open = 1, nrv = nng_aio_alloc(&f->aio, inflight_cb, f)) != 0) {
            nng_msg_free(x->msg);
            rpc_client_exchange_fail(x, nrv, timeout_ms);
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
    /* Exchanges on a driven loop's client: this thread reads their
     * replies itself (at most one such loop per group). The rest, and any
     * of those the deadline ended on their connection's thread, are waited
     * for as before. */
    rpc_loop *drive = NULL;
    for (size_t i = 0; i < n && drive == NULL; i++) {
        drive = fl[i].driven ? xs[i].client->driven : NULL;
    }
    if (drive != NULL) {
        rpc_loop_drive(drive, driven_done, &g, deadline);
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
                rpc_client_exchange_fail(&xs[i], f->rv, timeout_ms);
            }
        }
    }
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.mu);
    if (fl != &one) {
        free(fl);
    }
}

/* Unpacks reply (consumed) with alloc (NULL: malloc), after the nesting
 * check every frame from the network gets. NULL when it does not decode;
 * *len gets its size. */
Lapse__Response *rpc_client_unpack_reply(ProtobufCAllocator *alloc, nng_msg *reply, size_t *len)
{
    *len = nng_msg_len(reply);
    Lapse__Response *r = rpc_client_unpack_bytes(alloc, nng_msg_body(reply), *len);
    nng_msg_free(reply);
    return r;
}

Lapse__Response *rpc_client_unpack_bytes(ProtobufCAllocator *alloc, const void *data, size_t len)
{
    if (wire_check_nesting(&lapse__response__descriptor, data, len, WIRE_MAX_NESTING) != 0) {
        return NULL;
    }
    return lapse__response__unpack(alloc, len, data);
}

/* Takes a decoded reply r (NULL: undecodable, len bytes) from url into
 * *resp / the returned status, as rpc_call's. */
int rpc_client_take_reply(const char *url, Lapse__Response *r, size_t len, Lapse__Response **resp,
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

/* Copies len bytes into a new message. 0, LAPSE_ETOOBIG or LAPSE_ENOMEM. */
int rpc_client_new_msg(nng_msg **out, size_t len, char *err, size_t errlen)
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
int rpc_client_pack_request(Lapse__Request *req, int timeout_ms, nng_msg **out, char *err,
                            size_t errlen)
{
    req->version = RPC_PROTOCOL_VERSION;
    req->timeout_ms = (uint32_t)timeout_ms;
    size_t len = lapse__request__get_packed_size(req);
    int rv = rpc_client_new_msg(out, len, err, errlen);
    if (rv == 0) {
        lapse__request__pack(req, nng_msg_body(*out));
    }
    return rv;
}

void rpc_response_free(Lapse__Response *resp)
{
    if (resp != NULL) {
        lapse__response__free_unpacked(resp, NULL);
    }
}
