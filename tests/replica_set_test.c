/*
 * replica_set_test: tables of three copies (create-table --replication 3)
 * on a coordinator and three real nodes, every item call through liblapse,
 * each replica read through PartitionDigest on its node:
 *  - the map places each partition on three distinct nodes, in sync at
 *    epoch 1, with the primaries spread as for one copy;
 *  - after acknowledged puts, updates, deletes and a batch, every copy of
 *    every partition has the same items and log position;
 *  - node 3 killed (kill -9; liveness by its etcd lease): it leaves every
 *    in-sync set, the partitions it was primary of get a new primary at
 *    epoch 2, writes go on, and create-table --replication 3 says how many
 *    nodes are up; restarted, its primaries resync it (from the log) and
 *    the coordinator puts it back in every set, and the copies match;
 *  - node 1 killed while a thread writes: writes to its partitions succeed
 *    again after the promotion, every acknowledged write is there (each
 *    key reads at least its last acknowledged value, at most its last
 *    attempted one), and node 1, back, is resynced (a copy that diverged
 *    with an unacknowledged write is dropped and rebuilt) and matches;
 *  - a primary killed while its last write waits at one or both stopped
 *    replicas (SIGSTOP): whichever copies end up holding that unacknowledged
 *    record, the promoted replica goes on writing, the old primary, back,
 *    rejoins, every copy matches and reads give the later write. (Where
 *    the record stays on some copies only, the new primary takes it in or
 *    the returning copy is rebuilt; a stopped replica applies the dead
 *    primary's buffered request when it resumes, so which path runs
 *    depends on timing; partition/replog_test covers divergence and the
 *    rebuild deterministically.);
 *  - a retried write (the same request id) takes effect once: its primary
 *    and, after that primary is killed, the new one answer it done
 *    without applying it again; an update's retry answers its first
 *    attempt's item; a client whose 300 ms timeout fits one attempt
 *    writes again after the promotion (a call that timed out makes the
 *    next one refresh the map);
 *  - with two of three nodes killed, no write is acknowledged with fewer
 *    than two copies.
 */
#include "testutil.h"

#include <pthread.h>
#include <jansson.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "../common/arena.h"
#include "../common/clock.h"
#include "../common/ddbjson.h"
#include "../rpc/wire.h"

#include "replset_testutil.h"
#include "testmap.h"

#define PARTS 8

static int create(const char *name, unsigned replication, lapse_error *e)
{
    lapse_table_def d = {.name = name,
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .partitions = PARTS,
                         .replication = replication};
    return lapse_create_table(rs_client(), &d, e);
}

static void put_id(int i, const char *v)
{
    lapse_item *it = item_json("{\"Id\":{\"S\":\"k%d\"},\"V\":{\"S\":\"%s\"}}", i, v);
    lapse_error e = {0};
    assert_lapse_ok(lapse_put(rs_client(), "rf3", it, NULL, &e), &e);
    lapse_item_free(it);
}

