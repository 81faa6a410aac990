/*
 * cluster_test: a coordinator and three real nodes on loopback, every call
 * through liblapse: items spread over all three nodes (checked against the
 * partition map, node by node), CRUD with conditions, query with every sort
 * key operator and pagination, scan with segments, batch writes, and
 * WRONG_NODE recovery from a stale partition map.
 */
#include "testutil.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "../common/item.h"

#include "../placement/hash.h"
#include "../placement/pmap.h"
#include "../rpc/rpc.h"
#include "../rpc/wire.h"
#include "testmap.h"

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

static void create(const char *name, const char *pk, char pkt, const char *sk, char skt,
                   unsigned parts)
{
    lapse_table_def d = {.name = name,
                         .partition_key = pk,
                         .partition_key_type = pkt,
                         .sort_key = sk,
                         .sort_key_type = skt,
                         .partitions = parts};
    lapse_error e = {0};
    assert_lapse_ok(lapse_create_table(g_client, &d, &e), &e);
}

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
    create("Spread", "Id", 'S', NULL, 0, 64);
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
    create("Users", "UserName", 'S', NULL, 0, 0);
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
    create("Events", "Device", 'S', "Seq", 'N', 16);
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
    create("Files", "Owner", 'S', "Path", 'S', 4);
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
    create("Batch", "Id", 'N', NULL, 0, 32);
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

/* ---- asynchronous get, put and delete (lapse_*_async) ---- */

/* What the done callbacks of a group of asynchronous calls saw. */
typedef struct async_group {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int left;  /* calls not done yet */
    int calls; /* done calls, over all: each exactly once */
    int status[512];
    lapse_item *got[512]; /* a get's item */
} async_group;

typedef struct async_slot {
    async_group *g;
    int i;
} async_slot;

static void async_finish(async_slot *s, int status, lapse_item *it)
{
    async_group *g = s->g;
    pthread_mutex_lock(&g->mu);
    g->status[s->i] = status;
    g->got[s->i] = it;
    g->calls++;
    g->left--;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void async_get_cb(void *arg, int status, lapse_item *it, const lapse_error *err)
{
    assert_non_null(err);
    async_finish(arg, status, it);
}

static void async_put_cb(void *arg, int status, const lapse_error *err)
{
    assert_non_null(err);
    async_finish(arg, status, NULL);
}

/* Waits (at most 10 s) for every call of g to be done. */
static void async_wait(async_group *g)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&g->mu);
    while (g->left > 0 && pthread_cond_timedwait(&g->cv, &g->mu, &until) == 0) {
    }
    int left = g->left;
    pthread_mutex_unlock(&g->mu);
    assert_int_equal(left, 0);
}

static void async_group_init(async_group *g, int n)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->left = n;
    for (int i = 0; i < n; i++) {
        g->status[i] = -1;
    }
}

/* Puts {Id: PREFIX<i>, V: i} for i < n into table over c, all in flight at
 * once from this thread, each ending in done; waits for them all and
 * checks each succeeded. */
static void put_all_async(lapse_client *c, const char *table, char prefix, int n, lapse_done done,
                          async_group *g, async_slot *slots)
{
    lapse_error e = {0};
    async_group_init(g, n);
    for (int i = 0; i < n; i++) {
        slots[i] = (async_slot){g, i};
        lapse_item *it = item_json("{\"Id\":{\"S\":\"%c%d\"},\"V\":{\"N\":\"%d\"}}", prefix, i, i);
        assert_lapse_ok(lapse_put_async(c, table, it, done, &slots[i], &e), &e);
        lapse_item_free(it);
    }
    async_wait(g);
    assert_int_equal(g->calls, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(g->status[i], 0);
    }
}

/* The first n gets of g found their item with V = i; frees them. */
static void check_got_values(async_group *g, int n)
{
    for (int i = 0; i < n; i++) {
        assert_int_equal(g->status[i], 0);
        assert_non_null(g->got[i]);
        char want[32];
        snprintf(want, sizeof want, "%d", i);
        assert_string_equal(lapse_item_get_n(g->got[i], "V"), want);
        lapse_item_free(g->got[i]);
    }
}

