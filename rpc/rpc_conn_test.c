/*
 * rpc_conn_test.c: the stream client connection (rpc_conn.h) against a real
 * rpc_server (rep0) on a free loopback port: the wire checked by hand with a
 * plain socket, one call, many threads' calls each matched to its reply, a
 * dead port, a server that closes mid-call and comes back, a reply of 5 MB,
 * a request of 6 MB with calls behind it, a call due before the one the
 * connection's thread sleeps for, and a close with calls outstanding. Every
 * wait is bounded. The calls' cases run twice: with the connection's own
 * thread reading, then with a loop's (rpc_conn_open_on), where every reply's
 * callback must run on the loop's thread.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <nng/nng.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "rpc.h"
#include "rpc_client_int.h" /* to see that a client's calls go on its conns */
#include "rpc_conn.h"
#include "rpc_loop.h"
#include "rpc_testutil.h" /* the wire by hand */

/* The loop the conns of the second group are read on; NULL in the first. */
static rpc_loop *g_loop;

static int conn_open(rpc_conn **c, const char *url)
{
    return rpc_conn_open_on(c, url, g_loop);
}

/* ---- the server: Heartbeat(node_id, clock_ms) sleeps clock_ms and answers
 * pmap_version = node_id, with a message of the request's pmap_version
 * bytes ('x') ---- */

static atomic_int entered;

static void handler(void *arg, const Lapse__Request *req, Lapse__Response *resp, arena *a,
                    int64_t deadline_mono_ms)
{
    (void)arg;
    (void)deadline_mono_ms;
    if (req->body_case != LAPSE__REQUEST__BODY_HEARTBEAT) {
        rpc_set_error(resp, a, LAPSE_EINVAL, "unexpected call %d", (int)req->body_case);
        return;
    }
    atomic_fetch_add(&entered, 1);
    clock_sleep_ms(req->heartbeat->clock_ms);
    fixture_heartbeat_answer(req, resp, a);
    if (req->pmap_version > 0) {
        char *m = arena_alloc(a, req->pmap_version + 1);
        memset(m, 'x', req->pmap_version);
        m[req->pmap_version] = '\0';
        resp->message = m;
    }
}

/* NNG's own rep0 socket, not our stream server (rpc_server_stream_test's):
 * the conn is checked against the wire as NNG writes it. */
static rpc_server *server_open(const char *url)
{
    setenv("LAPSE_RPC_SERVER", "rep0", 1);
    rpc_server *s = NULL;
    char err[256] = "";
    rpc_server_options o = {.contexts = 64, .workers = 16};
    int rv = rpc_server_open(&s, url, &o, handler, NULL, err, sizeof err);
    if (rv != 0) {
        fail_msg("rpc_server_open %s: %s", url, err);
    }
    return s;
}

/* A server on a free port (url) and a conn to it, for the tests that want
 * both; served_close closes the conn, then the server. */
typedef struct served {
    char url[64];
    rpc_server *srv;
    rpc_conn *c;
} served;

static void served_open(served *s)
{
    fixture_url_free_port(s->url, sizeof s->url);
    s->srv = server_open(s->url);
    s->c = NULL;
    assert_int_equal(conn_open(&s->c, s->url), 0);
}

static void served_close(served *s)
{
    rpc_conn_close(s->c);
    rpc_server_close(s->srv);
}

/* ---- one call waited for ---- */

typedef struct waitcall {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int rv;
    Lapse__Response *resp;
    size_t reply_len;
    int off_loop; /* with g_loop: the callback ran on another thread */
} waitcall;

static void waitcall_init(waitcall *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
}

