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
#include "wire.h"

#define assert_rv(call, code, err)                                                                 \
    do {                                                                                           \
        int rv_ = (call);                                                                          \
        if (rv_ != (code)) {                                                                       \
            fail_msg("%s returned %d (%s), expected %d (%s): %s", #call, rv_, lapse_strerror(rv_), \
                     (code), lapse_strerror(code), (err));                                         \
        }                                                                                          \
    } while (0)

/* A loopback port nobody listens on right now. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = 0;
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t sl = sizeof sa;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

/* ---- the test server's handler ----
 *
 *   GetItem(key)           echoes key back as the item; with table
 *                          "slow:MS", after sleeping MS ms
 *   PutItem                sleeps 2 ms, answers OK echoing pmap_version
 *   Heartbeat(node_id, clock_ms)
 *                          sleeps clock_ms, answers pmap_version = node_id
 *   ListTables             answers ENOTFOUND with a formatted message
 *   anything else          answers EINVAL
 */
static atomic_int handlers_entered;
static atomic_int handlers_done;
static atomic_int barrier_entered;

/* Waits until handlers_entered reaches n, for at most 5 s. */
static void wait_entered(int n)
{
    clock_mono deadline = clock_mono_after_ms(5000);
    while (atomic_load(&handlers_entered) < n) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("handler %d never started", n);
        }
        clock_sleep_ms(2);
    }
}

static void handler(void *arg, const Lapse__Request *req, Lapse__Response *resp, arena *a,
                    int64_t deadline_mono_ms)
{
    (void)arg;
    (void)deadline_mono_ms;
    switch (req->body_case) {
    case LAPSE__REQUEST__BODY_GET_ITEM: {
        if (strncmp(req->get_item->table, "slow:", 5) == 0) {
            atomic_fetch_add(&handlers_entered, 1);
            clock_sleep_ms(atoi(req->get_item->table + 5));
        }
        Lapse__GetItemResponse *g = arena_alloc(a, sizeof *g);
        lapse__get_item_response__init(g);
        item *key = NULL;
        char err[256];
        int rv = wire_item_from_pb(req->get_item->key, &key, err, sizeof err);
        if (rv != 0) {
            rpc_set_error(resp, a, rv, "bad key: %s", err);
            return;
        }
        g->item = wire_item_to_pb(a, key);
        item_free(key);
        resp->body_case = LAPSE__RESPONSE__BODY_GET_ITEM;
        resp->get_item = g;
        return;
    }
    case LAPSE__REQUEST__BODY_HEARTBEAT: {
        atomic_fetch_add(&handlers_entered, 1);
        clock_sleep_ms(req->heartbeat->clock_ms);
        atomic_fetch_add(&handlers_done, 1);
        Lapse__HeartbeatResponse *h = arena_alloc(a, sizeof *h);
        lapse__heartbeat_response__init(h);
        h->pmap_version = req->heartbeat->node_id;
        resp->pmap_version = req->heartbeat->node_id;
        resp->body_case = LAPSE__RESPONSE__BODY_HEARTBEAT;
        resp->heartbeat = h;
        return;
    }
    case LAPSE__REQUEST__BODY_PUT_ITEM: {
        /* Alone (not in a group, see serve_puts): 2 ms, then OK with the
         * request's pmap_version echoed. */
        clock_sleep_ms(2);
        Lapse__PutItemResponse *p = arena_alloc(a, sizeof *p);
        lapse__put_item_response__init(p);
        resp->body_case = LAPSE__RESPONSE__BODY_PUT_ITEM;
        resp->put_item = p;
        resp->pmap_version = req->pmap_version;
        return;
    }
    case LAPSE__REQUEST__BODY_LIST_TABLES:
        rpc_set_error(resp, a, LAPSE_ENOTFOUND, "no tables in %s (%d)", "test", 42);
        return;
    case LAPSE__REQUEST__BODY_DESCRIBE_TABLE: {
        /* A barrier: answers OK only once atoi(table) handlers have entered
         * it (on any server of this process), else EUNAVAILABLE after 3 s. */
        int want = atoi(req->describe_table->table);
        atomic_fetch_add(&barrier_entered, 1);
        clock_mono deadline = clock_mono_after_ms(3000);
        while (atomic_load(&barrier_entered) < want) {
            if (clock_mono_remaining_ms(deadline) == 0) {
                rpc_set_error(resp, a, LAPSE_EUNAVAILABLE, "barrier of %d not reached", want);
                return;
            }
            clock_sleep_ms(1);
        }
        Lapse__DescribeTableResponse *d = arena_alloc(a, sizeof *d);
        lapse__describe_table_response__init(d);
        resp->body_case = LAPSE__RESPONSE__BODY_DESCRIBE_TABLE;
        resp->describe_table = d;
        return;
    }
    case LAPSE__REQUEST__BODY_REPLICATE_LOG: {
        /* Enters the barrier and answers at once (the urgent lane's call). */
        atomic_fetch_add(&barrier_entered, 1);
        Lapse__ReplicateLogResponse *r = arena_alloc(a, sizeof *r);
        lapse__replicate_log_response__init(r);
        resp->body_case = LAPSE__RESPONSE__BODY_REPLICATE_LOG;
        resp->replicate_log = r;
        return;
    }
    default:
        rpc_set_error(resp, a, LAPSE_EINVAL, "unexpected call %d", (int)req->body_case);
        return;
    }
}

