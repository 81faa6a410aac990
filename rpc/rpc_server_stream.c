/*
 * rpc_server_stream.c: the server half of rpc.h on plain TCP sockets, the
 * default transport (docs/wire-protocol.md, "The stream server"; NNG's rep0
 * is kept under LAPSE_RPC_SERVER=rep0): the wire a rep0 socket speaks,
 * framed by hand, as rpc_conn.c does for the client. Requests are taken,
 * served and answered by the code both transports share
 * (rpc_server_take.c); only where the bytes come from and where a reply
 * goes (stream_reply) are here.
 *
 * An accepting thread takes connections; each connection has a thread of
 * its own that sends rep0's header, checks the peer's (req0, within
 * HELLO_TIMEOUT_MS), then reads into a buffer of at least
 * RPC_FRAME_INBUF_MIN (rpc_frame.h) and takes every complete message in it
 * (a request of its own, an srv_ctx made for it, with its id): a quick call
 * is served right there, on that thread, and its reply written by it; the
 * others go to the workers. A reply is written by whoever answers, at once
 * when nothing waits to go out; what the socket does not take waits in the
 * connection's rpc_frame_out, and the connection's thread writes it when
 * poll says the socket is writable (waking on its eventfd). A connection
 * with rpc_server_options.contexts requests unanswered reads no more until
 * one is (back-pressure, as rep0's pool of contexts gives). Every thread
 * polls the server's stop eventfd too, written once when it closes.
 *
 * Why not NNG's stream API, as before: each request and reply cost
 * hand-offs between NNG's poller and task threads (docs/benchmarks.md,
 * "The server on plain sockets too"). The cost of a thread per connection
 * is a thread per client process on every node it talks to.
 *
 * Thread-safety: a connection's thread and the workers answering its
 * requests run concurrently; srv_conn.mu guards its state and output, its
 * input is its thread's alone. srv_stream.mu guards the list of
 * connections and the count of their threads.
 *
 * Invariants:
 *  1. Only a connection's thread closes its socket (at conn_free, after it
 *     ended): a failure elsewhere shuts the socket down, which ends the
 *     thread's poll, so a descriptor is never reused under a poll.
 *  2. A connection is freed once its thread has ended (thread_done) and no
 *     request refers to it (nreq == 0): by its thread when none does, else
 *     by the reply that brings nreq to 0 (a request answered after its
 *     connection failed drops its reply). Once srv_stream.closing is set
 *     the list no longer changes and rpc_server_stream_free frees them all.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

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
    srv_conn *prev, *next; /* on srv_stream.conns */
    rpc_server *s;
    pthread_mutex_t mu; /* guards what follows but the input */
    int fd;             /* the socket (invariant 1) */
    int wake_fd;        /* an eventfd: bytes to write, or reading resumed */
    int failed;         /* the socket is shut down: replies are dropped */
    int paused;         /* reads no more: nreq reached max_reqs */
    int thread_done;    /* the connection's thread ended (invariant 2) */
    size_t nreq;        /* requests taken and not answered */
    srv_ctx *reqs;      /* those requests (cprev, cnext) */
    rpc_frame_out out;  /* replies to write */
    int up;             /* the peer's header was read */
    uint8_t *in;        /* received bytes: inlen of incap (the thread's) */
    size_t inlen, incap;
};

struct srv_stream {
    rpc_server *s;
    int lfd;     /* the listening socket */
    int stop_fd; /* an eventfd written once when the server closes, never read */
    pthread_t accept_th;
    int accept_started;
    pthread_mutex_t mu; /* guards what follows */
    int mu_init;
    pthread_cond_t cv; /* signalled when a connection's thread ends */
    srv_conn *conns;   /* connections not freed */
    int nthreads;      /* connections' threads running */
    size_t max_reqs;   /* a connection's requests unanswered before it stops reading */
    int closing;
};