static void test_three_copies_placed_and_identical(void **state)
{
    (void)state;
    lapse_error e = {0};
    assert_lapse_ok(create("rf3", 3, &e), &e);
    assert_lapse_ok(create("rf1", 1, &e), &e);
    pmap *pm = testmap_fetch(rs_cluster());
    const pmap_table *t = pmap_table_find(pm, "rf3");
    assert_non_null(t);
    assert_int_equal(t->schema.replication, 3);
    size_t primaries[4] = {0};
    for (uint32_t p = 0; p < PARTS; p++) {
        const pmap_replicas *r = pmap_part(t, p);
        assert_int_equal(r->n, 3);
        assert_int_equal(r->epoch, 1);
        assert_int_equal(r->in_sync, 7);
        assert_true(r->ids[0] != r->ids[1] && r->ids[1] != r->ids[2] && r->ids[0] != r->ids[2]);
        primaries[r->ids[0]]++;
    }
    for (int n = 1; n <= 3; n++) {
        assert_true(primaries[n] >= 2 && primaries[n] <= 3); /* 8 over 3 */
    }
    assert_int_equal(pmap_part(pmap_table_find(pm, "rf1"), 0)->n, 1);
    /* cluster-status counts each node's copies ("Replicas") and first copies
     * ("Primaries") of every set: here 8 * 3 + 8 * 1 copies, 16 first ones. */
    size_t want_rep[4] = {0}, want_pri[4] = {0};
    for (size_t i = 0; i < pm->ntables; i++) {
        for (uint32_t p = 0; p < pm->tables[i].schema.partitions; p++) {
            const pmap_replicas *r = pmap_part(&pm->tables[i], p);
            want_pri[r->ids[0]]++;
            for (uint32_t k = 0; k < r->n; k++) {
                want_rep[r->ids[k]]++;
            }
        }
    }
    char *status = NULL;
    assert_lapse_ok(lapse_cluster_status(rs_client(), &status, &e), &e);
    json_error_t jerr;
    json_t *doc = json_loads(status, 0, &jerr), *node;
    assert_non_null(doc);
    size_t i, rep_sum = 0, pri_sum = 0;
    json_array_foreach(json_object_get(doc, "Nodes"), i, node)
    {
        json_int_t id = json_integer_value(json_object_get(node, "NodeId"));
        assert_true(id >= 1 && id <= 3);
        json_t *rep = json_object_get(node, "Replicas"), *pri = json_object_get(node, "Primaries");
        if (!json_is_integer(rep) || !json_is_integer(pri) ||
            (size_t)json_integer_value(rep) != want_rep[id] ||
            (size_t)json_integer_value(pri) != want_pri[id]) {
            fail_msg("node %d: want Replicas %zu, Primaries %zu in %s", (int)id, want_rep[id],
                     want_pri[id], status);
        }
        rep_sum += (size_t)json_integer_value(rep);
        pri_sum += (size_t)json_integer_value(pri);
    }
    assert_int_equal(rep_sum, PARTS * 3 + PARTS);
    assert_int_equal(pri_sum, 2 * PARTS);
    json_decref(doc);
    lapse_free(status);
    pmap_free(pm);
    char *json = NULL;
    assert_lapse_ok(lapse_describe_table(rs_client(), "rf3", &json, &e), &e);
    const char *rf = strstr(json, "\"Replication\":");
    assert_non_null(rf);
    rf += strlen("\"Replication\":");
    rf += strspn(rf, " ");
    assert_int_equal(*rf, '3');
    lapse_free(json);

    for (int i = 0; i < 60; i++) {
        put_id(i, "a");
    }
    for (int i = 0; i < 10; i++) {
        put_id(i, "b"); /* overwrites */
    }
    for (int i = 50; i < 60; i++) {
        lapse_item *k = item_json("{\"Id\":{\"S\":\"k%d\"}}", i);
        assert_lapse_ok(lapse_delete(rs_client(), "rf3", k, NULL, &e), &e);
        lapse_item_free(k);
    }
    lapse_item *batch[20];
    for (int i = 0; i < 20; i++) {
        batch[i] = item_json("{\"Id\":{\"S\":\"b%d\"},\"V\":{\"N\":\"%d\"}}", i, i);
    }
    assert_lapse_ok(lapse_batch_write(rs_client(), "rf3", batch, 20, NULL, 0, &e), &e);
    for (int i = 0; i < 20; i++) {
        lapse_item_free(batch[i]);
    }
    assert_int_equal(rs_assert_copies_match("rf3"), 70);
    /* One copy: the other nodes hold nothing of it. */
    pm = testmap_fetch(rs_cluster());
    t = pmap_table_find(pm, "rf1");
    for (uint32_t p = 0; p < PARTS; p++) {
        lapse_item *it = item_json("{\"Id\":{\"S\":\"x%u\"}}", (unsigned)p);
        assert_lapse_ok(lapse_put(rs_client(), "rf1", it, NULL, &e), &e);
        lapse_item_free(it);
    }
    for (uint32_t p = 0; p < PARTS; p++) {
        uint32_t owner = pmap_owner(t, p);
        for (int n = 1; n <= 3; n++) {
            rs_digest d = rs_node_digest(n, t->schema.id, p);
            assert_int_equal(d.seq, 0); /* one copy: no log */
            if ((uint32_t)n != owner) {
                assert_int_equal(d.items, 0);
            }
        }
    }
    pmap_free(pm);
}