typedef struct fixture {
    char url[64];
    rpc_server *srv;
    rpc_client *cli;
} fixture;

static fixture *fixture_open_lanes(int contexts, int workers, const uint32_t *urgent,
                                   size_t nurgent, int urgent_workers, rpc_quick_fn quick);

static fixture *fixture_open(int contexts, int workers)
{
    return fixture_open_lanes(contexts, workers, NULL, 0, 0, NULL);
}

static fixture *fixture_open_lanes(int contexts, int workers, const uint32_t *urgent,
                                   size_t nurgent, int urgent_workers, rpc_quick_fn quick)
{
    fixture *f = calloc(1, sizeof *f);
    char err[256] = "";
    snprintf(f->url, sizeof f->url, "tcp://127.0.0.1:%d", free_port());
    rpc_server_options o = {.contexts = contexts,
                            .workers = workers,
                            .urgent_calls = urgent,
                            .nurgent = nurgent,
                            .urgent_workers = urgent_workers,
                            .quick = quick};
    assert_rv(rpc_server_open(&f->srv, f->url, &o, handler, NULL, err, sizeof err), 0, err);
    assert_rv(rpc_client_open(&f->cli, f->url, err, sizeof err), 0, err);
    assert_string_equal(rpc_client_url(f->cli), f->url);
    return f;
}

static void fixture_close(fixture *f)
{
    rpc_client_close(f->cli);
    rpc_server_close(f->srv);
    free(f);
}

/* One heartbeat call: returns the status; on OK checks the echo. */
static int heartbeat(rpc_client *c, uint32_t id, int64_t sleep_ms, int timeout_ms, char *err,
                     size_t errlen)
{
    Lapse__HeartbeatRequest hb = LAPSE__HEARTBEAT_REQUEST__INIT;
    hb.node_id = id;
    hb.clock_ms = sleep_ms;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_HEARTBEAT;
    req.heartbeat = &hb;
    Lapse__Response *resp = NULL;
    int rv = rpc_call(c, &req, timeout_ms, &resp, err, errlen);
    if (rv == 0) {
        assert_non_null(resp);
        assert_int_equal(resp->body_case, LAPSE__RESPONSE__BODY_HEARTBEAT);
        assert_int_equal(resp->heartbeat->pmap_version, id);
        assert_int_equal(resp->pmap_version, id);
    } else if (rv == LAPSE_ETIMEDOUT || rv == LAPSE_EUNAVAILABLE) {
        assert_null(resp);
    }
    rpc_response_free(resp);
    return rv;
}

