/*
 * wire_index_test.c: secondary indexes, the stream config and their
 * placements on the wire. Round trips go through pack/unpack; rejections
 * feed hand-broken trees, as a hostile or buggy peer would push them; and a
 * large indexed map is measured against RPC_MAX_MESSAGE_BYTES.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../common/lapse_err.h"
#include "rpc.h"
#include "wire.h"

#define assert_rv(call, code, err)                                                                 \
    do {                                                                                           \
        int rv_ = (call);                                                                          \
        if (rv_ != (code)) {                                                                       \
            fail_msg("%s returned %d (%s), expected %d: %s", #call, rv_, lapse_strerror(rv_),      \
                     (code), (err));                                                               \
        }                                                                                          \
    } while (0)

/* ---- helpers ---- */

static void key(key_def *k, const char *name, attr_type t)
{
    snprintf(k->name, sizeof k->name, "%s", name);
    k->type = t;
}

/* A table with one LSI, two GSIs (ids 1-3) and a stream without TTL
 * deletes. */
static table_schema indexed(uint32_t id, const char *name, uint32_t partitions)
{
    table_schema t;
    memset(&t, 0, sizeof t);
    t.id = id;
    snprintf(t.name, sizeof t.name, "%s", name);
    key(&t.pk, "UserName", ATTR_S);
    key(&t.sk, "Id", ATTR_N);
    t.partitions = partitions;
    t.nlsi = 1;
    t.lsi[0].id = 1;
    snprintf(t.lsi[0].name, sizeof t.lsi[0].name, "ByCreated");
    key(&t.lsi[0].sk, "Created", ATTR_N);
    t.ngsi = 2;
    t.gsi[0].id = 2;
    snprintf(t.gsi[0].name, sizeof t.gsi[0].name, "ByEmail");
    key(&t.gsi[0].pk, "Email", ATTR_S);
    t.gsi[0].partitions = partitions;
    t.gsi[1].id = 3;
    snprintf(t.gsi[1].name, sizeof t.gsi[1].name, "ByCity");
    key(&t.gsi[1].pk, "City", ATTR_S);
    key(&t.gsi[1].sk, "Age", ATTR_B);
    t.gsi[1].projection = INDEX_PROJECT_KEYS;
    t.gsi[1].partitions = partitions > 1 ? partitions / 2 : 1;
    t.stream.enabled = 1;
    t.stream.ttl_deletes = 0;
    t.stream.retention_hours = 48;
    t.stream.view = STREAM_VIEW_OLD_IMAGE;
    t.created_ms = 1790000000123;
    return t;
}

/* Packs and unpacks a schema (caller frees with
 * lapse__table_schema__free_unpacked). */
static Lapse__TableSchema *through_wire(const table_schema *t)
{
    arena a;
    arena_init(&a);
    Lapse__TableSchema *pb = wire_schema_to_pb(&a, t);
    assert_non_null(pb);
    size_t n = lapse__table_schema__get_packed_size(pb);
    uint8_t *buf = malloc(n > 0 ? n : 1);
    lapse__table_schema__pack(pb, buf);
    arena_fini(&a);
    Lapse__TableSchema *un = lapse__table_schema__unpack(NULL, n, buf);
    free(buf);
    assert_non_null(un);
    return un;
}

/* ---- schemas ---- */

