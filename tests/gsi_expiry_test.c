/*
 * gsi_expiry_test: expired items and GSIs on a real three-node cluster
 * (metrics on), black box through liblapse, with replication_test's
 * fixture (repl_testutil.h):
 *  - hide_expired on a GSI query (keys-only and all projections) never
 *    returns an expired item;
 *  - a mass expiry with kill -9 of the node hosting most shards and of
 *    another node mid-way settles to a GSI equal to the projection of the
 *    base table and a gapless stream with exactly one TTL REMOVE per
 *    expired item and none for live ones.
 * No daemon crashes (teardown).
 */
#include "testutil.h"

#include <signal.h>
#include <sys/wait.h>

#include "repl_testutil.h"

/* ------------------------------------------------------------------------ */
/* hide_expired on GSI queries                                               */
/* ------------------------------------------------------------------------ */

static const lapse_index_def kind_gsi[] = {
    {.name = "KindKeys",
     .partition_key = "Kind",
     .partition_key_type = 'S',
     .projection = LAPSE_PROJECT_KEYS},
    {.name = "KindAll", .partition_key = "Kind", .partition_key_type = 'S', .partitions = 2},
};

/* Polls both GSIs with hide_expired until the 10 live items show; no poll
 * may return an expired one. */
static int only_live_shown(void *arg, int last)
{
    (void)arg;
    (void)last;
    int complete = 1;
    for (int g = 0; g < 2; g++) {
        rt_items got = {0};
        rt_query_all("Paused", kind_gsi[g].name, "{\"S\":\"k\"}", NULL, 1, 3, &got);
        for (size_t i = 0; i < got.n; i++) {
            const char *id = lapse_item_get_s(got.v[i], "User");
            if (strncmp(id, "live", 4) != 0) {
                fail_msg("GSI %s with hide_expired returned expired item %s", kind_gsi[g].name, id);
            }
            /* Keys only: the table's keys, the index's key, the TTL attribute. */
            assert_int_equal(lapse_item_count(got.v[i]), g == 0 ? 4 : 5);
        }
        complete &= got.n == 10;
        rt_items_free(&got);
    }
    return complete;
}

static int expired_still_indexed(void *arg, int last)
{
    (void)arg;
    (void)last;
    rt_items got = {0};
    rt_query_all("Paused", "KindAll", "{\"S\":\"k\"}", NULL, 0, 0, &got);
    int ok = got.n == 20;
    rt_items_free(&got);
    return ok;
}

static void test_hide_expired_on_gsi_queries(void **state)
{
    (void)state;
    lapse_table_def d = {.name = "Paused",
                         .partition_key = "User",
                         .partition_key_type = 'S',
                         .sort_key = "Sid",
                         .sort_key_type = 'N',
                         .partitions = 4,
                         .gsi = kind_gsi,
                         .ngsi = 2};
    rt_create(&d);
    rt_enable_ttl("Paused", "ExpiresAt");
    rt_pause_ttl("Paused"); /* expired items stay stored: only the filter hides them */
    rt_wait_nodes_took_map();
    int64_t now_s = rt_wall_ms() / 1000;
    for (int i = 0; i < 20; i++) {
        lapse_item *it =
            item_json("{\"User\":{\"S\":\"%s%d\"},\"Sid\":{\"N\":\"1\"},\"Kind\":{\"S\":\"k\"},"
                      "\"ExpiresAt\":{\"N\":\"%lld\"},\"Junk\":{\"S\":\"x\"}}",
                      i < 10 ? "live" : "old", i, (long long)(i < 10 ? now_s + 3600 : now_s - 100));
        lapse_error e = {0};
        assert_lapse_ok(lapse_put(rt_client(), "Paused", it, NULL, &e), &e);
        lapse_item_free(it);
    }
    rt_wait_for("the live items in both GSIs", 15000, only_live_shown, NULL);
    rt_wait_for("the expired items in the GSI without the filter", 15000, expired_still_indexed,
                NULL);
    /* Once more, now that everything has arrived. */
    assert_true(only_live_shown(NULL, 1));
}

/* ------------------------------------------------------------------------ */
/* Mass expiry through kill -9                                              */
/* ------------------------------------------------------------------------ */

enum { MASS_ITEMS = 3000, MASS_GROUPS = 10 };

static const lapse_index_def group_gsi[] = {
    {.name = "ByGroup", .partition_key = "Group", .partition_key_type = 'S', .partitions = 8}};

static int base_settled(void *arg, int last)
{
    rt_model *m = arg;
    rt_items got = {0}, want = {0};
    rt_scan_all("Mass", &got);
    rt_model_select(m, NULL, NULL, &want);
    rt_sort(&got, "Id", NULL, NULL);
    rt_sort(&want, "Id", NULL, NULL);
    int ok = rt_items_equal(&got, &want);
    if (!ok && last) {
        rt_assert_items_equal(&got, &want, "table Mass");
    }
    rt_items_free(&got);
    rt_items_free(&want);
    return ok;
}

