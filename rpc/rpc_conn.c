/*
 * rpc_conn.c: a req0-speaking client connection over NNG's stream API
 * (rpc_conn.h has the wire, the states and the invariants).
 *
 * Outstanding calls sit on one list, oldest first; a reply is matched by a
 * scan from the head, which finds it at once while replies come about in
 * order (a peer's contexts may answer out of order, never by far). Written
 * bytes go through two buffers: `sending` is the one the stream's send has,
 * `pending` collects what comes meanwhile, and the two swap when the send
 * ends, so a write carries every request made during the one before.
 */
#include "rpc_conn.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>

#include "rpc.h"
#include "rpc_frame.h"

#define BACKOFF_MIN_MS 10
#define BACKOFF_MAX_MS 1000
#define DIAL_TIMEOUT_MS 5000 /* a dial, or a handshake, that takes longer fails */

typedef enum conn_state {
    C_DIALING,   /* the dial is posted on dial_aio */
    C_HANDSHAKE, /* the headers are being exchanged */
    C_UP,        /* requests go out */
    C_DOWN,      /* failed: waits for send and receive to stop */
    C_BACKOFF,   /* sleeping on dial_aio before the next dial */
} conn_state;

typedef struct call call;
struct call {
    call *prev, *next; /* on rpc_conn.calls, or next on a list of ended calls */
    uint32_t id;       /* with the top bit set, as on the wire */
    clock_mono deadline;
    rpc_conn_done_fn done;
    void *arg;
    void *body; /* owned: the request while it waits for the connection (invariant 2) */
    size_t len;
    int rv;           /* when ended: its outcome */
    size_t reply_off; /* when ended with a reply: where it is in rpc_conn.in */
    size_t reply_len;
};

struct rpc_conn {
    pthread_mutex_t mu; /* guards everything below but the aios and the dialer */
    nng_stream_dialer *dialer;
    nng_aio *dial_aio;  /* dials, and sleeps the backoff */
    nng_aio *send_aio;  /* the stream's one send */
    nng_aio *recv_aio;  /* the stream's one receive */
    nng_aio *timer_aio; /* sleeps until the earliest deadline */
    nng_stream *s;      /* NULL while dialling */
    conn_state state;
    int closing;
    int recv_busy;         /* a receive is posted on s */
    int hs_sent, hs_recvd; /* handshake halves done */
    int backoff_ms;
    int timer_armed;
    clock_mono timer_at; /* what the armed timer wakes for */
    uint32_t next_id;
    call *head, *tail; /* outstanding calls, oldest first */
    rpc_frame_out out; /* requests written and to write */
    uint8_t *in;       /* received bytes: inlen of incap; only the receive path touches it */
    size_t inlen, incap;
};

/* ===================================================================== */
/* Calls                                                                  */
/* ===================================================================== */

static void list_remove(rpc_conn *c, call *k)
{
    if (k->prev != NULL) {
        k->prev->next = k->next;
    } else {
        c->head = k->next;
    }
    if (k->next != NULL) {
        k->next->prev = k->prev;
    } else {
        c->tail = k->prev;
    }
    k->prev = k->next = NULL;
}

/* Moves k from the outstanding list onto *ended (a singly linked list, in
 * order when built from the tail end) with outcome rv. */
static void end_call(rpc_conn *c, call *k, int rv, call ***ended)
{
    list_remove(c, k);
    k->rv = rv;
    **ended = k;
    *ended = &k->next;
}

/* Runs and frees the ended calls of list, in order. Called without c->mu;
 * replies are read from c->in, which only the receive path (the caller then)
 * changes. */
static void finish(rpc_conn *c, call *list)
{
    while (list != NULL) {
        call *k = list;
        list = k->next;
        if (k->rv == 0) {
            k->done(k->arg, 0, c->in + k->reply_off, k->reply_len);
        } else {
            k->done(k->arg, k->rv, NULL, 0);
        }
        free(k->body);
        free(k);
    }
}

/* ===================================================================== */
/* Connection states                                                      */
/* ===================================================================== */

static void post_recv_locked(rpc_conn *c, size_t want)
{
    c->recv_busy = 1;
    nng_iov iov = {.iov_buf = c->in + c->inlen, .iov_len = want};
    (void)nng_aio_set_iov(c->recv_aio, 1, &iov);
    nng_stream_recv(c->s, c->recv_aio);
}

/* Sleeps the backoff on dial_aio, then dials (dial_cb). */
static void backoff_locked(rpc_conn *c)
{
    c->state = C_BACKOFF;
    nng_aio_set_timeout(c->dial_aio, NNG_DURATION_INFINITE);
    nng_sleep_aio(c->backoff_ms, c->dial_aio);
    c->backoff_ms = c->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : c->backoff_ms * 2;
}

