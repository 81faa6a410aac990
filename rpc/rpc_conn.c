/*
 * rpc_conn.c: a req0-speaking client connection over a plain TCP socket
 * with a thread of its own (rpc_conn.h has the wire, the states and the
 * invariants).
 *
 * Outstanding calls sit on one list, oldest first; a reply is matched by a
 * scan from the head, which finds it at once while replies come about in
 * order (a peer's contexts may answer out of order, never by far).
 *
 * Writing: `out` (rpc_frame_out) holds the bytes not yet taken by the
 * socket. A caller that finds it empty writes its request at once, from
 * its own thread; what the socket does not take waits in `out`, and the
 * connection's thread writes it when poll says the socket is writable
 * (calls made meanwhile append to it, so that write carries them all).
 *
 * Reading: only the connection's thread reads, into `in`, and runs the
 * callbacks of the replies it took there before it reads again, so a
 * reply's bytes stay put while its callback runs.
 *
 * Why a thread and a plain socket rather than NNG's stream API:
 * docs/benchmarks.md, "The next lever measured: plain sockets, a thread
 * reading each".
 */
#include "rpc_conn.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>

#include "rpc.h"
#include "rpc_frame.h"
#include "rpc_loop.h"

#define BACKOFF_MIN_MS 10
#define BACKOFF_MAX_MS 1000
#define DIAL_TIMEOUT_MS 5000 /* a dial, or a handshake, that takes longer fails */
/* With no call outstanding the thread still wakes this often, so that the
 * first call after a quiet spell need not wake it (only one due sooner). */
#define IDLE_POLL_MS 1000

typedef enum conn_state {
    C_BACKOFF,    /* no socket: dials at `until` */
    C_CONNECTING, /* the connect is under way; fails at `until` */
    C_HANDSHAKE,  /* the headers are being exchanged; fails at `until` */
    C_UP,         /* requests go out */
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
    pthread_mutex_t mu; /* guards everything below but in, inlen, incap */
    pthread_t thread;
    int thread_started;
    int wake_fd;    /* an eventfd: written to wake the thread's poll */
    char host[256]; /* from the URL, brackets of a v6 address removed */
    char port[8];   /* from the URL, digits */
    int fd;         /* the socket, or -1 in C_BACKOFF */
    conn_state state;
    clock_mono until; /* in the states but C_UP: when the state times out */
    int closing;
    int write_failed; /* a caller's write failed: the thread fails the socket */
    int hs_recvd;     /* the peer's header came (C_HANDSHAKE) */
    int backoff_ms;
    int polling;           /* the thread sleeps in poll, until poll_until */
    clock_mono poll_until; /* a call due sooner wakes it */
    uint32_t next_id;
    call *head, *tail; /* outstanding calls, oldest first */
    rpc_frame_out out; /* bytes to write */
    uint8_t *in;       /* received bytes: inlen of incap; the reader's alone */
    size_t inlen, incap;
    /* With a loop (rpc_conn_open_on), the loop's thread reads the socket
     * while it is C_UP: the connection's thread then only dials, writes
     * what the socket did not take, and times calls out. */
    rpc_loop *loop;
    rpc_loop_watch lw; /* conn_loop_read */
    int watched;       /* the socket is on the loop */
    int loop_reading;  /* the loop's thread reads, or runs replies' callbacks from in */
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
 * replies are read from c->in, which only the connection's thread (the
 * caller then) changes. */
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

/* finish(c, list) for calls ended on the connection's thread (timeouts,
 * failures, the close): on a driven loop their caller waits in
 * rpc_loop_drive, which only its loop's events wake. */
static void finish_off_loop(rpc_conn *c, call *list)
{
    const int wake_driver = list != NULL && rpc_loop_is_driven(c->loop);
    finish(c, list);
    if (wake_driver) {
        rpc_loop_wake(c->loop);
    }
}

/* Ends the calls whose deadline passed by now with NNG_ETIMEDOUT, and
 * returns the earliest deadline left ({INT64_MAX} when none). */
static clock_mono expire_locked(rpc_conn *c, clock_mono now, call ***ended)
{
    clock_mono first = {.ms = INT64_MAX};
    for (call *k = c->head; k != NULL;) {
        call *next = k->next;
        if (k->deadline.ms <= now.ms) {
            end_call(c, k, NNG_ETIMEDOUT, ended);
        } else if (k->deadline.ms < first.ms) {
            first = k->deadline;
        }
        k = next;
    }
    return first;
}

static void wake(rpc_conn *c)
{
    rpc_frame_wake(c->wake_fd);
}

/* ===================================================================== */
/* The socket                                                             */
/* ===================================================================== */

