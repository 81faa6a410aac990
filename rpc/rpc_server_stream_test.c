/*
 * rpc_server_stream_test.c: the server's stream transport
 * (rpc_server_stream.c, the default) on a free loopback port,
 * with the test handler of rpc_testutil.c: calls from a req0 client and
 * from the stream client, many threads' calls each matched to its reply, a
 * coalesced frame, calls served on their connection's thread
 * (conn_thread), a malformed body (EPROTO), a bad handshake and a bad
 * message (the connection closes, the server serves on), a client leaving
 * with requests in flight, a close with requests running, and a reply of
 * 6 MB to a peer slow to read, with two behind it. Every wait is bounded.
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
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../common/arena.h"
#include "../common/clock.h"
#include "../common/item.h"
#include "rpc.h"
#include "rpc_client_int.h" /* to see that the client is on streams */
#include "rpc_conn.h"
#include "rpc_server_int.h" /* to see that the server is on streams */
#include "rpc_testutil.h"
#include "wire.h"

/* A fixture whose server is on streams (the default); stream_client: its
 * client's calls on rpc_conn (the default), else on req0
 * (LAPSE_RPC_CLIENT=req0). */
static fixture *open_stream_ctx(int contexts, int workers, int stream_client)
{
    unsetenv("LAPSE_RPC_SERVER");
    if (stream_client) {
        unsetenv("LAPSE_RPC_CLIENT");
    } else {
        setenv("LAPSE_RPC_CLIENT", "req0", 1);
    }
    fixture *f = fixture_open(contexts, workers);
    assert_non_null(f->srv->stream);
    assert_null(f->srv->ctxs);
    assert_int_equal(f->cli->stream, stream_client);
    assert_true(rpc_client_connected(f->cli, 5000));
    return f;
}

static fixture *open_stream(int workers, int stream_client)
{
    return open_stream_ctx(0, workers, stream_client);
}

/* ---- a plain TCP socket speaking (or not) SP by hand ---- */

