// server: ./server reqrep|stream|raw PORT STATSFILE
// SIGUSR1 = start measuring window, SIGUSR2 = end window: write rusage delta to STATSFILE.
#include "common.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

static _Atomic long g_errors, g_reqs;

/* ---------------- reqrep: rep0 + 64 contexts (demo/async/server.c style) --------------- */
#define NCTX 64
struct work { enum { INIT, RECV, SEND } state; nng_aio *aio; nng_ctx ctx; };

static void rep_cb(void *arg) {
    struct work *w = arg; int rv; nng_msg *msg;
    switch (w->state) {
    case INIT:
        w->state = RECV; nng_ctx_recv(w->ctx, w->aio); break;
    case RECV:
        if ((rv = nng_aio_result(w->aio)) != 0) {
            if (rv == NNG_ECLOSED) return;
            g_errors++; nng_ctx_recv(w->ctx, w->aio); return;
        }
        msg = nng_aio_get_msg(w->aio);
        if (nng_msg_len(msg) != REQ_PAYLOAD) g_errors++;
        // reply: 100 bytes, first 8 = the request id (already in place)
        if ((rv = nng_msg_realloc(msg, REP_PAYLOAD)) != 0) DIE("realloc", rv);
        memset((uint8_t *)nng_msg_body(msg) + 8, 0x5a, REP_PAYLOAD - 8);
        g_reqs++;
        nng_aio_set_msg(w->aio, msg);
        w->state = SEND; nng_ctx_send(w->ctx, w->aio); break;
    case SEND:
        if ((rv = nng_aio_result(w->aio)) != 0) { nng_msg_free(nng_aio_get_msg(w->aio)); g_errors++; }
        w->state = RECV; nng_ctx_recv(w->ctx, w->aio); break;
    }
}

static void run_reqrep(const char *url) {
    nng_socket s; int rv;
    if ((rv = nng_rep0_open(&s)) != 0) DIE("rep0_open", rv);
    static struct work works[NCTX];
    for (int i = 0; i < NCTX; i++) {
        if ((rv = nng_aio_alloc(&works[i].aio, rep_cb, &works[i])) != 0) DIE("aio", rv);
        if ((rv = nng_ctx_open(&works[i].ctx, s)) != 0) DIE("ctx", rv);
        works[i].state = INIT;
    }
    if ((rv = nng_listen(s, url, NULL, 0)) != 0) DIE("listen", rv);
    for (int i = 0; i < NCTX; i++) rep_cb(&works[i]);
}

/* ---------------- stream: own framing ---------------- */
#define INBUF (64 * 1024)
typedef struct { uint8_t *p; size_t len, cap; } buf_t;
static void buf_reserve(buf_t *b, size_t extra) {
    if (b->len + extra > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 65536;
        while (nc < b->len + extra) nc *= 2;
        b->p = realloc(b->p, nc); b->cap = nc;
    }
}
typedef struct conn {
    nng_stream *s;
    nng_aio *raio, *saio;
    uint8_t *in; size_t rlen;
    pthread_mutex_t mu;
    buf_t pending, sending; size_t soff; bool inflight, dead;
} conn_t;

static void conn_close(conn_t *c) {
    // called from a callback on error; leak the conn (spike), just close the stream
    pthread_mutex_lock(&c->mu);
    bool first = !c->dead; c->dead = true;
    pthread_mutex_unlock(&c->mu);
    if (first) nng_stream_close(c->s);
}

static void start_send_locked(conn_t *c) {
    buf_t t = c->sending; c->sending = c->pending; c->pending = t; c->pending.len = 0;
    c->soff = 0; c->inflight = true;
    nng_iov iov = { c->sending.p, c->sending.len };
    nng_aio_set_iov(c->saio, 1, &iov);
    nng_stream_send(c->s, c->saio);
}