/* Writes what `out` holds, as much as the socket takes now. Returns 0, or
 * -1 when the socket failed. */
static int flush_locked(rpc_conn *c)
{
    return rpc_frame_out_flush(&c->out, c->fd);
}

/* The connection failed (or timed out) in any state but C_BACKOFF: closes
 * the socket and backs off. From C_HANDSHAKE or C_UP it ends every
 * outstanding call with NNG_ECONNSHUT onto *ended; calls waiting for a
 * dial that failed keep waiting. */
static void fail_locked(rpc_conn *c, call ***ended)
{
    if (c->state == C_HANDSHAKE || c->state == C_UP) {
        while (c->head != NULL) {
            end_call(c, c->head, NNG_ECONNSHUT, ended);
        }
    }
    if (c->watched) {
        rpc_loop_del(c->loop, c->fd);
        c->watched = 0;
    }
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    rpc_frame_out_clear(&c->out);
    c->write_failed = 0;
    c->state = C_BACKOFF;
    c->until = clock_mono_after_ms(c->backoff_ms);
    c->backoff_ms = c->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : c->backoff_ms * 2;
}

/* Resolves the host and starts a non-blocking connect, without c->mu held
 * (a name lookup may take a while). Returns the socket, or -1. *done is set
 * when it connected at once. */
static int dial(const rpc_conn *c, int *done)
{
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    *done = 0;
    if (getaddrinfo(c->host, c->port, &hints, &ai) != 0 || ai == NULL) {
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            *done = 1;
        } else if (errno != EINPROGRESS) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    return fd;
}

/* Connected: sends our header and waits for the peer's. */
static void handshake_locked(rpc_conn *c, call ***ended)
{
    c->state = C_HANDSHAKE;
    c->hs_recvd = 0;
    c->inlen = 0;
    if (buf_append(&c->out.b, rpc_frame_hello_req0, RPC_FRAME_HELLO) != 0 || flush_locked(c) != 0) {
        fail_locked(c, ended);
    }
}

/* Both headers are through: the calls that waited go out (and with a
 * loop, the socket goes on it to be read there). */
static void up_locked(rpc_conn *c, call ***ended)
{
    c->state = C_UP;
    c->backoff_ms = BACKOFF_MIN_MS;
    c->inlen = 0;
    if (c->loop != NULL) {
        if (rpc_loop_add(c->loop, c->fd, &c->lw) != 0) {
            fail_locked(c, ended);
            return;
        }
        c->watched = 1;
    }
    for (call *k = c->head; k != NULL;) {
        call *next = k->next;
        if (k->body != NULL) {
            if (rpc_frame_append(&c->out.b, k->id, k->body, k->len) != 0) {
                end_call(c, k, NNG_ENOMEM, ended);
            } else {
                free(k->body);
                k->body = NULL;
            }
        }
        k = next;
    }
    if (flush_locked(c) != 0) {
        fail_locked(c, ended);
    }
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

/* The socket is readable. In C_HANDSHAKE reads the peer's header; in C_UP
 * reads replies and runs their callbacks (dropping c->mu meanwhile). A
 * failure ends the connection, its calls onto *ended. */
static void read_locked(rpc_conn *c, call ***ended)
{
    size_t want = c->state == C_HANDSHAKE ? RPC_FRAME_HELLO - c->inlen : c->incap - c->inlen;
    if (want == 0) { /* never: rpc_frame_keep_tail leaves room for a whole message */
        fail_locked(c, ended);
        return;
    }
    ssize_t k;
    do {
        k = recv(c->fd, c->in + c->inlen, want, MSG_DONTWAIT);
    } while (k < 0 && errno == EINTR);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
    }
    if (k <= 0) { /* an error, or the peer closed */
        fail_locked(c, ended);
        return;
    }
    c->inlen += (size_t)k;
    if (c->state == C_HANDSHAKE) {
        if (c->inlen == RPC_FRAME_HELLO) {
            if (memcmp(c->in, rpc_frame_hello_rep0, RPC_FRAME_HELLO) != 0) {
                fail_locked(c, ended); /* not a rep0 peer */
            } else {
                c->hs_recvd = 1;
            }
        }
        return;
    }
    size_t used = 0;
    call *replies = NULL, **rtail = &replies;
    int prv = parse_locked(c, &used, &rtail);
    pthread_mutex_unlock(&c->mu);
    finish(c, replies); /* read from c->in, which is this thread's alone */
    pthread_mutex_lock(&c->mu);
    /* Keep the partial tail, and make room for the whole of it. */
    if (prv == 0 && rpc_frame_keep_tail(&c->in, &c->inlen, &c->incap, used) != 0) {
        prv = NNG_ENOMEM;
    }
    if (prv != 0 && c->state == C_UP && !c->closing) {
        fail_locked(c, ended);
    }
}

