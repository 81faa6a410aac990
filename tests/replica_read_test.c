/*
 * replica_read_test: eventually consistent reads (docs/replication.md,
 * "Reads") on one etcd member, a coordinator and three real nodes serving
 * /metrics, a table of three copies:
 *  - on the wire, each node asked directly: a strongly consistent get,
 *    query, scan or batch get is answered by the partition's primary only
 *    (WRONG_NODE elsewhere); an eventually consistent one by every in-sync
 *    copy, with the same items; before the partition took any write only
 *    the primary answers (a copy with no record may be new or wiped);
 *  - through liblapse, eventually consistent gets of one primary's keys are
 *    spread over all three copies (each node's get count, from /metrics),
 *    and batch get, query and scan read every item;
 *  - a copy that its primaries took out of the in-sync sets (a test fault
 *    switch makes it refuse their records) refuses eventually consistent
 *    reads from then on, so it never serves its older items: liblapse's
 *    reads, sent there by a map that still says it is in sync, end at the
 *    primary and read the latest values. Healed, it rejoins and matches;
 *  - sixteen writers share replication rounds and calls (group commit), and
 *    on a table of one copy their puts and gets share frames and are served
 *    quick (docs/wire-protocol.md, "Coalesced calls"), from /metrics.
 */
#include "testutil.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../rpc/rpc.h"
#include "replset_testutil.h"
#include "scrape.h"

#define PARTS 4
#define TABLE "evc"
#define KEYS 40

static int group_setup(void **state)
{
    (void)state;
    return rs_group_setup_faults(NULL, 1);
}

/* ---- direct calls to one node ---- */

typedef struct key_pb {
    char id[32];
    Lapse__AttributeValue v;
    Lapse__Attribute attr;
    Lapse__Attribute *attrs[1];
    Lapse__Item item;
} key_pb;

/* The key {Id: k<i>} as a wire Item (in k). */
static Lapse__Item *key_of(key_pb *k, int i)
{
    snprintf(k->id, sizeof(k->id), "k%d", i);
    lapse__attribute_value__init(&k->v);
    k->v.value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_S;
    k->v.s.data = (uint8_t *)k->id;
    k->v.s.len = strlen(k->id);
    lapse__attribute__init(&k->attr);
    k->attr.name = "Id";
    k->attr.value = &k->v;
    k->attrs[0] = &k->attr;
    lapse__item__init(&k->item);
    k->item.attrs = k->attrs;
    k->item.n_attrs = 1;
    return &k->item;
}

/* Sends req to node; returns the call's Lapse code, *resp the reply when
 * it is 0 (caller frees). */
static int node_call(int node, Lapse__Request *req, Lapse__Response **resp)
{
    char err[256];
    int rv = rs_call(node, req, resp, err, sizeof(err));
    if (rv != 0 && rv != LAPSE_EWRONGNODE) {
        fail_msg("call %d on node %d: %s: %s", (int)req->body_case, node, lapse_strerror(rv), err);
    }
    return rv;
}

/* The text of item's attribute V ("" when it has none). */
static void value_of(const Lapse__Item *item, char *out, size_t outlen)
{
    out[0] = '\0';
    for (size_t i = 0; item != NULL && i < item->n_attrs; i++) {
        const Lapse__AttributeValue *v = item->attrs[i]->value;
        if (strcmp(item->attrs[i]->name, "V") == 0 &&
            v->value_case == LAPSE__ATTRIBUTE_VALUE__VALUE_S) {
            snprintf(out, outlen, "%.*s", (int)v->s.len, (const char *)v->s.data);
        }
    }
}

/* GetItem k<i> on node: the Lapse code; with 0, *v is the item's V ("" when
 * there is no item). */
