/*
 * indexcfg_test.c: the client's index and stream declarations without a
 * cluster: what lapse_table_def becomes in a CreateTable request, the checks
 * made before sending, and describe-table's JSON for indexes, streams and
 * shard hosts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "indexcfg.h"

/* ---- CreateTable ---- */

static const lapse_index_def lsis[] = {
    {.name = "ByCreated", .sort_key = "Created", .sort_key_type = 'N'},
};
static const lapse_index_def gsis[] = {
    {.name = "ByEmail", .partition_key = "Email", .partition_key_type = 'S'},
    {.name = "ByCity",
     .partition_key = "City",
     .partition_key_type = 'S',
     .sort_key = "Age",
     .sort_key_type = 'N',
     .projection = LAPSE_PROJECT_KEYS,
     .partitions = 4},
};

static lapse_table_def users(void)
{
    lapse_table_def d = {.name = "Users",
                         .partition_key = "UserName",
                         .partition_key_type = 'S',
                         .sort_key = "Id",
                         .sort_key_type = 'N',
                         .lsi = lsis,
                         .nlsi = 1,
                         .gsi = gsis,
                         .ngsi = 2,
                         .stream = 1,
                         .stream_retention_hours = 48,
                         .stream_exclude_ttl_deletes = 1};
    return d;
}

static void test_definitions_become_the_request(void **state)
{
    (void)state;
    arena a;
    arena_init(&a);
    lapse_error err = {0};
    lapse_table_def d = users();
    Lapse__TableSchema s = LAPSE__TABLE_SCHEMA__INIT;
    assert_int_equal(indexcfg_to_pb(&a, &d, &s, &err), 0);
    assert_int_equal(s.n_lsi, 1);
    assert_string_equal(s.lsi[0]->name, "ByCreated");
    assert_null(s.lsi[0]->partition_key);
    assert_string_equal(s.lsi[0]->sort_key->name, "Created");
    assert_int_equal(s.lsi[0]->sort_key->type, LAPSE__KEY_TYPE__KEY_N);
    assert_int_equal(s.n_gsi, 2);
    assert_null(s.gsi[0]->sort_key);
    assert_int_equal(s.gsi[0]->partitions, 0); /* the coordinator fills in the table's */
    assert_int_equal(s.gsi[1]->projection, LAPSE__INDEX_PROJECTION__PROJECTION_KEYS);
    assert_int_equal(s.gsi[1]->partitions, 4);
    assert_int_equal(s.gsi[1]->sort_key->type, LAPSE__KEY_TYPE__KEY_N);
    assert_non_null(s.stream);
    assert_true(s.stream->enabled);
    assert_true(s.stream->exclude_ttl_deletes);
    assert_int_equal(s.stream->retention_hours, 48);

    /* A definition without the new fields declares nothing. */
    lapse_table_def plain = {.name = "Plain", .partition_key = "k", .partition_key_type = 'S'};
    Lapse__TableSchema p = LAPSE__TABLE_SCHEMA__INIT;
    assert_int_equal(indexcfg_to_pb(&a, &plain, &p, &err), 0);
    assert_int_equal(p.n_lsi + p.n_gsi, 0);
    assert_null(p.stream);
    arena_fini(&a);
}

