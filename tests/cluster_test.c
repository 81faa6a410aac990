/*
 * cluster_test: a coordinator and three real nodes on loopback, every call
 * through liblapse: items spread over all three nodes (checked against the
 * partition map, node by node), CRUD with conditions, query with every sort
 * key operator and pagination, scan with segments, batch writes, tables
 * listed, described and deleted. Asynchronous calls and calls on a stale
 * map are in async_test.c.
 */
#define TESTUTIL_THREE_NODE_GROUP /* g_cluster, g_client, group_setup, group_teardown */
#include "testutil.h"

#include <jansson.h>

#include "../placement/pmap.h"
#include "../rpc/rpc.h"
#include "../rpc/wire.h"
#include "testmap.h"

/* The coordinator's current partition map, straight off the wire. */
static pmap *fetch_map(void)
{
    return testmap_fetch(g_cluster);
}

/* Scans one partition directly on one node; returns the status, and the item
 * count through *count. */
static int scan_on_node(int node, const char *table, uint32_t part, uint64_t pmap_version,
                        size_t *count)
{
    rpc_client *rc = NULL;
    char err[256];
    assert_int_equal(rpc_client_open(&rc, cluster_node_url(g_cluster, node), err, sizeof(err)), 0);
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__ScanRequest body = LAPSE__SCAN_REQUEST__INIT;
    body.table = (char *)table;
    body.partition = part;
    req.body_case = LAPSE__REQUEST__BODY_SCAN;
    req.scan = &body;
    req.pmap_version = pmap_version;
    Lapse__Response *resp = NULL;
    int rv = rpc_call(rc, &req, 3000, &resp, err, sizeof(err));
    *count = 0;
    if (rv == 0) {
        assert_non_null(resp->page);
        *count = resp->page->n_items;
        /* A page of a small partition is complete. */
        assert_null(resp->page->last_evaluated_key);
    }
    rpc_response_free(resp);
    rpc_client_close(rc);
    return rv;
}

static void test_items_spread_over_all_nodes(void **state)
{
    (void)state;
    lapse_error e = {0};
    create_keyed_table(g_client, "Spread", "Id", 'S', NULL, 0, 64);
    for (int i = 0; i < 600; i++) {
        lapse_item *it = item_json("{\"Id\":{\"S\":\"key-%d\"},\"V\":{\"N\":\"%d\"}}", i, i);
        assert_lapse_ok(lapse_put(g_client, "Spread", it, NULL, &e), &e);
        lapse_item_free(it);
    }

    pmap *pm = fetch_map();
    const pmap_table *t = pmap_table_find(pm, "Spread");
    assert_non_null(t);
    size_t per_node[4] = {0};
    size_t total = 0;
    for (uint32_t p = 0; p < t->schema.partitions; p++) {
        uint32_t owner = pmap_owner(t, p);
        assert_true(owner >= 1 && owner <= 3);
        size_t n = 0;
        assert_int_equal(scan_on_node((int)owner, "Spread", p, pm->version, &n), 0);
        per_node[owner] += n;
        total += n;
        /* Every other node refuses the partition. */
        uint32_t other = owner % 3 + 1;
        assert_int_equal(scan_on_node((int)other, "Spread", p, pm->version, &n), LAPSE_EWRONGNODE);
    }
    assert_int_equal(total, 600);
    for (int n = 1; n <= 3; n++) {
        /* 600 keys over 64 partitions, ~21 partitions a node: far from 0. */
        assert_true(per_node[n] > 100);
    }
    /* Each item sits in the partition its key hashes to. */
    for (int i = 0; i < 600; i += 37) {
        lapse_item *key = item_json("{\"Id\":{\"S\":\"key-%d\"}}", i);
        lapse_item *got = NULL;
        assert_lapse_ok(lapse_get(g_client, "Spread", key, &got, &e), &e);
        assert_non_null(got);
        char want[32];
        snprintf(want, sizeof(want), "%d", i);
        assert_string_equal(lapse_item_get_n(got, "V"), want);
        lapse_item_free(got);
        lapse_item_free(key);
    }
    pmap_free(pm);
}