static int get_on(int node, int i, int eventual, char *v, size_t vlen)
{
    key_pb k;
    Lapse__GetItemRequest body = LAPSE__GET_ITEM_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    body.table = TABLE;
    body.key = key_of(&k, i);
    body.eventually_consistent = eventual;
    req.body_case = LAPSE__REQUEST__BODY_GET_ITEM;
    req.get_item = &body;
    int rv = node_call(node, &req, &resp);
    if (rv == 0) {
        value_of(resp->get_item->item, v, vlen);
        rpc_response_free(resp);
    }
    return rv;
}

/* Scan of partition part on node: the Lapse code; with 0, *items counts
 * what it returned (a page holds every item of these small partitions). */
static int scan_on(int node, uint32_t part, int eventual, size_t *items)
{
    Lapse__ScanRequest body = LAPSE__SCAN_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    body.table = TABLE;
    body.partition = part;
    body.eventually_consistent = eventual;
    req.body_case = LAPSE__REQUEST__BODY_SCAN;
    req.scan = &body;
    int rv = node_call(node, &req, &resp);
    if (rv == 0) {
        assert_null(resp->page->last_evaluated_key);
        *items = resp->page->n_items;
        rpc_response_free(resp);
    }
    return rv;
}

/* Query of partition key k<i> on node: the Lapse code; with 0, *v is the
 * one item's V. */
static int query_on(int node, int i, int eventual, char *v, size_t vlen)
{
    key_pb k;
    Lapse__QueryRequest body = LAPSE__QUERY_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    body.table = TABLE;
    body.partition_key = key_of(&k, i)->attrs[0]->value;
    body.eventually_consistent = eventual;
    req.body_case = LAPSE__REQUEST__BODY_QUERY;
    req.query = &body;
    int rv = node_call(node, &req, &resp);
    if (rv == 0) {
        assert_int_equal(resp->page->n_items, 1);
        value_of(resp->page->items[0], v, vlen);
        rpc_response_free(resp);
    }
    return rv;
}

/* BatchGet of every key on node: how many it left unprocessed; every key
 * it processed has V want. */
static size_t batch_get_on(int node, int eventual, const char *want)
{
    static key_pb k[KEYS];
    Lapse__Item *keys[KEYS];
    Lapse__BatchGetRequest body = LAPSE__BATCH_GET_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    for (int i = 0; i < KEYS; i++) {
        keys[i] = key_of(&k[i], i);
    }
    body.table = TABLE;
    body.keys = keys;
    body.n_keys = KEYS;
    body.eventually_consistent = eventual;
    req.body_case = LAPSE__REQUEST__BODY_BATCH_GET;
    req.batch_get = &body;
    assert_int_equal(node_call(node, &req, &resp), 0);
    const Lapse__BatchGetResponse *bg = resp->batch_get;
    assert_int_equal(bg->n_items, KEYS);
    char *skip = calloc(KEYS, 1);
    for (size_t j = 0; j < bg->n_unprocessed; j++) {
        skip[bg->unprocessed[j]] = 1;
    }
    for (int i = 0; i < KEYS; i++) {
        char v[64];
        value_of(bg->items[i], v, sizeof(v));
        if (!skip[i] && strcmp(v, want) != 0) {
            fail_msg("batch get on node %d: k%d has V \"%s\", not \"%s\"", node, i, v, want);
        }
    }
    size_t un = bg->n_unprocessed;
    free(skip);
    rpc_response_free(resp);
    return un;
}

/* ---- helpers ---- */

static int g_primary_of[KEYS]; /* the node answering k<i> strongly */

static void put_all(const char *v)
{
    for (int i = 0; i < KEYS; i++) {
        char id[32];
        snprintf(id, sizeof(id), "k%d", i);
        rs_put_retrying(TABLE, id, v);
    }
}

/* The GetItem calls node answered OK, from its /metrics. */
static double gets_served(int node)
{
    char *text = scrape_get(cluster_metrics_addr(rs_cluster(), node), 3000);
    assert_non_null(text);
    double n = scrape_sum(text, "lapse_rpc_requests_total", "call=\"GetItem\",status=\"OK\"");
    free(text);
    return n;
}

