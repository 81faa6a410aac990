/*
 * rpc_test.c: the NNG transport on loopback with real sockets: round trips,
 * concurrency, deadlines on both sides, malformed frames, unreachable peers
 * and listen errors. Every wait is bounded by a call timeout.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "rpc.h"
#include "rpc_testutil.h"
#include "wire.h"

/* ---- tests ---- */

static void item_echo_round_trip(void **state)
{
    (void)state;
    fixture *f = fixture_open(0, 0);
    item *key = item_new();
    attr_value v;
    assert_int_equal(item_value_init_bytes(&v, ATTR_S, "user\0one", 8), 0);
    assert_int_equal(item_set(key, "pk", &v), 0);
    assert_int_equal(item_value_init_bytes(&v, ATTR_N, "3.14", 4), 0);
    assert_int_equal(item_set(key, "sk", &v), 0);

    arena a;
    arena_init(&a);
    Lapse__GetItemRequest g = LAPSE__GET_ITEM_REQUEST__INIT;
    g.table = "t1";
    g.key = wire_item_to_pb(&a, key);
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_GET_ITEM;
    req.get_item = &g;
    Lapse__Response *resp = NULL;
    char err[256] = "";
    assert_rv(rpc_call(f->cli, &req, 2000, &resp, err, sizeof err), 0, err);
    assert_int_equal(req.version, RPC_PROTOCOL_VERSION); /* filled in by rpc_call */
    assert_int_equal(req.timeout_ms, 2000);
    assert_int_equal(resp->status, LAPSE__STATUS__OK);
    assert_int_equal(resp->body_case, LAPSE__RESPONSE__BODY_GET_ITEM);
    item *back = NULL;
    assert_rv(wire_item_from_pb(resp->get_item->item, &back, err, sizeof err), 0, err);
    assert_true(item_eq(key, back));
    item_free(back);
    rpc_response_free(resp);

    /* A handler error arrives as the status, with the message in err and the
     * response still handed over. */
    Lapse__ListTablesRequest lt = LAPSE__LIST_TABLES_REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_LIST_TABLES;
    req.list_tables = &lt;
    assert_rv(rpc_call(f->cli, &req, 2000, &resp, err, sizeof err), LAPSE_ENOTFOUND, err);
    assert_non_null(resp);
    assert_string_equal(err, "no tables in test (42)");
    assert_string_equal(resp->message, "no tables in test (42)");
    rpc_response_free(resp);

    arena_fini(&a);
    item_free(key);
    fixture_close(f);
}

typedef struct caller {
    rpc_client *cli;
    uint32_t base;
    int calls;
    int failures;
} caller;

static void *caller_run(void *arg)
{
    caller *c = arg;
    char err[256];
    for (int i = 0; i < c->calls; i++) {
        int rv = fixture_heartbeat(c->cli, c->base + (uint32_t)i, 0, 5000, err, sizeof err);
        if (rv != 0) {
            fprintf(stderr, "heartbeat %d failed: %d %s\n", i, rv, err);
            c->failures++;
        }
    }
    return NULL;
}