static void test_crud_and_conditions(void **state)
{
    (void)state;
    lapse_error e = {0};
    create_keyed_table(g_client, "Users", "UserName", 'S', NULL, 0, 0);
    lapse_item *it =
        item_json("{\"UserName\":{\"S\":\"user1\"},\"Age\":{\"N\":\"31\"},"
                  "\"Tags\":{\"L\":[{\"S\":\"a\"},{\"BOOL\":true}]},"
                  "\"Blob\":{\"B\":\"AAEC\"},\"Nested\":{\"M\":{\"x\":{\"NULL\":true}}}}");
    lapse_condition not_exists = {LAPSE_COND_NOT_EXISTS, "UserName", NULL};
    assert_lapse_ok(lapse_put(g_client, "Users", it, &not_exists, &e), &e);
    assert_lapse_code(lapse_put(g_client, "Users", it, &not_exists, &e), LAPSE_ECONDITION, &e);

    lapse_item *key = item_json("{\"UserName\":{\"S\":\"user1\"}}");
    lapse_item *got = NULL;
    assert_lapse_ok(lapse_get(g_client, "Users", key, &got, &e), &e);
    assert_non_null(got);
    assert_true(lapse_item_equal(got, it));
    lapse_item_free(got);

    lapse_condition age_eq = {LAPSE_COND_EQUALS, "Age", "{\"N\":\"30\"}"};
    lapse_update *u = lapse_update_new();
    assert_lapse_ok(lapse_update_set(u, "Age", "{\"N\":\"32\"}", &e), &e);
    assert_int_equal(lapse_update_remove(u, "Blob"), 0);
    assert_lapse_code(lapse_update_item(g_client, "Users", key, u, &age_eq, NULL, &e),
                      LAPSE_ECONDITION, &e);
    age_eq.value_json = "{\"N\":\"31\"}";
    lapse_item *after = NULL;
    assert_lapse_ok(lapse_update_item(g_client, "Users", key, u, &age_eq, &after, &e), &e);
    assert_string_equal(lapse_item_get_n(after, "Age"), "32");
    assert_null(lapse_item_get_json(after, "Blob"));
    lapse_item_free(after);
    lapse_update_free(u);

    /* The whole-item guard holds for the item exactly as stored, not for
     * the one it was before the update. */
    char *stale = lapse_item_to_json(it);
    assert_lapse_ok(lapse_get(g_client, "Users", key, &got, &e), &e);
    char *now = lapse_item_to_json(got);
    lapse_item_free(got);
    lapse_condition whole = {LAPSE_COND_ITEM_EQUALS, NULL, stale};
    assert_lapse_code(lapse_put(g_client, "Users", it, &whole, &e), LAPSE_ECONDITION, &e);
    whole.value_json = now;
    assert_lapse_ok(lapse_put(g_client, "Users", it, &whole, &e), &e);
    whole.value_json = "{\"UserName\":{\"S\":\"user1\"},\"Age\":5"; /* bad JSON */
    assert_lapse_code(lapse_put(g_client, "Users", it, &whole, &e), LAPSE_EINVAL, &e);
    lapse_free(stale);
    lapse_free(now);

    lapse_condition exists = {LAPSE_COND_EXISTS, "Nope", NULL};
    assert_lapse_code(lapse_delete(g_client, "Users", key, &exists, &e), LAPSE_ECONDITION, &e);
    assert_lapse_ok(lapse_delete(g_client, "Users", key, NULL, &e), &e);
    assert_lapse_ok(lapse_get(g_client, "Users", key, &got, &e), &e);
    assert_null(got);
    /* Deleting what is not there is not an error. */
    assert_lapse_ok(lapse_delete(g_client, "Users", key, NULL, &e), &e);

    lapse_item_free(key);
    lapse_item_free(it);
}

