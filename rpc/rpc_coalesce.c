/*
 * rpc_coalesce.c: coalescing for the client half of rpc.h: single-item
 * calls made at once by many threads through one client share frames
 * (docs/wire-protocol.md, "Coalesced calls"). The client, its peers and
 * plain exchanges are in rpc_client.c; what the two share is in
 * rpc_client_int.h.
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
#include "wire.h"

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
#define COALESCE_STALL_MS 1           /* the least a call waits for a frame to be back */
#define COALESCE_MAX_BYTES (1u << 20) /* of the calls of one frame */
#define CLOSE_WAIT_MS 2000            /* rpc_client_close: for frames still out */

/* A call is queued, then sent in a frame, then done. */
typedef enum { W_QUEUED, W_SENT, W_DONE } waiter_state;

/* One single-item call (rpc_single_item_call): on its caller's stack (rpc_call), or on the
 * heap with done set (rpc_call_async; freed once done has run). */
struct waiter {
    waiter *next; /* in the client's queue, then in its frame */
    nng_msg *msg; /* the packed request; consumed when its frame goes */
    clock_mono deadline;
    clock_mono stall;   /* when queued: the moment it goes in a frame of its own */
    waiter_state state; /* guarded by the client's cmu */
    pthread_cond_t cv;  /* signalled on W_DONE (a blocking call's) */
    rpc_done_fn done;   /* NULL: a blocking call; else run on W_DONE, outside cmu */
    void *done_arg;
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

int rpc_single_item_call(const Lapse__Request *req)
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

/* Marks w done: a blocking call is woken; an asynchronous one goes on
 * *later, whose callbacks run_later runs once cmu is released (a callback
 * may take other locks, or send). REQUIRES: the client's cmu. */
static void waiter_done(waiter *w, waiter **later)
{
    w->state = W_DONE;
    if (w->done == NULL) {
        pthread_cond_signal(&w->cv);
        return;
    }
    w->next = *later;
    *later = w;
}

/* Runs the callbacks of the asynchronous calls on later and frees them.
 * REQUIRES: cmu not held. */
static void run_later(waiter *later)
{
    while (later != NULL) {
        waiter *w = later;
        later = w->next;
        w->done(w->done_arg, w->rv, w->resp, w->err);
        free(w);
    }
}

/* Takes the calls of c's queue into a frame after first (may be NULL),
 * within the limits; calls whose deadline passed are finished with
 * ETIMEDOUT instead (asynchronous ones onto *later). Returns the frame's
 * first call. REQUIRES: c->cmu. */
static waiter *take_batch(rpc_client *c, waiter *first, waiter **later)
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
        c->async_queued -= w->done != NULL;
        if (clock_mono_remaining_ms(w->deadline) <= 0) {
            nng_msg_free(w->msg);
            w->msg = NULL;
            waiter_fail(w, LAPSE_ETIMEDOUT, "no reply in time (the call waited for a frame)");
            waiter_done(w, later);
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
    c->async_queued -= w->done != NULL;
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
    (void)rpc_client_pack_request(&env, f->timeout_ms, &m, err, errlen);
    for (waiter *w = f->batch; w != NULL; w = w->next) {
        nng_msg_free(w->msg);
        w->msg = NULL;
    }
    return m;
}

/* Hands each call of f its reply out of the len bytes at reply (borrowed;
 * none when rv, a Lapse code, says why, with err). */
static void frame_answer(frame *f, const void *reply, size_t len, int rv, const char *err)
{
    rpc_client *c = f->c;
    if (rv == 0 && f->n == 1) {
        Lapse__Response *r = rpc_client_unpack_bytes(NULL, reply, len);
        waiter *w = f->batch;
        w->rv = rpc_client_take_reply(c->url, r, len, &w->resp, w->err, sizeof(w->err));
        return;
    }
    Lapse__Response *r = NULL;
    char why[512];
    snprintf(why, sizeof(why), "%s", err);
    if (rv == 0) {
        Lapse__Response *whole;
        r = rpc_client_unpack_bytes(NULL, reply, len);
        rv = rpc_client_take_reply(c->url, r, len, &whole, why, sizeof(why));
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
        w->rv = rpc_client_take_reply(c->url, one, b->len, &w->resp, w->err, sizeof(w->err));
    }
    rpc_response_free(r);
}

static void frame_send(frame *f, waiter *batch, int may_wait);
static frame *frame_new(rpc_client *c);
static void frames_fail(rpc_client *c, waiter *batch, int rv, const char *why);

/* Ends f: its calls are answered (frame_answer) and woken; the queue, if
 * any, goes out as the next frame on f, else f goes back to the list. */
static void frame_end(frame *f, const void *reply, size_t len, int nrv, int rv, const char *err)
{
    rpc_client *c = f->c;
    char why[512];
    if (nrv != 0) {
        exchange x = {.client = c, .peer = f->peer, .err = why, .errlen = sizeof(why)};
        rpc_client_exchange_fail(&x, nrv, f->timeout_ms);
        rv = x.rv;
        err = why;
    }
    frame_answer(f, reply, len, rv, err);
    waiter *later = NULL;
    pthread_mutex_lock(&c->cmu);
    for (waiter *w = f->batch; w != NULL;) {
        waiter *next = w->next; /* w may be gone once woken and unlocked */
        waiter_done(w, &later);
        w = next;
    }
    f->batch = NULL;
    /* The asynchronous calls' callbacks run first, the frame still out, so
     * the calls they send (an event loop keeping its calls in flight)
     * queue and go together in the next frame, not the first alone. */
    if (later != NULL) {
        pthread_mutex_unlock(&c->cmu);
        run_later(later);
        later = NULL;
        pthread_mutex_lock(&c->cmu);
    }
    waiter *next = take_batch(c, NULL, &later);
    if (next != NULL && c->stream && c->closing) {
        /* rpc_client_close is ending the conns (this may be its thread):
         * no call goes on one any more. */
        for (waiter *w = next; w != NULL;) {
            waiter *after = w->next;
            nng_msg_free(w->msg);
            w->msg = NULL;
            waiter_fail(w, LAPSE_EUNAVAILABLE, "the client closed");
            waiter_done(w, &later);
            w = after;
        }
        next = NULL;
    }
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
        } else {
            frame_send(out, next, 0);
        }
    }
    run_later(later);
}