/* How the coordinator shows node as a follower of TABLE's sets, in
 * cluster-status (describe 0) or describe-table (1). */
typedef struct follower_view {
    int sets;        /* sets it follows */
    int out_of_sync; /* of those, the ones it is out of sync in */
    int lag_known;   /* the ones with a LagRecords */
    long long max_lag;
    long long under; /* cluster-status' UnderReplicated (-1 in describe-table) */
} follower_view;

static follower_view view_of(int describe, uint32_t node)
{
    lapse_error e = {0};
    char *text = NULL;
    follower_view v = {0, 0, 0, 0, -1};
    if (describe) {
        assert_lapse_ok(lapse_describe_table(rs_client(), TABLE, &text, &e), &e);
    } else {
        assert_lapse_ok(lapse_cluster_status(rs_client(), &text, &e), &e);
    }
    json_error_t je;
    json_t *doc = json_loads(text, 0, &je);
    assert_non_null(doc);
    json_t *sets = describe ? json_object_get(json_object_get(doc, "Table"), "ReplicaSets")
                            : json_object_get(doc, "ReplicaSets");
    if (!describe) {
        v.under = json_integer_value(json_object_get(doc, "UnderReplicated"));
    }
    assert_true(json_array_size(sets) > 0);
    size_t i, j;
    json_t *set, *f;
    json_array_foreach(sets, i, set)
    {
        const char *t = json_string_value(json_object_get(set, "Table"));
        if (!describe && (t == NULL || strcmp(t, TABLE) != 0)) {
            continue;
        }
        json_array_foreach(json_object_get(set, "Followers"), j, f)
        {
            if (json_integer_value(json_object_get(f, "NodeId")) != node) {
                continue;
            }
            v.sets++;
            v.out_of_sync += !json_is_true(json_object_get(f, "InSync"));
            json_t *lag = json_object_get(f, "LagRecords");
            if (lag != NULL) {
                v.lag_known++;
                if (json_integer_value(lag) > v.max_lag) {
                    v.max_lag = json_integer_value(lag);
                }
            }
        }
    }
    json_decref(doc);
    lapse_free(text);
    return v;
}

/* Sums metric (with labels) over the three nodes' /metrics. */
static double metric_sum(const char *name, const char *labels)
{
    double sum = 0;
    for (int node = 1; node <= 3; node++) {
        char *text = scrape_get(cluster_metrics_addr(rs_cluster(), node), 3000);
        assert_non_null(text);
        assert_non_null(strstr(text, "lapse_failover_promotions_total"));
        sum += scrape_sum(text, name, labels);
        free(text);
    }
    return sum;
}

/* ---- tests ---- */