static void indexed_schema_round_trips(void **state)
{
    (void)state;
    char err[256] = "";
    table_schema t = indexed(7, "users", 16), back;
    Lapse__TableSchema *un = through_wire(&t);
    assert_int_equal(un->n_lsi, 1);
    assert_int_equal(un->n_gsi, 2);
    assert_null(un->lsi[0]->partition_key); /* an LSI's pk is the table's */
    assert_int_equal(un->gsi[1]->projection, LAPSE__INDEX_PROJECTION__PROJECTION_KEYS);
    assert_true(un->stream->enabled);
    assert_true(un->stream->exclude_ttl_deletes);
    assert_int_equal(un->stream->view, LAPSE__STREAM_VIEW__STREAM_VIEW_OLD_IMAGE);
    assert_int_equal(un->created_ms, 1790000000123);
    assert_rv(wire_schema_from_pb(un, &back, err, sizeof err), 0, err);
    assert_memory_equal(&t, &back, sizeof t);
    assert_rv(schema_validate(&back, err, sizeof err), 0, err);
    lapse__table_schema__free_unpacked(un, NULL);

    /* Stream on with TTL deletes (the default); off: all zero and absent. */
    t.stream.ttl_deletes = 1;
    un = through_wire(&t);
    assert_false(un->stream->exclude_ttl_deletes);
    assert_rv(wire_schema_from_pb(un, &back, err, sizeof err), 0, err);
    assert_int_equal(back.stream.ttl_deletes, 1);
    lapse__table_schema__free_unpacked(un, NULL);
    memset(&t.stream, 0, sizeof t.stream);
    un = through_wire(&t);
    assert_null(un->stream);
    assert_rv(wire_schema_from_pb(un, &back, err, sizeof err), 0, err);
    assert_memory_equal(&t, &back, sizeof t);
    /* A disabled stream with settings still means no stream. */
    Lapse__StreamConfig off = LAPSE__STREAM_CONFIG__INIT;
    off.retention_hours = 5;
    off.exclude_ttl_deletes = 1;
    un->stream = &off;
    assert_rv(wire_schema_from_pb(un, &back, err, sizeof err), 0, err);
    assert_int_equal(back.stream.enabled + back.stream.ttl_deletes + back.stream.retention_hours,
                     0);
    un->stream = NULL;
    lapse__table_schema__free_unpacked(un, NULL);
    /* CreateTable's stream (generation 0) turned off keeps its label's
     * instant, so it stays told apart from none. */
    t.stream.since_ms = 1790000000123;
    un = through_wire(&t);
    assert_non_null(un->stream);
    assert_false(un->stream->enabled);
    assert_rv(wire_schema_from_pb(un, &back, err, sizeof err), 0, err);
    assert_memory_equal(&t, &back, sizeof t);
    lapse__table_schema__free_unpacked(un, NULL);
}

static void lsi_partition_key_must_be_the_tables(void **state)
{
    (void)state;
    char err[256] = "";
    table_schema t = indexed(7, "users", 4), back;
    arena a;
    arena_init(&a);
    Lapse__TableSchema *pb = wire_schema_to_pb(&a, &t);
    Lapse__KeyDef same = LAPSE__KEY_DEF__INIT, other = LAPSE__KEY_DEF__INIT;
    same.name = "UserName";
    same.type = LAPSE__KEY_TYPE__KEY_S;
    pb->lsi[0]->partition_key = &same; /* DynamoDB's way of writing it: dropped */
    assert_rv(wire_schema_from_pb(pb, &back, err, sizeof err), 0, err);
    assert_string_equal(back.lsi[0].pk.name, "");
    other.name = "Email";
    other.type = LAPSE__KEY_TYPE__KEY_S;
    pb->lsi[0]->partition_key = &other;
    assert_int_equal(wire_schema_from_pb(pb, &back, err, sizeof err), LAPSE_EINVAL);
    assert_non_null(strstr(err, "LSI \"ByCreated\" has partition key \"Email\""));
    arena_fini(&a);
}