/* From DOWN, once the stream has neither a send nor a receive posted. */
static void maybe_redial_locked(rpc_conn *c)
{
    if (c->state == C_DOWN && !c->out.busy && !c->recv_busy && !c->closing) {
        backoff_locked(c);
    }
}

/* The connection failed: closes the stream (which ends the send and receive
 * posted on it) and ends every outstanding call with NNG_ECONNSHUT onto
 * *ended. */
static void fail_locked(rpc_conn *c, call ***ended)
{
    if (c->state != C_HANDSHAKE && c->state != C_UP) {
        return;
    }
    c->state = C_DOWN;
    nng_stream_close(c->s);
    buf_clear(&c->out.pending);
    while (c->head != NULL) {
        end_call(c, c->head, NNG_ECONNSHUT, ended);
    }
}

/* Both handshake halves are done: the calls that waited go out. */
static void up_locked(rpc_conn *c, call ***ended)
{
    c->state = C_UP;
    c->backoff_ms = BACKOFF_MIN_MS;
    c->inlen = 0;
    for (call *k = c->head; k != NULL;) {
        call *next = k->next;
        if (k->body != NULL) {
            if (rpc_frame_append(&c->out.pending, k->id, k->body, k->len) != 0) {
                end_call(c, k, NNG_ENOMEM, ended);
            } else {
                free(k->body);
                k->body = NULL;
            }
        }
        k = next;
    }
    nng_aio_set_timeout(c->recv_aio, NNG_DURATION_INFINITE);
    post_recv_locked(c, c->incap);
    if (!c->out.busy && c->out.pending.len > 0) {
        rpc_frame_out_start(&c->out, c->s, c->send_aio);
    }
}

/* dial_aio: a backoff sleep or a dial ended. */
static void dial_cb(void *arg)
{
    rpc_conn *c = arg;
    int rv = nng_aio_result(c->dial_aio);
    pthread_mutex_lock(&c->mu);
    if (c->closing) {
        if (c->state == C_DIALING && rv == 0) { /* dialled just as the close began */
            nng_stream_free(nng_aio_get_output(c->dial_aio, 0));
        }
        pthread_mutex_unlock(&c->mu);
        return;
    }
    if (c->state == C_BACKOFF) {
        if (c->s != NULL) { /* the last connection's: neither aio is posted on it */
            nng_stream_free(c->s);
            c->s = NULL;
        }
        c->state = C_DIALING;
        nng_aio_set_timeout(c->dial_aio, DIAL_TIMEOUT_MS);
        nng_stream_dialer_dial(c->dialer, c->dial_aio);
    } else if (rv != 0) { /* C_DIALING */
        backoff_locked(c);
    } else {
        c->s = nng_aio_get_output(c->dial_aio, 0);
        (void)nng_stream_set_bool(c->s, NNG_OPT_TCP_NODELAY, true);
        c->state = C_HANDSHAKE;
        c->hs_sent = c->hs_recvd = 0;
        c->inlen = 0;
        buf_clear(&c->out.sending);
        if (buf_append(&c->out.sending, rpc_frame_hello_req0, RPC_FRAME_HELLO) != 0) {
            c->state = C_DOWN;
            nng_stream_close(c->s);
            maybe_redial_locked(c);
        } else {
            rpc_frame_out_post(&c->out, c->s, c->send_aio); /* the header alone */
            nng_aio_set_timeout(c->recv_aio, DIAL_TIMEOUT_MS);
            post_recv_locked(c, 8);
        }
    }
    pthread_mutex_unlock(&c->mu);
}

/* send_aio: a write ended (perhaps part of it). */
static void send_cb(void *arg)
{
    rpc_conn *c = arg;
    call *ended = NULL, **tail = &ended;
    int rv = nng_aio_result(c->send_aio);
    pthread_mutex_lock(&c->mu);
    int ok = rv == 0 && !c->closing && (c->state == C_UP || c->state == C_HANDSHAKE);
    if (rpc_frame_out_sent(&c->out, ok, c->s, c->send_aio)) { /* a short write: the rest */
        pthread_mutex_unlock(&c->mu);
        return;
    }
    if (ok) {
        if (c->state == C_HANDSHAKE) {
            c->hs_sent = 1;
            if (c->hs_recvd) {
                up_locked(c, &tail);
            }
        } else if (c->out.pending.len > 0) {
            rpc_frame_out_start(&c->out, c->s, c->send_aio);
        }
    } else {
        if (!c->closing) {
            fail_locked(c, &tail);
            maybe_redial_locked(c);
        }
    }
    pthread_mutex_unlock(&c->mu);
    finish(c, ended);
}

