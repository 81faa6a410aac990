/*
 * rpc_testutil.c: the fixture of the rpc/ transport tests (rpc_testutil.h).
 */
#include "rpc_testutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
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
#include "wire.h"

/* ---- the test server's handler (what it answers: rpc_testutil.h) ---- */
atomic_int fixture_handlers_entered;
atomic_int fixture_handlers_done;
atomic_int fixture_barrier_entered;

/* Waits until fixture_handlers_entered reaches n, for at most 5 s. */
void fixture_wait_entered(int n)
{
    clock_mono deadline = clock_mono_after_ms(5000);
    while (atomic_load(&fixture_handlers_entered) < n) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("handler %d never started", n);
        }
        clock_sleep_ms(2);
    }
}

void fixture_heartbeat_answer(const Lapse__Request *req, Lapse__Response *resp, arena *a)
{
    Lapse__HeartbeatResponse *h = arena_alloc(a, sizeof *h);
    lapse__heartbeat_response__init(h);
    h->pmap_version = req->heartbeat->node_id;
    resp->pmap_version = req->heartbeat->node_id;
    resp->body_case = LAPSE__RESPONSE__BODY_HEARTBEAT;
    resp->heartbeat = h;
}

void fixture_handler(void *arg, const Lapse__Request *req, Lapse__Response *resp, arena *a,
                     int64_t deadline_mono_ms)
{
    (void)arg;
    (void)deadline_mono_ms;
    switch (req->body_case) {
    case LAPSE__REQUEST__BODY_GET_ITEM: {
        if (strncmp(req->get_item->table, "slow:", 5) == 0) {
            atomic_fetch_add(&fixture_handlers_entered, 1);
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
        atomic_fetch_add(&fixture_handlers_entered, 1);
        clock_sleep_ms(req->heartbeat->clock_ms);
        atomic_fetch_add(&fixture_handlers_done, 1);
        fixture_heartbeat_answer(req, resp, a);
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
        atomic_fetch_add(&fixture_barrier_entered, 1);
        clock_mono deadline = clock_mono_after_ms(3000);
        while (atomic_load(&fixture_barrier_entered) < want) {
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
        atomic_fetch_add(&fixture_barrier_entered, 1);
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

fixture *fixture_open(int contexts, int workers)
{
    return fixture_open_lanes(contexts, workers, NULL, 0, 0, NULL);
}

fixture *fixture_open_lanes(int contexts, int workers, const uint32_t *urgent, size_t nurgent,
                            int urgent_workers, rpc_quick_fn quick)
{
    rpc_server_options o = {.contexts = contexts,
                            .workers = workers,
                            .urgent_calls = urgent,
                            .nurgent = nurgent,
                            .urgent_workers = urgent_workers,
                            .quick = quick};
    return fixture_open_opts(&o);
}

fixture *fixture_open_opts(const rpc_server_options *o)
{
    fixture *f = calloc(1, sizeof *f);
    char err[256] = "";
    fixture_url_free_port(f->url, sizeof f->url);
    assert_rv(rpc_server_open(&f->srv, f->url, o, fixture_handler, NULL, err, sizeof err), 0, err);
    assert_rv(rpc_client_open(&f->cli, f->url, err, sizeof err), 0, err);
    assert_string_equal(rpc_client_url(f->cli), f->url);
    return f;
}

void fixture_close(fixture *f)
{
    rpc_client_close(f->cli);
    rpc_server_close(f->srv);
    free(f);
}

/* Makes *req a Heartbeat of node_id id and clock_ms sleep_ms, its body in
 * *hb (which must outlive req). */
static void heartbeat_request(Lapse__Request *req, Lapse__HeartbeatRequest *hb, uint32_t id,
                              int64_t sleep_ms)
{
    lapse__heartbeat_request__init(hb);
    hb->node_id = id;
    hb->clock_ms = sleep_ms;
    lapse__request__init(req);
    req->body_case = LAPSE__REQUEST__BODY_HEARTBEAT;
    req->heartbeat = hb;
}

/* One heartbeat call: returns the status; on OK checks the echo. */
int fixture_heartbeat(rpc_client *c, uint32_t id, int64_t sleep_ms, int timeout_ms, char *err,
                      size_t errlen)
{
    Lapse__HeartbeatRequest hb;
    Lapse__Request req;
    heartbeat_request(&req, &hb, id, sleep_ms);
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
Lapse__Response *fixture_raw_call(rpc_client *c, const void *data, size_t len)
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

void *fixture_slow_call_run(void *arg)
{
    fixture_slow_call *sc = arg;
    char err[256];
    sc->rv = fixture_heartbeat(sc->c, 77, sc->sleep_ms, sc->timeout_ms, err, sizeof err);
    return NULL;
}

/* ---- the wire by hand ---- */

/* req packed as version RPC_PROTOCOL_VERSION with timeout_ms; returns its
 * bytes (caller frees with free()), *len their size. */
static uint8_t *pack_request(Lapse__Request *req, uint32_t timeout_ms, size_t *len)
{
    req->version = RPC_PROTOCOL_VERSION;
    req->timeout_ms = timeout_ms;
    *len = lapse__request__get_packed_size(req);
    uint8_t *p = malloc(*len);
    assert_non_null(p);
    lapse__request__pack(req, p);
    return p;
}

void fixture_url_free_port(char *url, size_t n)
{
    snprintf(url, n, "tcp://127.0.0.1:%d", freeport_loopback());
}

uint8_t *fixture_pack_heartbeat(uint32_t id, int64_t sleep_ms, uint64_t reply_bytes, size_t *len)
{
    Lapse__HeartbeatRequest hb;
    Lapse__Request req;
    heartbeat_request(&req, &hb, id, sleep_ms);
    req.pmap_version = reply_bytes;
    return pack_request(&req, 10000, len);
}

uint8_t *fixture_pack_heartbeat_padded(uint32_t id, size_t pad_bytes, size_t *len)
{
    Lapse__HeartbeatRequest hb;
    Lapse__Request req;
    heartbeat_request(&req, &hb, id, 0);
    char *token = malloc(pad_bytes + 1);
    assert_non_null(token);
    memset(token, 'a', pad_bytes);
    token[pad_bytes] = '\0';
    req.admin_token = token;
    uint8_t *p = pack_request(&req, 10000, len);
    free(token);
    return p;
}

Lapse__Response *fixture_multi_call(rpc_client *c, ProtobufCBinaryData *calls, size_t n)
{
    Lapse__MultiRequest m = LAPSE__MULTI_REQUEST__INIT;
    m.n_calls = n;
    m.calls = calls;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_MULTI;
    req.multi = &m;
    size_t len;
    uint8_t *buf = pack_request(&req, 2000, &len);
    Lapse__Response *r = fixture_raw_call(c, buf, len);
    free(buf);
    return r;
}

void fixture_read_full(int fd, uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        assert_true(r > 0);
        p += r;
        n -= (size_t)r;
    }
}

uint64_t fixture_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = v << 8 | p[i];
    }
    return v;
}