static void bad_index_definitions_are_rejected(void **state)
{
    (void)state;
    char err[256] = "";
    table_schema t = indexed(7, "users", 4), back;
    arena a;
    arena_init(&a);
    Lapse__TableSchema *pb = wire_schema_to_pb(&a, &t);

    pb->gsi[0]->projection = 9;
    assert_int_equal(wire_schema_from_pb(pb, &back, err, sizeof err), LAPSE_EINVAL);
    assert_non_null(strstr(err, "GSI \"ByEmail\": unknown projection 9"));
    pb->gsi[0]->projection = LAPSE__INDEX_PROJECTION__PROJECTION_ALL;

    pb->gsi[0]->partition_key->type = 7;
    assert_int_equal(wire_schema_from_pb(pb, &back, err, sizeof err), LAPSE_EINVAL);
    assert_non_null(strstr(err, "GSI \"ByEmail\" partition key"));
    pb->gsi[0]->partition_key->type = LAPSE__KEY_TYPE__KEY_NONE; /* named, no type */
    assert_int_equal(wire_schema_from_pb(pb, &back, err, sizeof err), LAPSE_EINVAL);
    pb->gsi[0]->partition_key->type = LAPSE__KEY_TYPE__KEY_S;

    char longname[SCHEMA_MAX_NAME + 2];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    char *saved = pb->lsi[0]->name;
    pb->lsi[0]->name = longname;
    assert_int_equal(wire_schema_from_pb(pb, &back, err, sizeof err), LAPSE_EINVAL);
    assert_non_null(strstr(err, "longer than 255"));
    pb->lsi[0]->name = saved;

    Lapse__IndexDef *saved_gsi = pb->gsi[1];
    pb->gsi[1] = NULL; /* a hole in the list */
    assert_int_equal(wire_schema_from_pb(pb, &back, err, sizeof err), LAPSE_EINVAL);
    pb->gsi[1] = saved_gsi;

    /* More than the limits: refused before anything is copied. */
    Lapse__IndexDef *many[SCHEMA_MAX_GSI + 1];
    for (size_t i = 0; i <= SCHEMA_MAX_GSI; i++) {
        many[i] = pb->gsi[0];
    }
    Lapse__IndexDef **gsi = pb->gsi;
    size_t ngsi = pb->n_gsi;
    pb->gsi = many;
    pb->n_gsi = SCHEMA_MAX_GSI + 1;
    assert_int_equal(wire_schema_from_pb(pb, &back, err, sizeof err), LAPSE_EINVAL);
    assert_non_null(strstr(err, "at most 20"));
    pb->gsi = gsi;
    pb->n_gsi = ngsi;
    Lapse__IndexDef **lsi = pb->lsi;
    pb->lsi = many;
    pb->n_lsi = SCHEMA_MAX_LSI + 1;
    assert_int_equal(wire_schema_from_pb(pb, &back, err, sizeof err), LAPSE_EINVAL);
    assert_non_null(strstr(err, "at most 5"));
    pb->n_lsi = 3;
    pb->lsi = NULL; /* a count without an array */
    assert_int_equal(wire_schema_from_pb(pb, &back, err, sizeof err), LAPSE_EINVAL);
    pb->lsi = lsi;
    pb->n_lsi = 1;
    assert_rv(wire_schema_from_pb(pb, &back, err, sizeof err), 0, err);
    arena_fini(&a);
}

/* ---- partition maps ---- */

static pmap *indexed_pmap(void)
{
    pmap *pm = pmap_new();
    assert_non_null(pm);
    pm->version = 9;
    for (uint32_t id = 1; id <= 3; id++) {
        char addr[64];
        snprintf(addr, sizeof addr, "tcp://127.0.0.1:%u", 7400 + id);
        assert_int_equal(pmap_set_node(pm, id, addr, PMAP_NODE_UP), 0);
    }
    table_schema t = indexed(1, "users", 8);
    assert_int_equal(pmap_add_table(pm, &t), 0);
    table_schema plain;
    memset(&plain, 0, sizeof plain);
    plain.id = 2;
    snprintf(plain.name, sizeof plain.name, "plain");
    key(&plain.pk, "k", ATTR_S);
    plain.partitions = 2;
    assert_int_equal(pmap_add_table(pm, &plain), 0);
    return pm;
}

static Lapse__PartitionMap *pmap_through_wire(const pmap *pm)
{
    arena a;
    arena_init(&a);
    Lapse__PartitionMap *pb = wire_pmap_to_pb(&a, pm);
    assert_non_null(pb);
    size_t n = lapse__partition_map__get_packed_size(pb);
    uint8_t *buf = malloc(n);
    lapse__partition_map__pack(pb, buf);
    arena_fini(&a);
    Lapse__PartitionMap *un = lapse__partition_map__unpack(NULL, n, buf);
    free(buf);
    assert_non_null(un);
    return un;
}