/* Takes the complete replies in c->in onto *ended (their bytes stay in
 * c->in). Returns 0, or NNG_EPROTO for a frame no rep0 peer sends (then the
 * connection must close). */
static int parse_locked(rpc_conn *c, size_t *used, call ***ended)
{
    size_t off = 0, len;
    uint32_t id;
    int got;
    while ((got = rpc_frame_next(c->in + off, c->inlen - off, &id, &len)) == 1) {
        for (call *k = c->head; k != NULL; k = k->next) {
            if (k->id == id) {
                k->reply_off = off + RPC_FRAME_HDR;
                k->reply_len = len;
                end_call(c, k, 0, ended);
                break;
            }
        }
        off += RPC_FRAME_HDR + len; /* a reply to no call (ended already) is dropped */
    }
    *used = off;
    return got < 0 ? NNG_EPROTO : 0;
}

/* recv_aio: bytes came in (or the stream failed). */
static void recv_cb(void *arg)
{
    rpc_conn *c = arg;
    call *ended = NULL, **tail = &ended;
    int rv = nng_aio_result(c->recv_aio);
    pthread_mutex_lock(&c->mu);
    if (rv != 0 || c->closing || (c->state != C_UP && c->state != C_HANDSHAKE)) {
        c->recv_busy = 0;
        if (!c->closing) {
            fail_locked(c, &tail);
            maybe_redial_locked(c);
        }
        pthread_mutex_unlock(&c->mu);
        finish(c, ended);
        return;
    }
    c->inlen += nng_aio_count(c->recv_aio);
    if (c->state == C_HANDSHAKE) {
        if (c->inlen < RPC_FRAME_HELLO) {
            post_recv_locked(c, RPC_FRAME_HELLO - c->inlen);
        } else if (memcmp(c->in, rpc_frame_hello_rep0, RPC_FRAME_HELLO) != 0) {
            c->recv_busy = 0;
            fail_locked(c, &tail);
            maybe_redial_locked(c);
        } else {
            c->recv_busy = 0;
            c->hs_recvd = 1;
            if (c->hs_sent) {
                up_locked(c, &tail);
            }
        }
        pthread_mutex_unlock(&c->mu);
        finish(c, ended);
        return;
    }
    size_t used = 0;
    int prv = parse_locked(c, &used, &tail);
    pthread_mutex_unlock(&c->mu);
    finish(c, ended); /* replies are read from c->in, which is ours alone */
    ended = NULL;
    tail = &ended;
    pthread_mutex_lock(&c->mu);
    if (prv == 0) {
        /* Keep the partial tail, and make room for the whole of it. */
        if (rpc_frame_keep_tail(&c->in, &c->inlen, &c->incap, used) != 0) {
            prv = NNG_ENOMEM;
        }
    }
    if (prv != 0 || c->closing || c->state != C_UP) {
        c->recv_busy = 0;
        if (!c->closing) {
            fail_locked(c, &tail);
            maybe_redial_locked(c);
        }
    } else {
        post_recv_locked(c, c->incap - c->inlen);
    }
    pthread_mutex_unlock(&c->mu);
    finish(c, ended);
}

/* Re-arms the timer for the earliest deadline of the outstanding calls, or
 * leaves it idle when there are none. */
static void arm_timer_locked(rpc_conn *c)
{
    clock_mono first = {.ms = INT64_MAX};
    for (call *k = c->head; k != NULL; k = k->next) {
        if (k->deadline.ms < first.ms) {
            first = k->deadline;
        }
    }
    c->timer_armed = first.ms != INT64_MAX;
    if (c->timer_armed) {
        c->timer_at = first;
        nng_sleep_aio((nng_duration)clock_mono_remaining_ms(first), c->timer_aio);
    }
}

/* timer_aio: ends the calls whose deadline passed (also run when a call with
 * an earlier deadline aborted the sleep). */
static void timer_cb(void *arg)
{
    rpc_conn *c = arg;
    call *ended = NULL, **tail = &ended;
    pthread_mutex_lock(&c->mu);
    if (c->closing) {
        c->timer_armed = 0;
        pthread_mutex_unlock(&c->mu);
        return;
    }
    clock_mono now = clock_mono_now();
    for (call *k = c->head; k != NULL;) {
        call *next = k->next;
        if (k->deadline.ms <= now.ms) {
            end_call(c, k, NNG_ETIMEDOUT, &tail);
        }
        k = next;
    }
    arm_timer_locked(c);
    pthread_mutex_unlock(&c->mu);
    finish(c, ended);
}

/* ===================================================================== */
/* Interface                                                              */
/* ===================================================================== */