static void s_send_cb(void *arg) {
    conn_t *c = arg; int rv;
    if ((rv = nng_aio_result(c->saio)) != 0) { if (rv != NNG_ECLOSED) g_errors++; conn_close(c); return; }
    c->soff += nng_aio_count(c->saio);
    if (c->soff < c->sending.len) { // partial write: continue
        nng_iov iov = { c->sending.p + c->soff, c->sending.len - c->soff };
        nng_aio_set_iov(c->saio, 1, &iov);
        nng_stream_send(c->s, c->saio);
        return;
    }
    pthread_mutex_lock(&c->mu);
    if (c->pending.len && !c->dead) start_send_locked(c); else c->inflight = false;
    pthread_mutex_unlock(&c->mu);
}

static void s_recv_cb(void *arg) {
    conn_t *c = arg; int rv;
    if ((rv = nng_aio_result(c->raio)) != 0) { if (rv != NNG_ECLOSED && rv != NNG_ECONNSHUT && rv != NNG_ECONNRESET) g_errors++; conn_close(c); return; }
    c->rlen += nng_aio_count(c->raio);
    size_t off = 0; int nrep = 0;
    pthread_mutex_lock(&c->mu);
    while (c->rlen - off >= 4) {
        uint32_t flen = get32(c->in + off);
        if (flen < 8 || flen > INBUF - 4) { g_errors++; pthread_mutex_unlock(&c->mu); conn_close(c); return; }
        if (c->rlen - off < 4 + (size_t)flen) break;
        uint64_t id = get64(c->in + off + 4);
        if (flen - 8 != REQ_PAYLOAD) g_errors++;
        buf_reserve(&c->pending, HDR + REP_PAYLOAD);
        uint8_t *o = c->pending.p + c->pending.len;
        put32(o, 8 + REP_PAYLOAD); put64(o + 4, id); memset(o + HDR, 0x5a, REP_PAYLOAD);
        c->pending.len += HDR + REP_PAYLOAD;
        off += 4 + flen; nrep++;
    }
    g_reqs += nrep;
    if (c->pending.len && !c->inflight && !c->dead) start_send_locked(c);
    pthread_mutex_unlock(&c->mu);
    if (off) { memmove(c->in, c->in + off, c->rlen - off); c->rlen -= off; }
    nng_iov iov = { c->in + c->rlen, INBUF - c->rlen };
    nng_aio_set_iov(c->raio, 1, &iov);
    nng_stream_recv(c->s, c->raio);
}

static nng_stream_listener *g_l; static nng_aio *g_acc;
static void accept_cb(void *arg) {
    (void)arg; int rv;
    if ((rv = nng_aio_result(g_acc)) != 0) { if (rv == NNG_ECLOSED) return; fprintf(stderr, "accept: %s\n", nng_strerror(rv)); g_errors++; nng_stream_listener_accept(g_l, g_acc); return; }
    conn_t *c = calloc(1, sizeof *c);
    c->s = nng_aio_get_output(g_acc, 0);
    nng_stream_set_bool(c->s, NNG_OPT_TCP_NODELAY, true);
    pthread_mutex_init(&c->mu, NULL);
    c->in = malloc(INBUF);
    if ((rv = nng_aio_alloc(&c->raio, s_recv_cb, c)) != 0) DIE("aio", rv);
    if ((rv = nng_aio_alloc(&c->saio, s_send_cb, c)) != 0) DIE("aio", rv);
    nng_iov iov = { c->in, INBUF };
    nng_aio_set_iov(c->raio, 1, &iov);
    nng_stream_recv(c->s, c->raio);
    nng_stream_listener_accept(g_l, g_acc);
}

static void run_stream(const char *url) {
    int rv;
    if ((rv = nng_stream_listener_alloc(&g_l, url)) != 0) DIE("listener_alloc", rv);
    if ((rv = nng_stream_listener_listen(g_l)) != 0) DIE("listen", rv);
    if ((rv = nng_aio_alloc(&g_acc, accept_cb, NULL)) != 0) DIE("aio", rv);
    nng_stream_listener_accept(g_l, g_acc);
}