static void concurrent_calls_from_many_threads(void **state)
{
    (void)state;
    fixture *f = fixture_open(16, 4);
    enum { THREADS = 8, CALLS = 150 };
    pthread_t th[THREADS];
    caller cs[THREADS];
    rpc_client *second = NULL;
    char err[256] = "";
    /* Half the threads share f->cli, the other half a second client. */
    assert_rv(rpc_client_open(&second, f->url, err, sizeof err), 0, err);
    for (int i = 0; i < THREADS; i++) {
        cs[i] = (caller){i % 2 ? second : f->cli, (uint32_t)(i + 1) * 100000u, CALLS, 0};
        assert_int_equal(pthread_create(&th[i], NULL, caller_run, &cs[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(cs[i].failures, 0);
    }
    rpc_client_close(second);
    fixture_close(f);
}

static void slow_handler_times_out_and_server_keeps_serving(void **state)
{
    (void)state;
    fixture *f = fixture_open(0, 2);
    char err[256] = "";
    clock_mono t0 = clock_mono_now();
    assert_rv(fixture_heartbeat(f->cli, 1, 800, 200, err, sizeof err), LAPSE_ETIMEDOUT, err);
    int64_t took = clock_mono_now().ms - t0.ms;
    assert_true(took >= 150 && took < 700);
    /* While the slow handler still runs, another call is served. */
    assert_rv(fixture_heartbeat(f->cli, 2, 0, 2000, err, sizeof err), 0, err);
    clock_sleep_ms(700);
    assert_rv(fixture_heartbeat(f->cli, 3, 0, 2000, err, sizeof err), 0, err);
    fixture_close(f);
}

static void server_answers_etimedout_when_the_deadline_passed_in_its_queue(void **state)
{
    (void)state;
    /* One worker: the slow request holds it, so the next one waits in the
     * queue past its 100 ms budget. */
    fixture *f = fixture_open(4, 1);
    char err[256] = "";
    assert_rv(fixture_heartbeat(f->cli, 9, 0, 2000, err, sizeof err), 0, err); /* connected */

    int before = atomic_load(&fixture_handlers_entered);
    fixture_slow_call sc = {f->cli, 500, 3000, -1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fixture_slow_call_run, &sc), 0);
    fixture_wait_entered(before + 1);

    Lapse__HeartbeatRequest hb = LAPSE__HEARTBEAT_REQUEST__INIT;
    hb.node_id = 8;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.version = RPC_PROTOCOL_VERSION;
    req.timeout_ms = 100;
    req.body_case = LAPSE__REQUEST__BODY_HEARTBEAT;
    req.heartbeat = &hb;
    uint8_t buf[64];
    size_t n = lapse__request__pack(&req, buf);
    Lapse__Response *r = fixture_raw_call(f->cli, buf, n); /* waits up to 3 s for the reply */
    assert_int_equal(r->status, LAPSE__STATUS__ETIMEDOUT);
    assert_int_equal(r->body_case, LAPSE__RESPONSE__BODY__NOT_SET);
    lapse__response__free_unpacked(r, NULL);
    assert_int_equal(atomic_load(&fixture_handlers_entered), before + 1); /* never ran */

    pthread_join(th, NULL);
    assert_int_equal(sc.rv, 0);
    fixture_close(f);
}

/* A Request whose put_item.item.attrs[0].value is a list nested levels deep,
 * built inside out. Caller frees. */
static uint8_t *deep_request(int levels, size_t *len_out)
{
    size_t cap = (size_t)levels * 8 + 64;
    uint8_t *buf = malloc(cap);
    size_t start = cap, len = 0;
    assert_non_null(buf);
    for (int i = 0; i < levels * 2 + 4; i++) {
        uint8_t tag;
        if (i < levels * 2) {
            tag = i % 2 == 0 ? (1 << 3 | 2) : (6 << 3 | 2); /* values / l */
        } else {
            const uint8_t outer[] = {2 << 3 | 2, 1 << 3 | 2, 2 << 3 | 2, 10 << 3 | 2};
            tag = outer[i - levels * 2]; /* value, attrs, item, put_item */
        }
        uint8_t hdr[12];
        size_t h = 0;
        hdr[h++] = tag;
        uint64_t l = len;
        do {
            hdr[h++] = (uint8_t)((l & 0x7f) | (l > 0x7f ? 0x80 : 0));
            l >>= 7;
        } while (l != 0);
        start -= h;
        memcpy(buf + start, hdr, h);
        len += h;
    }
    memmove(buf, buf + start, len);
    *len_out = len;
    return buf;
}

static void garbage_gets_eproto_and_server_keeps_serving(void **state)
{
    (void)state;
    fixture *f = fixture_open(0, 0);
    char err[256] = "";
    const uint8_t garbage[][8] = {
        {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, /* endless varint */
        {0x0b, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, /* group wire type */
        {0x52, 0x7f, 0x01, 0x02, 0x03, 0x00, 0x00, 0x00}, /* put_item longer than the frame */
    };
    for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
        Lapse__Response *r = fixture_raw_call(f->cli, garbage[i], sizeof garbage[i]);
        assert_int_equal(r->status, LAPSE__STATUS__EPROTO);
        assert_non_null(strstr(r->message, "malformed"));
        lapse__response__free_unpacked(r, NULL);
        assert_rv(fixture_heartbeat(f->cli, (uint32_t)i + 1, 0, 2000, err, sizeof err), 0, err);
    }

    /* An empty frame decodes as an empty Request: version 0. */
    Lapse__Response *r = fixture_raw_call(f->cli, "", 0);
    assert_int_equal(r->status, LAPSE__STATUS__EPROTO);
    assert_non_null(strstr(r->message, "version 0"));
    lapse__response__free_unpacked(r, NULL);

    /* A frame nested far deeper than any item may be: protobuf-c would
     * recurse once per level. */
    size_t len = 0;
    uint8_t *deep = deep_request(100000, &len);
    r = fixture_raw_call(f->cli, deep, len);
    assert_int_equal(r->status, LAPSE__STATUS__EPROTO);
    lapse__response__free_unpacked(r, NULL);
    free(deep);

    assert_rv(fixture_heartbeat(f->cli, 99, 0, 2000, err, sizeof err), 0, err);
    fixture_close(f);
}

static void wrong_version_and_empty_body_get_eproto(void **state)
{
    (void)state;
    fixture *f = fixture_open(0, 0);
    Lapse__ListTablesRequest lt = LAPSE__LIST_TABLES_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.version = RPC_PROTOCOL_VERSION + 1;
    req.body_case = LAPSE__REQUEST__BODY_LIST_TABLES;
    req.list_tables = &lt;
    uint8_t buf[64];
    size_t n = lapse__request__pack(&req, buf);
    Lapse__Response *r = fixture_raw_call(f->cli, buf, n);
    assert_int_equal(r->status, LAPSE__STATUS__EPROTO);
    assert_non_null(strstr(r->message, "protocol version 2 not supported"));
    lapse__response__free_unpacked(r, NULL);

    req.version = RPC_PROTOCOL_VERSION;
    req.body_case = LAPSE__REQUEST__BODY__NOT_SET;
    n = lapse__request__pack(&req, buf);
    r = fixture_raw_call(f->cli, buf, n);
    assert_int_equal(r->status, LAPSE__STATUS__EPROTO);
    lapse__response__free_unpacked(r, NULL);

    /* The same request with a body and version 1 reaches the handler. */
    req.body_case = LAPSE__REQUEST__BODY_LIST_TABLES;
    n = lapse__request__pack(&req, buf);
    r = fixture_raw_call(f->cli, buf, n);
    assert_int_equal(r->status, LAPSE__STATUS__ENOTFOUND);
    lapse__response__free_unpacked(r, NULL);
    fixture_close(f);
}

static void call_to_dead_port_fails_within_timeout(void **state)
{
    (void)state;
    char url[64];
    char err[256] = "";
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", freeport_loopback());
    rpc_client *c = NULL;
    assert_rv(rpc_client_open(&c, url, err, sizeof err), 0, err); /* never blocks */
    clock_mono t0 = clock_mono_now();
    int rv = fixture_heartbeat(c, 1, 0, 300, err, sizeof err);
    int64_t took = clock_mono_now().ms - t0.ms;
    if (rv != LAPSE_ETIMEDOUT && rv != LAPSE_EUNAVAILABLE) {
        fail_msg("got %d (%s): %s", rv, lapse_strerror(rv), err);
    }
    assert_true(took < 1000);
    assert_non_null(strstr(err, url));
    assert_int_equal(rpc_client_connected(c, 50), 0); /* nothing listens */

    /* The client redials in the background: a server started later is
     * reached by the same client. */
    rpc_server *s = NULL;
    assert_rv(rpc_server_open(&s, url, NULL, fixture_handler, NULL, err, sizeof err), 0, err);
    assert_int_equal(rpc_client_connected(c, 5000), 1);
    assert_rv(fixture_heartbeat(c, 2, 0, 3000, err, sizeof err), 0, err);
    rpc_client_close(c);
    rpc_server_close(s);
}

/* A probe tells a port nobody listens on (refused) from one a server
 * listens on, and from one whose process accepts nothing (a listening
 * socket never accepted from, as a stopped process's is: the kernel still
 * completes the handshake); other URLs prove nothing. */
static void probe_tells_a_closed_port(void **state)
{
    (void)state;
    char url[64], err[256] = "";
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", freeport_loopback());
    assert_int_equal(rpc_probe(url, 500), RPC_PROBE_REFUSED);
    rpc_server *s = NULL;
    assert_rv(rpc_server_open(&s, url, NULL, fixture_handler, NULL, err, sizeof err), 0, err);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(rpc_probe(url, 500), RPC_PROBE_LISTENING);
    }
    /* A probe connects and hangs up before NNG's handshake: the server must
     * go on accepting callers (and has, once a call went through, finished
     * with every probe's connection, so closing it frees everything). */
    rpc_client *c = NULL;
    assert_rv(rpc_client_open(&c, url, err, sizeof err), 0, err);
    assert_rv(fixture_heartbeat(c, 1, 0, 5000, err, sizeof err), 0, err);
    rpc_client_close(c);
    rpc_server_close(s);
    assert_int_equal(rpc_probe(url, 500), RPC_PROBE_REFUSED);

    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", ntohs(a.sin_port));
    assert_int_equal(rpc_probe(url, 500), RPC_PROBE_LISTENING);
    close(fd);

    assert_int_equal(rpc_probe("ipc:///tmp/lapse-no-such-socket", 100), RPC_PROBE_UNKNOWN);
    assert_int_equal(rpc_probe("not a url", 100), RPC_PROBE_UNKNOWN);
}

static void listen_errors_are_reported(void **state)
{
    (void)state;
    fixture *f = fixture_open(0, 0);
    rpc_server *s = NULL;
    char err[256] = "";
    assert_int_equal(rpc_server_open(&s, f->url, NULL, fixture_handler, NULL, err, sizeof err),
                     LAPSE_EUNAVAILABLE);
    assert_null(s);
    assert_non_null(strstr(err, "address in use"));
    assert_non_null(strstr(err, f->url));

    assert_int_equal(
        rpc_server_open(&s, "nope://127.0.0.1:1", NULL, fixture_handler, NULL, err, sizeof err),
        LAPSE_EINVAL);
    assert_int_equal(rpc_server_open(&s, "tcp://", NULL, fixture_handler, NULL, err, sizeof err),
                     LAPSE_EINVAL);
    rpc_client *c = NULL;
    assert_int_equal(rpc_client_open(&c, "nope://x", err, sizeof err), LAPSE_EINVAL);
    assert_null(c);
    rpc_server_close(NULL);
    rpc_client_close(NULL);
    fixture_close(f);
}

static void oversized_request_is_refused_before_sending(void **state)
{
    (void)state;
    fixture *f = fixture_open(0, 0);
    size_t big = RPC_MAX_MESSAGE_BYTES + 1;
    uint8_t *blob = calloc(1, big);
    assert_non_null(blob);
    Lapse__AttributeValue v = LAPSE__ATTRIBUTE_VALUE__INIT;
    v.value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_B;
    v.b.data = blob;
    v.b.len = big;
    Lapse__Attribute at = LAPSE__ATTRIBUTE__INIT;
    at.name = "blob";
    at.value = &v;
    Lapse__Attribute *ats[] = {&at};
    Lapse__Item it = LAPSE__ITEM__INIT;
    it.attrs = ats;
    it.n_attrs = 1;
    Lapse__PutItemRequest p = LAPSE__PUT_ITEM_REQUEST__INIT;
    p.table = "t1";
    p.item = &it;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_PUT_ITEM;
    req.put_item = &p;
    Lapse__Response *resp = NULL;
    char err[256] = "";
    assert_rv(rpc_call(f->cli, &req, 2000, &resp, err, sizeof err), LAPSE_ETOOBIG, err);
    assert_null(resp);
    free(blob);
    char err2[256] = "";
    assert_rv(fixture_heartbeat(f->cli, 5, 0, 2000, err2, sizeof err2), 0, err2);
    fixture_close(f);
}

static void close_waits_for_running_handlers(void **state)
{
    (void)state;
    fixture *f = fixture_open(0, 0);
    char err[256] = "";
    assert_rv(fixture_heartbeat(f->cli, 1, 0, 2000, err, sizeof err), 0, err);
    int entered = atomic_load(&fixture_handlers_entered);
    int done = atomic_load(&fixture_handlers_done);
    fixture_slow_call sc = {f->cli, 300, 1000, -1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fixture_slow_call_run, &sc), 0);
    fixture_wait_entered(entered + 1);
    rpc_server_close(f->srv);
    f->srv = NULL;
    /* The handler finished before close returned. */
    assert_int_equal(atomic_load(&fixture_handlers_done), done + 1);
    pthread_join(th, NULL);
    if (sc.rv != LAPSE_ETIMEDOUT && sc.rv != LAPSE_EUNAVAILABLE) {
        fail_msg("call to a closing server returned %d", sc.rv);
    }
    fixture_close(f);
}

/* rpc_call_many sends every call before awaiting any: each handler below
 * waits until all three requests have arrived, which calls made one after
 * another could never satisfy. A call to a dead peer in the same group
 * fails on its own without holding up the others. */
static void call_many_runs_calls_concurrently(void **state)
{
    (void)state;
    fixture *f[3];
    for (int i = 0; i < 3; i++) {
        f[i] = fixture_open(0, 2);
    }
    rpc_client *dead = NULL;
    char url[64], err[256] = "";
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", freeport_loopback());
    assert_rv(rpc_client_open(&dead, url, err, sizeof err), 0, err);

    Lapse__DescribeTableRequest d = LAPSE__DESCRIBE_TABLE_REQUEST__INIT;
    d.table = "3";
    Lapse__Request reqs[4];
    rpc_multi_call calls[4];
    for (int i = 0; i < 4; i++) {
        lapse__request__init(&reqs[i]);
        reqs[i].body_case = LAPSE__REQUEST__BODY_DESCRIBE_TABLE;
        reqs[i].describe_table = &d;
        calls[i].client = i < 3 ? f[i]->cli : dead;
        calls[i].req = &reqs[i];
    }
    atomic_store(&fixture_barrier_entered, 0);
    rpc_call_many(calls, 4, 2000);
    for (int i = 0; i < 3; i++) {
        assert_rv(calls[i].rv, 0, calls[i].err);
        assert_int_equal(calls[i].resp->body_case, LAPSE__RESPONSE__BODY_DESCRIBE_TABLE);
        rpc_response_free(calls[i].resp);
    }
    assert_true(calls[3].rv == LAPSE_ETIMEDOUT || calls[3].rv == LAPSE_EUNAVAILABLE);
    assert_null(calls[3].resp);
    assert_non_null(strstr(calls[3].err, url));

    /* The same group, one call at a time, cannot meet the barrier. */
    atomic_store(&fixture_barrier_entered, 0);
    Lapse__Response *resp = NULL;
    assert_rv(rpc_call(f[0]->cli, &reqs[0], 5000, &resp, err, sizeof err), LAPSE_EUNAVAILABLE, err);
    rpc_response_free(resp);

    rpc_client_close(dead);
    for (int i = 0; i < 3; i++) {
        fixture_close(f[i]);
    }
}

/* A dead peer first in the group: its send waits out the whole deadline,
 * and the live peers after it, whose replies came in meanwhile, still
 * succeed; only the dead call fails (lapse ttl-preview blamed a healthy
 * node for a dead one's timeout). */
static void call_many_dead_peer_first_does_not_fail_the_others(void **state)
{
    (void)state;
    fixture *f[2];
    for (int i = 0; i < 2; i++) {
        f[i] = fixture_open(0, 2);
    }
    rpc_client *dead = NULL;
    char url[64], err[256] = "";
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", freeport_loopback());
    assert_rv(rpc_client_open(&dead, url, err, sizeof err), 0, err);

    Lapse__HeartbeatRequest hb = LAPSE__HEARTBEAT_REQUEST__INIT; /* answered at once */
    hb.node_id = 7;
    Lapse__Request reqs[3];
    rpc_multi_call calls[3];
    for (int i = 0; i < 3; i++) {
        lapse__request__init(&reqs[i]);
        reqs[i].body_case = LAPSE__REQUEST__BODY_HEARTBEAT;
        reqs[i].heartbeat = &hb;
        calls[i].client = i == 0 ? dead : f[i - 1]->cli;
        calls[i].req = &reqs[i];
    }
    rpc_call_many(calls, 3, 500);
    assert_true(calls[0].rv == LAPSE_ETIMEDOUT || calls[0].rv == LAPSE_EUNAVAILABLE);
    assert_non_null(strstr(calls[0].err, url));
    for (int i = 1; i < 3; i++) {
        assert_rv(calls[i].rv, 0, calls[i].err);
        assert_int_equal(calls[i].resp->body_case, LAPSE__RESPONSE__BODY_HEARTBEAT);
        rpc_response_free(calls[i].resp);
    }
    rpc_client_close(dead);
    for (int i = 0; i < 2; i++) {
        fixture_close(f[i]);
    }
}

/* A call in flight on the only general worker waits for an urgent call
 * (ReplicateLog here) to enter the barrier: the urgent lane serves it on
 * a worker of its own. With one lane it would queue behind the first and
 * the barrier would fail after its 3 s. */
typedef struct lane_call {
    fixture *f;
    int rv;
    char err[256];
} lane_call;

static void *lane_main(void *arg)
{
    lane_call *lc = arg;
    Lapse__DescribeTableRequest d = LAPSE__DESCRIBE_TABLE_REQUEST__INIT;
    d.table = "2";
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_DESCRIBE_TABLE;
    req.describe_table = &d;
    Lapse__Response *resp = NULL;
    lc->rv = rpc_call(lc->f->cli, &req, 5000, &resp, lc->err, sizeof lc->err);
    if (lc->rv == 0 && resp->status != 0) {
        lc->rv = resp->status;
        snprintf(lc->err, sizeof lc->err, "%s", resp->message);
    }
    rpc_response_free(resp);
    return NULL;
}

static void urgent_lane_is_served_while_workers_wait(void **state)
{
    (void)state;
    static const uint32_t urgent[] = {LAPSE__REQUEST__BODY_REPLICATE_LOG};
    fixture *f = fixture_open_lanes(0, 1, urgent, 1, 1, NULL);
    atomic_store(&fixture_barrier_entered, 0);
    lane_call lc = {.f = f};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, lane_main, &lc), 0);
    clock_mono deadline = clock_mono_after_ms(5000);
    while (atomic_load(&fixture_barrier_entered) < 1 && clock_mono_remaining_ms(deadline) > 0) {
        clock_sleep_ms(2); /* the general worker is in the barrier */
    }
    assert_int_equal(atomic_load(&fixture_barrier_entered), 1);
    Lapse__ReplicateLogRequest r = LAPSE__REPLICATE_LOG_REQUEST__INIT;
    r.table_id = 7;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_REPLICATE_LOG;
    req.replicate_log = &r;
    Lapse__Response *resp = NULL;
    char err[256] = "";
    assert_rv(rpc_call(f->cli, &req, 5000, &resp, err, sizeof err), 0, err);
    assert_int_equal(resp->body_case, LAPSE__RESPONSE__BODY_REPLICATE_LOG);
    rpc_response_free(resp);
    pthread_join(th, NULL);
    assert_rv(lc.rv, 0, lc.err); /* the barrier met: both were served at once */
    fixture_close(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(item_echo_round_trip),
        cmocka_unit_test(concurrent_calls_from_many_threads),
        cmocka_unit_test(slow_handler_times_out_and_server_keeps_serving),
        cmocka_unit_test(server_answers_etimedout_when_the_deadline_passed_in_its_queue),
        cmocka_unit_test(garbage_gets_eproto_and_server_keeps_serving),
        cmocka_unit_test(wrong_version_and_empty_body_get_eproto),
        cmocka_unit_test(call_to_dead_port_fails_within_timeout),
        cmocka_unit_test(probe_tells_a_closed_port),
        cmocka_unit_test(listen_errors_are_reported),
        cmocka_unit_test(oversized_request_is_refused_before_sending),
        cmocka_unit_test(close_waits_for_running_handlers),
        cmocka_unit_test(call_many_runs_calls_concurrently),
        cmocka_unit_test(urgent_lane_is_served_while_workers_wait),
        cmocka_unit_test(call_many_dead_peer_first_does_not_fail_the_others),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