static void conn_free(srv_conn *c)
{
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

/* Shuts c's socket down (invariant 1), which ends its thread's poll.
 * REQUIRES: c->mu held. */
static void fail_locked(srv_conn *c)
{
    if (!c->failed) {
        c->failed = 1;
        rpc_frame_out_clear(&c->out);
        (void)shutdown(c->fd, SHUT_RDWR);
    }
}

/* Takes c off t's list. REQUIRES: t->mu held, not closing (invariant 2). */
static void conns_unlink(srv_stream *t, srv_conn *c)
{
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        t->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
}

/* Unlinks the dead c (invariant 2) and frees it, unless the server closes
 * (then rpc_server_stream_free does). */
static void bury(srv_conn *c)
{
    srv_stream *t = c->s->stream;
    pthread_mutex_lock(&t->mu);
    int closing = t->closing;
    if (!closing) {
        conns_unlink(t, c);
    }
    pthread_mutex_unlock(&t->mu);
    if (!closing) {
        conn_free(c);
    }
}

/* Where a stream request's reply goes (rpc_server.reply): appended to its
 * connection's output behind its id and written at once when nothing waits
 * to go out; dropped when the connection failed. out NULL (out of memory
 * packing it) closes the connection (rpc.h invariant 1). Frees r. */
static void stream_reply(srv_ctx *r, nng_msg *out)
{
    srv_conn *c = r->conn;
    int must_wake = 0;
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
        must_wake = 1;
    }
    if (!c->failed) {
        size_t n = out != NULL ? nng_msg_len(out) : 0;
        int idle = !rpc_frame_out_pending(&c->out);
        if (out == NULL || rpc_frame_append(&c->out.b, r->id, nng_msg_body(out), n) != 0) {
            fail_locked(c);
        } else if (idle) {
            if (rpc_frame_out_flush(&c->out, c->fd) != 0) {
                fail_locked(c);
            } else if (rpc_frame_out_pending(&c->out)) {
                must_wake = 1; /* the thread writes the rest */
            }
        }
    }
    int dead = c->failed && c->thread_done && c->nreq == 0;
    if (must_wake && !c->thread_done) {
        rpc_frame_wake(c->wake_fd); /* under mu: the thread cannot free c meanwhile */
    }
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

/* A connection's thread: the handshake, then reads and takes requests,
 * and writes what replies left, until the connection fails or the server
 * closes. */
static void *conn_run(void *arg)
{
    srv_conn *c = arg;
    srv_stream *t = c->s->stream;
    clock_mono hello_by = clock_mono_after_ms(HELLO_TIMEOUT_MS);
    pthread_mutex_lock(&c->mu);
    if (buf_append(&c->out.b, rpc_frame_hello_rep0, RPC_FRAME_HELLO) != 0 ||
        rpc_frame_out_flush(&c->out, c->fd) != 0) {
        fail_locked(c);
    }
    pthread_mutex_unlock(&c->mu);
    for (;;) {
        pthread_mutex_lock(&c->mu);
        if (c->failed) {
            pthread_mutex_unlock(&c->mu);
            break;
        }
        short ev =
            (short)((c->paused ? 0 : POLLIN) | (rpc_frame_out_pending(&c->out) ? POLLOUT : 0));
        pthread_mutex_unlock(&c->mu);
        struct pollfd pfd[3] = {{.fd = c->fd, .events = ev},
                                {.fd = c->wake_fd, .events = POLLIN},
                                {.fd = t->stop_fd, .events = POLLIN}};
        int timeout = -1;
        if (!c->up) {
            int64_t left = clock_mono_remaining_ms(hello_by);
            timeout = left < 0 ? 0 : (int)left;
        }
        int n = poll(pfd, 3, timeout);
        if (n < 0 && errno != EINTR) {
            break;
        }
        if (pfd[2].revents != 0) {
            break;
        }
        if (pfd[1].revents & POLLIN) {
            rpc_frame_wake_drain(c->wake_fd);
        }
        if (!c->up && clock_mono_remaining_ms(hello_by) <= 0) {
            break;
        }
        short re = pfd[0].revents;
        if (re & POLLOUT) {
            pthread_mutex_lock(&c->mu);
            int bad = rpc_frame_out_flush(&c->out, c->fd) != 0;
            pthread_mutex_unlock(&c->mu);
            if (bad) {
                break;
            }
        }
        if ((re & (POLLIN | POLLERR | POLLHUP)) == 0) {
            continue;
        }
        size_t want = !c->up ? RPC_FRAME_HELLO - c->inlen : c->incap - c->inlen;
        ssize_t k = recv(c->fd, c->in + c->inlen, want, MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            continue;
        }
        if (k <= 0) {
            break;
        }
        c->inlen += (size_t)k;
        if (!c->up) {
            if (c->inlen == RPC_FRAME_HELLO) {
                if (memcmp(c->in, rpc_frame_hello_req0, RPC_FRAME_HELLO) != 0) {
                    break;
                }
                c->up = 1;
                c->inlen = 0;
            }
            continue;
        }
        size_t used = take_messages(c);
        if (used == SIZE_MAX || rpc_frame_keep_tail(&c->in, &c->inlen, &c->incap, used) != 0) {
            break;
        }
        pthread_mutex_lock(&c->mu);
        if (c->nreq >= t->max_reqs) {
            c->paused = 1; /* stream_reply reads on */
        }
        pthread_mutex_unlock(&c->mu);
    }
    pthread_mutex_lock(&c->mu);
    fail_locked(c);
    c->thread_done = 1;
    int dead = c->nreq == 0;
    pthread_mutex_unlock(&c->mu);
    /* From here c is another's when requests remain (the last reply buries it). */
    pthread_mutex_lock(&t->mu);
    int closing = t->closing;
    if (dead && !closing) {
        conns_unlink(t, c);
    }
    t->nthreads--;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    if (dead && !closing) {
        conn_free(c);
    }
    return NULL;
}

/* A connection on the accepted socket fd (taken), with its thread. */
static void conn_start(srv_stream *t, int fd)
{
    srv_conn *c = calloc(1, sizeof *c);
    if (c == NULL || pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        close(fd);
        return;
    }
    c->s = t->s;
    c->fd = fd;
    c->incap = RPC_FRAME_INBUF_MIN;
    if ((c->in = malloc(c->incap)) == NULL ||
        (c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        c->wake_fd = -1;
        conn_free(c);
        return;
    }
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pthread_mutex_lock(&t->mu);
    if (t->closing) {
        pthread_mutex_unlock(&t->mu);
        conn_free(c);
        return;
    }
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    if (pthread_create(&th, &at, conn_run, c) != 0) {
        pthread_attr_destroy(&at);
        pthread_mutex_unlock(&t->mu);
        conn_free(c);
        return;
    }
    pthread_attr_destroy(&at);
    (void)pthread_setname_np(th, "lapse:rpc-serve"); /* for top -H, perf */
    c->next = t->conns;
    if (t->conns != NULL) {
        t->conns->prev = c;
    }
    t->conns = c;
    t->nthreads++;
    pthread_mutex_unlock(&t->mu);
}

/* The accepting thread. */
static void *accept_run(void *arg)
{
    srv_stream *t = arg;
    for (;;) {
        struct pollfd pfd[2] = {{.fd = t->lfd, .events = POLLIN},
                                {.fd = t->stop_fd, .events = POLLIN}};
        if (poll(pfd, 2, -1) < 0 && errno != EINTR) {
            return NULL;
        }
        if (pfd[1].revents != 0) {
            return NULL;
        }
        if (pfd[0].revents == 0) {
            continue;
        }
        int fd = accept4(t->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                errno != ECONNABORTED) {
                log_warn("rpc: accept failed: %s", strerror(errno));
                clock_sleep_ms(ACCEPT_RETRY_MS);
            }
            continue;
        }
        conn_start(t, fd);
    }
}

int rpc_server_stream_open(rpc_server *s, const char *url, char *err, size_t errlen)
{
    srv_stream *t = calloc(1, sizeof *t);
    if (t == NULL) {
        set_err(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    t->lfd = -1;
    t->stop_fd = -1;
    s->stream = t;
    s->reply = stream_reply;
    t->s = s;
    t->max_reqs = (size_t)s->nctx;
    s->nctx = 0;
    if (pthread_mutex_init(&t->mu, NULL) != 0) {
        set_err(err, errlen, "pthread_mutex_init failed");
        return LAPSE_ENOMEM;
    }
    clock_cond_init_mono(&t->cv);
    t->mu_init = 1;
    char host[256], port[8];
    int rv = rpc_frame_split_url(url, host, sizeof host, port, sizeof port);
    if (rv != 0) {
        set_err(err, errlen, "bad listen address %s: %s", url, nng_strerror(rv));
        return LAPSE_EINVAL;
    }
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(strcmp(host, "*") == 0 || host[0] == '\0' ? NULL : host, port, &hints, &ai) !=
            0 ||
        ai == NULL) {
        set_err(err, errlen, "bad listen address %s", url);
        return LAPSE_EINVAL;
    }
    t->lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (t->lfd < 0) {
        rv = NNG_ENOMEM;
    } else {
        (void)setsockopt(t->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(t->lfd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(t->lfd, SOMAXCONN) != 0) {
            rv = errno == EADDRINUSE ? NNG_EADDRINUSE : NNG_EADDRINVAL;
        }
    }
    freeaddrinfo(ai);
    if (rv != 0) {
        return rpc_server_listen_failed(rv, url, err, errlen);
    }
    if ((t->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        pthread_create(&t->accept_th, NULL, accept_run, t) != 0) {
        set_err(err, errlen, "cannot start the accepting thread");
        return LAPSE_ENOMEM;
    }
    t->accept_started = 1;
    return 0;
}

/* Interface (rpc_server_int.h). */

void rpc_server_stream_stop(rpc_server *s)
{
    srv_stream *t = s->stream;
    if (t == NULL || !t->mu_init) {
        return;
    }
    pthread_mutex_lock(&t->mu);
    t->closing = 1;
    pthread_mutex_unlock(&t->mu);
    if (t->stop_fd >= 0) {
        rpc_frame_wake(t->stop_fd); /* never read: every poll sees it */
    }
    if (t->accept_started) {
        pthread_join(t->accept_th, NULL);
        t->accept_started = 0;
    }
    pthread_mutex_lock(&t->mu);
    while (t->nthreads > 0) {
        pthread_cond_wait(&t->cv, &t->mu);
    }
    pthread_mutex_unlock(&t->mu);
}

void rpc_server_stream_free(rpc_server *s)
{
    srv_stream *t = s->stream;
    if (t == NULL) {
        return;
    }
    while (t->conns != NULL) {
        srv_conn *c = t->conns;
        t->conns = c->next;
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
    if (t->lfd >= 0) {
        close(t->lfd);
    }
    if (t->stop_fd >= 0) {
        close(t->stop_fd);
    }
    if (t->mu_init) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
    }
    free(t);
    s->stream = NULL;
}