/* Sends raw bytes and decodes the reply, which must be a Response. */
static Lapse__Response *raw_call(rpc_client *c, const void *data, size_t len)
{
    void *reply = NULL;
    size_t reply_len = 0;
    char err[256] = "";
    assert_rv(rpc_call_raw(c, data, len, 3000, &reply, &reply_len, err, sizeof err), 0, err);
    Lapse__Response *r = lapse__response__unpack(NULL, reply_len, reply);
    free(reply);
    assert_non_null(r);
    return r;
}

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
        int rv = heartbeat(c->cli, c->base + (uint32_t)i, 0, 5000, err, sizeof err);
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
    assert_rv(heartbeat(f->cli, 1, 800, 200, err, sizeof err), LAPSE_ETIMEDOUT, err);
    int64_t took = clock_mono_now().ms - t0.ms;
    assert_true(took >= 150 && took < 700);
    /* While the slow handler still runs, another call is served. */
    assert_rv(heartbeat(f->cli, 2, 0, 2000, err, sizeof err), 0, err);
    clock_sleep_ms(700);
    assert_rv(heartbeat(f->cli, 3, 0, 2000, err, sizeof err), 0, err);
    fixture_close(f);
}

typedef struct slow_call {
    rpc_client *c;
    int64_t sleep_ms;
    int timeout_ms;
    int rv;
} slow_call;

static void *slow_call_run(void *arg)
{
    slow_call *sc = arg;
    char err[256];
    sc->rv = heartbeat(sc->c, 77, sc->sleep_ms, sc->timeout_ms, err, sizeof err);
    return NULL;
}

static void server_answers_etimedout_when_the_deadline_passed_in_its_queue(void **state)
{
    (void)state;
    /* One worker: the slow request holds it, so the next one waits in the
     * queue past its 100 ms budget. */
    fixture *f = fixture_open(4, 1);
    char err[256] = "";
    assert_rv(heartbeat(f->cli, 9, 0, 2000, err, sizeof err), 0, err); /* connected */

    int before = atomic_load(&handlers_entered);
    slow_call sc = {f->cli, 500, 3000, -1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, slow_call_run, &sc), 0);
    wait_entered(before + 1);

    Lapse__HeartbeatRequest hb = LAPSE__HEARTBEAT_REQUEST__INIT;
    hb.node_id = 8;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.version = RPC_PROTOCOL_VERSION;
    req.timeout_ms = 100;
    req.body_case = LAPSE__REQUEST__BODY_HEARTBEAT;
    req.heartbeat = &hb;
    uint8_t buf[64];
    size_t n = lapse__request__pack(&req, buf);
    Lapse__Response *r = raw_call(f->cli, buf, n); /* waits up to 3 s for the reply */
    assert_int_equal(r->status, LAPSE__STATUS__ETIMEDOUT);
    assert_int_equal(r->body_case, LAPSE__RESPONSE__BODY__NOT_SET);
    lapse__response__free_unpacked(r, NULL);
    assert_int_equal(atomic_load(&handlers_entered), before + 1); /* never ran */

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
        Lapse__Response *r = raw_call(f->cli, garbage[i], sizeof garbage[i]);
        assert_int_equal(r->status, LAPSE__STATUS__EPROTO);
        assert_non_null(strstr(r->message, "malformed"));
        lapse__response__free_unpacked(r, NULL);
        assert_rv(heartbeat(f->cli, (uint32_t)i + 1, 0, 2000, err, sizeof err), 0, err);
    }

    /* An empty frame decodes as an empty Request: version 0. */
    Lapse__Response *r = raw_call(f->cli, "", 0);
    assert_int_equal(r->status, LAPSE__STATUS__EPROTO);
    assert_non_null(strstr(r->message, "version 0"));
    lapse__response__free_unpacked(r, NULL);

    /* A frame nested far deeper than any item may be: protobuf-c would
     * recurse once per level. */
    size_t len = 0;
    uint8_t *deep = deep_request(100000, &len);
    r = raw_call(f->cli, deep, len);
    assert_int_equal(r->status, LAPSE__STATUS__EPROTO);
    lapse__response__free_unpacked(r, NULL);
    free(deep);

    assert_rv(heartbeat(f->cli, 99, 0, 2000, err, sizeof err), 0, err);
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
    Lapse__Response *r = raw_call(f->cli, buf, n);
    assert_int_equal(r->status, LAPSE__STATUS__EPROTO);
    assert_non_null(strstr(r->message, "protocol version 2 not supported"));
    lapse__response__free_unpacked(r, NULL);

    req.version = RPC_PROTOCOL_VERSION;
    req.body_case = LAPSE__REQUEST__BODY__NOT_SET;
    n = lapse__request__pack(&req, buf);
    r = raw_call(f->cli, buf, n);
    assert_int_equal(r->status, LAPSE__STATUS__EPROTO);
    lapse__response__free_unpacked(r, NULL);

    /* The same request with a body and version 1 reaches the handler. */
    req.body_case = LAPSE__REQUEST__BODY_LIST_TABLES;
    n = lapse__request__pack(&req, buf);
    r = raw_call(f->cli, buf, n);
    assert_int_equal(r->status, LAPSE__STATUS__ENOTFOUND);
    lapse__response__free_unpacked(r, NULL);
    fixture_close(f);
}