static void test_async_get_and_put(void **state)
{
    (void)state;
    enum { N = 300 };
    lapse_error e = {0};
    create("Async", "Id", 'S', NULL, 0, 16);
    static async_group g;
    static async_slot slots[N + 1];

    /* Puts from one thread, all in flight at once. */
    put_all_async(g_client, "Async", 'a', N, async_put_cb, &g, slots);

    /* Gets of every key and of one that is absent; blocking reads agree. */
    async_group_init(&g, N + 1);
    for (int i = 0; i <= N; i++) {
        slots[i] = (async_slot){&g, i};
        lapse_item *key = item_json("{\"Id\":{\"S\":\"a%d\"}}", i);
        lapse_read_opts ro = {.eventually_consistent = i % 2};
        assert_lapse_ok(lapse_get_async(g_client, "Async", key, &ro, async_get_cb, &slots[i], &e),
                        &e);
        lapse_item_free(key);
    }
    async_wait(&g);
    assert_int_equal(g.calls, N + 1);
    check_got_values(&g, N);
    assert_int_equal(g.status[N], 0);
    assert_null(g.got[N]);

    /* Deletes of every other key (and of the absent one: nothing to do);
     * blocking reads see exactly those gone. */
    async_group_init(&g, N / 2 + 1);
    for (int i = 0; i <= N / 2; i++) {
        slots[i] = (async_slot){&g, i};
        lapse_item *k = item_json("{\"Id\":{\"S\":\"a%d\"}}", i < N / 2 ? 2 * i : N);
        assert_lapse_ok(lapse_delete_async(g_client, "Async", k, async_put_cb, &slots[i], &e), &e);
        lapse_item_free(k);
    }
    async_wait(&g);
    for (int i = 0; i <= N / 2; i++) {
        assert_int_equal(g.status[i], 0);
    }
    for (int i = 0; i < N; i++) {
        lapse_item *k = item_json("{\"Id\":{\"S\":\"a%d\"}}", i), *got = NULL;
        assert_lapse_ok(lapse_get(g_client, "Async", k, &got, &e), &e);
        if ((got == NULL) != (i % 2 == 0)) {
            fail_msg("key a%d is %s after the deletes", i, got ? "there" : "gone");
        }
        lapse_item_free(got);
        lapse_item_free(k);
    }

    /* What cannot be sent is refused at once, and done is never called. */
    lapse_item *key = item_json("{\"Id\":{\"S\":\"a1\"}}");
    lapse_item *badkey = item_json("{\"Id\":{\"N\":\"1\"}}");
    async_group_init(&g, 0);
    slots[0] = (async_slot){&g, 0};
    assert_int_equal(
        lapse_get_async(g_client, "NoSuchTable", key, NULL, async_get_cb, &slots[0], &e),
        LAPSE_ENOTFOUND);
    assert_int_equal(lapse_get_async(g_client, "Async", badkey, NULL, async_get_cb, &slots[0], &e),
                     LAPSE_EINVAL);
    assert_int_equal(lapse_put_async(g_client, "Async", badkey, async_put_cb, &slots[0], &e),
                     LAPSE_EINVAL);
    assert_int_equal(lapse_get_async(g_client, "Async", key, NULL, NULL, NULL, &e), LAPSE_EINVAL);
    assert_int_equal(g.calls, 0);

    /* A table the client's map does not hold yet: the asynchronous call
     * does not fetch the map (that blocks), the blocking one does. */
    lapse_client *older = connect_client(g_cluster);
    create("AsyncLater", "Id", 'S', NULL, 0, 4);
    assert_int_equal(lapse_get_async(older, "AsyncLater", key, NULL, async_get_cb, &slots[0], &e),
                     LAPSE_ENOTFOUND);
    assert_int_equal(g.calls, 0);
    lapse_item *got = NULL;
    assert_lapse_ok(lapse_get(older, "AsyncLater", key, &got, &e), &e);
    assert_null(got);
    async_group_init(&g, 1);
    assert_lapse_ok(lapse_get_async(older, "AsyncLater", key, NULL, async_get_cb, &slots[0], &e),
                    &e);
    async_wait(&g);
    assert_int_equal(g.status[0], 0);
    assert_null(g.got[0]);
    lapse_close(older);
    lapse_item_free(key);
    lapse_item_free(badkey);
}

/* A key of table "Moving" whose partition has another primary in after than
 * in before (-1: none among k0..k63). */
static int moved_key(const pmap *before, const pmap *after)
{
    const pmap_table *tb = pmap_table_find(before, "Moving"),
                     *ta = pmap_table_find(after, "Moving");
    for (int i = 0; i < 64; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        attr_value v;
        uint32_t pb, pa;
        assert_int_equal(item_value_init_bytes(&v, ATTR_S, k, strlen(k)), 0);
        assert_int_equal(hash_partition(&v, tb->schema.partitions, &pb), 0);
        assert_int_equal(hash_partition(&v, ta->schema.partitions, &pa), 0);
        item_value_fini(&v);
        if (pmap_owner(tb, pb) != pmap_owner(ta, pa)) {
            return i;
        }
    }
    return -1;
}