/* Each broken definition fails before anything is sent, naming the index. */
static void test_bad_definitions_are_refused(void **state)
{
    (void)state;
    lapse_index_def bad_type = {.name = "G", .partition_key = "E", .partition_key_type = 'X'};
    lapse_index_def no_pk = {.name = "NoPk", .sort_key = "S", .sort_key_type = 'S'};
    lapse_index_def no_sk = {.name = "NoSk"};
    lapse_index_def no_name = {.partition_key = "E", .partition_key_type = 'S'};
    lapse_index_def bad_proj = {
        .name = "P", .partition_key = "E", .partition_key_type = 'S', .projection = 7};
    lapse_index_def empty_key = {.name = "Empty", .partition_key = "", .partition_key_type = 'S'};
    lapse_index_def many[21];
    for (size_t i = 0; i < 21; i++) {
        many[i] = gsis[0];
    }
    struct {
        const lapse_index_def *lsi, *gsi;
        size_t nlsi, ngsi;
        int stream;
        unsigned hours;
        int exclude;
        const char *says;
    } cases[] = {
        {NULL, &bad_type, 0, 1, 0, 0, 0, "GSI \"G\" partition key \"E\": type must be S, N or B"},
        {NULL, &no_pk, 0, 1, 0, 0, 0, "GSI \"NoPk\": no partition key"},
        {&no_sk, NULL, 1, 0, 0, 0, 0, "LSI \"NoSk\": no sort key"},
        {NULL, &no_name, 0, 1, 0, 0, 0, "GSI 1: no index name"},
        {NULL, &bad_proj, 0, 1, 0, 0, 0, "GSI \"P\": unknown projection 7"},
        {NULL, &empty_key, 0, 1, 0, 0, 0, "GSI \"Empty\" partition key: no attribute name"},
        {NULL, many, 0, 21, 0, 0, 0, "21 GSIs; a table has at most 20"},
        {many, NULL, 6, 0, 0, 0, 0, "6 LSIs; a table has at most 5"},
        {NULL, NULL, 0, 2, 0, 0, 0, "2 GSIs declared but none given"},
        {NULL, NULL, 0, 0, 0, 24, 0, "need a stream"},
        {NULL, NULL, 0, 0, 0, 0, 1, "need a stream"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        arena a;
        arena_init(&a);
        lapse_error err = {0};
        lapse_table_def d = users();
        d.lsi = cases[i].lsi;
        d.nlsi = cases[i].nlsi;
        d.gsi = cases[i].gsi;
        d.ngsi = cases[i].ngsi;
        d.stream = cases[i].stream;
        d.stream_retention_hours = cases[i].hours;
        d.stream_exclude_ttl_deletes = cases[i].exclude;
        Lapse__TableSchema s = LAPSE__TABLE_SCHEMA__INIT;
        int rv = indexcfg_to_pb(&a, &d, &s, &err);
        if (rv != LAPSE_EINVAL || err.code != LAPSE_EINVAL ||
            strstr(err.message, cases[i].says) == NULL) {
            fail_msg("case %zu: %d \"%s\", want EINVAL \"%s\"", i, rv, err.message, cases[i].says);
        }
        arena_fini(&a);
    }
}

/* ---- describe-table ---- */

static char *dump_json(json_t *doc)
{
    char *s = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_non_null(s);
    return s;
}

static void assert_described(const Lapse__TableMap *tm, const char *want)
{
    json_t *t =
        json_pack("{s:[{s:s,s:s},{s:s,s:s}]}", "AttributeDefinitions", "AttributeName", "UserName",
                  "AttributeType", "S", "AttributeName", "Id", "AttributeType", "N");
    assert_non_null(t);
    assert_int_equal(indexcfg_describe(t, tm), 0);
    char *got = dump_json(t);
    json_decref(t);
    if (strcmp(got, want) != 0) {
        fail_msg("JSON\n got: %s\nwant: %s", got, want);
    }
    free(got);
}

static void test_describe_indexes_and_stream(void **state)
{
    (void)state;
    Lapse__KeyDef pk = LAPSE__KEY_DEF__INIT, created = LAPSE__KEY_DEF__INIT;
    Lapse__KeyDef email = LAPSE__KEY_DEF__INIT, id = LAPSE__KEY_DEF__INIT;
    pk.name = "UserName";
    pk.type = LAPSE__KEY_TYPE__KEY_S;
    created.name = "Created";
    created.type = LAPSE__KEY_TYPE__KEY_N;
    email.name = "Email";
    email.type = LAPSE__KEY_TYPE__KEY_S;
    id.name = "Id"; /* the table's sort key, reused: defined once */
    id.type = LAPSE__KEY_TYPE__KEY_N;
    Lapse__IndexDef lsi = LAPSE__INDEX_DEF__INIT, gsi = LAPSE__INDEX_DEF__INIT;
    lsi.id = 1;
    lsi.name = "ByCreated";
    lsi.sort_key = &created;
    gsi.id = 2;
    gsi.name = "ByEmail";
    gsi.partition_key = &email;
    gsi.sort_key = &id;
    gsi.projection = LAPSE__INDEX_PROJECTION__PROJECTION_KEYS;
    gsi.partitions = 2;
    Lapse__IndexDef *lsis_pb[] = {&lsi}, *gsis_pb[] = {&gsi};
    Lapse__StreamConfig sc = LAPSE__STREAM_CONFIG__INIT;
    sc.enabled = 1;
    sc.retention_hours = 24;
    Lapse__TableSchema s = LAPSE__TABLE_SCHEMA__INIT;
    s.name = "Users";
    s.partition_key = &pk;
    s.lsi = lsis_pb;
    s.n_lsi = 1;
    s.gsi = gsis_pb;
    s.n_gsi = 1;
    s.stream = &sc;
    uint32_t n3[] = {3};
    Lapse__PartitionReplicas r3 = LAPSE__PARTITION_REPLICAS__INIT;
    r3.node_ids = n3;
    r3.n_node_ids = 1;
    Lapse__PartitionReplicas *gparts[] = {&r3, &r3};
    Lapse__GsiPartitions gp = LAPSE__GSI_PARTITIONS__INIT;
    gp.partitions = gparts;
    gp.n_partitions = 2;
    Lapse__GsiPartitions *gps[] = {&gp};
    uint32_t h0[] = {2, 3}, h1[] = {1};
    Lapse__PartitionReplicas s0 = LAPSE__PARTITION_REPLICAS__INIT, s1 = s0;
    s0.node_ids = h0;
    s0.n_node_ids = 2;
    s1.node_ids = h1;
    s1.n_node_ids = 1;
    Lapse__PartitionReplicas *shard_ptrs[] = {&s0, &s1};
    Lapse__TableMap tm = LAPSE__TABLE_MAP__INIT;
    tm.schema = &s;
    tm.gsi = gps;
    tm.n_gsi = 1;
    tm.stream_shards = shard_ptrs;
    tm.n_stream_shards = 2;
    assert_described(&tm, "{\"AttributeDefinitions\":["
                          "{\"AttributeName\":\"UserName\",\"AttributeType\":\"S\"},"
                          "{\"AttributeName\":\"Id\",\"AttributeType\":\"N\"},"
                          "{\"AttributeName\":\"Created\",\"AttributeType\":\"N\"},"
                          "{\"AttributeName\":\"Email\",\"AttributeType\":\"S\"}],"
                          "\"LocalSecondaryIndexes\":[{\"IndexName\":\"ByCreated\",\"IndexId\":1,"
                          "\"KeySchema\":[{\"AttributeName\":\"UserName\",\"KeyType\":\"HASH\"},"
                          "{\"AttributeName\":\"Created\",\"KeyType\":\"RANGE\"}],"
                          "\"Projection\":{\"ProjectionType\":\"ALL\"}}],"
                          "\"GlobalSecondaryIndexes\":[{\"IndexName\":\"ByEmail\",\"IndexId\":2,"
                          "\"KeySchema\":[{\"AttributeName\":\"Email\",\"KeyType\":\"HASH\"},"
                          "{\"AttributeName\":\"Id\",\"KeyType\":\"RANGE\"}],"
                          "\"Projection\":{\"ProjectionType\":\"KEYS_ONLY\"},\"Partitions\":2,"
                          "\"PartitionsPerNode\":{\"3\":2}}],"
                          "\"StreamSpecification\":{\"StreamEnabled\":true,"
                          "\"StreamViewType\":\"NEW_AND_OLD_IMAGES\",\"TtlDeletes\":true,"
                          "\"RetentionHours\":24},"
                          "\"StreamShards\":[{\"Partition\":0,\"NodeId\":2,\"NodeIds\":[2,3]},"
                          "{\"Partition\":1,\"NodeId\":1,\"NodeIds\":[1]}]}");

    /* No indexes, no stream: only the stream's absence is stated. */
    s.n_lsi = s.n_gsi = 0;
    s.stream = NULL;
    tm.n_gsi = tm.n_stream_shards = 0;
    assert_described(&tm, "{\"AttributeDefinitions\":["
                          "{\"AttributeName\":\"UserName\",\"AttributeType\":\"S\"},"
                          "{\"AttributeName\":\"Id\",\"AttributeType\":\"N\"}],"
                          "\"StreamSpecification\":{\"StreamEnabled\":false}}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_definitions_become_the_request),
        cmocka_unit_test(test_bad_definitions_are_refused),
        cmocka_unit_test(test_describe_indexes_and_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