static void call_to_dead_port_fails_within_timeout(void **state)
{
    (void)state;
    char url[64];
    char err[256] = "";
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", free_port());
    rpc_client *c = NULL;
    assert_rv(rpc_client_open(&c, url, err, sizeof err), 0, err); /* never blocks */
    clock_mono t0 = clock_mono_now();
    int rv = heartbeat(c, 1, 0, 300, err, sizeof err);
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
    assert_rv(rpc_server_open(&s, url, NULL, handler, NULL, err, sizeof err), 0, err);
    assert_int_equal(rpc_client_connected(c, 5000), 1);
    assert_rv(heartbeat(c, 2, 0, 3000, err, sizeof err), 0, err);
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
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", free_port());
    assert_int_equal(rpc_probe(url, 500), RPC_PROBE_REFUSED);
    rpc_server *s = NULL;
    assert_rv(rpc_server_open(&s, url, NULL, handler, NULL, err, sizeof err), 0, err);
    assert_int_equal(rpc_probe(url, 500), RPC_PROBE_LISTENING);
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
    assert_int_equal(rpc_server_open(&s, f->url, NULL, handler, NULL, err, sizeof err),
                     LAPSE_EUNAVAILABLE);
    assert_null(s);
    assert_non_null(strstr(err, "address in use"));
    assert_non_null(strstr(err, f->url));

    assert_int_equal(
        rpc_server_open(&s, "nope://127.0.0.1:1", NULL, handler, NULL, err, sizeof err),
        LAPSE_EINVAL);
    assert_int_equal(rpc_server_open(&s, "tcp://", NULL, handler, NULL, err, sizeof err),
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
    assert_rv(heartbeat(f->cli, 5, 0, 2000, err2, sizeof err2), 0, err2);
    fixture_close(f);
}

static void close_waits_for_running_handlers(void **state)
{
    (void)state;
    fixture *f = fixture_open(0, 0);
    char err[256] = "";
    assert_rv(heartbeat(f->cli, 1, 0, 2000, err, sizeof err), 0, err);
    int entered = atomic_load(&handlers_entered);
    int done = atomic_load(&handlers_done);
    slow_call sc = {f->cli, 300, 1000, -1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, slow_call_run, &sc), 0);
    wait_entered(entered + 1);
    rpc_server_close(f->srv);
    f->srv = NULL;
    /* The handler finished before close returned. */
    assert_int_equal(atomic_load(&handlers_done), done + 1);
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
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", free_port());
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
    atomic_store(&barrier_entered, 0);
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
    atomic_store(&barrier_entered, 0);
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
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", free_port());
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
    atomic_store(&barrier_entered, 0);
    lane_call lc = {.f = f};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, lane_main, &lc), 0);
    clock_mono deadline = clock_mono_after_ms(5000);
    while (atomic_load(&barrier_entered) < 1 && clock_mono_remaining_ms(deadline) > 0) {
        clock_sleep_ms(2); /* the general worker is in the barrier */
    }
    assert_int_equal(atomic_load(&barrier_entered), 1);
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