static void waitcall_done(void *arg, int rv, const void *reply, size_t len)
{
    waitcall *w = arg;
    Lapse__Response *r = rv == 0 ? lapse__response__unpack(NULL, len, reply) : NULL;
    pthread_mutex_lock(&w->mu);
    w->done++;
    w->rv = rv;
    w->resp = r;
    w->reply_len = len;
    w->off_loop = g_loop != NULL && !rpc_loop_on_thread(g_loop);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Waits for w's callback (at most 20 s, else fails). */
static void waitcall_wait(waitcall *w)
{
    clock_mono until = clock_mono_after_ms(20000);
    pthread_mutex_lock(&w->mu);
    while (!w->done) {
        pthread_mutex_unlock(&w->mu);
        if (clock_mono_remaining_ms(until) == 0) {
            fail_msg("a call never ended");
        }
        clock_sleep_ms(1);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
}

static void waitcall_fini(waitcall *w)
{
    if (w->resp != NULL) {
        lapse__response__free_unpacked(w->resp, NULL);
    }
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}

/* Starts a heartbeat over c (pmap_version reply_bytes, deadline timeout_ms
 * from now) that ends in w, made here; the caller waits for it and
 * waitcall_fini's it. */
static void heartbeat_start(rpc_conn *c, waitcall *w, uint32_t id, int64_t sleep_ms,
                            uint64_t reply_bytes, int timeout_ms)
{
    size_t len;
    uint8_t *body = fixture_pack_heartbeat(id, sleep_ms, reply_bytes, &len);
    waitcall_init(w);
    assert_int_equal(rpc_conn_call(c, body, len, clock_mono_after_ms(timeout_ms), waitcall_done, w),
                     0);
    free(body);
}

/* One heartbeat over c: returns the callback's rv; on 0 checks the echo. */
static int heartbeat(rpc_conn *c, uint32_t id, int64_t sleep_ms, int timeout_ms)
{
    waitcall w;
    heartbeat_start(c, &w, id, sleep_ms, 0, timeout_ms);
    waitcall_wait(&w);
    int rv = w.rv;
    assert_int_equal(w.done, 1);
    if (rv == 0) {
        assert_non_null(w.resp);
        assert_int_equal(w.resp->status, LAPSE__STATUS__OK);
        assert_int_equal(w.resp->body_case, LAPSE__RESPONSE__BODY_HEARTBEAT);
        assert_int_equal(w.resp->pmap_version, id);
        assert_false(w.off_loop); /* a reply is read, and answered, on the loop */
    }
    waitcall_fini(&w);
    return rv;
}

static void wait_connected(rpc_conn *c, int ms)
{
    clock_mono until = clock_mono_after_ms(ms);
    while (!rpc_conn_connected(c)) {
        if (clock_mono_remaining_ms(until) == 0) {
            fail_msg("never connected");
        }
        clock_sleep_ms(1);
    }
}

/* ---- tests ---- */

static void write_full(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t r = write(fd, p, n);
        assert_true(r > 0);
        p += r;
        n -= (size_t)r;
    }
}

/* The wire rpc_conn speaks, written by hand on a plain socket: a rep0 server
 * answers the req0 handshake with its own, and a request framed as req0
 * frames it with the id echoed first. Catches a wrong idea of the wire. */
static void wire_by_hand(void **state)
{
    (void)state;
    char url[64];
    fixture_url_free_port(url, sizeof url);
    rpc_server *srv = server_open(url);
    int port = atoi(strrchr(url, ':') + 1);

    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    const uint8_t hello[8] = {0x00, 'S', 'P', 0x00, 0x00, 0x30, 0x00, 0x00};
    write_full(fd, hello, 8);
    uint8_t back[8];
    fixture_read_full(fd, back, 8);
    const uint8_t rep0[8] = {0x00, 'S', 'P', 0x00, 0x00, 0x31, 0x00, 0x00};
    assert_memory_equal(back, rep0, 8);

    size_t len;
    uint8_t *body = fixture_pack_heartbeat(4242, 0, 0, &len);
    uint8_t *frame = malloc(12 + len);
    uint64_t n = 4 + len;
    for (int i = 0; i < 8; i++) {
        frame[i] = (uint8_t)(n >> (56 - 8 * i));
    }
    const uint8_t id[4] = {0x80, 0x12, 0x34, 0x56};
    memcpy(frame + 8, id, 4);
    memcpy(frame + 12, body, len);
    write_full(fd, frame, 12 + len);

    uint8_t hdr[8];
    fixture_read_full(fd, hdr, 8);
    uint64_t rn = fixture_be64(hdr);
    assert_true(rn >= 4 && rn < 4096);
    uint8_t *reply = malloc(rn);
    fixture_read_full(fd, reply, rn);
    assert_memory_equal(reply, id, 4);
    Lapse__Response *r = lapse__response__unpack(NULL, rn - 4, reply + 4);
    assert_non_null(r);
    assert_int_equal(r->status, LAPSE__STATUS__OK);
    assert_int_equal(r->pmap_version, 4242);
    lapse__response__free_unpacked(r, NULL);
    free(reply);
    free(frame);
    free(body);
    close(fd);
    rpc_server_close(srv);
}

static void one_call(void **state)
{
    (void)state;
    served s;
    served_open(&s);
    /* Made before the connection is up: waits for it. */
    assert_int_equal(heartbeat(s.c, 7, 0, 5000), 0);
    assert_true(rpc_conn_connected(s.c));
    assert_int_equal(heartbeat(s.c, 8, 0, 5000), 0);
    served_close(&s);
}

typedef struct caller {
    rpc_conn *c;
    uint32_t base;
    int ok;
} caller;

static void *caller_run(void *arg)
{
    caller *k = arg;
    for (uint32_t i = 0; i < 200; i++) {
        if (heartbeat(k->c, k->base + i, 0, 10000) == 0) {
            k->ok++;
        }
    }
    return NULL;
}

/* 16 threads x 200 calls on one connection, each reply matched to its own
 * request (heartbeat checks the echoed id). Catches replies crossed between
 * calls, or lost in a read that carried several. */
static void many_threads(void **state)
{
    (void)state;
    served s;
    served_open(&s);
    wait_connected(s.c, 5000);
    pthread_t t[16];
    caller k[16];
    for (int i = 0; i < 16; i++) {
        k[i] = (caller){.c = s.c, .base = (uint32_t)(i + 1) * 100000};
        assert_int_equal(pthread_create(&t[i], NULL, caller_run, &k[i]), 0);
    }
    for (int i = 0; i < 16; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(k[i].ok, 200);
    }
    served_close(&s);
}

/* Nothing listens: the call ends with a time-out at its deadline, not later. */
static void dead_port(void **state)
{
    (void)state;
    char url[64];
    fixture_url_free_port(url, sizeof url);
    rpc_conn *c = NULL;
    assert_int_equal(conn_open(&c, url), 0);
    clock_mono t0 = clock_mono_now();
    assert_int_equal(heartbeat(c, 1, 0, 300), NNG_ETIMEDOUT);
    int64_t took = clock_mono_now().ms - t0.ms;
    assert_true(took >= 290);
    assert_true(took < 1000);
    assert_false(rpc_conn_connected(c));
    rpc_conn_close(c);
}

/* The server closes while a call is in its handler: the call ends with an
 * error at once (not at its deadline), and a server started again on the
 * same port is reached after the redial. */
static void server_restart(void **state)
{
    (void)state;
    served s;
    served_open(&s);
    assert_int_equal(heartbeat(s.c, 1, 0, 5000), 0);

    waitcall w;
    int before = atomic_load(&entered);
    clock_mono t0 = clock_mono_now();
    heartbeat_start(s.c, &w, 2, 1000, 0, 10000);
    while (atomic_load(&entered) == before) {
        assert_true(clock_mono_now().ms - t0.ms < 5000);
        clock_sleep_ms(1);
    }
    rpc_server_close(s.srv); /* waits for the handler (1 s): the reply never goes */
    waitcall_wait(&w);
    assert_int_equal(w.rv, NNG_ECONNSHUT);
    assert_true(clock_mono_now().ms - t0.ms < 5000);
    waitcall_fini(&w);

    s.srv = server_open(s.url);
    assert_int_equal(heartbeat(s.c, 3, 0, 5000), 0);
    assert_true(rpc_conn_connected(s.c));
    served_close(&s);
}

/* A reply of ~5 MB arrives whole (the receive buffer grows past 64 KiB),
 * and a small call after it still works (and shrinks it back). */
static void big_reply(void **state)
{
    (void)state;
    served s;
    served_open(&s);
    waitcall w;
    heartbeat_start(s.c, &w, 9, 0, 5u * 1000 * 1000, 10000);
    waitcall_wait(&w);
    assert_int_equal(w.rv, 0);
    assert_true(w.reply_len > 5u * 1000 * 1000);
    assert_non_null(w.resp);
    assert_int_equal(w.resp->pmap_version, 9);
    assert_int_equal(strlen(w.resp->message), 5u * 1000 * 1000);
    waitcall_fini(&w);
    assert_int_equal(heartbeat(s.c, 10, 0, 5000), 0);
    served_close(&s);
}

/* A request of 6 MB, more than the socket takes at once (the connection's
 * thread writes the rest as it drains), with small calls made right behind
 * it, which append to the bytes still waiting: every call is answered, the
 * big one whole (the server decoded it: its id echoed). */
static void big_request(void **state)
{
    (void)state;
    served s;
    served_open(&s);
    wait_connected(s.c, 5000);
    size_t len;
    uint8_t *body = fixture_pack_heartbeat_padded(77, 6u * 1000 * 1000, &len);
    waitcall big, small[4];
    waitcall_init(&big);
    assert_int_equal(rpc_conn_call(s.c, body, len, clock_mono_after_ms(10000), waitcall_done, &big),
                     0);
    for (int i = 0; i < 4; i++) {
        heartbeat_start(s.c, &small[i], (uint32_t)(100 + i), 0, 0, 10000);
    }
    waitcall_wait(&big);
    assert_int_equal(big.rv, 0);
    assert_non_null(big.resp);
    assert_int_equal(big.resp->status, LAPSE__STATUS__OK);
    assert_int_equal(big.resp->pmap_version, 77);
    for (int i = 0; i < 4; i++) {
        waitcall_wait(&small[i]);
        assert_int_equal(small[i].rv, 0);
        assert_non_null(small[i].resp);
        assert_int_equal(small[i].resp->pmap_version, 100 + i);
        waitcall_fini(&small[i]);
    }
    waitcall_fini(&big);
    free(body);
    served_close(&s);
}

/* A call due sooner than the one the connection's thread sleeps for wakes
 * it: with a call of a 10 s deadline in a handler, one of 300 ms (whose
 * handler sleeps 600 ms) ends ETIMEDOUT at about 300 ms, not when the
 * thread would next have woken. */
static void earlier_deadline(void **state)
{
    (void)state;
    served s;
    served_open(&s);
    wait_connected(s.c, 5000);
    waitcall slow;
    heartbeat_start(s.c, &slow, 1, 1500, 0, 10000);
    clock_sleep_ms(50); /* the thread now sleeps for the 10 s deadline */
    clock_mono t0 = clock_mono_now();
    assert_int_equal(heartbeat(s.c, 2, 600, 300), NNG_ETIMEDOUT);
    int64_t took = clock_mono_now().ms - t0.ms;
    assert_true(took >= 290);
    assert_true(took < 1000);
    waitcall_wait(&slow);
    assert_int_equal(slow.rv, 0);
    waitcall_fini(&slow);
    served_close(&s);
}

static atomic_int closed_calls;

static void count_done(void *arg, int rv, const void *reply, size_t len)
{
    (void)arg;
    (void)reply;
    (void)len;
    if (rv == NNG_ECLOSED) {
        atomic_fetch_add(&closed_calls, 1);
    }
}

/* rpc_conn_close with calls in the server's handlers and others waiting for
 * a connection: every one ends (NNG_ECLOSED) before the close returns. */
static void close_outstanding(void **state)
{
    (void)state;
    char dead[64];
    served s;
    served_open(&s);
    fixture_url_free_port(dead, sizeof dead);
    rpc_conn *c = s.c, *d = NULL;
    assert_int_equal(conn_open(&d, dead), 0);
    wait_connected(c, 5000);
    size_t len;
    uint8_t *body = fixture_pack_heartbeat(5, 500, 0, &len);
    int before = atomic_load(&entered);
    atomic_store(&closed_calls, 0);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(rpc_conn_call(c, body, len, clock_mono_after_ms(10000), count_done, NULL),
                         0);
        assert_int_equal(rpc_conn_call(d, body, len, clock_mono_after_ms(10000), count_done, NULL),
                         0);
    }
    free(body);
    clock_mono until = clock_mono_after_ms(5000);
    while (atomic_load(&entered) < before + 10 && clock_mono_remaining_ms(until) > 0) {
        clock_sleep_ms(1);
    }
    rpc_conn_close(c);
    assert_int_equal(atomic_load(&closed_calls), 10);
    rpc_conn_close(d);
    assert_int_equal(atomic_load(&closed_calls), 20);
    rpc_server_close(s.srv);
}