/* Collects a whole query, page by page, and returns the Seq values. */
static size_t query_all(const char *pk, lapse_sk_op op, const char *v1, const char *v2,
                        unsigned limit, int reverse, double *out, size_t max)
{
    lapse_error e = {0};
    lapse_item *start = NULL;
    size_t n = 0;
    for (int pages = 0; pages < 1000; pages++) {
        lapse_query_opts q = {0};
        q.partition_key_json = pk;
        q.sk_op = op;
        q.sk_json = v1;
        q.sk2_json = v2;
        q.limit = limit;
        q.reverse = reverse;
        q.exclusive_start_key = start;
        lapse_page *pg = NULL;
        assert_lapse_ok(lapse_query(g_client, "Events", &q, &pg, &e), &e);
        for (size_t i = 0; i < lapse_page_count(pg); i++) {
            assert_true(n < max);
            out[n++] = atof(lapse_item_get_n(lapse_page_item(pg, i), "Seq"));
        }
        lapse_item_free(start);
        start = lapse_page_last_key(pg) ? lapse_item_dup(lapse_page_last_key(pg)) : NULL;
        lapse_page_free(pg);
        if (start == NULL) {
            return n;
        }
    }
    fail_msg("query did not finish in 1000 pages");
    return n;
}

static void test_query_sort_keys_and_pages(void **state)
{
    (void)state;
    lapse_error e = {0};
    create_keyed_table(g_client, "Events", "Device", 'S', "Seq", 'N', 16);
    /* Seq from -30 to 29.5 in halves, put in a scrambled order. */
    for (int i = 0; i < 120; i++) {
        int j = (i * 77) % 120;
        char num[32];
        snprintf(num, sizeof(num), "%g", -30 + j * 0.5);
        lapse_item *it = item_json(
            "{\"Device\":{\"S\":\"d1\"},\"Seq\":{\"N\":\"%s\"},\"P\":{\"S\":\"x\"}}", num);
        assert_lapse_ok(lapse_put(g_client, "Events", it, NULL, &e), &e);
        lapse_item_free(it);
    }
    lapse_item *other = item_json("{\"Device\":{\"S\":\"d2\"},\"Seq\":{\"N\":\"0\"}}");
    assert_lapse_ok(lapse_put(g_client, "Events", other, NULL, &e), &e);
    lapse_item_free(other);

    double got[200];
    const char *pk = "{\"S\":\"d1\"}";
    size_t n = query_all(pk, LAPSE_SK_NONE, NULL, NULL, 7, 0, got, 200);
    assert_int_equal(n, 120);
    for (size_t i = 0; i < n; i++) {
        assert_true(got[i] == -30 + (double)i * 0.5); /* ascending, each once */
    }
    n = query_all(pk, LAPSE_SK_NONE, NULL, NULL, 11, 1, got, 200);
    assert_int_equal(n, 120);
    assert_true(got[0] == 29.5 && got[119] == -30);

    assert_int_equal(query_all(pk, LAPSE_SK_EQ, "{\"N\":\"-2.5\"}", NULL, 0, 0, got, 200), 1);
    assert_true(got[0] == -2.5);
    assert_int_equal(query_all(pk, LAPSE_SK_LT, "{\"N\":\"-29\"}", NULL, 0, 0, got, 200), 2);
    assert_int_equal(query_all(pk, LAPSE_SK_LE, "{\"N\":\"-29\"}", NULL, 0, 0, got, 200), 3);
    assert_int_equal(query_all(pk, LAPSE_SK_GT, "{\"N\":\"29\"}", NULL, 0, 0, got, 200), 1);
    assert_int_equal(query_all(pk, LAPSE_SK_GE, "{\"N\":\"29\"}", NULL, 3, 0, got, 200), 2);
    n = query_all(pk, LAPSE_SK_BETWEEN, "{\"N\":\"-1\"}", "{\"N\":\"1.0\"}", 2, 1, got, 200);
    assert_int_equal(n, 5);
    assert_true(got[0] == 1 && got[4] == -1);

    /* begins_with on a string sort key. */
    create_keyed_table(g_client, "Files", "Owner", 'S', "Path", 'S', 4);
    const char *paths[] = {"a/b", "a/c", "ab", "a", "b/a", "a/b/c"};
    for (size_t i = 0; i < 6; i++) {
        lapse_item *it =
            item_json("{\"Owner\":{\"S\":\"o\"},\"Path\":{\"S\":\"%s\"},\"Seq\":{\"N\":\"%zu\"}}",
                      paths[i], i);
        assert_lapse_ok(lapse_put(g_client, "Files", it, NULL, &e), &e);
        lapse_item_free(it);
    }
    lapse_query_opts q = {0};
    q.partition_key_json = "{\"S\":\"o\"}";
    q.sk_op = LAPSE_SK_BEGINS_WITH;
    q.sk_json = "{\"S\":\"a/\"}";
    lapse_page *pg = NULL;
    assert_lapse_ok(lapse_query(g_client, "Files", &q, &pg, &e), &e);
    assert_int_equal(lapse_page_count(pg), 3);
    assert_string_equal(lapse_item_get_s(lapse_page_item(pg, 0), "Path"), "a/b");
    assert_string_equal(lapse_item_get_s(lapse_page_item(pg, 1), "Path"), "a/b/c");
    assert_string_equal(lapse_item_get_s(lapse_page_item(pg, 2), "Path"), "a/c");
    lapse_page_free(pg);
}