/* ---- coalesced calls (wire-protocol.md, "Coalesced calls") ---- */

/* A GetItem of key (an S attribute "k") on table; returns the status and,
 * on OK, checks that the reply echoes this call's own key. */
static int get_echo(rpc_client *c, const char *table, const char *key, int timeout_ms, char *err,
                    size_t errlen)
{
    arena a;
    arena_init(&a);
    item *it = item_new();
    attr_value v;
    assert_int_equal(item_value_init_bytes(&v, ATTR_S, key, strlen(key)), 0);
    assert_int_equal(item_set(it, "k", &v), 0);
    Lapse__GetItemRequest g = LAPSE__GET_ITEM_REQUEST__INIT;
    g.table = (char *)table;
    g.key = wire_item_to_pb(&a, it);
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_GET_ITEM;
    req.get_item = &g;
    Lapse__Response *resp = NULL;
    int rv = rpc_call(c, &req, timeout_ms, &resp, err, errlen);
    if (rv == 0) {
        item *back = NULL;
        assert_int_equal(resp->body_case, LAPSE__RESPONSE__BODY_GET_ITEM);
        assert_rv(wire_item_from_pb(resp->get_item->item, &back, err, errlen), 0, err);
        if (!item_eq(it, back)) {
            fail_msg("call for key %s got another call's reply", key);
        }
        item_free(back);
    }
    rpc_response_free(resp);
    item_free(it);
    arena_fini(&a);
    return rv;
}

typedef struct getter {
    rpc_client *cli;
    int id, calls, failures;
    const char *table;
} getter;

static void *getter_run(void *arg)
{
    getter *g = arg;
    char err[256], key[32];
    for (int i = 0; i < g->calls; i++) {
        snprintf(key, sizeof key, "t%d-c%d", g->id, i);
        if (get_echo(g->cli, g->table, key, 5000, err, sizeof err) != 0) {
            g->failures++;
        }
    }
    return NULL;
}