/* The GSI is the projection of the base table: per group, the live items. */
static int gsi_settled(void *arg, int last)
{
    rt_model *m = arg;
    for (int g = 0; g < MASS_GROUPS; g++) {
        char val[16], pk[32];
        snprintf(val, sizeof(val), "g%d", g);
        snprintf(pk, sizeof(pk), "{\"S\":\"%s\"}", val);
        rt_items got = {0}, want = {0};
        rt_query_all("Mass", "ByGroup", pk, NULL, 0, 0, &got);
        rt_model_select(m, "Group", val, &want);
        rt_sort(&want, "Id", NULL, NULL); /* one partition key: table key order */
        int ok = rt_items_equal(&got, &want);
        if (!ok && last) {
            rt_assert_items_equal(&got, &want, "GSI ByGroup");
        }
        rt_items_free(&got);
        rt_items_free(&want);
        if (!ok) {
            return 0;
        }
    }
    return 1;
}

static double ttl_deleted_on(int node)
{
    char *text = scrape_get(cluster_metrics_addr(rt_cluster(), node), 1000);
    double v = text != NULL ? scrape_sum(text, "lapse_ttl_deleted_items_total", NULL) : 0;
    free(text);
    return v;
}

/* Node y's sweep has deleted more than before (earlier tables' deletes
 * count too). */
typedef struct sweep_wait {
    int node;
    double before;
} sweep_wait;

static int deleting_on(void *arg, int last)
{
    (void)last;
    sweep_wait *w = arg;
    return ttl_deleted_on(w->node) > w->before;
}

static void test_mass_expiry_through_kill9(void **state)
{
    (void)state;
    lapse_table_def d = {.name = "Mass",
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .sort_key = "Part",
                         .sort_key_type = 'N',
                         .partitions = 16,
                         .gsi = group_gsi,
                         .ngsi = 1,
                         .stream = 1};
    rt_create(&d);
    rt_enable_ttl("Mass", "ExpiresAt");
    rt_model *m = rt_model_new("Mass", "Id", "Part", 16);
    int64_t due_s = rt_wall_ms() / 1000 + 6;
    char json[256];
    for (int i = 0; i < MASS_ITEMS; i++) { /* two in three expire */
        snprintf(json, sizeof(json),
                 "{\"Id\":{\"S\":\"i%d\"},\"Part\":{\"N\":\"1\"},\"Group\":{\"S\":\"g%d\"},"
                 "\"ExpiresAt\":{\"N\":\"%lld\"}}",
                 i, i % MASS_GROUPS, (long long)(i % 3 ? due_s : due_s + 3600));
        rt_batch_put(m, json);
        if ((i + 1) % 1000 == 0) {
            rt_batch_commit(m);
        }
    }

    /* X hosts the most shards (every node owns GSI partitions too); Y is
     * another node. */
    lapse_stream_shard *shards = NULL;
    size_t nshards = 0;
    lapse_error e = {0};
    assert_lapse_ok(lapse_stream_shards(rt_client(), "Mass", &shards, &nshards, &e), &e);
    int per_node[4] = {0}, x = 1;
    for (size_t i = 0; i < nshards; i++) {
        per_node[shards[i].node_id]++;
    }
    lapse_free(shards);
    for (int n = 2; n <= 3; n++) {
        x = per_node[n] > per_node[x] ? n : x;
    }
    int y = x % 3 + 1;
    sweep_wait sw = {y, ttl_deleted_on(y)};

    /* Kill X as the items fall due, mid-sweep and mid-shipping, and Y once
     * its own sweep has begun. */
    while (rt_wall_ms() < due_s * 1000 + 150) {
        rt_sleep_ms(20);
    }
    assert_int_equal(cluster_kill(rt_cluster(), x, SIGKILL), 0);
    rt_wait_for("node Y to start deleting", 10000, deleting_on, &sw);
    assert_int_equal(cluster_kill(rt_cluster(), y, SIGKILL), 0);
    assert_int_equal(cluster_restart(rt_cluster(), x), 0);
    assert_int_equal(cluster_restart(rt_cluster(), y), 0);
    assert_int_equal(cluster_wait_up(rt_cluster(), 3, 30000), 0);

    for (int i = 0; i < MASS_ITEMS; i++) {
        if (i % 3) {
            char id[16];
            snprintf(id, sizeof(id), "i%d", i);
            rt_model_ttl_removed(m, id, 1, "ExpiresAt", due_s * 1000);
        }
    }
    rt_wait_for("the base table to hold the live items only", 60000, base_settled, m);
    rt_wait_for("the GSI to equal the base table's projection", 60000, gsi_settled, m);
    rt_stream s;
    rt_stream_wait(&s, "Mass", rt_model_records(m), 60000);
    rt_stream_check_gapless(&s, 0);
    rt_model_check_stream(m, &s); /* one INSERT each, one TTL REMOVE per expired */
    rt_stream_free(&s);

    /* hide_expired on the GSI: nothing past its due instant. */
    for (int g = 0; g < MASS_GROUPS; g++) {
        char pk[32];
        snprintf(pk, sizeof(pk), "{\"S\":\"g%d\"}", g);
        rt_items got = {0};
        rt_query_all("Mass", "ByGroup", pk, NULL, 1, 100, &got);
        for (size_t i = 0; i < got.n; i++) {
            assert_true(atoll(lapse_item_get_n(got.v[i], "ExpiresAt")) > rt_wall_ms() / 1000);
        }
        rt_items_free(&got);
    }
    rt_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hide_expired_on_gsi_queries),
        cmocka_unit_test(test_mass_expiry_through_kill9),
    };
    return cmocka_run_group_tests(tests, rt_setup, rt_teardown);
}