/* A frame's call on its peer's conn ended (the stream transport): the
 * reply, read where the conn holds it, ends f as frame_cb does. */
static void frame_conn_done(void *arg, int nrv, const void *reply, size_t len)
{
    frame_end(arg, reply, len, nrv, 0, "");
}

static void frame_cb(void *arg)
{
    frame *f = arg;
    int nrv = nng_aio_result(f->aio);
    if (!f->receiving) {
        if (!rpc_client_send_done(f->aio, f->ctx, nrv, f->deadline, &f->receiving)) {
            frame_end(f, NULL, 0, nrv, 0, "");
        }
        return;
    }
    nng_msg *reply = NULL;
    if (nrv == 0) {
        reply = nng_aio_get_msg(f->aio);
        nng_aio_set_msg(f->aio, NULL);
    }
    frame_end(f, reply != NULL ? nng_msg_body(reply) : NULL, reply != NULL ? nng_msg_len(reply) : 0,
              nrv, 0, "");
    if (reply != NULL) {
        nng_msg_free(reply);
    }
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
    waiter *later = NULL;
    pthread_mutex_lock(&c->cmu);
    for (waiter *w = batch; w != NULL;) {
        waiter *next = w->next;
        nng_msg_free(w->msg);
        w->msg = NULL;
        waiter_fail(w, rv, why);
        waiter_done(w, &later);
        w = next;
    }
    c->inflight--;
    pthread_cond_broadcast(&c->idle);
    pthread_mutex_unlock(&c->cmu);
    run_later(later);
}

/* Sends the calls from batch on as frame f. may_wait: the caller's thread,
 * which may wait for a peer of a list to connect (rpc_client_pick_peer); NNG's thread
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
    int peer = may_wait ? rpc_client_pick_peer(c) : atomic_load(&c->cur);
    int nrv = 0;
    if (c->stream) {
        /* On the peer's conn: no context, and the reply comes to
         * frame_conn_done, perhaps before rpc_conn_call returns. */
        f->peer = peer;
        nng_msg *m = frame_msg(f, err, sizeof(err));
        if (m == NULL) {
            frame_end(f, NULL, 0, 0, LAPSE_ENOMEM, err[0] ? err : "out of memory");
            return;
        }
        nrv = rpc_conn_call(c->peers[peer].conn, nng_msg_body(m), nng_msg_len(m), f->deadline,
                            frame_conn_done, f);
        nng_msg_free(m); /* the conn copied it */
        if (nrv != 0) {
            frame_end(f, NULL, 0, nrv, 0, "");
        }
        return;
    }
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
        frame_end(f, NULL, 0, nrv, nrv != 0 ? 0 : LAPSE_ENOMEM, err[0] ? err : "out of memory");
        return;
    }
    nng_aio_set_timeout(f->aio, f->timeout_ms);
    nng_aio_set_msg(f->aio, m);
    nng_ctx_send(f->ctx, f->aio);
}