static void placements_round_trip(void **state)
{
    (void)state;
    char err[256] = "";
    pmap *pm = indexed_pmap(), *back = NULL;
    Lapse__PartitionMap *un = pmap_through_wire(pm);
    assert_int_equal(un->tables[0]->n_gsi, 2);
    assert_int_equal(un->tables[0]->gsi[1]->n_partitions, 4);
    assert_int_equal(un->tables[0]->n_stream_shards, 8);
    assert_int_equal(un->tables[1]->n_gsi, 0);
    assert_int_equal(un->tables[1]->n_stream_shards, 0);
    assert_rv(wire_pmap_from_pb(un, &back, err, sizeof err), 0, err);
    lapse__partition_map__free_unpacked(un, NULL);
    assert_true(pmap_check(back));
    const pmap_table *t = pmap_table_find(pm, "users"), *u = pmap_table_find(back, "users");
    assert_memory_equal(&t->schema, &u->schema, sizeof t->schema);
    for (uint32_t g = 0; g < 2; g++) {
        assert_memory_equal(t->gsi_parts[g], u->gsi_parts[g],
                            t->schema.gsi[g].partitions * sizeof(pmap_replicas));
    }
    assert_memory_equal(t->stream_shards, u->stream_shards, 8 * sizeof(pmap_replicas));
    assert_null(pmap_table_find(back, "plain")->stream_shards);
    pmap_free(back);
    pmap_free(pm);
}

/* Encodes the indexed map, lets mutate break one field, and expects the
 * decoder to refuse it with a reason containing says. */
static void expect_rejected(void (*mutate)(Lapse__TableMap *, arena *), const char *says)
{
    pmap *pm = indexed_pmap();
    arena a;
    arena_init(&a);
    Lapse__PartitionMap *pb = wire_pmap_to_pb(&a, pm);
    mutate(pb->tables[0], &a);
    pmap *out = NULL;
    char err[256] = "";
    int rv = wire_pmap_from_pb(pb, &out, err, sizeof err);
    if (rv != LAPSE_EINVAL || strstr(err, says) == NULL) {
        fail_msg("got %d (%s), want EINVAL saying \"%s\"", rv, err, says);
    }
    assert_null(out);
    arena_fini(&a);
    pmap_free(pm);
}

static void m_gsi_missing(Lapse__TableMap *t, arena *a)
{
    (void)a;
    t->n_gsi = 1;
}
static void m_gsi_extra(Lapse__TableMap *t, arena *a)
{
    (void)a;
    t->schema->n_gsi = 1;
}
static void m_gsi_null(Lapse__TableMap *t, arena *a)
{
    (void)a;
    t->gsi[1] = NULL;
}
static void m_gsi_count(Lapse__TableMap *t, arena *a)
{
    (void)a;
    t->gsi[0]->n_partitions--;
}
static void m_gsi_unknown_node(Lapse__TableMap *t, arena *a)
{
    (void)a;
    t->gsi[1]->partitions[2]->node_ids[0] = 77;
}
static void m_gsi_no_replicas(Lapse__TableMap *t, arena *a)
{
    (void)a;
    t->gsi[0]->partitions[0]->n_node_ids = 0;
}
static void m_gsi_repeated(Lapse__TableMap *t, arena *a)
{
    uint32_t *ids = arena_alloc(a, 2 * sizeof *ids);
    ids[0] = ids[1] = 2;
    t->gsi[0]->partitions[3]->node_ids = ids;
    t->gsi[0]->partitions[3]->n_node_ids = 2;
}
static void m_gsi_bad_partitions(Lapse__TableMap *t, arena *a)
{
    (void)a;
    t->schema->gsi[0]->partitions = 3;
}
static void m_hosts_short(Lapse__TableMap *t, arena *a)
{
    (void)a;
    t->n_stream_shards = 7;
}
static void m_hosts_unknown(Lapse__TableMap *t, arena *a)
{
    (void)a;
    t->stream_shards[5]->node_ids[0] = 0;
}
static void m_hosts_without_stream(Lapse__TableMap *t, arena *a)
{
    (void)a;
    t->schema->stream = NULL;
}
static void m_dup_index_id(Lapse__TableMap *t, arena *a)
{
    (void)a;
    t->schema->gsi[1]->id = 1;
}
static void m_retention(Lapse__TableMap *t, arena *a)
{
    (void)a;
    t->schema->stream->retention_hours = 100000;
}