static void coalesced_calls_share_frames_and_keep_their_replies(void **state)
{
    (void)state;
    /* Each call takes 2 ms on the server: while one frame is out, the
     * other threads' calls queue in the client and go together. */
    fixture *f = fixture_open(16, 4);
    enum { THREADS = 12, CALLS = 30 };
    pthread_t th[THREADS];
    getter gs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        gs[i] = (getter){.cli = f->cli, .id = i, .calls = CALLS, .table = "slow:2"};
        assert_int_equal(pthread_create(&th[i], NULL, getter_run, &gs[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(gs[i].failures, 0);
    }
    rpc_server_count n;
    rpc_server_counts(f->srv, &n);
    assert_int_equal(n.calls, THREADS * CALLS);
    /* Far fewer frames than calls (uncoalesced, one frame per call). */
    if (n.frames * 2 > n.calls || n.coalesced == 0) {
        fail_msg("%llu calls came in %llu frames (%llu coalesced)", (unsigned long long)n.calls,
                 (unsigned long long)n.frames, (unsigned long long)n.coalesced);
    }
    assert_int_equal(n.quick, 0);
    fixture_close(f);
}

typedef struct slow_get {
    rpc_client *c;
    int rv;
} slow_get;

static void *slow_get_run(void *arg)
{
    slow_get *sg = arg;
    char err[256];
    sg->rv = get_echo(sg->c, "slow:600", "first", 3000, err, sizeof err);
    return NULL;
}

static void queued_call_does_not_wait_behind_a_slow_frame(void **state)
{
    (void)state;
    fixture *f = fixture_open(0, 2);
    char err[256] = "";
    assert_rv(get_echo(f->cli, "t", "warm", 2000, err, sizeof err), 0, err); /* connected */
    int before = atomic_load(&handlers_entered);
    slow_get sg = {f->cli, -1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, slow_get_run, &sg), 0);
    wait_entered(before + 1);
    /* The client's frame is out for 600 ms: this call queues behind it,
     * then goes in a frame of its own and is served by the other worker
     * well within its 300 ms. */
    clock_mono t0 = clock_mono_now();
    assert_rv(get_echo(f->cli, "t", "second", 300, err, sizeof err), 0, err);
    int64_t took = clock_mono_now().ms - t0.ms;
    if (took >= 300) {
        fail_msg("the call behind a slow frame took %lld ms", (long long)took);
    }
    pthread_join(th, NULL);
    assert_int_equal(sg.rv, 0);
    fixture_close(f);
}

/* Packs a GetItem of key k into a Request's bytes (caller frees). */
static uint8_t *packed_get(const char *key, size_t *len)
{
    arena a;
    arena_init(&a);
    item *it = item_new();
    attr_value v;
    assert_int_equal(item_value_init_bytes(&v, ATTR_S, key, strlen(key)), 0);
    assert_int_equal(item_set(it, "k", &v), 0);
    Lapse__GetItemRequest g = LAPSE__GET_ITEM_REQUEST__INIT;
    g.table = "t";
    g.key = wire_item_to_pb(&a, it);
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.version = RPC_PROTOCOL_VERSION;
    req.timeout_ms = 2000;
    req.body_case = LAPSE__REQUEST__BODY_GET_ITEM;
    req.get_item = &g;
    *len = lapse__request__get_packed_size(&req);
    uint8_t *buf = malloc(*len);
    lapse__request__pack(&req, buf);
    item_free(it);
    arena_fini(&a);
    return buf;
}

/* Sends a coalesced frame of the n calls and returns its reply. */
static Lapse__Response *multi_call(rpc_client *c, ProtobufCBinaryData *calls, size_t n)
{
    Lapse__MultiRequest m = LAPSE__MULTI_REQUEST__INIT;
    m.n_calls = n;
    m.calls = calls;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.version = RPC_PROTOCOL_VERSION;
    req.timeout_ms = 2000;
    req.body_case = LAPSE__REQUEST__BODY_MULTI;
    req.multi = &m;
    size_t len = lapse__request__get_packed_size(&req);
    uint8_t *buf = malloc(len);
    lapse__request__pack(&req, buf);
    Lapse__Response *r = raw_call(c, buf, len);
    free(buf);
    return r;
}

static void malformed_coalesced_frames_get_eproto_per_call(void **state)
{
    (void)state;
    fixture *f = fixture_open(0, 2);
    size_t glen;
    uint8_t *get = packed_get("ok", &glen);
    uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff};

    /* A frame of no calls, and one of too many, fail as a whole. */
    Lapse__Response *r = multi_call(f->cli, NULL, 0);
    assert_int_equal(r->status, LAPSE__STATUS__EPROTO);
    lapse__response__free_unpacked(r, NULL);
    ProtobufCBinaryData many[RPC_MAX_COALESCED + 1];
    for (size_t i = 0; i < RPC_MAX_COALESCED + 1; i++) {
        many[i] = (ProtobufCBinaryData){glen, get};
    }
    r = multi_call(f->cli, many, RPC_MAX_COALESCED + 1);
    assert_int_equal(r->status, LAPSE__STATUS__EPROTO);
    lapse__response__free_unpacked(r, NULL);

    /* Garbage and a frame within a frame fail alone; the good call is
     * served. */
    Lapse__MultiRequest inner = LAPSE__MULTI_REQUEST__INIT;
    inner.n_calls = 1;
    inner.calls = &(ProtobufCBinaryData){glen, get};
    Lapse__Request nested = LAPSE__REQUEST__INIT;
    nested.version = RPC_PROTOCOL_VERSION;
    nested.body_case = LAPSE__REQUEST__BODY_MULTI;
    nested.multi = &inner;
    uint8_t nbuf[256];
    size_t nlen = lapse__request__pack(&nested, nbuf);
    ProtobufCBinaryData calls[] = {{sizeof garbage, garbage}, {glen, get}, {nlen, nbuf}};
    r = multi_call(f->cli, calls, 3);
    assert_int_equal(r->status, LAPSE__STATUS__OK);
    assert_int_equal(r->body_case, LAPSE__RESPONSE__BODY_MULTI);
    assert_int_equal(r->multi->n_replies, 3);
    const int want[] = {LAPSE__STATUS__EPROTO, LAPSE__STATUS__OK, LAPSE__STATUS__EPROTO};
    for (int i = 0; i < 3; i++) {
        Lapse__Response *one =
            lapse__response__unpack(NULL, r->multi->replies[i].len, r->multi->replies[i].data);
        assert_non_null(one);
        assert_int_equal(one->status, want[i]);
        if (i == 1) {
            assert_int_equal(one->body_case, LAPSE__RESPONSE__BODY_GET_ITEM);
        }
        lapse__response__free_unpacked(one, NULL);
    }
    lapse__response__free_unpacked(r, NULL);
    free(get);
    char err[256] = "";
    assert_rv(get_echo(f->cli, "t", "after", 2000, err, sizeof err), 0, err);
    fixture_close(f);
}