int rpc_conn_open(rpc_conn **out, const char *url)
{
    int rv;
    *out = NULL;
    rpc_conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
        return NNG_ENOMEM;
    }
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return NNG_ENOMEM;
    }
    c->backoff_ms = BACKOFF_MIN_MS;
    c->next_id = (uint32_t)nng_random();
    c->incap = RPC_FRAME_INBUF_MIN;
    if ((c->in = malloc(c->incap)) == NULL) {
        rv = NNG_ENOMEM;
        goto fail;
    }
    if ((rv = nng_stream_dialer_alloc(&c->dialer, url)) != 0 ||
        (rv = nng_aio_alloc(&c->dial_aio, dial_cb, c)) != 0 ||
        (rv = nng_aio_alloc(&c->send_aio, send_cb, c)) != 0 ||
        (rv = nng_aio_alloc(&c->recv_aio, recv_cb, c)) != 0 ||
        (rv = nng_aio_alloc(&c->timer_aio, timer_cb, c)) != 0) {
        goto fail;
    }
    pthread_mutex_lock(&c->mu);
    c->state = C_DIALING;
    nng_aio_set_timeout(c->dial_aio, DIAL_TIMEOUT_MS);
    nng_stream_dialer_dial(c->dialer, c->dial_aio);
    pthread_mutex_unlock(&c->mu);
    *out = c;
    return 0;

fail:
    rpc_conn_close(c);
    return rv;
}

int rpc_conn_connected(rpc_conn *c)
{
    pthread_mutex_lock(&c->mu);
    int up = c->state == C_UP;
    pthread_mutex_unlock(&c->mu);
    return up;
}

int rpc_conn_call(rpc_conn *c, const void *body, size_t len, clock_mono deadline,
                  rpc_conn_done_fn done, void *arg)
{
    if (len > RPC_MAX_MESSAGE_BYTES) {
        return NNG_EMSGSIZE;
    }
    call *k = calloc(1, sizeof *k);
    if (k == NULL) {
        return NNG_ENOMEM;
    }
    k->deadline = deadline;
    k->done = done;
    k->arg = arg;
    k->len = len;
    pthread_mutex_lock(&c->mu);
    k->id = (c->next_id++ & 0x7fffffffu) | 0x80000000u;
    if (c->state == C_UP) {
        if (rpc_frame_append(&c->out.pending, k->id, body, len) != 0) {
            pthread_mutex_unlock(&c->mu);
            free(k);
            return NNG_ENOMEM;
        }
        if (!c->out.busy) {
            rpc_frame_out_start(&c->out, c->s, c->send_aio);
        }
    } else if ((k->body = malloc(len > 0 ? len : 1)) == NULL) {
        pthread_mutex_unlock(&c->mu);
        free(k);
        return NNG_ENOMEM;
    } else if (len > 0) {
        memcpy(k->body, body, len);
    }
    k->prev = c->tail;
    if (c->tail != NULL) {
        c->tail->next = k;
    } else {
        c->head = k;
    }
    c->tail = k;
    if (!c->timer_armed) {
        c->timer_armed = 1;
        c->timer_at = deadline;
        nng_sleep_aio((nng_duration)clock_mono_remaining_ms(deadline), c->timer_aio);
    } else if (deadline.ms < c->timer_at.ms) {
        c->timer_at = deadline; /* timer_cb re-arms for the earliest */
        nng_aio_abort(c->timer_aio, NNG_ECANCELED);
    }
    pthread_mutex_unlock(&c->mu);
    return 0;
}

void rpc_conn_close(rpc_conn *c)
{
    if (c == NULL) {
        return;
    }
    pthread_mutex_lock(&c->mu);
    c->closing = 1;
    if (c->s != NULL) {
        nng_stream_close(c->s);
    }
    pthread_mutex_unlock(&c->mu);
    if (c->dialer != NULL) {
        nng_stream_dialer_close(c->dialer);
    }
    /* Each stop waits for the aio's callback; a callback that sees closing
     * posts nothing more. */
    nng_aio *aios[] = {c->dial_aio, c->timer_aio, c->send_aio, c->recv_aio};
    for (size_t i = 0; i < sizeof aios / sizeof aios[0]; i++) {
        if (aios[i] != NULL) {
            nng_aio_stop(aios[i]);
        }
    }
    call *ended = NULL, **tail = &ended;
    while (c->head != NULL) {
        end_call(c, c->head, NNG_ECLOSED, &tail);
    }
    finish(c, ended);
    for (size_t i = 0; i < sizeof aios / sizeof aios[0]; i++) {
        if (aios[i] != NULL) {
            nng_aio_free(aios[i]);
        }
    }
    if (c->s != NULL) {
        nng_stream_free(c->s);
    }
    if (c->dialer != NULL) {
        nng_stream_dialer_free(c->dialer);
    }
    pthread_mutex_destroy(&c->mu);
    rpc_frame_out_fini(&c->out);
    free(c->in);
    free(c);
}