static void test_copies_answer_eventually_consistent_reads(void **state)
{
    (void)state;
    rs_create_rf3(TABLE, PARTS);
    pmap_free(rs_wait_all_in_sync(TABLE));

    /* No write yet: no copy holds a record, so only the primary answers
     * even an eventually consistent read (a copy with none may be wiped). */
    char v[64];
    for (int i = 0; i < KEYS; i++) {
        int answered = 0;
        for (int node = 1; node <= 3; node++) {
            if (get_on(node, i, 1, v, sizeof(v)) == 0) {
                assert_string_equal(v, "");
                answered++;
                g_primary_of[i] = node;
            }
        }
        assert_int_equal(answered, 1);
    }

    put_all("a");
    for (int i = 0; i < KEYS; i++) {
        int strong = 0;
        for (int node = 1; node <= 3; node++) {
            assert_int_equal(get_on(node, i, 1, v, sizeof(v)), 0);
            assert_string_equal(v, "a");
            if (get_on(node, i, 0, v, sizeof(v)) == 0) {
                assert_string_equal(v, "a");
                assert_int_equal(node, g_primary_of[i]);
                strong++;
            }
            assert_int_equal(query_on(node, i, 1, v, sizeof(v)), 0);
            assert_string_equal(v, "a");
            int q = query_on(node, i, 0, v, sizeof(v));
            assert_int_equal(q, node == g_primary_of[i] ? 0 : LAPSE_EWRONGNODE);
        }
        assert_int_equal(strong, 1);
    }

    for (int node = 1; node <= 3; node++) {
        size_t total = 0, led = 0;
        for (uint32_t p = 0; p < PARTS; p++) {
            size_t n = 0;
            assert_int_equal(scan_on(node, p, 1, &n), 0);
            total += n;
            size_t strong_n = 0;
            if (scan_on(node, p, 0, &strong_n) == 0) {
                assert_int_equal(strong_n, n);
                led++;
            }
        }
        assert_int_equal(total, KEYS);
        assert_true(led >= 1 && led < PARTS); /* some partitions, not all */

        int mine = 0;
        for (int i = 0; i < KEYS; i++) {
            mine += g_primary_of[i] == node;
        }
        assert_int_equal(batch_get_on(node, 1, "a"), 0);
        assert_int_equal(batch_get_on(node, 0, "a"), (size_t)(KEYS - mine));
    }
}

static void test_client_spreads_reads_over_the_copies(void **state)
{
    (void)state;
    lapse_client *c = rs_client();
    lapse_error e = {0};
    int ids[KEYS], n = 0;
    for (int i = 0; i < KEYS; i++) {
        if (g_primary_of[i] == 1) {
            ids[n++] = i;
        }
    }
    assert_true(n > 0);

    /* Gets of node 1's keys: strongly consistent ones all go to node 1;
     * eventually consistent ones to every copy in turn. */
    double before[4], after[4];
    for (int node = 1; node <= 3; node++) {
        before[node] = gets_served(node);
    }
    lapse_read_opts ro = {.eventually_consistent = 1};
    for (int j = 0; j < 60; j++) {
        lapse_item *key = item_json("{\"Id\":{\"S\":\"k%d\"}}", ids[j % n]), *got = NULL;
        assert_lapse_ok(lapse_get_opts(c, TABLE, key, &ro, &got, &e), &e);
        assert_non_null(got);
        lapse_item_free(got);
        lapse_item_free(key);
    }
    for (int node = 1; node <= 3; node++) {
        after[node] = gets_served(node);
    }
    double all = 0;
    for (int node = 1; node <= 3; node++) {
        double got = after[node] - before[node];
        if (got < 10) {
            fail_msg("node %d answered %.0f of 60 eventually consistent gets: not spread", node,
                     got);
        }
        all += got;
    }
    assert_true(all == 60);

    /* Batch get, query and scan read every item. */
    lapse_item *keys[KEYS], *out[KEYS];
    for (int i = 0; i < KEYS; i++) {
        keys[i] = item_json("{\"Id\":{\"S\":\"k%d\"}}", i);
    }
    assert_lapse_ok(lapse_batch_get_opts(c, TABLE, keys, KEYS, &ro, out, &e), &e);
    for (int i = 0; i < KEYS; i++) {
        assert_non_null(out[i]);
        lapse_item_free(out[i]);
        lapse_item_free(keys[i]);
    }
    lapse_query_opts q = {.partition_key_json = "{\"S\":\"k7\"}", .eventually_consistent = 1};
    lapse_page *page = NULL;
    assert_lapse_ok(lapse_query(c, TABLE, &q, &page, &e), &e);
    assert_int_equal(lapse_page_count(page), 1);
    lapse_page_free(page);
    lapse_scan_opts so = {.eventually_consistent = 1};
    assert_lapse_ok(lapse_scan(c, TABLE, &so, &page, &e), &e);
    assert_int_equal(lapse_page_count(page), KEYS);
    lapse_page_free(page);
}

