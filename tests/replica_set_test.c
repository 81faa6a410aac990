/*
 * replica_set_test: tables of three copies (create-table --replication 3)
 * on a coordinator and three real nodes, every item call through liblapse,
 * each replica read through PartitionDigest on its node:
 *  - the map places each partition on three distinct nodes, in sync at
 *    epoch 1, with the primaries spread as for one copy;
 *  - after acknowledged puts, updates, deletes and a batch, every copy of
 *    every partition has the same items and log position;
 *  - with a replica killed (kill -9) writes are refused, not acknowledged
 *    with fewer copies, and create-table --replication 3 says how many
 *    nodes are up; restarted, it is caught up from the primary's log (the
 *    refused writes included) by the next write, and the copies match.
 */
#include "testutil.h"

#include <signal.h>
#include <string.h>
#include <time.h>

#include "testmap.h"

#define PARTS 8

static cluster *g_cluster;
static lapse_client *g_client;

static int setup(void **state)
{
    (void)state;
    g_cluster = start_cluster(3, NULL);
    g_client = connect_client(g_cluster);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return stop_cluster(g_cluster, g_client);
}

static int create(const char *name, unsigned replication, lapse_error *e)
{
    lapse_table_def d = {.name = name,
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .partitions = PARTS,
                         .replication = replication};
    return lapse_create_table(g_client, &d, e);
}

/* One copy's digest, through PartitionDigest on node. */
typedef struct digest {
    uint64_t items, hash, epoch, seq;
} digest;

static digest node_digest(int node, uint32_t table_id, uint32_t part)
{
    rpc_client *rc = NULL;
    char err[256];
    assert_int_equal(rpc_client_open(&rc, cluster_node_url(g_cluster, node), err, sizeof(err)), 0);
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__PartitionDigestRequest body = LAPSE__PARTITION_DIGEST_REQUEST__INIT;
    body.table_id = table_id;
    body.partition = part;
    req.body_case = LAPSE__REQUEST__BODY_PARTITION_DIGEST;
    req.partition_digest = &body;
    Lapse__Response *resp = NULL;
    if (rpc_call(rc, &req, 3000, &resp, err, sizeof(err)) != 0) {
        fail_msg("PartitionDigest on node %d: %s", node, err);
    }
    digest d = {resp->partition_digest->items, resp->partition_digest->digest,
                resp->partition_digest->epoch, resp->partition_digest->seq};
    rpc_response_free(resp);
    rpc_client_close(rc);
    return d;
}

/* Asserts every copy of every partition of table equals the primary's and
 * returns the items over all partitions (counted on the primaries). */
static uint64_t assert_copies_match(const char *table)
{
    pmap *pm = testmap_fetch(g_cluster);
    const pmap_table *t = pmap_table_find(pm, table);
    assert_non_null(t);
    uint64_t total = 0;
    for (uint32_t p = 0; p < t->schema.partitions; p++) {
        const pmap_replicas *r = pmap_part(t, p);
        digest want = node_digest((int)r->ids[0], t->schema.id, p);
        for (uint32_t i = 1; i < r->n; i++) {
            digest got = node_digest((int)r->ids[i], t->schema.id, p);
            if (got.items != want.items || got.hash != want.hash || got.seq != want.seq ||
                got.epoch != want.epoch) {
                fail_msg("table %s partition %u: node %u has %llu items at seq %llu, primary "
                         "node %u %llu at seq %llu (digests %s)",
                         table, (unsigned)p, (unsigned)r->ids[i], (unsigned long long)got.items,
                         (unsigned long long)got.seq, (unsigned)r->ids[0],
                         (unsigned long long)want.items, (unsigned long long)want.seq,
                         got.hash == want.hash ? "equal" : "differ");
            }
        }
        total += want.items;
    }
    pmap_free(pm);
    return total;
}

static void put_id(int i, const char *v)
{
    lapse_item *it = item_json("{\"Id\":{\"S\":\"k%d\"},\"V\":{\"S\":\"%s\"}}", i, v);
    lapse_error e = {0};
    assert_lapse_ok(lapse_put(g_client, "rf3", it, NULL, &e), &e);
    lapse_item_free(it);
}