/* The test's quick calls: GetItem of table "quick". */
static int quick_gets(void *arg, const Lapse__Request *req)
{
    (void)arg;
    return req->body_case == LAPSE__REQUEST__BODY_GET_ITEM &&
           strcmp(req->get_item->table, "quick") == 0;
}

static void quick_calls_are_served_while_every_worker_waits(void **state)
{
    (void)state;
    fixture *f = fixture_open_lanes(0, 1, NULL, 0, 0, quick_gets);
    char err[256] = "";
    assert_rv(heartbeat(f->cli, 9, 0, 2000, err, sizeof err), 0, err); /* connected */
    int before = atomic_load(&handlers_entered);
    slow_call sc = {f->cli, 600, 3000, -1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, slow_call_run, &sc), 0);
    wait_entered(before + 1); /* the only worker sleeps 600 ms */
    clock_mono t0 = clock_mono_now();
    assert_rv(get_echo(f->cli, "quick", "q", 300, err, sizeof err), 0, err);
    assert_true(clock_mono_now().ms - t0.ms < 300);
    /* A call that is not quick waits for the worker, past its deadline. */
    assert_rv(get_echo(f->cli, "t", "slow", 150, err, sizeof err), LAPSE_ETIMEDOUT, err);
    pthread_join(th, NULL);
    assert_int_equal(sc.rv, 0);
    /* The worker answers the timed-out call late (ETIMEDOUT): let that
     * reply land before the client closes. NNG 1.5.2 can hang in nng_close
     * when a reply arrives as the socket closes (req0's pipe receive is
     * re-armed after the transport closed and never aborted; seen here 1 in
     * ~20 runs under load). */
    rpc_server_count n;
    clock_mono until = clock_mono_after_ms(3000);
    do {
        clock_sleep_ms(10);
        rpc_server_counts(f->srv, &n);
    } while (n.calls < 4 && clock_mono_remaining_ms(until) > 0);
    assert_int_equal(n.calls, 4); /* connect, slow, quick, late */
    assert_int_equal(n.quick, 1);
    clock_sleep_ms(50);
    fixture_close(f);
}

/* ---- calls served together (rpc_server_options.serve_many) ---- */

static atomic_int groups_served, group_max;