/* An asynchronous call on a stale map makes one attempt: the old owner's
 * WRONG_NODE comes back as a retryable status, further asynchronous calls
 * are refused until a blocking call has fetched the map, and then they go. */
static void async_call_on_stale_map(lapse_client *stale, int k)
{
    static async_group g;
    async_slot slot = {&g, 0};
    lapse_error e = {0};
    lapse_item *key = item_json("{\"K\":{\"S\":\"k%d\"}}", k);
    async_group_init(&g, 1);
    assert_lapse_ok(lapse_get_async(stale, "Moving", key, NULL, async_get_cb, &slot, &e), &e);
    async_wait(&g);
    assert_int_equal(g.status[0], LAPSE_EWRONGNODE);
    assert_true(lapse_retryable(g.status[0]));
    assert_int_equal(lapse_get_async(stale, "Moving", key, NULL, async_get_cb, &slot, &e),
                     LAPSE_EWRONGNODE);
    lapse_item *got = NULL;
    assert_lapse_ok(lapse_get(stale, "Moving", key, &got, &e), &e);
    lapse_item_free(got);
    async_group_init(&g, 1);
    assert_lapse_ok(lapse_get_async(stale, "Moving", key, NULL, async_get_cb, &slot, &e), &e);
    async_wait(&g);
    assert_int_equal(g.status[0], 0);
    lapse_item_free(g.got[0]);
    lapse_item_free(key);
}

/* A loop's own descriptor: each time it is readable, counted (on the
 * loop's thread or not) and drained. */
typedef struct own_fd {
    lapse_loop *l;
    int fd;
    atomic_int calls, off_loop;
} own_fd;

static void own_fd_ready(void *arg)
{
    own_fd *o = arg;
    uint64_t n;
    if (read(o->fd, &n, sizeof n) < 0) {
        return; /* drained already */
    }
    atomic_fetch_add(&o->off_loop, !lapse_loop_on_thread(o->l));
    atomic_fetch_add(&o->calls, 1);
}

/* Where the asynchronous calls' callbacks ran. */
static atomic_int g_loop_cb_off;
static lapse_loop *g_cb_loop;

static void loop_put_cb(void *arg, int status, const lapse_error *err)
{
    atomic_fetch_add(&g_loop_cb_off, !lapse_loop_on_thread(g_cb_loop));
    async_put_cb(arg, status, err);
}

static void loop_get_cb(void *arg, int status, lapse_item *it, const lapse_error *err)
{
    atomic_fetch_add(&g_loop_cb_off, !lapse_loop_on_thread(g_cb_loop));
    async_get_cb(arg, status, it, err);
}

/* A client on a lapse_loop (as the DynamoDB gateway's): asynchronous
 * calls' callbacks run on the loop's thread, blocking calls from another
 * thread still work, and the program's own descriptor is served on the
 * same thread until unwatched; bad arguments are EINVAL. */