static void test_copy_out_of_the_set_refuses(void **state)
{
    (void)state;
    lapse_client *c = rs_client();
    lapse_error e = {0};
    char v[64];
    int followed = 0, led = 0;

    /* Node 3 refuses its primaries' records: the new values are
     * acknowledged by the other two copies and node 3 leaves the sets it
     * follows, keeping the old values. */
    follower_view before = view_of(0, 3);
    assert_true(before.sets > 0);
    assert_int_equal(before.out_of_sync, 0);
    assert_int_equal(before.under, 0);
    assert_true(metric_sum("lapse_replica_sets_led", NULL) == PARTS);
    assert_true(metric_sum("lapse_replica_sets_under_replicated", NULL) == 0);
    rs_refuse_replicate_log(3, 1);
    put_all("b");
    rs_follower_and_primary_sets(TABLE, 3, &followed, &led);
    assert_int_equal(followed, 0);

    /* cluster-status, describe-table and the primaries' /metrics show node
     * 3 out of the sets it follows, and behind (the primaries' next
     * heartbeats carry it: bounded wait). */
    follower_view now = {0};
    for (int tries = 0; tries < 100; tries++) {
        now = view_of(0, 3);
        if (now.lag_known == before.sets && now.max_lag > 0) {
            break;
        }
        rs_sleep_ms(100);
    }
    assert_int_equal(now.out_of_sync, before.sets);
    assert_int_equal(now.lag_known, before.sets);
    assert_true(now.max_lag > 0);
    assert_true(now.under >= before.sets);
    follower_view desc = view_of(1, 3);
    assert_int_equal(desc.sets, before.sets);
    assert_int_equal(desc.out_of_sync, before.sets);
    assert_true(desc.max_lag > 0);
    assert_true(metric_sum("lapse_replica_sets_under_replicated", NULL) >= before.sets);
    assert_true(metric_sum("lapse_replication_lag_records", "follower=\"3\"") > 0);
    assert_true(metric_sum("lapse_replica_sets_by_in_sync", "in_sync=\"2\"") >= before.sets);

    /* Once its own map says so (bounded wait), node 3 refuses eventually
     * consistent reads of the partitions it no longer holds in sync. */
    for (int i = 0; i < KEYS; i++) {
        if (g_primary_of[i] == 3) {
            continue;
        }
        int rv = 0;
        for (int tries = 0; tries < 100 && (rv = get_on(3, i, 1, v, sizeof(v))) == 0; tries++) {
            assert_string_equal(v, "a"); /* its copy is behind */
            rs_sleep_ms(100);
        }
        assert_int_equal(rv, LAPSE_EWRONGNODE);
    }

    /* liblapse's eventually consistent reads all read the new values,
     * whichever copy its map sends them to first. */
    lapse_read_opts ro = {.eventually_consistent = 1};
    for (int j = 0; j < 3 * KEYS; j++) {
        lapse_item *key = item_json("{\"Id\":{\"S\":\"k%d\"}}", j % KEYS), *got = NULL;
        assert_lapse_ok(lapse_get_opts(c, TABLE, key, &ro, &got, &e), &e);
        char *json = lapse_item_to_json(got);
        assert_non_null(strstr(json, "\"b\""));
        lapse_free(json);
        lapse_item_free(got);
        lapse_item_free(key);
    }

    /* Healed, node 3 rejoins and serves the new values. */
    rs_refuse_replicate_log(3, 0);
    pmap_free(rs_wait_all_in_sync(TABLE));
    rs_assert_copies_match(TABLE);
    for (int tries = 0; tries < 100; tries++) {
        now = view_of(0, 3);
        if (now.max_lag == 0) {
            break;
        }
        rs_sleep_ms(100);
    }
    assert_int_equal(now.out_of_sync, 0);
    assert_int_equal(now.max_lag, 0);
    assert_int_equal(now.under, 0);
    assert_true(metric_sum("lapse_replica_sets_under_replicated", NULL) == 0);
    for (int i = 0; i < KEYS; i++) {
        int rv = LAPSE_EWRONGNODE;
        for (int tries = 0; tries < 100 && (rv = get_on(3, i, 1, v, sizeof(v))) != 0; tries++) {
            rs_sleep_ms(100);
        }
        assert_int_equal(rv, 0);
        assert_string_equal(v, "b");
    }
}