static void m_view(Lapse__TableMap *t, arena *a)
{
    (void)a;
    t->schema->stream->view = (Lapse__StreamView)4;
}

static void bad_placements_are_rejected(void **state)
{
    (void)state;
    expect_rejected(m_gsi_missing, "placements for 1 GSIs, the schema has 2");
    expect_rejected(m_gsi_extra, "placements for 2 GSIs, the schema has 1");
    expect_rejected(m_gsi_null, "GSI \"ByCity\": 0 replica lists for 4 partitions");
    expect_rejected(m_gsi_count, "GSI \"ByEmail\": 7 replica lists for 8 partitions");
    expect_rejected(m_gsi_unknown_node, "GSI \"ByCity\" partition 2: unknown node 77");
    expect_rejected(m_gsi_no_replicas, "partition 0: 0 replicas");
    expect_rejected(m_gsi_repeated, "node 2 listed twice");
    expect_rejected(m_gsi_bad_partitions, "power of two");
    expect_rejected(m_hosts_short, "placements for 7 stream shards, it has 8");
    expect_rejected(m_view, "unknown stream view 4");
    expect_rejected(m_hosts_unknown, "stream partition 5: node id 0");
    expect_rejected(m_hosts_without_stream, "placements for 8 stream shards, it has 0");
    expect_rejected(m_dup_index_id, "same index id 1");
    expect_rejected(m_retention, "stream retention");
}

/* A big indexed cluster's map, pushed whole in one PushPartitionMap, stays
 * far below the message limit. */
static void large_indexed_map_fits_a_message(void **state)
{
    (void)state;
    pmap *pm = pmap_new();
    for (uint32_t id = 1; id <= 5; id++) {
        char addr[64];
        snprintf(addr, sizeof addr, "tcp://node-%u.example.internal:7401", id);
        assert_int_equal(pmap_set_node(pm, id, addr, PMAP_NODE_UP), 0);
    }
    for (uint32_t i = 0; i < 50; i++) {
        char name[64];
        snprintf(name, sizeof name, "table_%02u", i);
        table_schema t = indexed(i + 1, name, 64);
        t.gsi[1].partitions = 64;
        assert_int_equal(pmap_add_table(pm, &t), 0);
    }
    assert_true(pmap_check(pm));
    arena a;
    arena_init(&a);
    Lapse__PushPartitionMapRequest push = LAPSE__PUSH_PARTITION_MAP_REQUEST__INIT;
    push.map = wire_pmap_to_pb(&a, pm);
    assert_non_null(push.map);
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.version = 1;
    req.body_case = LAPSE__REQUEST__BODY_PUSH_PARTITION_MAP;
    req.push_partition_map = &push;
    size_t n = lapse__request__get_packed_size(&req);
    print_message("50 tables x 64 partitions, 2 GSIs x 64 and a stream each: %zu bytes\n", n);
    assert_true(n < RPC_MAX_MESSAGE_BYTES / 64);
    arena_fini(&a);
    pmap_free(pm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(indexed_schema_round_trips),
        cmocka_unit_test(lsi_partition_key_must_be_the_tables),
        cmocka_unit_test(bad_index_definitions_are_rejected),
        cmocka_unit_test(placements_round_trip),
        cmocka_unit_test(bad_placements_are_rejected),
        cmocka_unit_test(large_indexed_map_fits_a_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