/* One rpc_call of a heartbeat (a call that does not coalesce) on cli. */
static int client_heartbeat(rpc_client *cli, uint32_t id, int timeout_ms)
{
    Lapse__HeartbeatRequest hb = LAPSE__HEARTBEAT_REQUEST__INIT;
    hb.node_id = id;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_HEARTBEAT;
    req.heartbeat = &hb;
    Lapse__Response *resp = NULL;
    char err[256] = "";
    int rv = rpc_call(cli, &req, timeout_ms, &resp, err, sizeof err);
    if (rv == 0) {
        assert_int_equal(resp->pmap_version, id);
    }
    rpc_response_free(resp);
    return rv;
}

/* A client opened without LAPSE_RPC_CLIENT (or with it "stream") carries
 * every call on its conns and has no req0 socket; with it "req0" it has a
 * req0 socket per peer and no conns. A list of a dead and a live peer picks
 * the live one. Catches the variable ignored, the default not the stream
 * transport, or the peer choice broken by it. */
static void client_stream_mode(void **state)
{
    (void)state;
    char url[64], dead[64], list[160];
    fixture_url_free_port(url, sizeof url);
    fixture_url_free_port(dead, sizeof dead);
    snprintf(list, sizeof list, "%s,%s", dead, url);
    rpc_server *srv = server_open(url);
    char err[256] = "";
    const char *was = getenv("LAPSE_RPC_CLIENT");
    char *saved = was != NULL ? strdup(was) : NULL;

    setenv("LAPSE_RPC_CLIENT", "req0", 1);
    rpc_client *plain = NULL;
    assert_int_equal(rpc_client_open(&plain, url, err, sizeof err), 0);
    assert_false(plain->stream);
    assert_true(plain->peers[0].open);
    assert_null(plain->peers[0].conn);
    assert_int_equal(client_heartbeat(plain, 1, 5000), 0);
    rpc_client_close(plain);

    setenv("LAPSE_RPC_CLIENT", "stream", 1);
    rpc_client *named = NULL;
    assert_int_equal(rpc_client_open(&named, url, err, sizeof err), 0);
    assert_true(named->stream);
    assert_non_null(named->peers[0].conn);
    rpc_client_close(named);

    unsetenv("LAPSE_RPC_CLIENT");
    rpc_client *cli = NULL;
    assert_int_equal(rpc_client_open(&cli, list, err, sizeof err), 0);
    assert_true(cli->stream);
    assert_false(cli->peers[1].open); /* no req0 socket */
    assert_non_null(cli->peers[1].conn);
    assert_true(rpc_client_connected(cli, 5000));
    assert_int_equal(client_heartbeat(cli, 2, 5000), 0);
    assert_int_equal(atomic_load(&cli->cur), 1); /* the live peer */
    for (uint32_t i = 0; i < 20; i++) {
        assert_int_equal(client_heartbeat(cli, 100 + i, 5000), 0);
    }
    rpc_multi_call mc[3];
    Lapse__HeartbeatRequest hb[3];
    Lapse__Request req[3];
    for (int i = 0; i < 3; i++) {
        lapse__heartbeat_request__init(&hb[i]);
        hb[i].node_id = 200 + (uint32_t)i;
        lapse__request__init(&req[i]);
        req[i].body_case = LAPSE__REQUEST__BODY_HEARTBEAT;
        req[i].heartbeat = &hb[i];
        mc[i].client = cli;
        mc[i].req = &req[i];
    }
    rpc_call_many(mc, 3, 5000);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(mc[i].rv, 0);
        assert_int_equal(mc[i].resp->pmap_version, 200 + i);
        rpc_response_free(mc[i].resp);
    }
    rpc_client_close(cli);

    if (saved != NULL) {
        setenv("LAPSE_RPC_CLIENT", saved, 1);
        free(saved);
    } else {
        unsetenv("LAPSE_RPC_CLIENT");
    }
    rpc_server_close(srv);
}