static void put_retrying(int i, const char *v)
{
    char id[16];
    snprintf(id, sizeof(id), "k%d", i);
    rs_put_retrying("rf3", id, v);
}

static void test_node_down_fails_over_then_rejoins(void **state)
{
    (void)state;
    lapse_error e = {0};
    pmap *before = testmap_fetch(rs_cluster());
    assert_int_equal(cluster_kill(rs_cluster(), 3, SIGKILL), 0);
    rs_wait_state(3, "DOWN");
    /* Node 3 left every set; where it was primary, another took over with
     * the next epoch; elsewhere the primary and epoch stay. */
    pmap *pm = testmap_fetch(rs_cluster());
    const pmap_table *t0 = pmap_table_find(before, "rf3"), *t1 = pmap_table_find(pm, "rf3");
    int promoted = 0;
    for (uint32_t p = 0; p < PARTS; p++) {
        const pmap_replicas *a = &t0->parts[p], *b = &t1->parts[p];
        int i = pmap_replicas_index(b, 3);
        assert_true(i >= 0);
        assert_false(pmap_in_sync(b, (uint32_t)i));
        if (a->ids[0] == 3) {
            assert_int_not_equal(b->ids[0], 3);
            assert_int_equal(b->epoch, a->epoch + 1);
            promoted++;
        } else {
            assert_int_equal(b->ids[0], a->ids[0]);
            assert_int_equal(b->epoch, a->epoch);
        }
    }
    assert_true(promoted > 0);
    pmap_free(before);
    pmap_free(pm);
    /* Writes go on with two copies. */
    for (int i = 0; i < 60; i++) {
        put_retrying(i, "down");
    }
    assert_lapse_code(create("rf3_second", 3, &e), LAPSE_EUNAVAILABLE, &e);
    assert_non_null(strstr(e.message, "replication 3 needs 3 nodes up; 2 are up"));

    /* Back: its primaries resync it and it rejoins every set; then the
     * rebalancer hands it its share of primaryships back (each handover
     * takes the old primary out of the set until it is caught up again),
     * so the copies are compared once that is done. */
    assert_int_equal(cluster_restart(rs_cluster(), 3), 0);
    assert_int_equal(cluster_wait_up(rs_cluster(), 3, 20000), 0);
    pmap_free(rs_wait_rebalanced("rf3"));
    for (int i = 0; i < 60; i++) {
        put_id(i, "after");
    }
    assert_int_equal(rs_assert_copies_match("rf3"), 80);
}

/* A writer of keys w0..w<WKEYS-1>, each with increasing values; it records
 * per key the last value attempted and the last acknowledged. */
#define WKEYS 64
typedef struct writer {
    lapse_client *client;
    atomic_int stop;
    atomic_long acked_total;
    long attempted[WKEYS], acked[WKEYS];
} writer;

static void *writer_main(void *arg)
{
    writer *w = arg;
    for (long n = 1; !atomic_load(&w->stop); n++) {
        int k = (int)(n % WKEYS);
        lapse_item *it = item_json("{\"Id\":{\"S\":\"w%d\"},\"V\":{\"N\":\"%ld\"}}", k, n);
        lapse_error e = {0};
        w->attempted[k] = n;
        if (lapse_put(w->client, "rf3", it, NULL, &e) == 0) {
            w->acked[k] = n;
            atomic_fetch_add(&w->acked_total, 1);
        } else {
            rs_sleep_ms(20);
        }
        lapse_item_free(it);
    }
    return NULL;
}

/* Waits (up to 30 s) until w has n more acknowledged writes. */
static void wait_acks(writer *w, long n, const char *when)
{
    long from = atomic_load(&w->acked_total);
    for (int i = 0; i < 300 && atomic_load(&w->acked_total) < from + n; i++) {
        rs_sleep_ms(100);
    }
    if (atomic_load(&w->acked_total) < from + n) {
        fail_msg("%s: %ld of %ld writes acknowledged in 30 s", when,
                 atomic_load(&w->acked_total) - from, n);
    }
}

/* Puts Id=u -> V=v on table rf3u in a thread (it may hang or fail). */
typedef struct bg_put {
    const char *v;
    pthread_t th;
} bg_put;

