// client: ./client reqrep|stream|raw PORT SERVERPID STATSFILE [-t N slots/threads] [-a async] [-n conns] [-c ctx-per-call] [-w warm s] [-d dur s]
#include "common.h"
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#define HBUCKETS 200000 /* 1 us buckets up to 200 ms */
static int g_async, g_nconn = 1, g_nslots = 16, g_percall;
static volatile int g_phase; // 0 warm-up, 1 measure, 2 stop
static _Atomic long g_errors, g_timeouts;
static nng_socket g_sock;

typedef struct { uint8_t *p; size_t len, cap; } buf_t;
static void buf_reserve(buf_t *b, size_t extra) {
    if (b->len + extra > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 65536;
        while (nc < b->len + extra) nc *= 2;
        b->p = realloc(b->p, nc); b->cap = nc;
    }
}
#define INBUF (64 * 1024)
typedef struct cconn {
    nng_stream *s; nng_aio *raio, *saio; uint8_t *in; size_t rlen;
    pthread_mutex_t mu; buf_t pending, sending; size_t soff; bool inflight;
    int fd; /* raw mode: a plain socket read by a thread of its own; else -1 */
} cconn_t;

typedef struct slot {
    int idx; cconn_t *c; uint32_t seq; uint64_t t0; _Atomic int busy;
    pthread_mutex_t mu; pthread_cond_t cv; bool done;
    uint32_t *hist; long count; pthread_t th;
    nng_ctx ctx; nng_aio *aio; int state;
} slot_t;
static slot_t *slots;
static cconn_t *conns;

static void record(slot_t *s) {
    uint64_t us = (now_ns() - s->t0) / 1000;
    if (g_phase == 1) { s->hist[us < HBUCKETS ? us : HBUCKETS - 1]++; s->count++; }
}