static int dial_raw(const char *url)
{
    int port = atoi(strrchr(url, ':') + 1);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void write_all(int fd, const void *p, size_t n)
{
    assert_int_equal(write(fd, p, n), (ssize_t)n);
}

/* Reads until the peer closes (read returns 0), for at most 5 s. */
static void expect_closed(int fd)
{
    uint8_t b[256];
    for (;;) {
        ssize_t r = read(fd, b, sizeof b);
        if (r == 0) {
            return;
        }
        assert_true(r > 0); /* else the 5 s receive timeout passed */
    }
}

/* Sends the header of proto and checks the server's (rep0). */
static void handshake(int fd, uint8_t proto)
{
    const uint8_t mine[8] = {0, 'S', 'P', 0, 0, proto, 0, 0};
    const uint8_t want[8] = {0, 'S', 'P', 0, 0, 0x31, 0, 0};
    uint8_t got[8];
    write_all(fd, mine, 8);
    fixture_read_full(fd, got, 8);
    assert_memory_equal(got, want, 8);
}

/* Sends a message: 8-byte length, id, body. */
static void send_msg(int fd, uint32_t id, const void *body, size_t len)
{
    uint8_t hdr[12];
    uint64_t n = 4 + (uint64_t)len;
    for (int i = 7; i >= 0; i--) {
        hdr[i] = (uint8_t)n;
        n >>= 8;
    }
    hdr[8] = (uint8_t)(id >> 24);
    hdr[9] = (uint8_t)(id >> 16);
    hdr[10] = (uint8_t)(id >> 8);
    hdr[11] = (uint8_t)id;
    write_all(fd, hdr, sizeof hdr);
    if (len > 0) {
        write_all(fd, body, len);
    }
}

/* ---- tests ---- */

static void req0_and_stream_clients_are_served(void **state)
{
    (void)state;
    char err[256] = "";
    for (int sc = 0; sc < 2; sc++) {
        fixture *f = open_stream(2, sc);
        assert_rv(fixture_heartbeat(f->cli, 7, 0, 3000, err, sizeof err), 0, err);
        assert_rv(fixture_heartbeat(f->cli, 8, 5, 3000, err, sizeof err), 0, err);
        fixture_close(f);
    }
    /* And rpc_conn itself. */
    fixture *f = open_stream(2, 0);
    rpc_conn *c = NULL;
    assert_int_equal(rpc_conn_open(&c, f->url), 0);
    clock_mono until = clock_mono_after_ms(5000);
    while (!rpc_conn_connected(c)) {
        assert_true(clock_mono_remaining_ms(until) > 0);
        clock_sleep_ms(1);
    }
    rpc_conn_close(c);
    rpc_server_count n;
    rpc_server_counts(f->srv, &n);
    assert_int_equal(n.frames, 0);
    fixture_close(f);
}

typedef struct many_arg {
    rpc_client *cli;
    int base;
    int failures;
} many_arg;

static void *many_run(void *arg)
{
    many_arg *m = arg;
    char err[256];
    for (int i = 0; i < 200; i++) {
        if (fixture_heartbeat(m->cli, (uint32_t)(m->base + i), 0, 5000, err, sizeof err) != 0) {
            m->failures++;
        }
    }
    return NULL;
}

static atomic_int conn_thread_asked;

/* rpc_server_options.conn_thread: heartbeats, on their connection's thread. */
static int heartbeat_on_conn_thread(void *arg, const Lapse__Request *req)
{
    (void)arg;
    atomic_fetch_add(&conn_thread_asked, 1);
    return req->body_case == LAPSE__REQUEST__BODY_HEARTBEAT;
}

/* A call the conn_thread option accepts is served on its connection's
 * thread: a second call on that connection is read only once the first
 * is answered (with workers to spare, it would be answered first), while
 * another connection is served meanwhile. Under rep0 the option is never
 * asked. */
static void conn_thread_calls_hold_only_their_connection(void **state)
{
    (void)state;
    char err[256] = "";
    unsetenv("LAPSE_RPC_CLIENT");
    unsetenv("LAPSE_RPC_SERVER");
    rpc_server_options o = {.workers = 4, .conn_thread = heartbeat_on_conn_thread};
    fixture *f = fixture_open_opts(&o);
    assert_non_null(f->srv->stream);
    rpc_client *other = NULL;
    assert_rv(rpc_client_open(&other, f->url, err, sizeof err), 0, err);
    assert_true(rpc_client_connected(f->cli, 5000));
    assert_true(rpc_client_connected(other, 5000));

    const int entered = atomic_load(&fixture_handlers_entered);
    const int done = atomic_load(&fixture_handlers_done);
    fixture_slow_call slow = {.c = f->cli, .sleep_ms = 1500, .timeout_ms = 10000};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fixture_slow_call_run, &slow), 0);
    fixture_wait_entered(entered + 1);
    /* Another connection: served while the slow call sleeps. */
    assert_rv(fixture_heartbeat(other, 5, 0, 5000, err, sizeof err), 0, err);
    assert_int_equal(atomic_load(&fixture_handlers_done), done + 1);
    /* The same connection: behind the slow call. */
    assert_rv(fixture_heartbeat(f->cli, 6, 0, 5000, err, sizeof err), 0, err);
    assert_int_equal(atomic_load(&fixture_handlers_done), done + 3);
    pthread_join(th, NULL);
    assert_int_equal(slow.rv, 0);
    rpc_server_count n;
    rpc_server_counts(f->srv, &n);
    assert_int_equal(n.quick, 3);
    assert_true(atomic_load(&conn_thread_asked) >= 3);
    rpc_client_close(other);
    fixture_close(f);

    setenv("LAPSE_RPC_SERVER", "rep0", 1);
    atomic_store(&conn_thread_asked, 0);
    f = fixture_open_opts(&o);
    assert_null(f->srv->stream);
    assert_rv(fixture_heartbeat(f->cli, 7, 0, 5000, err, sizeof err), 0, err);
    rpc_server_counts(f->srv, &n);
    assert_int_equal(n.quick, 0);
    assert_int_equal(atomic_load(&conn_thread_asked), 0);
    fixture_close(f);
    unsetenv("LAPSE_RPC_SERVER");
}