static void *bg_put_main(void *arg)
{
    bg_put *b = arg;
    lapse_client *c = connect_client(rs_cluster());
    lapse_item *it = item_json("{\"Id\":{\"S\":\"u\"},\"V\":{\"S\":\"%s\"}}", b->v);
    lapse_error e = {0};
    lapse_put(c, "rf3u", it, NULL, &e); /* acknowledged or not: either is allowed */
    lapse_item_free(it);
    lapse_close(c);
    return NULL;
}

/* The set of rf3u's only partition in the coordinator's map now. */
static pmap_replicas set_u(void)
{
    pmap *pm = testmap_fetch(rs_cluster());
    pmap_replicas r = pmap_table_find(pm, "rf3u")->parts[0];
    pmap_free(pm);
    return r;
}

/* Kills the primary while its write of u=v is held at the stopped
 * replicas (SIGSTOP, well under a lease), then lets them go. */
static void kill_primary_mid_write(const pmap_replicas *r, int stop_first, int stop_second,
                                   const char *v)
{
    if (stop_first) {
        assert_int_equal(cluster_kill(rs_cluster(), (int)r->ids[1], SIGSTOP), 0);
    }
    if (stop_second) {
        assert_int_equal(cluster_kill(rs_cluster(), (int)r->ids[2], SIGSTOP), 0);
    }
    bg_put b = {.v = v};
    assert_int_equal(pthread_create(&b.th, NULL, bg_put_main, &b), 0);
    rs_sleep_ms(400); /* written on the primary, waiting for the stopped copies */
    assert_int_equal(cluster_kill(rs_cluster(), (int)r->ids[0], SIGKILL), 0);
    if (stop_first) {
        assert_int_equal(cluster_kill(rs_cluster(), (int)r->ids[1], SIGCONT), 0);
    }
    if (stop_second) {
        assert_int_equal(cluster_kill(rs_cluster(), (int)r->ids[2], SIGCONT), 0);
    }
    rs_wait_state(r->ids[0], "DOWN");
    pthread_join(b.th, NULL);
}

static void test_unacknowledged_suffixes(void **state)
{
    (void)state;
    lapse_error e = {0};
    lapse_table_def d = {.name = "rf3u",
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .partitions = 1,
                         .replication = 3};
    assert_lapse_ok(lapse_create_table(rs_client(), &d, &e), &e);
    rs_put_retrying("rf3u", "u", "v0");
    /* 1. ids[1] stopped: the record reaches ids[2] at once, ids[1] when it
     *    resumes (or, if the new epoch fenced it first, by the promoted
     *    ids[1] taking it in from ids[2]); either way the next write must
     *    go through. */
    pmap_replicas r = set_u();
    kill_primary_mid_write(&r, 1, 0, "x1");
    pmap_replicas r2 = set_u();
    assert_int_equal(r2.ids[0], r.ids[1]);
    rs_put_retrying("rf3u", "u", "x2");
    assert_int_equal(cluster_restart(rs_cluster(), (int)r.ids[0]), 0);
    assert_int_equal(cluster_wait_up(rs_cluster(), 3, 20000), 0);
    pmap_free(rs_wait_all_in_sync("rf3u"));
    rs_assert_copies_match("rf3u");
    /* 2. Both replicas stopped: the record is on the killed primary and,
     *    once they resume, on those that took the buffered request. Back,
     *    the old primary rejoins (rebuilt if its copy diverged), and reads
     *    give the later write. */
    r = set_u();
    kill_primary_mid_write(&r, 1, 1, "y1");
    rs_put_retrying("rf3u", "u", "y2");
    assert_int_equal(cluster_restart(rs_cluster(), (int)r.ids[0]), 0);
    assert_int_equal(cluster_wait_up(rs_cluster(), 3, 20000), 0);
    pmap_free(rs_wait_all_in_sync("rf3u"));
    rs_assert_copies_match("rf3u");
    lapse_item *key = item_json("{\"Id\":{\"S\":\"u\"}}");
    lapse_item *got = NULL;
    assert_lapse_ok(lapse_get(rs_client(), "rf3u", key, &got, &e), &e);
    assert_non_null(got);
    assert_string_equal(lapse_item_get_s(got, "V"), "y2");
    lapse_item_free(key);
    lapse_item_free(got);
}

/* ---- retried writes, on the wire ---- */