/* ===================================================================== */
/* The connection's thread                                                */
/* ===================================================================== */

/* Moves the state on when its time is up: a backoff ends in a dial, a dial
 * or handshake that took too long fails. */
static void step_locked(rpc_conn *c, clock_mono now, call ***ended)
{
    if (c->state == C_UP || now.ms < c->until.ms || c->loop_reading) {
        return; /* (the loop's reader wakes this thread when it is done with in) */
    }
    if (c->state != C_BACKOFF) {
        fail_locked(c, ended);
        return;
    }
    int done;
    pthread_mutex_unlock(&c->mu);
    int fd = dial(c, &done);
    pthread_mutex_lock(&c->mu);
    if (fd < 0 || c->closing) {
        if (fd >= 0) {
            close(fd);
        }
        c->state = C_CONNECTING; /* so that fail_locked backs off from here */
        fail_locked(c, ended);
        return;
    }
    c->fd = fd;
    c->state = C_CONNECTING;
    c->until = clock_mono_after_ms(DIAL_TIMEOUT_MS);
    if (done) {
        handshake_locked(c, ended);
    }
}

/* After poll: what the socket's events mean in the state it is in. */
static void on_events_locked(rpc_conn *c, short ev, call ***ended)
{
    if (c->state == C_CONNECTING) {
        int err = 0;
        socklen_t n = sizeof err;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &n) != 0) {
            err = errno;
        }
        if (err != 0) {
            fail_locked(c, ended);
        } else if ((ev & (POLLOUT | POLLERR | POLLHUP)) != 0) {
            handshake_locked(c, ended);
        }
        return;
    }
    if ((ev & POLLOUT) != 0 && flush_locked(c) != 0) {
        fail_locked(c, ended);
        return;
    }
    if (c->watched) {
        return; /* the loop reads (and sees the errors) */
    }
    if ((ev & (POLLIN | POLLERR | POLLHUP)) != 0) {
        read_locked(c, ended);
    }
    if (c->state == C_HANDSHAKE && c->hs_recvd && !rpc_frame_out_pending(&c->out)) {
        up_locked(c, ended);
    }
}

static void *conn_run(void *arg)
{
    rpc_conn *c = arg;
    call *ended = NULL, **tail = &ended;
    pthread_mutex_lock(&c->mu);
    while (!c->closing) {
        clock_mono now = clock_mono_now();
        if (c->write_failed && c->fd >= 0) {
            fail_locked(c, &tail);
        }
        step_locked(c, now, &tail);
        clock_mono wake_at = expire_locked(c, clock_mono_now(), &tail);
        if (c->state != C_UP && c->until.ms < wake_at.ms && !c->loop_reading) {
            wake_at = c->until;
        }
        if (wake_at.ms == INT64_MAX) {
            wake_at = clock_mono_after_ms(IDLE_POLL_MS);
        }
        struct pollfd pfd[2] = {{.fd = c->wake_fd, .events = POLLIN}};
        nfds_t nfds = 1;
        if (c->fd >= 0) {
            pfd[1].fd = c->fd;
            pfd[1].events = c->state == C_CONNECTING ? POLLOUT : c->watched ? 0 : POLLIN;
            if (c->state != C_CONNECTING && rpc_frame_out_pending(&c->out)) {
                pfd[1].events |= POLLOUT;
            }
            nfds = pfd[1].events != 0 ? 2 : 1;
        }
        int64_t left = clock_mono_remaining_ms(wake_at);
        int timeout = left < 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
        c->polling = 1;
        c->poll_until = wake_at;
        pthread_mutex_unlock(&c->mu);
        finish_off_loop(c, ended);
        ended = NULL;
        tail = &ended;
        int n = poll(pfd, nfds, timeout);
        pthread_mutex_lock(&c->mu);
        c->polling = 0;
        if (n <= 0) {
            continue; /* the time is up (step_locked, expire_locked), or EINTR */
        }
        if ((pfd[0].revents & POLLIN) != 0) {
            rpc_frame_wake_drain(c->wake_fd);
        }
        if (nfds == 2 && pfd[1].revents != 0 && !c->closing && c->fd == pfd[1].fd) {
            on_events_locked(c, pfd[1].revents, &tail);
        }
    }
    pthread_mutex_unlock(&c->mu);
    finish_off_loop(c, ended);
    return NULL;
}

/* The loop's callback: the socket is readable (or failed) while C_UP. A
 * failure wakes the connection's thread, which dials again once this
 * reader is done with c->in. */