/* 16 threads x 200 calls, each reply checked against its own call's id
 * (fixture_heartbeat): replies cross-wired between requests would fail.
 * With one context the stream client's connection stops reading at each
 * request and reads on at its reply: a lost resume would hang it. */
static void many_threads_calls_matched(void **state)
{
    (void)state;
    for (int k = 0; k < 4; k++) {
        int sc = k & 1;
        fixture *f = open_stream_ctx(k < 2 ? 0 : 1, 8, sc);
        pthread_t th[16];
        many_arg a[16];
        for (int t = 0; t < 16; t++) {
            a[t] = (many_arg){f->cli, 1000 * (t + 1), 0};
            assert_int_equal(pthread_create(&th[t], NULL, many_run, &a[t]), 0);
        }
        for (int t = 0; t < 16; t++) {
            pthread_join(th[t], NULL);
            assert_int_equal(a[t].failures, 0);
        }
        rpc_server_count n;
        rpc_server_counts(f->srv, &n);
        assert_int_equal(n.calls, 16 * 200);
        fixture_close(f);
    }
}

static void coalesced_frame_is_served(void **state)
{
    (void)state;
    fixture *f = open_stream(2, 0);
    enum { N = 5 };
    ProtobufCBinaryData calls[N];
    for (int i = 0; i < N; i++) {
        calls[i].data = fixture_pack_heartbeat((uint32_t)(100 + i), 1, 0, &calls[i].len);
    }
    uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff};
    calls[N - 1].data = memcpy(realloc(calls[N - 1].data, sizeof garbage), garbage, sizeof garbage);
    calls[N - 1].len = sizeof garbage;
    Lapse__Response *r = fixture_multi_call(f->cli, calls, N);
    assert_int_equal(r->status, LAPSE__STATUS__OK);
    assert_int_equal(r->body_case, LAPSE__RESPONSE__BODY_MULTI);
    assert_int_equal(r->multi->n_replies, N);
    for (int i = 0; i < N; i++) {
        Lapse__Response *one =
            lapse__response__unpack(NULL, r->multi->replies[i].len, r->multi->replies[i].data);
        assert_non_null(one);
        if (i < N - 1) {
            assert_int_equal(one->status, LAPSE__STATUS__OK);
            assert_int_equal(one->pmap_version, 100 + i);
        } else {
            assert_int_equal(one->status, LAPSE__STATUS__EPROTO);
        }
        lapse__response__free_unpacked(one, NULL);
        free(calls[i].data);
    }
    lapse__response__free_unpacked(r, NULL);
    rpc_server_count n;
    rpc_server_counts(f->srv, &n);
    assert_int_equal(n.frames, 1);
    assert_int_equal(n.coalesced, 1);
    assert_int_equal(n.calls, N - 1);
    fixture_close(f);
}

static void malformed_body_gets_eproto(void **state)
{
    (void)state;
    fixture *f = open_stream(2, 0);
    uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0x0f};
    Lapse__Response *r = fixture_raw_call(f->cli, garbage, sizeof garbage);
    assert_int_equal(r->status, LAPSE__STATUS__EPROTO);
    lapse__response__free_unpacked(r, NULL);
    r = fixture_raw_call(f->cli, "", 0);
    assert_int_equal(r->status, LAPSE__STATUS__EPROTO);
    lapse__response__free_unpacked(r, NULL);
    fixture_close(f);
}

/* A peer that is not req0, a message id without its top bit, a body under
 * 4 bytes and a length over the limit each close their connection; the
 * server serves others on. The wire is also checked by hand: the reply
 * echoes the id. */