/* One write call as a client's attempts send it: table rf3r, key {Id: r},
 * with its request id. */
typedef struct wcall {
    uint8_t id[16];
    size_t id_len;
    int update; /* UpdateItem SET V = v; else PutItem {Id, V: v} */
    int batch;  /* BatchWrite of that one put instead */
    const char *v;
    int if_absent; /* the condition attribute_not_exists(Id) (puts) */
} wcall;

/* Sends c to node: the Lapse code; an update's answer's V into v_out. */
static int send_call(int node, const wcall *c, char *v_out, size_t vlen, char *err, size_t errlen)
{
    char json[128];
    item *it = NULL;
    arena a;
    arena_init(&a);
    snprintf(json, sizeof json, "{\"Id\":{\"S\":\"r\"},\"V\":{\"S\":\"%s\"}}", c->v);
    assert_int_equal(ddbjson_parse_item(json, strlen(json), &it, err, errlen), 0);
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__PutItemRequest put = LAPSE__PUT_ITEM_REQUEST__INIT;
    Lapse__UpdateItemRequest upd = LAPSE__UPDATE_ITEM_REQUEST__INIT;
    Lapse__Condition cond = LAPSE__CONDITION__INIT;
    Lapse__UpdateAction act = LAPSE__UPDATE_ACTION__INIT;
    Lapse__UpdateAction *acts[1] = {&act};
    Lapse__BatchWriteRequest bw = LAPSE__BATCH_WRITE_REQUEST__INIT;
    Lapse__WriteRequest w = LAPSE__WRITE_REQUEST__INIT;
    Lapse__WriteRequest *ws[1] = {&w};
    req.request_id = (ProtobufCBinaryData){.len = c->id_len, .data = (uint8_t *)c->id};
    if (c->update) {
        act.name = "V";
        act.value = wire_value_to_pb(&a, item_get(it, "V"));
        item_remove(it, "V");
        upd.table = "rf3r";
        upd.key = wire_item_to_pb(&a, it);
        upd.actions = acts;
        upd.n_actions = 1;
        req.body_case = LAPSE__REQUEST__BODY_UPDATE_ITEM;
        req.update_item = &upd;
    } else if (c->batch) {
        w.put = wire_item_to_pb(&a, it);
        bw.table = "rf3r";
        bw.writes = ws;
        bw.n_writes = 1;
        req.body_case = LAPSE__REQUEST__BODY_BATCH_WRITE;
        req.batch_write = &bw;
    } else {
        put.table = "rf3r";
        put.item = wire_item_to_pb(&a, it);
        cond.kind = LAPSE__CONDITION__KIND__ATTRIBUTE_NOT_EXISTS;
        cond.attribute = "Id";
        put.condition = c->if_absent ? &cond : NULL;
        req.body_case = LAPSE__REQUEST__BODY_PUT_ITEM;
        req.put_item = &put;
    }
    Lapse__Response *resp = NULL;
    int rv = rs_call(node, &req, &resp, err, errlen);
    if (rv == 0 && c->batch && resp->batch_write->n_unprocessed > 0) {
        rv = LAPSE_EWRONGNODE; /* not this node's partition (yet) */
    }
    if (rv == 0 && c->update) {
        item *got = NULL;
        assert_non_null(resp->update_item);
        assert_int_equal(wire_item_from_pb(resp->update_item->item, &got, err, errlen), 0);
        const attr_value *gv = item_get(got, "V");
        assert_non_null(gv);
        snprintf(v_out, vlen, "%.*s", (int)gv->u.bytes.len, gv->u.bytes.ptr);
        item_free(got);
    }
    rpc_response_free(resp);
    item_free(it);
    arena_fini(&a);
    return rv;
}

/* send_call, retried while the partition's primary changes (WRONG_NODE,
 * unavailable, timed out: a failover in progress), for up to 15 s. */
static int send_retrying(int node, const wcall *c, char *v_out, size_t vlen)
{
    char err[256] = "";
    int rv = LAPSE_ETIMEDOUT;
    for (int i = 0; i < 150; i++) {
        rv = send_call(node, c, v_out, vlen, err, sizeof err);
        if (rv != LAPSE_EWRONGNODE && rv != LAPSE_EUNAVAILABLE && rv != LAPSE_ETIMEDOUT) {
            return rv;
        }
        rs_sleep_ms(100);
    }
    fail_msg("call on node %d kept failing for 15 s: %s", node, err);
    return rv;
}