/* Sends batch (c->inflight counted for it already) as a new frame, from
 * the caller's thread (on_nng 0) or from NNG's (on_nng 1: the stall timer,
 * which takes a frame without freeing dead ones or waiting for a peer).
 * REQUIRES: c->cmu not held. */
static void frame_start(rpc_client *c, waiter *batch, int on_nng)
{
    frame *f = NULL;
    if (on_nng) {
        pthread_mutex_lock(&c->cmu);
        if ((f = c->free_frames) != NULL) {
            c->free_frames = f->next_free;
        }
        pthread_mutex_unlock(&c->cmu);
        f = f != NULL ? f : frame_new(c);
    } else {
        f = frame_get(c);
    }
    if (f != NULL) {
        frame_send(f, batch, !on_nng);
    } else {
        frames_fail(c, batch, LAPSE_ENOMEM, "out of memory");
    }
}

/* The stall watcher of c's asynchronous calls: no thread of theirs waits
 * to notice a slow frame, so this one does. While asynchronous calls are
 * queued it sleeps until the queue's head has waited COALESCE_STALL_MS,
 * then sends the queue in a frame of its own (as a blocking call's own
 * wait does in rpc_coalesce_call); otherwise it sleeps until one is
 * queued. (NNG 1.5's nng_sleep_aio was tried: re-armed at this rate, its
 * expiry thread spun on the clock.) */
static void *stall_run(void *arg)
{
    rpc_client *c = arg;
    pthread_mutex_lock(&c->cmu);
    while (!c->closing) {
        if (c->async_queued == 0 || c->qhead == NULL) {
            c->stall_idle = 1;
            pthread_cond_wait(&c->stall_cv, &c->cmu);
            c->stall_idle = 0;
            continue;
        }
        int64_t ms = clock_mono_remaining_ms(c->qhead->stall);
        if (ms > 0) {
            struct timespec ts = clock_mono_abstime(ms);
            pthread_cond_timedwait(&c->stall_cv, &c->cmu, &ts);
            continue;
        }
        waiter *later = NULL;
        waiter *batch = take_batch(c, NULL, &later);
        if (batch != NULL) {
            c->inflight++;
        }
        pthread_mutex_unlock(&c->cmu);
        run_later(later);
        if (batch != NULL) {
            frame_start(c, batch, 1);
        }
        pthread_mutex_lock(&c->cmu);
    }
    pthread_mutex_unlock(&c->cmu);
    return NULL;
}

/* Wakes the stall watcher for a newly queued asynchronous call, starting
 * it on the first. REQUIRES: c->cmu. */
static void stall_watch(rpc_client *c)
{
    if (!c->stall_started && !c->closing) {
        clock_cond_init_mono(&c->stall_cv);
        if (pthread_create(&c->stall_thread, NULL, stall_run, c) != 0) {
            pthread_cond_destroy(&c->stall_cv);
            return; /* queued calls then wait for the frame out, at worst their deadline */
        }
        c->stall_started = 1;
    }
    if (c->stall_idle) {
        /* It sleeps until woken; when it sleeps until a head's stall
         * instead, it finds this call at that wake (a signal per call cost
         * a thread switch per call). */
        pthread_cond_signal(&c->stall_cv);
    }
}

/* Before the sockets close: waits for the callbacks of the frames not out
 * to return, then closes their contexts (NNG waits for a socket's contexts
 * when it closes it). A frame's caller is woken from its callback, which
 * may still be inside NNG (posting the receive of an earlier step) when the
 * caller returns; NNG 1.5.2 panics ("pthread_mutex_lock: Invalid
 * argument") when that runs against a socket being closed. The stall
 * watcher is stopped first, so it starts no frame from here on. */