/* ---- group commit ---- */

#define GC_THREADS 16
#define GC_PUTS 60 /* per thread */

typedef struct gc_writer {
    int id;
    const char *table;
    int acked;
    char err[640];
} gc_writer;

/* Puts g<id>-<n> on w->table, then reads it back strongly. */
static void *gc_main(void *arg)
{
    gc_writer *w = arg;
    for (int n = 0; n < GC_PUTS; n++) {
        lapse_item *it = item_json("{\"Id\":{\"S\":\"g%d-%d\"},\"V\":{\"N\":\"%d\"}}", w->id, n, n);
        lapse_error e = {0};
        int rv = lapse_put(rs_client(), w->table, it, NULL, &e);
        lapse_item_free(it);
        if (rv != 0) {
            snprintf(w->err, sizeof(w->err), "put g%d-%d: %s", w->id, n, e.message);
            return NULL;
        }
        lapse_item *key = item_json("{\"Id\":{\"S\":\"g%d-%d\"}}", w->id, n);
        lapse_item *got = NULL;
        rv = lapse_get(rs_client(), w->table, key, &got, &e);
        lapse_item_free(key);
        if (rv != 0 || got == NULL) {
            snprintf(w->err, sizeof(w->err), "get g%d-%d after its put: %s", w->id, n,
                     rv != 0 ? e.message : "absent");
            return NULL;
        }
        lapse_item_free(got);
        w->acked++;
    }
    return NULL;
}

/* Sixteen writers on table (of three copies, partitions of them), every
 * put acknowledged and read back and the copies identical at the end:
 * the replication rounds, calls and records the primaries shipped. */
static void gc_run(const char *table, unsigned partitions, double *rounds, double *calls,
                   double *records)
{
    rs_create_rf3(table, partitions);
    pmap_free(rs_wait_all_in_sync(table));
    double rounds0 = metric_sum("lapse_replication_rounds_total", NULL);
    double calls0 = metric_sum("lapse_replication_calls_total", NULL);
    double records0 = metric_sum("lapse_replication_round_records_total", NULL);
    double shipments0 = metric_sum("lapse_replication_round_seconds_count", NULL);
    double applies0 = metric_sum("lapse_replication_apply_seconds_count", NULL);
    gc_writer w[GC_THREADS];
    pthread_t th[GC_THREADS];
    for (int i = 0; i < GC_THREADS; i++) {
        w[i] = (gc_writer){.id = i, .table = table};
        assert_int_equal(pthread_create(&th[i], NULL, gc_main, &w[i]), 0);
    }
    int acked = 0;
    for (int i = 0; i < GC_THREADS; i++) {
        pthread_join(th[i], NULL);
        if (w[i].err[0] != 0) {
            fail_msg("writer %d: %s", i, w[i].err);
        }
        acked += w[i].acked;
    }
    assert_int_equal(acked, GC_THREADS * GC_PUTS);
    *rounds = metric_sum("lapse_replication_rounds_total", NULL) - rounds0;
    *calls = metric_sum("lapse_replication_calls_total", NULL) - calls0;
    *records = metric_sum("lapse_replication_round_records_total", NULL) - records0;
    /* Each shipment timed once, and it went to both followers (three
     * nodes, three copies); each call applied and timed on its follower. */
    double shipments = metric_sum("lapse_replication_round_seconds_count", NULL) - shipments0;
    double applies = metric_sum("lapse_replication_apply_seconds_count", NULL) - applies0;
    assert_true(shipments >= 1 && shipments * 2 == *calls);
    assert_true(applies >= *calls);
    print_message("%s: %d puts from %d threads on %u partitions: %.0f records in %.0f "
                  "replication rounds, %.0f calls\n",
                  table, acked, GC_THREADS, partitions, *records, *rounds, *calls);
    assert_true(*records == (double)acked); /* one record per put, each shipped once */
    assert_int_equal(rs_assert_copies_match(table), (uint64_t)acked);
}