static void bad_url(void **state)
{
    (void)state;
    rpc_conn *c = (rpc_conn *)1;
    assert_int_not_equal(rpc_conn_open(&c, "nonsense://x"), 0);
    assert_null(c);
    rpc_conn_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(wire_by_hand),      cmocka_unit_test(one_call),
        cmocka_unit_test(many_threads),      cmocka_unit_test(dead_port),
        cmocka_unit_test(server_restart),    cmocka_unit_test(big_reply),
        cmocka_unit_test(close_outstanding), cmocka_unit_test(client_stream_mode),
        cmocka_unit_test(bad_url),           cmocka_unit_test(big_request),
        cmocka_unit_test(earlier_deadline),
    };
    int rv = cmocka_run_group_tests_name("own thread", tests, NULL, NULL);
    /* The same calls with a loop reading (the wire-by-hand, mode and URL
     * cases are about neither). */
    const struct CMUnitTest on_loop[] = {
        cmocka_unit_test(one_call),    cmocka_unit_test(many_threads),
        cmocka_unit_test(dead_port),   cmocka_unit_test(server_restart),
        cmocka_unit_test(big_reply),   cmocka_unit_test(close_outstanding),
        cmocka_unit_test(big_request), cmocka_unit_test(earlier_deadline),
    };
    if (rpc_loop_open(&g_loop, "test:loop") != 0) {
        fprintf(stderr, "cannot start a loop\n");
        return 1;
    }
    rv |= cmocka_run_group_tests_name("on a loop", on_loop, NULL, NULL);
    rpc_loop_close(g_loop);
    rpc_fini();
    return rv;
}