/* Scans a table (optionally one segment of n) and counts how often each
 * Id number appears. */
static void scan_count(const char *table, unsigned seg, unsigned nseg, unsigned limit, int *seen,
                       int max)
{
    lapse_error e = {0};
    lapse_item *start = NULL;
    for (int pages = 0; pages < 10000; pages++) {
        lapse_scan_opts o = {
            .limit = limit, .segment = seg, .total_segments = nseg, .exclusive_start_key = start};
        lapse_page *pg = NULL;
        assert_lapse_ok(lapse_scan(g_client, table, &o, &pg, &e), &e);
        for (size_t i = 0; i < lapse_page_count(pg); i++) {
            int id = atoi(lapse_item_get_n(lapse_page_item(pg, i), "Id"));
            assert_true(id >= 0 && id < max);
            seen[id]++;
        }
        if (limit > 0) {
            assert_true(lapse_page_count(pg) <= limit);
        }
        lapse_item_free(start);
        start = lapse_page_last_key(pg) ? lapse_item_dup(lapse_page_last_key(pg)) : NULL;
        lapse_page_free(pg);
        if (start == NULL) {
            return;
        }
    }
    fail_msg("scan did not finish");
}

static void test_batch_write_and_scan_segments(void **state)
{
    (void)state;
    enum { N = 2500 };
    lapse_error e = {0};
    create_keyed_table(g_client, "Batch", "Id", 'N', NULL, 0, 32);
    lapse_item **items = calloc(N, sizeof(*items));
    for (int i = 0; i < N; i++) {
        items[i] = item_json("{\"Id\":{\"N\":\"%d\"},\"Pad\":{\"S\":\"%0100d\"}}", i, i);
    }
    assert_lapse_ok(lapse_batch_write(g_client, "Batch", items, N, NULL, 0, &e), &e);

    int *seen = calloc(N, sizeof(int));
    scan_count("Batch", 0, 0, 97, seen, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(seen[i], 1);
    }
    memset(seen, 0, N * sizeof(int));
    for (unsigned s = 0; s < 5; s++) {
        scan_count("Batch", s, 5, 0, seen, N);
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(seen[i], 1);
    }

    /* Batch deletes of the even ids. */
    lapse_item **keys = calloc(N / 2, sizeof(*keys));
    for (int i = 0; i < N / 2; i++) {
        keys[i] = item_json("{\"Id\":{\"N\":\"%d\"}}", 2 * i);
    }
    assert_lapse_ok(lapse_batch_write(g_client, "Batch", NULL, 0, keys, N / 2, &e), &e);
    memset(seen, 0, N * sizeof(int));
    scan_count("Batch", 0, 0, 0, seen, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(seen[i], i % 2);
    }

    /* Batch get of every key, across all three nodes at once: results are
     * aligned with the keys, the deleted even ids absent. */
    lapse_item **all_keys = calloc(N, sizeof(*all_keys));
    lapse_item **got = calloc(N, sizeof(*got));
    for (int i = 0; i < N; i++) {
        all_keys[i] = item_json("{\"Id\":{\"N\":\"%d\"}}", i);
    }
    assert_lapse_ok(lapse_batch_get(g_client, "Batch", all_keys, N, got, &e), &e);
    for (int i = 0; i < N; i++) {
        if (i % 2 == 0) {
            assert_null(got[i]);
            continue;
        }
        assert_non_null(got[i]);
        assert_int_equal(atoi(lapse_item_get_n(got[i], "Id")), i);
        assert_true(lapse_item_equal(got[i], items[i]));
        lapse_item_free(got[i]);
    }
    /* A bad key is refused before anything is sent. */
    lapse_item *bad = item_json("{\"Id\":{\"S\":\"x\"}}");
    lapse_item *one = NULL;
    assert_lapse_code(lapse_batch_get(g_client, "Batch", &bad, 1, &one, &e), LAPSE_EINVAL, &e);
    assert_null(one);
    lapse_item_free(bad);
    for (int i = 0; i < N; i++) {
        lapse_item_free(all_keys[i]);
    }
    free(all_keys);
    free(got);
    for (int i = 0; i < N; i++) {
        lapse_item_free(items[i]);
    }
    for (int i = 0; i < N / 2; i++) {
        lapse_item_free(keys[i]);
    }
    free(items);
    free(keys);
    free(seen);
}