static void test_three_copies_placed_and_identical(void **state)
{
    (void)state;
    lapse_error e = {0};
    assert_lapse_ok(create("rf3", 3, &e), &e);
    assert_lapse_ok(create("rf1", 1, &e), &e);
    pmap *pm = testmap_fetch(g_cluster);
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
    pmap_free(pm);
    char *json = NULL;
    assert_lapse_ok(lapse_describe_table(g_client, "rf3", &json, &e), &e);
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
        assert_lapse_ok(lapse_delete(g_client, "rf3", k, NULL, &e), &e);
        lapse_item_free(k);
    }
    lapse_item *batch[20];
    for (int i = 0; i < 20; i++) {
        batch[i] = item_json("{\"Id\":{\"S\":\"b%d\"},\"V\":{\"N\":\"%d\"}}", i, i);
    }
    assert_lapse_ok(lapse_batch_write(g_client, "rf3", batch, 20, NULL, 0, &e), &e);
    for (int i = 0; i < 20; i++) {
        lapse_item_free(batch[i]);
    }
    assert_int_equal(assert_copies_match("rf3"), 70);
    /* One copy: the other nodes hold nothing of it. */
    pm = testmap_fetch(g_cluster);
    t = pmap_table_find(pm, "rf1");
    for (uint32_t p = 0; p < PARTS; p++) {
        lapse_item *it = item_json("{\"Id\":{\"S\":\"x%u\"}}", (unsigned)p);
        assert_lapse_ok(lapse_put(g_client, "rf1", it, NULL, &e), &e);
        lapse_item_free(it);
    }
    for (uint32_t p = 0; p < PARTS; p++) {
        uint32_t owner = pmap_owner(t, p);
        for (int n = 1; n <= 3; n++) {
            digest d = node_digest(n, t->schema.id, p);
            assert_int_equal(d.seq, 0); /* one copy: no log */
            if ((uint32_t)n != owner) {
                assert_int_equal(d.items, 0);
            }
        }
    }
    pmap_free(pm);
}

/* Waits until the coordinator reports node id in state want. */
static void wait_state(uint32_t id, const char *want)
{
    char st[32] = "";
    for (int i = 0; i < 200; i++) {
        if (strcmp(cluster_node_state(g_client, id, st, sizeof(st)), want) == 0) {
            return;
        }
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    fail_msg("node %u is %s, not %s, after 20 s", (unsigned)id, st, want);
}

static void test_replica_down_refuses_then_catches_up(void **state)
{
    (void)state;
    lapse_error e = {0};
    assert_int_equal(cluster_kill(g_cluster, 3, SIGKILL), 0);
    wait_state(3, "DOWN");
    /* Every partition has a copy on node 3: no write is acknowledged with
     * fewer copies than the in-sync set. */
    int mentions = 0;
    for (int i = 0; i < 4; i++) {
        lapse_item *it = item_json("{\"Id\":{\"S\":\"k%d\"},\"V\":{\"S\":\"down\"}}", i);
        int rv = lapse_put(g_client, "rf3", it, NULL, &e);
        lapse_item_free(it);
        if (rv == 0) {
            fail_msg("put k%d was acknowledged with node 3 down", i);
        }
        mentions += strstr(e.message, "node 3") != NULL;
    }
    assert_int_equal(mentions, 4); /* down as a primary, or as a replica */
    assert_lapse_code(create("rf3_second", 3, &e), LAPSE_EUNAVAILABLE, &e);
    assert_non_null(strstr(e.message, "replication 3 needs 3 nodes up; 2 are up"));

    assert_int_equal(cluster_restart(g_cluster, 3), 0);
    assert_int_equal(cluster_wait_up(g_cluster, 3, 20000), 0);
    /* The next write to each partition catches node 3 up first. */
    for (int i = 0; i < 60; i++) {
        put_id(i, "after");
    }
    assert_int_equal(assert_copies_match("rf3"), 80);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_copies_placed_and_identical),
        cmocka_unit_test(test_replica_down_refuses_then_catches_up),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