/* ---------------- stream client ---------------- */
static void c_start_send_locked(cconn_t *c) {
    buf_t t = c->sending; c->sending = c->pending; c->pending = t; c->pending.len = 0;
    c->soff = 0; c->inflight = true;
    nng_iov iov = { c->sending.p, c->sending.len };
    nng_aio_set_iov(c->saio, 1, &iov);
    nng_stream_send(c->s, c->saio);
}
static void stream_issue(slot_t *s) {
    cconn_t *c = s->c;
    s->seq++; s->busy = 1; s->t0 = now_ns();
    uint64_t id = ((uint64_t)s->idx << 32) | s->seq;
    pthread_mutex_lock(&c->mu);
    buf_reserve(&c->pending, HDR + REQ_PAYLOAD);
    uint8_t *o = c->pending.p + c->pending.len;
    put32(o, 8 + REQ_PAYLOAD); put64(o + 4, id); memset(o + HDR, 0xa5, REQ_PAYLOAD);
    c->pending.len += HDR + REQ_PAYLOAD;
    if (c->fd >= 0) { /* raw: written here, at once */
        size_t done = 0;
        while (done < c->pending.len) {
            ssize_t k = send(c->fd, c->pending.p + done, c->pending.len - done, MSG_NOSIGNAL);
            if (k <= 0) { g_errors++; break; }
            done += (size_t)k;
        }
        c->pending.len = 0;
    } else if (!c->inflight) c_start_send_locked(c);
    pthread_mutex_unlock(&c->mu);
}
static void c_send_cb(void *arg) {
    cconn_t *c = arg; int rv;
    if ((rv = nng_aio_result(c->saio)) != 0) { if (g_phase < 2) { g_errors++; fprintf(stderr, "send: %s\n", nng_strerror(rv)); } return; }
    c->soff += nng_aio_count(c->saio);
    if (c->soff < c->sending.len) {
        nng_iov iov = { c->sending.p + c->soff, c->sending.len - c->soff };
        nng_aio_set_iov(c->saio, 1, &iov); nng_stream_send(c->s, c->saio); return;
    }
    pthread_mutex_lock(&c->mu);
    if (c->pending.len) c_start_send_locked(c); else c->inflight = false;
    pthread_mutex_unlock(&c->mu);
}
/* Takes in every whole reply frame of c->in (either client); 0, or -1 on a bad frame. */
static int take_replies(cconn_t *c) {
    size_t off = 0;
    while (c->rlen - off >= 4) {
        uint32_t flen = get32(c->in + off);
        if (flen < 8 || flen > INBUF - 4) { g_errors++; fprintf(stderr, "bad frame\n"); return -1; }
        if (c->rlen - off < 4 + (size_t)flen) break;
        uint64_t id = get64(c->in + off + 4);
        uint32_t idx = id >> 32;
        off += 4 + flen;
        if (idx >= (uint32_t)g_nslots || slots[idx].seq != (uint32_t)id || !slots[idx].busy || flen - 8 != REP_PAYLOAD || c->in[off - 1] != 0x5a) { g_errors++; continue; }
        slot_t *s = &slots[idx];
        s->busy = 0;
        if (g_async) {
            record(s);
            if (g_phase < 2) stream_issue(s);
        } else {
            pthread_mutex_lock(&s->mu); s->done = true; pthread_cond_signal(&s->cv); pthread_mutex_unlock(&s->mu);
        }
    }
    if (off) { memmove(c->in, c->in + off, c->rlen - off); c->rlen -= off; }
    return 0;
}
static void c_recv_cb(void *arg) {
    cconn_t *c = arg; int rv;
    if ((rv = nng_aio_result(c->raio)) != 0) { if (g_phase < 2) { g_errors++; fprintf(stderr, "recv: %s\n", nng_strerror(rv)); } return; }
    c->rlen += nng_aio_count(c->raio);
    if (take_replies(c) != 0) return;
    nng_iov iov = { c->in + c->rlen, INBUF - c->rlen };
    nng_aio_set_iov(c->raio, 1, &iov);
    nng_stream_recv(c->s, c->raio);
}
static void *stream_thread(void *arg) {
    slot_t *s = arg;
    while (g_phase < 2) {
        s->done = false;
        stream_issue(s);
        pthread_mutex_lock(&s->mu);
        struct timespec ts; clock_gettime(CLOCK_REALTIME, &ts); ts.tv_sec += 5;
        int rc = 0;
        while (!s->done && rc == 0) rc = pthread_cond_timedwait(&s->cv, &s->mu, &ts);
        bool ok = s->done;
        pthread_mutex_unlock(&s->mu);
        if (!ok) { g_timeouts++; fprintf(stderr, "TIMEOUT slot %d\n", s->idx); return NULL; }
        record(s);
    }
    return NULL;
}
static void stream_setup(const char *url) {
    int rv; nng_stream_dialer *d;
    if ((rv = nng_stream_dialer_alloc(&d, url)) != 0) DIE("dialer_alloc", rv);
    conns = calloc(g_nconn, sizeof *conns);
    for (int i = 0; i < g_nconn; i++) {
        cconn_t *c = &conns[i]; nng_aio *a;
        c->fd = -1;
        if ((rv = nng_aio_alloc(&a, NULL, NULL)) != 0) DIE("aio", rv);
        nng_aio_set_timeout(a, 5000);
        nng_stream_dialer_dial(d, a); nng_aio_wait(a);
        if ((rv = nng_aio_result(a)) != 0) DIE("dial", rv);
        c->s = nng_aio_get_output(a, 0); nng_aio_free(a);
        nng_stream_set_bool(c->s, NNG_OPT_TCP_NODELAY, true);
        pthread_mutex_init(&c->mu, NULL); c->in = malloc(INBUF);
        if ((rv = nng_aio_alloc(&c->raio, c_recv_cb, c)) != 0) DIE("aio", rv);
        if ((rv = nng_aio_alloc(&c->saio, c_send_cb, c)) != 0) DIE("aio", rv);
        nng_iov iov = { c->in, INBUF }; nng_aio_set_iov(c->raio, 1, &iov);
        nng_stream_recv(c->s, c->raio);
    }
}

/* ---------------- raw client: plain sockets, a reader thread a connection ---------------- */
static void *raw_reader(void *arg) {
    cconn_t *c = arg;
    for (;;) {
        ssize_t k = recv(c->fd, c->in + c->rlen, INBUF - c->rlen, 0);
        if (k <= 0) { if (g_phase < 2) { g_errors++; fprintf(stderr, "raw recv: %s\n", k < 0 ? strerror(errno) : "closed"); } return NULL; }
        c->rlen += (size_t)k;
        if (take_replies(c) != 0) return NULL;
    }
}
static void raw_setup(int port) {
    conns = calloc(g_nconn, sizeof *conns);
    for (int i = 0; i < g_nconn; i++) {
        cconn_t *c = &conns[i];
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0) { perror("raw connect"); exit(1); }
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_mutex_init(&c->mu, NULL); c->in = malloc(INBUF);
        pthread_t t; pthread_create(&t, NULL, raw_reader, c); pthread_detach(t);
    }
}