static void test_tables_listed_described_and_deleted(void **state)
{
    (void)state;
    lapse_error e = {0};
    create_keyed_table(g_client, "Listed", "Id", 'B', "Sk", 'S', 4);
    lapse_table_def dup = {
        .name = "Listed", .partition_key = "Id", .partition_key_type = 'B', .partitions = 4};
    assert_lapse_code(lapse_create_table(g_client, &dup, &e), LAPSE_EEXISTS, &e);
    char *js = NULL;
    assert_lapse_ok(lapse_list_tables(g_client, &js, &e), &e);
    assert_non_null(strstr(js, "\"Listed\""));
    lapse_free(js);
    assert_lapse_ok(lapse_describe_table(g_client, "Listed", &js, &e), &e);
    json_error_t jerr;
    json_t *root = json_loads(js, 0, &jerr);
    assert_non_null(root);
    json_t *t = json_object_get(root, "Table");
    assert_string_equal(json_string_value(json_object_get(t, "TableName")), "Listed");
    assert_int_equal(json_integer_value(json_object_get(t, "PartitionCount")), 4);
    json_decref(root);
    lapse_free(js);
    assert_lapse_ok(lapse_delete_table(g_client, "Listed", &e), &e);
    assert_lapse_code(lapse_describe_table(g_client, "Listed", &js, &e), LAPSE_ENOTFOUND, &e);
    lapse_item *key = item_json("{\"Id\":{\"B\":\"AA==\"},\"Sk\":{\"S\":\"x\"}}");
    lapse_item *got = NULL;
    assert_lapse_code(lapse_get(g_client, "Listed", key, &got, &e), LAPSE_ENOTFOUND, &e);
    assert_non_null(strstr(e.message, "Listed"));
    lapse_item_free(key);

    assert_lapse_ok(lapse_cluster_status(g_client, &js, &e), &e);
    root = json_loads(js, 0, &jerr);
    assert_non_null(root);
    assert_int_equal(json_array_size(json_object_get(root, "Nodes")), 3);
    json_decref(root);
    lapse_free(js);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_items_spread_over_all_nodes),
        cmocka_unit_test(test_crud_and_conditions),
        cmocka_unit_test(test_query_sort_keys_and_pages),
        cmocka_unit_test(test_batch_write_and_scan_segments),
        cmocka_unit_test(test_tables_listed_described_and_deleted),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