static pmap_replicas set_of(const char *table)
{
    pmap *pm = testmap_fetch(rs_cluster());
    pmap_replicas r = pmap_table_find(pm, table)->parts[0];
    pmap_free(pm);
    return r;
}

static const char *v_of_r(void)
{
    static char v[64];
    lapse_item *key = item_json("{\"Id\":{\"S\":\"r\"}}");
    lapse_item *got = NULL;
    lapse_error e = {0};
    assert_lapse_ok(lapse_get(rs_client(), "rf3r", key, &got, &e), &e);
    assert_non_null(got);
    snprintf(v, sizeof v, "%s", lapse_item_get_s(got, "V"));
    lapse_item_free(key);
    lapse_item_free(got);
    return v;
}

/* docs/replication.md, "Retried writes": a conditional put sent again with
 * its request id is answered done and changes nothing, by its primary and,
 * after that primary is killed, by the new one (the record came with the
 * write), while the same put with another id fails its condition; an
 * update's retry answers the item its first attempt made; a batch write's
 * retry applies nothing again. */
static void test_retried_write_after_failover(void **state)
{
    (void)state;
    char v[64] = "";
    rs_create_rf3("rf3r", 1);
    pmap_free(rs_wait_all_in_sync("rf3r"));
    pmap_replicas r = set_of("rf3r");
    const int p1 = (int)r.ids[0];
    wcall put1 = {.id = "put-call-number1", .id_len = 16, .v = "first", .if_absent = 1};
    wcall put2 = {.id = "put-call-number2", .id_len = 16, .v = "second", .if_absent = 1};
    wcall upd = {.id = "update-call-no-1", .id_len = 16, .update = 1, .v = "updated"};
    assert_int_equal(send_retrying(p1, &put1, v, sizeof v), 0);
    assert_int_equal(send_retrying(p1, &put1, v, sizeof v), 0);
    assert_int_equal(send_retrying(p1, &put2, v, sizeof v), LAPSE_ECONDITION);
    assert_int_equal(send_retrying(p1, &upd, v, sizeof v), 0);
    assert_string_equal(v, "updated");
    wcall bad = put2;
    bad.id_len = 5;
    assert_int_equal(send_retrying(p1, &bad, v, sizeof v), LAPSE_EINVAL);
    wcall bat = {.id = "batch-call-numb1", .id_len = 16, .batch = 1, .v = "batched"};
    assert_int_equal(send_retrying(p1, &bat, v, sizeof v), 0);
    assert_string_equal(v_of_r(), "batched");

    /* A client whose timeout fits one attempt, putting from the kill on:
     * its calls time out at the dead primary, waiting for a connection
     * (NNG redials in the background), until one that timed out makes the
     * next refresh the map and it learns of the promotion. Before, no call
     * refreshed it and the partition timed out for good. */
    lapse_client *quick = connect_client(rs_cluster());
    lapse_set_timeout_ms(quick, 300);
    assert_int_equal(cluster_kill(rs_cluster(), p1, SIGKILL), 0);
    clock_mono killed = clock_mono_now();
    lapse_item *qi = item_json("{\"Id\":{\"S\":\"q\"},\"V\":{\"S\":\"quick\"}}");
    int quick_rv = -1;
    while (quick_rv != 0 && clock_mono_now().ms - killed.ms < 15000) {
        lapse_error e = {0};
        quick_rv = lapse_put(quick, "rf3r", qi, NULL, &e);
    }
    lapse_item_free(qi);
    lapse_close(quick);
    if (quick_rv != 0) {
        fail_msg("a client with a 300 ms timeout still fails its puts 15 s after the kill");
    }
    print_message("a 300 ms client's put acknowledged %lld ms after kill -9 of its primary\n",
                  (long long)(clock_mono_now().ms - killed.ms));
    rs_wait_state((uint32_t)p1, "DOWN");
    pmap_replicas r2 = set_of("rf3r");
    const int p2 = (int)r2.ids[0];
    assert_int_not_equal(p2, p1);
    rs_put_retrying("rf3r", "r", "later");
    assert_int_equal(send_retrying(p2, &put1, v, sizeof v), 0); /* not ECONDITION */
    v[0] = '\0';
    assert_int_equal(send_retrying(p2, &upd, v, sizeof v), 0);
    assert_string_equal(v, "updated");                         /* the first attempt's answer */
    assert_int_equal(send_retrying(p2, &bat, v, sizeof v), 0); /* a batch's retry */
    assert_string_equal(v_of_r(), "later");                    /* and nothing applied again */
    assert_int_equal(send_retrying(p2, &put2, v, sizeof v), LAPSE_ECONDITION);

    assert_int_equal(cluster_restart(rs_cluster(), p1), 0);
    assert_int_equal(cluster_wait_up(rs_cluster(), 3, 20000), 0);
    pmap_free(rs_wait_all_in_sync("rf3r"));
    rs_assert_copies_match("rf3r");
}