static void test_client_on_a_loop(void **state)
{
    (void)state;
    enum { N = 200 };
    lapse_error e = {0};
    lapse_loop *l = NULL;
    assert_lapse_ok(lapse_loop_open(&l, &e), &e);
    assert_false(lapse_loop_on_thread(l));
    create("OnLoop", "Id", 'S', NULL, 0, 8); /* before: the client's first map has it */
    lapse_connect_options co = {.loop = l};
    lapse_client *c = NULL;
    assert_lapse_ok(lapse_connect_opts(&c, cluster_coordinator_url(g_cluster), &co, &e), &e);
    g_cb_loop = l;
    atomic_store(&g_loop_cb_off, 0);
    static async_group g;
    static async_slot slots[N];
    put_all_async(c, "OnLoop", 'l', N, loop_put_cb, &g, slots);
    /* A blocking call from this thread, its reply read on the loop. */
    lapse_item *k0 = item_json("{\"Id\":{\"S\":\"l0\"}}"), *got0 = NULL;
    assert_lapse_ok(lapse_get(c, "OnLoop", k0, &got0, &e), &e);
    assert_non_null(got0);
    lapse_item_free(got0);
    lapse_item_free(k0);
    async_group_init(&g, N);
    for (int i = 0; i < N; i++) {
        slots[i] = (async_slot){&g, i};
        lapse_item *k = item_json("{\"Id\":{\"S\":\"l%d\"}}", i);
        assert_lapse_ok(lapse_get_async(c, "OnLoop", k, NULL, loop_get_cb, &slots[i], &e), &e);
        lapse_item_free(k);
    }
    async_wait(&g);
    check_got_values(&g, N);
    assert_int_equal(atomic_load(&g_loop_cb_off), 0);

    own_fd o = {.l = l, .fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
    assert_true(o.fd >= 0);
    assert_lapse_ok(lapse_loop_watch(l, o.fd, own_fd_ready, &o, &e), &e);
    for (int i = 1; i <= 5; i++) {
        uint64_t one = 1;
        assert_int_equal(write(o.fd, &one, sizeof one), (ssize_t)sizeof one);
        for (int t = 0; atomic_load(&o.calls) < i; t++) {
            assert_true(t < 5000);
            usleep(1000);
        }
    }
    lapse_loop_unwatch(l, o.fd);
    uint64_t one = 1;
    assert_int_equal(write(o.fd, &one, sizeof one), (ssize_t)sizeof one);
    usleep(50000);
    assert_int_equal(atomic_load(&o.calls), 5);
    assert_int_equal(atomic_load(&o.off_loop), 0);
    close(o.fd);

    assert_int_equal(lapse_loop_watch(NULL, 0, own_fd_ready, NULL, &e), LAPSE_EINVAL);
    assert_int_equal(lapse_loop_watch(l, -1, own_fd_ready, NULL, &e), LAPSE_EINVAL);
    assert_int_equal(lapse_loop_watch(l, 0, NULL, NULL, &e), LAPSE_EINVAL);
    assert_int_equal(lapse_loop_open(NULL, &e), LAPSE_EINVAL);
    lapse_close(c);
    lapse_loop_close(l);
    lapse_loop_close(NULL);
}

static void test_stale_map_is_refreshed_on_wrong_node(void **state)
{
    (void)state;
    lapse_error e = {0};
    create("Moving", "K", 'S', NULL, 0, 8);
    lapse_client *stale = connect_client(g_cluster); /* caches the map now */
    lapse_client *stale_async = connect_client(g_cluster);
    lapse_item *it = item_json("{\"K\":{\"S\":\"k0\"}}");
    assert_lapse_ok(lapse_put(stale, "Moving", it, NULL, &e), &e);

    /* Recreate the table with every partition on a different node: delete it,
     * create a one-partition table (taking the least loaded node), then the
     * same name again, which the balanced assignment now lays out shifted. */
    pmap *before = fetch_map();
    assert_lapse_ok(lapse_delete_table(g_client, "Moving", &e), &e);
    create("Shim", "K", 'S', NULL, 0, 1);
    create("Moving", "K", 'S', NULL, 0, 8);
    pmap *after = fetch_map();
    int moved = 0;
    for (uint32_t p = 0; p < 8; p++) {
        moved += pmap_owner(pmap_table_find(before, "Moving"), p) !=
                 pmap_owner(pmap_table_find(after, "Moving"), p);
    }
    assert_true(moved > 0);
    int k = moved_key(before, after);
    assert_true(k >= 0);
    async_call_on_stale_map(stale_async, k);
    lapse_close(stale_async);

    /* The stale client routes by its old map, is told WRONG_NODE, refreshes
     * and lands every write; the data of the old table is gone. */
    lapse_item *key = item_json("{\"K\":{\"S\":\"k0\"}}");
    lapse_item *got = NULL;
    assert_lapse_ok(lapse_get(stale, "Moving", key, &got, &e), &e);
    assert_null(got);
    for (int i = 0; i < 64; i++) {
        lapse_item *x = item_json("{\"K\":{\"S\":\"k%d\"}}", i);
        assert_lapse_ok(lapse_put(stale, "Moving", x, NULL, &e), &e);
        lapse_item_free(x);
    }
    int seen = 0;
    lapse_scan_opts o = {0};
    lapse_page *pg = NULL;
    assert_lapse_ok(lapse_scan(g_client, "Moving", &o, &pg, &e), &e);
    seen = (int)lapse_page_count(pg);
    lapse_page_free(pg);
    assert_int_equal(seen, 64);

    pmap_free(before);
    pmap_free(after);
    lapse_item_free(key);
    lapse_item_free(it);
    lapse_close(stale);
}

static void test_tables_listed_described_and_deleted(void **state)
{
    (void)state;
    lapse_error e = {0};
    create("Listed", "Id", 'B', "Sk", 'S', 4);
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
        cmocka_unit_test(test_async_get_and_put),
        cmocka_unit_test(test_client_on_a_loop),
        cmocka_unit_test(test_stale_map_is_refreshed_on_wrong_node),
        cmocka_unit_test(test_tables_listed_described_and_deleted),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