void rpc_coalesce_idle_close(rpc_client *c)
{
    pthread_mutex_lock(&c->cmu);
    c->closing = 1;
    int started = c->stall_started;
    if (started) {
        pthread_cond_signal(&c->stall_cv);
    }
    pthread_mutex_unlock(&c->cmu);
    if (started) {
        pthread_join(c->stall_thread, NULL);
        pthread_cond_destroy(&c->stall_cv);
    }
    /* Asynchronous calls may still be out (a blocking caller's are not):
     * their frames end first (bounded), so none is inside NNG or holds an
     * open context the snapshot below misses when the sockets close. */
    pthread_mutex_lock(&c->cmu);
    struct timespec until = clock_mono_abstime(CLOSE_WAIT_MS);
    while ((c->inflight > 0 || c->qhead != NULL) &&
           pthread_cond_timedwait(&c->idle, &c->cmu, &until) == 0) {
    }
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
 * which end with ECLOSED, then frees every frame. Asynchronous calls still
 * queued (the frames out ended before taking them) end with ECLOSED. */
void rpc_coalesce_close(rpc_client *c)
{
    waiter *later = NULL;
    pthread_mutex_lock(&c->cmu);
    struct timespec until = clock_mono_abstime(CLOSE_WAIT_MS);
    while (c->inflight > 0 && pthread_cond_timedwait(&c->idle, &c->cmu, &until) == 0) {
    }
    frame *lists[2] = {c->free_frames, c->dead_frames};
    c->free_frames = c->dead_frames = NULL;
    while (c->qhead != NULL) {
        waiter *w = c->qhead;
        queue_remove(c, w);
        nng_msg_free(w->msg);
        w->msg = NULL;
        waiter_fail(w, LAPSE_EUNAVAILABLE, "the client closed");
        waiter_done(w, &later);
    }
    pthread_mutex_unlock(&c->cmu);
    run_later(later);
    for (int list = 0; list < 2; list++) {
        for (frame *f = lists[list]; f != NULL;) {
            frame *next = f->next_free;
            frame_free(f);
            f = next;
        }
    }
}

/* Queues w (packed, deadline set) or, when c has room for another frame,
 * sends it at once with what is queued. REQUIRES: c->cmu held, released
 * around the send. */
static void submit(rpc_client *c, waiter *w, waiter **later)
{
    /* One more: the clock counts whole milliseconds, so "1 ms from now"
     * would come anywhere from a microsecond to 1 ms later, and a frame
     * whose calls came back a moment ago would be split more often than
     * a slow one. */
    w->stall = clock_mono_after_ms(COALESCE_STALL_MS + 1);
    if (c->inflight < COALESCE_INFLIGHT) {
        c->inflight++;
        waiter *batch = take_batch(c, w, later);
        pthread_mutex_unlock(&c->cmu);
        frame_start(c, batch, 0);
        pthread_mutex_lock(&c->cmu);
        return;
    }
    w->next = NULL;
    if (c->qtail != NULL) {
        c->qtail->next = w;
    } else {
        c->qhead = w;
    }
    c->qtail = w;
    if (w->done != NULL) {
        c->async_queued++;
        stall_watch(c);
    }
}

/* rpc_call of a single-item call (rpc_single_item_call). */
int rpc_coalesce_call(rpc_client *c, Lapse__Request *req, int timeout_ms, Lapse__Response **resp,
                      char *err, size_t errlen)
{
    waiter w = {.state = W_QUEUED};
    waiter *later = NULL;
    *resp = NULL;
    int rv = rpc_client_pack_request(req, timeout_ms, &w.msg, err, errlen);
    if (rv != 0) {
        return rv;
    }
    w.deadline = clock_mono_after_ms(timeout_ms);
    clock_cond_init_mono(&w.cv);

    pthread_mutex_lock(&c->cmu);
    submit(c, &w, &later);
    while (w.state == W_QUEUED) {
        int64_t wait_ms = clock_mono_remaining_ms(w.stall);
        struct timespec ts = clock_mono_abstime(wait_ms > 0 ? wait_ms : 0);
        if (pthread_cond_timedwait(&w.cv, &c->cmu, &ts) == 0 || w.state != W_QUEUED ||
            clock_mono_remaining_ms(w.stall) > 0) {
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
        waiter *batch = take_batch(c, &w, &later);
        pthread_mutex_unlock(&c->cmu);
        frame_start(c, batch, 0);
        pthread_mutex_lock(&c->cmu);
    }
    while (w.state != W_DONE) {
        pthread_cond_wait(&w.cv, &c->cmu);
    }
    pthread_mutex_unlock(&c->cmu);
    run_later(later);
    pthread_cond_destroy(&w.cv);
    *resp = w.resp;
    if (w.rv != 0) {
        set_err(err, errlen, "%s", w.err);
    }
    return w.rv;
}

int rpc_coalesce_call_async(rpc_client *c, Lapse__Request *req, int timeout_ms, rpc_done_fn done,
                            void *arg, char *err, size_t errlen)
{
    waiter *w = calloc(1, sizeof *w);
    if (w == NULL) {
        set_err(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    int rv = rpc_client_pack_request(req, timeout_ms, &w->msg, err, errlen);
    if (rv != 0) {
        free(w);
        return rv;
    }
    w->state = W_QUEUED;
    w->deadline = clock_mono_after_ms(timeout_ms);
    w->done = done;
    w->done_arg = arg;
    waiter *later = NULL;
    pthread_mutex_lock(&c->cmu);
    submit(c, w, &later);
    pthread_mutex_unlock(&c->cmu);
    run_later(later);
    return 0;
}