static void conn_loop_read(void *arg)
{
    rpc_conn *c = arg;
    call *ended = NULL, **tail = &ended;
    pthread_mutex_lock(&c->mu);
    if (!c->closing && c->state == C_UP && c->watched) {
        c->loop_reading = 1;
        read_locked(c, &tail);
        c->loop_reading = 0;
        if (c->state != C_UP) {
            wake(c);
        }
    }
    pthread_mutex_unlock(&c->mu);
    finish(c, ended);
}

/* ===================================================================== */
/* Interface                                                              */
/* ===================================================================== */

/* c->host and c->port from url: a host and a port other than 0 to dial.
 * Returns 0, NNG_ENOTSUP for another scheme, or NNG_EADDRINVAL. */
static int parse_url(rpc_conn *c, const char *url)
{
    int rv = rpc_frame_split_url(url, c->host, sizeof c->host, c->port, sizeof c->port);
    if (rv == 0 && (c->host[0] == '\0' || atoi(c->port) < 1)) {
        rv = NNG_EADDRINVAL;
    }
    return rv;
}

int rpc_conn_open(rpc_conn **out, const char *url)
{
    return rpc_conn_open_on(out, url, NULL);
}

int rpc_conn_open_on(rpc_conn **out, const char *url, rpc_loop *loop)
{
    int rv;
    *out = NULL;
    rpc_conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
        return NNG_ENOMEM;
    }
    c->fd = -1;
    c->wake_fd = -1;
    c->loop = loop;
    c->lw = (rpc_loop_watch){.fn = conn_loop_read, .arg = c};
    if ((rv = parse_url(c, url)) != 0) {
        free(c);
        return rv;
    }
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return NNG_ENOMEM;
    }
    c->state = C_BACKOFF;
    c->until = clock_mono_now(); /* the first dial at once */
    c->backoff_ms = BACKOFF_MIN_MS;
    c->next_id = (uint32_t)nng_random();
    c->incap = RPC_FRAME_INBUF_MIN;
    if ((c->in = malloc(c->incap)) == NULL ||
        (c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        pthread_create(&c->thread, NULL, conn_run, c) != 0) {
        rpc_conn_close(c);
        return NNG_ENOMEM;
    }
    c->thread_started = 1;
    (void)pthread_setname_np(c->thread, "lapse:rpc-conn"); /* for top -H, perf */
    *out = c;
    return 0;
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
    int must_wake = 0;
    pthread_mutex_lock(&c->mu);
    k->id = (c->next_id++ & 0x7fffffffu) | 0x80000000u;
    if (c->state == C_UP) {
        int idle = !rpc_frame_out_pending(&c->out); /* else the thread waits to write it */
        if (rpc_frame_append(&c->out.b, k->id, body, len) != 0) {
            pthread_mutex_unlock(&c->mu);
            free(k);
            return NNG_ENOMEM;
        }
        if (idle && !c->write_failed) {
            if (flush_locked(c) != 0) {
                c->write_failed = 1; /* the thread fails the socket, and this call */
                must_wake = 1;
            } else if (rpc_frame_out_pending(&c->out)) {
                must_wake = 1; /* the thread writes the rest */
            }
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
    if (c->polling && deadline.ms < c->poll_until.ms) {
        c->poll_until = deadline; /* one wake is enough */
        must_wake = 1;
    }
    pthread_mutex_unlock(&c->mu);
    if (must_wake) {
        wake(c);
    }
    return 0;
}

void rpc_conn_close(rpc_conn *c)
{
    if (c == NULL) {
        return;
    }
    if (c->thread_started) {
        pthread_mutex_lock(&c->mu);
        c->closing = 1;
        pthread_mutex_unlock(&c->mu);
        wake(c);
        pthread_join(c->thread, NULL);
    }
    if (c->loop != NULL) {
        /* Off the loop (under the mutex: the loop's reader may have failed
         * the socket meanwhile, and its number be another's now), and that
         * reader, which saw closing, done. */
        pthread_mutex_lock(&c->mu);
        if (c->watched) {
            rpc_loop_del(c->loop, c->fd);
            c->watched = 0;
        }
        pthread_mutex_unlock(&c->mu);
        rpc_loop_barrier(c->loop);
    }
    call *ended = NULL, **tail = &ended;
    while (c->head != NULL) {
        end_call(c, c->head, NNG_ECLOSED, &tail);
    }
    finish_off_loop(c, ended);
    if (c->fd >= 0) {
        close(c->fd);
    }
    if (c->wake_fd >= 0) {
        close(c->wake_fd);
    }
    pthread_mutex_destroy(&c->mu);
    rpc_frame_out_fini(&c->out);
    free(c->in);
    free(c);
}