/* The test's batchable calls: PutItem. */
static int batchable_puts(void *arg, const Lapse__Request *req)
{
    (void)arg;
    return req->body_case == LAPSE__REQUEST__BODY_PUT_ITEM;
}

/* Answers each PutItem OK with its own pmap_version echoed, after 2 ms
 * per group (so that other calls queue meanwhile). */
static void serve_puts(void *arg, const Lapse__Request *const *reqs, Lapse__Response **resps,
                       arena **as, const int64_t *deadlines, size_t n)
{
    (void)arg, (void)deadlines;
    atomic_fetch_add(&groups_served, 1);
    int was = atomic_load(&group_max);
    while ((int)n > was && !atomic_compare_exchange_weak(&group_max, &was, (int)n)) {
    }
    clock_sleep_ms(2);
    for (size_t i = 0; i < n; i++) {
        Lapse__PutItemResponse *p = arena_alloc(as[i], sizeof *p);
        lapse__put_item_response__init(p);
        resps[i]->body_case = LAPSE__RESPONSE__BODY_PUT_ITEM;
        resps[i]->put_item = p;
        resps[i]->pmap_version = reqs[i]->pmap_version;
    }
}

typedef struct putter {
    rpc_client *cli;
    int id, failures;
} putter;

static void *putter_run(void *arg)
{
    putter *p = arg;
    for (int i = 0; i < 40; i++) {
        Lapse__PutItemRequest put = LAPSE__PUT_ITEM_REQUEST__INIT;
        put.table = "t";
        Lapse__Request req = LAPSE__REQUEST__INIT;
        req.body_case = LAPSE__REQUEST__BODY_PUT_ITEM;
        req.put_item = &put;
        req.pmap_version = (uint64_t)p->id * 1000 + (uint64_t)i;
        Lapse__Response *resp = NULL;
        char err[256];
        int rv = rpc_call(p->cli, &req, 5000, &resp, err, sizeof err);
        if (rv != 0 || resp->body_case != LAPSE__RESPONSE__BODY_PUT_ITEM ||
            resp->pmap_version != req.pmap_version) {
            fprintf(stderr, "put %d of %d: %d %s\n", i, p->id, rv, err);
            p->failures++;
        }
        rpc_response_free(resp);
    }
    return NULL;
}

static void batchable_calls_of_a_frame_are_served_together(void **state)
{
    (void)state;
    fixture *f = calloc(1, sizeof *f);
    char err[256] = "";
    snprintf(f->url, sizeof f->url, "tcp://127.0.0.1:%d", free_port());
    rpc_server_options o = {.workers = 4, .batchable = batchable_puts, .serve_many = serve_puts};
    assert_rv(rpc_server_open(&f->srv, f->url, &o, handler, NULL, err, sizeof err), 0, err);
    assert_rv(rpc_client_open(&f->cli, f->url, err, sizeof err), 0, err);
    atomic_store(&groups_served, 0);
    atomic_store(&group_max, 0);
    enum { THREADS = 12 };
    pthread_t th[THREADS];
    putter ps[THREADS];
    for (int i = 0; i < THREADS; i++) {
        ps[i] = (putter){.cli = f->cli, .id = i + 1};
        assert_int_equal(pthread_create(&th[i], NULL, putter_run, &ps[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(ps[i].failures, 0);
    }
    /* Every put was answered with its own reply; frames of several puts
     * were served as groups (a lone put goes to the handler, not here). */
    if (atomic_load(&group_max) < 2) {
        fail_msg("no group of puts was served together (%d groups, largest %d)",
                 atomic_load(&groups_served), atomic_load(&group_max));
    }
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
        cmocka_unit_test(coalesced_calls_share_frames_and_keep_their_replies),
        cmocka_unit_test(queued_call_does_not_wait_behind_a_slow_frame),
        cmocka_unit_test(malformed_coalesced_frames_get_eproto_per_call),
        cmocka_unit_test(quick_calls_are_served_while_every_worker_waits),
        cmocka_unit_test(batchable_calls_of_a_frame_are_served_together),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