/* ---------------- reqrep client ---------------- */
static nng_msg *make_req(slot_t *s) {
    nng_msg *m; int rv;
    if ((rv = nng_msg_alloc(&m, REQ_PAYLOAD)) != 0) DIE("msg_alloc", rv);
    s->seq++;
    uint8_t *b = nng_msg_body(m);
    put64(b, ((uint64_t)s->idx << 32) | s->seq); memset(b + 8, 0xa5, REQ_PAYLOAD - 8);
    return m;
}
static bool check_rep(slot_t *s, nng_msg *m) {
    bool ok = nng_msg_len(m) == REP_PAYLOAD && get64(nng_msg_body(m)) == (((uint64_t)s->idx << 32) | s->seq)
              && ((uint8_t *)nng_msg_body(m))[REP_PAYLOAD - 1] == 0x5a;
    nng_msg_free(m);
    if (!ok) g_errors++;
    return ok;
}
static void *reqrep_thread(void *arg) {
    slot_t *s = arg; int rv; nng_aio *aio;
    if ((rv = nng_aio_alloc(&aio, NULL, NULL)) != 0) DIE("aio", rv);
    nng_aio_set_timeout(aio, 5000);
    if (!g_percall && (rv = nng_ctx_open(&s->ctx, g_sock)) != 0) DIE("ctx", rv);
    while (g_phase < 2) {
        if (g_percall && (rv = nng_ctx_open(&s->ctx, g_sock)) != 0) DIE("ctx", rv);
        s->t0 = now_ns();
        nng_aio_set_msg(aio, make_req(s));
        nng_ctx_send(s->ctx, aio); nng_aio_wait(aio);
        if ((rv = nng_aio_result(aio)) != 0) { nng_msg_free(nng_aio_get_msg(aio)); goto fail; }
        nng_ctx_recv(s->ctx, aio); nng_aio_wait(aio);
        if ((rv = nng_aio_result(aio)) != 0) goto fail;
        check_rep(s, nng_aio_get_msg(aio));
        record(s);
        if (g_percall) nng_ctx_close(s->ctx);
        continue;
    fail:
        if (rv == NNG_ETIMEDOUT) g_timeouts++; else g_errors++;
        fprintf(stderr, "slot %d: %s\n", s->idx, nng_strerror(rv));
        return NULL;
    }
    return NULL;
}
static void reqrep_async_cb(void *arg) {
    slot_t *s = arg; int rv;
    if ((rv = nng_aio_result(s->aio)) != 0) {
        if (s->state == 0) nng_msg_free(nng_aio_get_msg(s->aio));
        if (rv == NNG_ETIMEDOUT) g_timeouts++; else g_errors++;
        fprintf(stderr, "async slot %d: %s\n", s->idx, nng_strerror(rv));
        s->busy = 0; return;
    }
    if (s->state == 0) { s->state = 1; nng_ctx_recv(s->ctx, s->aio); return; }
    check_rep(s, nng_aio_get_msg(s->aio));
    record(s);
    if (g_phase >= 2) { s->busy = 0; return; }
    s->t0 = now_ns(); s->state = 0;
    nng_aio_set_msg(s->aio, make_req(s));
    nng_ctx_send(s->ctx, s->aio);
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage\n"); return 2; }
    const char *mode = argv[1]; pid_t spid = atoi(argv[3]); const char *sf = argv[4];
    int warm = 1, dur = 10, opt;
    optind = 5;
    while ((opt = getopt(argc, argv, "t:an:cw:d:")) != -1) switch (opt) {
        case 't': g_nslots = atoi(optarg); break; case 'a': g_async = 1; break;
        case 'n': g_nconn = atoi(optarg); break; case 'c': g_percall = 1; break;
        case 'w': warm = atoi(optarg); break; case 'd': dur = atoi(optarg); break;
    }
    char url[64]; snprintf(url, sizeof url, "tcp://127.0.0.1:%s", argv[2]);
    bool raw = !strcmp(mode, "raw"), stream = raw || !strcmp(mode, "stream"); int rv;
    slots = calloc(g_nslots, sizeof *slots);
    for (int i = 0; i < g_nslots; i++) {
        slots[i].idx = i; slots[i].hist = calloc(HBUCKETS, sizeof(uint32_t));
        pthread_mutex_init(&slots[i].mu, NULL); pthread_cond_init(&slots[i].cv, NULL);
    }
    if (stream) {
        if (raw) raw_setup(atoi(argv[2])); else stream_setup(url);
        for (int i = 0; i < g_nslots; i++) slots[i].c = &conns[i % g_nconn];
        for (int i = 0; i < g_nslots; i++)
            if (g_async) stream_issue(&slots[i]); else pthread_create(&slots[i].th, NULL, stream_thread, &slots[i]);
    } else {
        if ((rv = nng_req0_open(&g_sock)) != 0) DIE("req0", rv);
        if ((rv = nng_dial(g_sock, url, NULL, 0)) != 0) DIE("dial", rv);
        for (int i = 0; i < g_nslots; i++) {
            slot_t *s = &slots[i];
            if (g_async) {
                if ((rv = nng_ctx_open(&s->ctx, g_sock)) != 0) DIE("ctx", rv);
                if ((rv = nng_aio_alloc(&s->aio, reqrep_async_cb, s)) != 0) DIE("aio", rv);
                nng_aio_set_timeout(s->aio, 5000);
                s->busy = 1; s->state = 0; s->t0 = now_ns();
                nng_aio_set_msg(s->aio, make_req(s)); nng_ctx_send(s->ctx, s->aio);
            } else pthread_create(&s->th, NULL, reqrep_thread, s);
        }
    }
    sleep(warm);
    g_phase = 1; kill(spid, SIGUSR1);
    usage_t u0 = get_usage(); uint64_t t0 = now_ns();
    struct timespec ts = { dur, 0 }; while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
    usage_t u1 = get_usage(); uint64_t t1 = now_ns();
    kill(spid, SIGUSR2);
    g_phase = 2;
    if (!g_async) for (int i = 0; i < g_nslots; i++) pthread_join(slots[i].th, NULL);
    else usleep(200000);
    // async: any slot still busy long after the window ended is stuck (would be a lost reply)
    long stuck = 0;
    if (g_async && stream) for (int i = 0; i < g_nslots; i++) if (slots[i].busy && now_ns() - slots[i].t0 > 100000000ull) stuck++;
    // aggregate
    long n = 0; static uint64_t h[HBUCKETS];
    for (int i = 0; i < g_nslots; i++) { n += slots[i].count; for (int b = 0; b < HBUCKETS; b++) h[b] += slots[i].hist[b]; }
    long p50 = -1, p99 = -1, acc = 0;
    for (int b = 0; b < HBUCKETS; b++) { acc += h[b]; if (p50 < 0 && acc >= n * 0.5) p50 = b; if (p99 < 0 && acc >= n * 0.99) { p99 = b; break; } }
    double scpu = -1; long svcsw = -1, sivcsw = -1, sreqs = -1, serr = -1;
    for (int i = 0; i < 50; i++) { // wait for server stats
        FILE *f = fopen(sf, "r");
        if (f) { int k = fscanf(f, "%lf %ld %ld %ld %ld", &scpu, &svcsw, &sivcsw, &sreqs, &serr); fclose(f); if (k == 5) break; }
        usleep(50000);
    }
    double secs = (t1 - t0) / 1e9, ccpu = u1.cpu_us - u0.cpu_us;
    long ccs = (u1.vcsw - u0.vcsw) + (u1.ivcsw - u0.ivcsw), scs = svcsw + sivcsw;
    printf("mode=%s%s%s conns=%d slots=%d calls=%ld calls/s=%.0f p50us=%ld p99us=%ld "
           "cpu_us/call c=%.2f s=%.2f tot=%.2f  cs/call c=%.2f(v%.2f iv%.2f) s=%.2f(v%.2f iv%.2f) tot=%.2f  "
           "srv_reqs=%ld errors c=%ld s=%ld timeouts=%ld stuck=%ld%s\n",
           mode, g_async ? "-async" : "-threads", (!stream && g_percall) ? "-ctxpercall" : "", g_nconn, g_nslots, n, n / secs, p50, p99,
           ccpu / n, scpu / n, (ccpu + scpu) / n, (double)ccs / n, (double)(u1.vcsw - u0.vcsw) / n, (double)(u1.ivcsw - u0.ivcsw) / n,
           (double)scs / n, (double)svcsw / n, (double)sivcsw / n, (double)(ccs + scs) / n,
           sreqs, (long)g_errors, serr, (long)g_timeouts, stuck, scpu < 0 ? " SERVER-STATS-MISSING" : "");
    fflush(stdout);
    _exit(g_errors || g_timeouts || stuck || serr ? 1 : 0);
}