static void test_primary_killed_during_writes(void **state)
{
    (void)state;
    static writer w;
    memset(&w, 0, sizeof(w));
    w.client = connect_client(rs_cluster());
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, writer_main, &w), 0);
    wait_acks(&w, 200, "before the kill");
    assert_int_equal(cluster_kill(rs_cluster(), 1, SIGKILL), 0);
    clock_mono killed = clock_mono_now();
    rs_wait_state(1, "DOWN");
    /* Every key again, node 1's partitions included. */
    wait_acks(&w, 4 * WKEYS, "after the promotion");
    print_message("writes acknowledged again %lld ms after kill -9 of a primary\n",
                  (long long)(clock_mono_now().ms - killed.ms));
    atomic_store(&w.stop, 1);
    pthread_join(th, NULL);
    lapse_close(w.client);
    /* Nothing acknowledged is lost. */
    for (int k = 0; k < WKEYS; k++) {
        lapse_item *key = item_json("{\"Id\":{\"S\":\"w%d\"}}", k);
        lapse_item *got = NULL;
        lapse_error e = {0};
        assert_lapse_ok(lapse_get(rs_client(), "rf3", key, &got, &e), &e);
        long v = got != NULL && lapse_item_get_n(got, "V") != NULL
                     ? atol(lapse_item_get_n(got, "V"))
                     : 0;
        if (v < w.acked[k] || v > w.attempted[k]) {
            fail_msg("w%d reads %ld; last acknowledged %ld, last attempted %ld", k, v, w.acked[k],
                     w.attempted[k]);
        }
        lapse_item_free(key);
        lapse_item_free(got);
    }
    /* Back, node 1 is resynced into every set and every copy matches. */
    assert_int_equal(cluster_restart(rs_cluster(), 1), 0);
    assert_int_equal(cluster_wait_up(rs_cluster(), 3, 20000), 0);
    pmap_free(rs_wait_all_in_sync("rf3"));
    rs_assert_copies_match("rf3");

    /* Two of three down: no write is acknowledged with one copy. */
    assert_int_equal(cluster_kill(rs_cluster(), 2, SIGKILL), 0);
    assert_int_equal(cluster_kill(rs_cluster(), 3, SIGKILL), 0);
    rs_wait_state(2, "DOWN");
    rs_wait_state(3, "DOWN");
    int refused_in_sync = 0;
    for (int i = 0; i < 16; i++) {
        lapse_item *it = item_json("{\"Id\":{\"S\":\"k%d\"},\"V\":{\"S\":\"one\"}}", i);
        lapse_error e = {0};
        int rv = lapse_put(rs_client(), "rf3", it, NULL, &e);
        lapse_item_free(it);
        if (rv == 0) {
            fail_msg("put k%d was acknowledged with two of three nodes down", i);
        }
        refused_in_sync += strstr(e.message, "copies in sync") != NULL;
    }
    assert_true(refused_in_sync > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_copies_placed_and_identical),
        cmocka_unit_test(test_node_down_fails_over_then_rejoins),
        cmocka_unit_test(test_unacknowledged_suffixes),
        cmocka_unit_test(test_retried_write_after_failover),
        cmocka_unit_test(test_primary_killed_during_writes),
    };
    return cmocka_run_group_tests(tests, rs_group_setup, rs_group_teardown);
}
