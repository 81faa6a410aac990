/*
 * index_schema_test: declaring secondary indexes and streams end to end on a
 * real three-node cluster: liblapse's create-table with LSIs, GSIs and a
 * stream; the description it gets back and describe-table's; every node
 * taking the map with the placements (a node refuses a map that fails its
 * checks, and then lags behind the coordinator's version); and the
 * declarations surviving a kill -9 of the coordinator.
 */
#define TESTUTIL_THREE_NODE_GROUP /* g_cluster, g_client, group_setup, group_teardown */
#include "testutil.h"

#include <jansson.h>
#include <signal.h>

#include "../common/clock.h"

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *doc = json_loads(text, 0, &je);
    if (doc == NULL) {
        fail_msg("bad JSON (%s): %s", je.text, text);
    }
    return doc;
}

/* Every node reports the coordinator's map version within a few seconds:
 * it took the latest map, placements included. */
static void assert_nodes_took_map(void)
{
    clock_mono deadline = clock_mono_after_ms(10000);
    for (;;) {
        lapse_error e = {0};
        char *js = NULL;
        assert_lapse_ok(lapse_cluster_status(g_client, &js, &e), &e);
        json_t *doc = parse(js);
        json_int_t want = json_integer_value(json_object_get(doc, "PartitionMapVersion"));
        size_t i, behind = 0;
        json_t *n;
        json_array_foreach(json_object_get(doc, "Nodes"), i, n)
        {
            behind += json_integer_value(json_object_get(n, "PartitionMapVersion")) != want;
        }
        json_decref(doc);
        if (behind == 0) {
            lapse_free(js);
            return;
        }
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("nodes still behind the coordinator's map: %s", js);
        }
        lapse_free(js);
        clock_sleep_ms(100);
    }
}

static const lapse_index_def order_lsi[] = {
    {.name = "ByDate", .sort_key = "Date", .sort_key_type = 'S'},
};
static const lapse_index_def order_gsi[] = {
    {.name = "ByStatus",
     .partition_key = "Status",
     .partition_key_type = 'S',
     .sort_key = "Date",
     .sort_key_type = 'S',
     .projection = LAPSE_PROJECT_KEYS},
    {.name = "ByProduct", .partition_key = "Product", .partition_key_type = 'N', .partitions = 2},
};

static void test_create_with_indexes_and_stream(void **state)
{
    (void)state;
    lapse_error e = {0};
    lapse_table_def d = {.name = "Orders",
                         .partition_key = "Customer",
                         .partition_key_type = 'S',
                         .sort_key = "OrderNo",
                         .sort_key_type = 'N',
                         .partitions = 8,
                         .lsi = order_lsi,
                         .nlsi = 1,
                         .gsi = order_gsi,
                         .ngsi = 2,
                         .stream = 1,
                         .stream_exclude_ttl_deletes = 1};
    char *created = NULL, *described = NULL;
    assert_lapse_ok(lapse_create_table_json(g_client, &d, &created, &e), &e);
    assert_lapse_ok(lapse_describe_table(g_client, "Orders", &described, &e), &e);
    assert_string_equal(created, described);

    json_t *doc = parse(described);
    json_t *t = json_object_get(doc, "Table");
    json_t *lsi = json_array_get(json_object_get(t, "LocalSecondaryIndexes"), 0);
    assert_string_equal(json_string_value(json_object_get(lsi, "IndexName")), "ByDate");
    assert_int_equal(json_integer_value(json_object_get(lsi, "IndexId")), 1);
    json_t *gsis = json_object_get(t, "GlobalSecondaryIndexes");
    assert_int_equal(json_array_size(gsis), 2);
    json_t *g0 = json_array_get(gsis, 0), *g1 = json_array_get(gsis, 1);
    assert_int_equal(json_integer_value(json_object_get(g0, "IndexId")), 2);
    assert_int_equal(json_integer_value(json_object_get(g0, "Partitions")), 8); /* the table's */
    assert_int_equal(json_integer_value(json_object_get(g1, "Partitions")), 2);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(g0, "Projection"), "ProjectionType")),
        "KEYS_ONLY");
    /* GSI partitions spread over the three nodes: 8 over 3 is 2 or 3 each. */
    const char *id;
    json_t *count;
    json_object_foreach(json_object_get(g0, "PartitionsPerNode"), id, count)
    {
        assert_true(json_integer_value(count) == 2 || json_integer_value(count) == 3);
    }
    json_t *spec = json_object_get(t, "StreamSpecification");
    assert_true(json_is_true(json_object_get(spec, "StreamEnabled")));
    assert_true(json_is_false(json_object_get(spec, "TtlDeletes")));
    assert_int_equal(json_integer_value(json_object_get(spec, "RetentionHours")), 24);
    json_t *shards = json_object_get(t, "StreamShards");
    assert_int_equal(json_array_size(shards), 8);
    size_t i;
    json_t *sh;
    json_array_foreach(shards, i, sh)
    {
        json_int_t node = json_integer_value(json_object_get(sh, "NodeId"));
        assert_true(node >= 1 && node <= 3);
    }
    /* Attribute definitions cover the index keys, each once. */
    assert_int_equal(json_array_size(json_object_get(t, "AttributeDefinitions")), 5);
    json_decref(doc);
    lapse_free(created);
    lapse_free(described);
    assert_nodes_took_map();
}

/* Declarations the coordinator refuses come back as EINVAL naming the index,
 * and create nothing. */
static void test_refused_declarations(void **state)
{
    (void)state;
    lapse_error e = {0};
    lapse_table_def d = {.name = "NoSort",
                         .partition_key = "k",
                         .partition_key_type = 'S',
                         .lsi = order_lsi,
                         .nlsi = 1};
    assert_lapse_code(lapse_create_table(g_client, &d, &e), LAPSE_EINVAL, &e);
    assert_non_null(strstr(e.message, "LSI \"ByDate\" needs a table with a sort key"));
    lapse_index_def odd = {
        .name = "Odd", .partition_key = "x", .partition_key_type = 'S', .partitions = 6};
    d.lsi = NULL;
    d.nlsi = 0;
    d.gsi = &odd;
    d.ngsi = 1;
    assert_lapse_code(lapse_create_table(g_client, &d, &e), LAPSE_EINVAL, &e);
    assert_non_null(strstr(e.message, "GSI \"Odd\": partition count 6"));
    char *js = NULL;
    assert_lapse_code(lapse_describe_table(g_client, "NoSort", &js, &e), LAPSE_ENOTFOUND, &e);
    assert_null(js);
}

/* kill -9 of the coordinator: the description is the same after restart. */
static void test_declarations_survive_coordinator_kill9(void **state)
{
    (void)state;
    lapse_error e = {0};
    char *before = NULL, *after = NULL;
    assert_lapse_ok(lapse_describe_table(g_client, "Orders", &before, &e), &e);
    assert_int_equal(cluster_kill(g_cluster, 0, SIGKILL), 0);
    assert_int_equal(cluster_restart(g_cluster, 0), 0);
    assert_int_equal(cluster_wait_up(g_cluster, 3, 15000), 0);
    lapse_client *fresh = connect_client(g_cluster);
    assert_lapse_ok(lapse_describe_table(fresh, "Orders", &after, &e), &e);
    assert_string_equal(before, after);
    lapse_free(before);
    lapse_free(after);
    lapse_close(fresh);
    assert_nodes_took_map();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_with_indexes_and_stream),
        cmocka_unit_test(test_refused_declarations),
        cmocka_unit_test(test_declarations_survive_coordinator_kill9),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