static void bad_peers_are_closed(void **state)
{
    (void)state;
    fixture *f = open_stream(2, 0);
    char err[256] = "";

    int fd = dial_raw(f->url);
    handshake(fd, 0x31); /* rep0 talking to rep0 */
    expect_closed(fd);
    close(fd);

    size_t len;
    uint8_t *hb = fixture_pack_heartbeat(9, 0, 0, &len);
    fd = dial_raw(f->url);
    handshake(fd, 0x30);
    send_msg(fd, 0x80000abcu, hb, len);
    uint8_t hdr[12];
    fixture_read_full(fd, hdr, sizeof hdr);
    uint64_t n = fixture_be64(hdr);
    assert_true(n > 4 && n < 4096);
    assert_memory_equal(hdr + 8, "\x80\x00\x0a\xbc", 4);
    uint8_t body[4096];
    fixture_read_full(fd, body, (size_t)n - 4);
    Lapse__Response *r = lapse__response__unpack(NULL, (size_t)n - 4, body);
    assert_non_null(r);
    assert_int_equal(r->pmap_version, 9);
    lapse__response__free_unpacked(r, NULL);
    send_msg(fd, 0x00000abcu, hb, len); /* no top bit */
    expect_closed(fd);
    close(fd);

    fd = dial_raw(f->url);
    handshake(fd, 0x30);
    uint8_t shorty[8 + 2] = {0, 0, 0, 0, 0, 0, 0, 2, 0x80, 0};
    write_all(fd, shorty, sizeof shorty);
    expect_closed(fd);
    close(fd);

    fd = dial_raw(f->url);
    handshake(fd, 0x30);
    uint8_t huge[8] = {0, 0, 0, 0, 0x7f, 0, 0, 0};
    write_all(fd, huge, sizeof huge);
    expect_closed(fd);
    close(fd);

    free(hb);
    assert_rv(fixture_heartbeat(f->cli, 10, 0, 3000, err, sizeof err), 0, err);
    fixture_close(f);
}

/* A reply of 6 MB (GetItem echoes its key), more than the socket takes at
 * once, while the peer reads nothing: the server's connection writes the
 * rest when the socket drains, and the replies of two small calls sent
 * behind it follow it whole and in order (one worker serves the three in
 * turn). Read by hand, slowly at first. */
static void big_reply_written_as_the_peer_reads(void **state)
{
    (void)state;
    fixture *f = open_stream(1, 0);
    size_t big = 6u * 1000 * 1000;
    item *key = item_new();
    assert_non_null(key);
    attr_value v = {.type = ATTR_S};
    v.u.bytes.ptr = malloc(big + 1);
    assert_non_null(v.u.bytes.ptr);
    memset(v.u.bytes.ptr, 'k', big);
    v.u.bytes.ptr[big] = '\0';
    v.u.bytes.len = big;
    assert_int_equal(item_set(key, "k", &v), 0);
    arena a;
    arena_init(&a);
    Lapse__GetItemRequest g = LAPSE__GET_ITEM_REQUEST__INIT;
    g.table = "t";
    g.key = wire_item_to_pb(&a, key);
    assert_non_null(g.key);
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.version = RPC_PROTOCOL_VERSION;
    req.timeout_ms = 10000;
    req.body_case = LAPSE__REQUEST__BODY_GET_ITEM;
    req.get_item = &g;
    size_t len = lapse__request__get_packed_size(&req);
    uint8_t *body = malloc(len);
    assert_non_null(body);
    lapse__request__pack(&req, body);
    size_t hlen;
    uint8_t *hb = fixture_pack_heartbeat(5, 0, 0, &hlen);

    int fd = dial_raw(f->url);
    handshake(fd, 0x30);
    send_msg(fd, 0x80000001u, body, len);
    send_msg(fd, 0x80000002u, hb, hlen);
    send_msg(fd, 0x80000003u, hb, hlen);
    clock_sleep_ms(300); /* the server is left holding what the socket did not take */
    for (uint32_t want = 1; want <= 3; want++) {
        uint8_t hdr[12];
        fixture_read_full(fd, hdr, sizeof hdr);
        uint64_t n = fixture_be64(hdr);
        assert_true(n >= 4 && n <= RPC_MAX_MESSAGE_BYTES);
        assert_int_equal(hdr[8], 0x80);
        assert_int_equal(hdr[11], want); /* in order */
        uint8_t *reply = malloc(n - 4 + 1);
        assert_non_null(reply);
        fixture_read_full(fd, reply, n - 4);
        Lapse__Response *r = lapse__response__unpack(NULL, n - 4, reply);
        assert_non_null(r);
        assert_int_equal(r->status, LAPSE__STATUS__OK);
        if (want == 1) {
            assert_int_equal(r->body_case, LAPSE__RESPONSE__BODY_GET_ITEM);
            assert_true(n > big);
        } else {
            assert_int_equal(r->pmap_version, 5);
        }
        lapse__response__free_unpacked(r, NULL);
        free(reply);
    }
    close(fd);
    free(hb);
    free(body);
    arena_fini(&a);
    item_free(key);
    fixture_close(f);
}