/* ---------------- raw: plain sockets, a thread a connection ---------------- */
static void *raw_conn(void *arg) {
    int fd = (int)(intptr_t)arg;
    uint8_t *in = malloc(INBUF);
    buf_t out = {0};
    size_t rlen = 0;
    for (;;) {
        ssize_t k = recv(fd, in + rlen, INBUF - rlen, 0);
        if (k <= 0) break;
        rlen += (size_t)k;
        size_t off = 0; int nrep = 0;
        out.len = 0;
        while (rlen - off >= 4) {
            uint32_t flen = get32(in + off);
            if (flen < 8 || flen > INBUF - 4) { g_errors++; goto done; }
            if (rlen - off < 4 + (size_t)flen) break;
            uint64_t id = get64(in + off + 4);
            if (flen - 8 != REQ_PAYLOAD) g_errors++;
            buf_reserve(&out, HDR + REP_PAYLOAD);
            uint8_t *o = out.p + out.len;
            put32(o, 8 + REP_PAYLOAD); put64(o + 4, id); memset(o + HDR, 0x5a, REP_PAYLOAD);
            out.len += HDR + REP_PAYLOAD;
            off += 4 + flen; nrep++;
        }
        g_reqs += nrep;
        for (size_t sent = 0; sent < out.len;) {
            ssize_t w = send(fd, out.p + sent, out.len - sent, MSG_NOSIGNAL);
            if (w <= 0) goto done;
            sent += (size_t)w;
        }
        if (off) { memmove(in, in + off, rlen - off); rlen -= off; }
    }
done:
    close(fd); free(in); free(out.p);
    return NULL;
}
static void *raw_accept(void *arg) {
    int lfd = (int)(intptr_t)arg;
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) continue;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_t t; pthread_create(&t, NULL, raw_conn, (void *)(intptr_t)fd); pthread_detach(t);
    }
    return NULL;
}
static void run_raw(int port) {
    int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 64) != 0) { perror("raw listen"); exit(1); }
    pthread_t t; pthread_create(&t, NULL, raw_accept, (void *)(intptr_t)lfd); pthread_detach(t);
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: server reqrep|stream PORT STATSFILE\n"); return 2; }
    sigset_t set; sigemptyset(&set); sigaddset(&set, SIGUSR1); sigaddset(&set, SIGUSR2);
    sigaddset(&set, SIGTERM); sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL); // NNG threads inherit this mask
    char url[64]; snprintf(url, sizeof url, "tcp://127.0.0.1:%s", argv[2]);
    if (!strcmp(argv[1], "reqrep")) run_reqrep(url);
    else if (!strcmp(argv[1], "stream")) run_stream(url);
    else if (!strcmp(argv[1], "raw")) run_raw(atoi(argv[2]));
    else { fprintf(stderr, "bad mode\n"); return 2; }
    fprintf(stderr, "server %s listening on %s\n", argv[1], url);
    usage_t u0 = get_usage(); long r0 = g_reqs;
    for (;;) {
        int sig; sigwait(&set, &sig);
        if (sig == SIGUSR1) { u0 = get_usage(); r0 = g_reqs; }
        else if (sig == SIGUSR2) {
            usage_t u1 = get_usage();
            FILE *f = fopen(argv[3], "w");
            fprintf(f, "%.0f %ld %ld %ld %ld\n", u1.cpu_us - u0.cpu_us, u1.vcsw - u0.vcsw, u1.ivcsw - u0.ivcsw, g_reqs - r0, (long)g_errors);
            fclose(f);
        } else { fprintf(stderr, "server exit: reqs=%ld errors=%ld\n", (long)g_reqs, (long)g_errors); fflush(stderr); _exit(0); }
    }
}