/* On one partition, the primary shipped the puts in fewer rounds than
 * records: concurrent writes shared rounds (group commit). */
static void test_concurrent_writes_share_rounds(void **state)
{
    (void)state;
    double rounds = 0, calls = 0, records = 0;
    gc_run("gcommit", 1, &rounds, &calls, &records);
    assert_true(rounds > 0 && rounds < records * 0.9);
}

/* On 32 partitions, where concurrent writes seldom meet on one, the rounds
 * of different partitions bound for a follower shared calls (node-level
 * group commit): without that, every round is a call to each of its two
 * followers. */
static void test_writes_to_many_partitions_share_calls(void **state)
{
    (void)state;
    double rounds = 0, calls = 0, records = 0;
    gc_run("gcommit32", 32, &rounds, &calls, &records);
    assert_true(calls > 0 && calls < 2 * rounds * 0.9);
}

/* Single-item calls of many threads through one client share frames, and
 * on a table of one copy each is served on the node's receiving thread
 * (quick: nothing to wait for); the nodes' /metrics count both. */
static void test_single_calls_share_frames_and_run_quick(void **state)
{
    (void)state;
    lapse_table_def d = {.name = "frames1",
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .partitions = 8,
                         .replication = 1};
    lapse_error e = {0};
    assert_lapse_ok(lapse_create_table(rs_client(), &d, &e), &e);
    static const char *const names[] = {"lapse_rpc_frames_total",
                                        "lapse_rpc_coalesced_frames_total", "lapse_rpc_calls_total",
                                        "lapse_rpc_quick_calls_total"};
    double before[4], delta[4];
    for (int i = 0; i < 4; i++) {
        before[i] = metric_sum(names[i], NULL);
    }
    gc_writer w[GC_THREADS];
    pthread_t th[GC_THREADS];
    for (int i = 0; i < GC_THREADS; i++) {
        w[i] = (gc_writer){.id = i, .table = "frames1"};
        assert_int_equal(pthread_create(&th[i], NULL, gc_main, &w[i]), 0);
    }
    for (int i = 0; i < GC_THREADS; i++) {
        pthread_join(th[i], NULL);
        if (w[i].err[0] != 0) {
            fail_msg("writer %d: %s", i, w[i].err);
        }
        assert_int_equal(w[i].acked, GC_PUTS);
    }
    for (int i = 0; i < 4; i++) {
        delta[i] = metric_sum(names[i], NULL) - before[i];
    }
    const double items = 2.0 * GC_THREADS * GC_PUTS; /* a put and a get each */
    print_message("%.0f single-item calls: %.0f calls served in %.0f frames (%.0f coalesced), "
                  "%.0f quick\n",
                  items, delta[2], delta[0], delta[1], delta[3]);
    assert_true(delta[3] >= items); /* every put and get of the table, quick */
    assert_true(delta[1] > 0);      /* some frames carried several calls */
    assert_true(delta[0] < delta[2]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copies_answer_eventually_consistent_reads),
        cmocka_unit_test(test_client_spreads_reads_over_the_copies),
        cmocka_unit_test(test_copy_out_of_the_set_refuses),
        cmocka_unit_test(test_concurrent_writes_share_rounds),
        cmocka_unit_test(test_writes_to_many_partitions_share_calls),
        cmocka_unit_test(test_single_calls_share_frames_and_run_quick),
    };
    return cmocka_run_group_tests(tests, group_setup, rs_group_teardown);
}