/* A client that sends slow requests and leaves: the requests are still
 * served (their replies dropped), and the server serves others on. */
static void client_leaving_with_requests_in_flight(void **state)
{
    (void)state;
    fixture *f = open_stream(4, 0);
    char err[256] = "";
    int done = atomic_load(&fixture_handlers_done);
    int entered = atomic_load(&fixture_handlers_entered);
    size_t len;
    uint8_t *hb = fixture_pack_heartbeat(11, 100, 0, &len);
    int fd = dial_raw(f->url);
    handshake(fd, 0x30);
    for (uint32_t i = 0; i < 8; i++) {
        send_msg(fd, 0x80000000u | i, hb, len);
    }
    fixture_wait_entered(entered + 4);
    close(fd);
    free(hb);
    clock_mono until = clock_mono_after_ms(5000);
    while (atomic_load(&fixture_handlers_done) < done + 8) {
        assert_true(clock_mono_remaining_ms(until) > 0);
        clock_sleep_ms(1);
    }
    assert_rv(fixture_heartbeat(f->cli, 12, 0, 3000, err, sizeof err), 0, err);
    fixture_close(f);
}

/* Closing with requests running and more queued: close waits for the
 * running handlers, frees the queued ones, and the callers fail. */
static void close_with_requests_running(void **state)
{
    (void)state;
    for (int sc = 0; sc < 2; sc++) {
        fixture *f = open_stream(2, sc);
        int entered = atomic_load(&fixture_handlers_entered);
        int done = atomic_load(&fixture_handlers_done);
        fixture_slow_call calls[6];
        pthread_t th[6];
        for (int i = 0; i < 6; i++) {
            calls[i] = (fixture_slow_call){f->cli, 300, 2000, -1};
            assert_int_equal(pthread_create(&th[i], NULL, fixture_slow_call_run, &calls[i]), 0);
        }
        fixture_wait_entered(entered + 2); /* two workers busy, four queued */
        rpc_server_close(f->srv);
        f->srv = NULL;
        int ran = atomic_load(&fixture_handlers_done) - done;
        assert_true(ran >= 2);
        for (int i = 0; i < 6; i++) {
            pthread_join(th[i], NULL);
        }
        assert_int_equal(atomic_load(&fixture_handlers_done) - done, ran); /* none after */
        fixture_close(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(req0_and_stream_clients_are_served),
        cmocka_unit_test(many_threads_calls_matched),
        cmocka_unit_test(conn_thread_calls_hold_only_their_connection),
        cmocka_unit_test(coalesced_frame_is_served),
        cmocka_unit_test(malformed_body_gets_eproto),
        cmocka_unit_test(bad_peers_are_closed),
        cmocka_unit_test(client_leaving_with_requests_in_flight),
        cmocka_unit_test(close_with_requests_running),
        cmocka_unit_test(big_reply_written_as_the_peer_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
