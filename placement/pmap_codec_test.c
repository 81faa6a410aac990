/*
 * pmap_codec_test.c: the partition map's persistent encoding (pmap_codec.c):
 * a rich map (every node flag, TTL, LSIs, GSIs, a stream, replica sets with
 * every field set) survives a round trip with every field equal; empty,
 * foreign, truncated, garbled and trailing input gives LAPSE_ECORRUPT with
 * a reason, never a crash or a map that breaks its invariants.
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
#include "pmap.h"

static void set_key(key_def *k, const char *name, attr_type type)
{
    snprintf(k->name, sizeof k->name, "%s", name);
    k->type = type;
}

static void set_index(index_def *ix, uint32_t id, const char *name, uint32_t partitions)
{
    ix->id = id;
    snprintf(ix->name, sizeof ix->name, "%s", name);
    ix->partitions = partitions;
}

/* Every field of the replica sets of t set, distinct from its neighbours'. */
static void enrich_sets(pmap_replicas *sets, uint32_t n, uint64_t salt)
{
    for (uint32_t p = 0; p < n; p++) {
        pmap_replicas *r = &sets[p];
        r->in_sync = r->n > 1 ? 0x3 : 0x1;
        r->epoch = salt + p + 1;
        r->changes = salt * 3 + p;
        r->last_out = r->ids[r->n - 1];
        r->leaving = r->ids[r->n - 1];
        r->handing_since = r->n > 1 ? (1ull << 40) + p : 0;
        r->handing_to = r->n > 1 ? r->ids[1] : 0;
        r->joining = r->ids[0];
        r->joining_since = salt + 77 + p;
    }
}

/* Four nodes in every state, a table with everything a schema holds and a
 * plain one. Caller frees. */
static pmap *rich_map(void)
{
    pmap *pm = pmap_new();
    assert_non_null(pm);
    pm->version = 123456789012ull;
    for (uint32_t id = 1; id <= 4; id++) {
        char addr[64];
        snprintf(addr, sizeof addr, "tcp://127.0.0.1:%u", 7400 + id);
        assert_int_equal(pmap_set_node(pm, id, addr, PMAP_NODE_UP), 0);
        assert_int_equal(pmap_set_node_lease(pm, id, 0x7000000000000000ll + id), 0);
        assert_int_equal(pmap_set_node_incarnation(pm, id, 0xfedcba9876543210ull - id), 0);
    }
    assert_int_equal(pmap_set_node_zone(pm, 1, "us-east-1a"), 0);
    assert_int_equal(pmap_set_node_zone(pm, 2, "rack_2.b"), 0);
    assert_int_equal(pmap_set_node_zone(pm, 4, "Z"), 0); /* node 3: none */

    table_schema t;
    memset(&t, 0, sizeof t);
    t.id = 7;
    snprintf(t.name, sizeof t.name, "rich.table-1");
    set_key(&t.pk, "pk", ATTR_S);
    set_key(&t.sk, "sk", ATTR_N);
    t.partitions = 8;
    t.ttl.enabled = 1;
    snprintf(t.ttl.attribute, sizeof t.ttl.attribute, "expires");
    t.ttl.offset_s = 3600;
    t.ttl.guard_years = 7;
    t.ttl.paused = 1;
    t.ttl.config_version = 99;
    t.hide_expired = 1;
    t.nlsi = 2;
    set_index(&t.lsi[0], 1, "by_a", 0);
    set_key(&t.lsi[0].sk, "a", ATTR_S);
    set_index(&t.lsi[1], 2, "by_b", 0);
    set_key(&t.lsi[1].sk, "b", ATTR_B);
    t.lsi[1].projection = INDEX_PROJECT_KEYS;
    t.ngsi = 2;
    set_index(&t.gsi[0], 3, "g_c", 4);
    set_key(&t.gsi[0].pk, "c", ATTR_S);
    set_index(&t.gsi[1], 4, "g_d", 2);
    set_key(&t.gsi[1].pk, "d", ATTR_N);
    set_key(&t.gsi[1].sk, "a", ATTR_S);
    t.gsi[1].projection = INDEX_PROJECT_KEYS;
    t.stream.enabled = 1;
    t.stream.view = STREAM_VIEW_OLD_IMAGE;
    t.stream.ttl_deletes = 1;
    t.stream.retention_hours = 48;
    t.stream.generation = 3;
    t.stream.since_ms = 1700000000123ll;
    t.replication = 3;
    t.created_ms = 1690000000456ll;
    assert_int_equal(pmap_add_table(pm, &t), 0);

    table_schema plain;
    memset(&plain, 0, sizeof plain);
    plain.id = 9;
    snprintf(plain.name, sizeof plain.name, "plain");
    set_key(&plain.pk, "id", ATTR_B);
    plain.partitions = 1;
    assert_int_equal(pmap_add_table(pm, &plain), 0);

    pmap_table *rt = &pm->tables[0];
    enrich_sets(rt->parts, rt->schema.partitions, 10);
    for (uint32_t g = 0; g < rt->schema.ngsi; g++) {
        enrich_sets(rt->gsi_parts[g], rt->schema.gsi[g].partitions, 100 + g);
    }
    enrich_sets(rt->stream_shards, rt->schema.partitions, 200);
    /* Flags last: a draining or removed node gets no new sets. */
    assert_int_equal(pmap_set_node_draining(pm, 2, 1), 0);
    assert_int_equal(pmap_set_node(pm, 3, "tcp://[::1]:7403", PMAP_NODE_DOWN), 0);
    assert_int_equal(pmap_set_node_removed(pm, 4), 0);
    assert_true(pmap_check(pm));
    return pm;
}

static void expect_key(const key_def *a, const key_def *b)
{
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->type, b->type);
}

static void expect_index(const index_def *a, const index_def *b)
{
    assert_int_equal(a->id, b->id);
    assert_string_equal(a->name, b->name);
    expect_key(&a->pk, &b->pk);
    expect_key(&a->sk, &b->sk);
    assert_int_equal(a->projection, b->projection);
    assert_int_equal(a->partitions, b->partitions);
}

static void expect_schema(const table_schema *a, const table_schema *b)
{
    assert_int_equal(a->id, b->id);
    assert_string_equal(a->name, b->name);
    expect_key(&a->pk, &b->pk);
    expect_key(&a->sk, &b->sk);
    assert_int_equal(a->partitions, b->partitions);
    assert_int_equal(a->ttl.enabled, b->ttl.enabled);
    assert_string_equal(a->ttl.attribute, b->ttl.attribute);
    assert_int_equal(a->ttl.offset_s, b->ttl.offset_s);
    assert_int_equal(a->ttl.guard_years, b->ttl.guard_years);
    assert_int_equal(a->ttl.paused, b->ttl.paused);
    assert_int_equal(a->ttl.config_version, b->ttl.config_version);
    assert_int_equal(a->hide_expired, b->hide_expired);
    assert_int_equal(a->nlsi, b->nlsi);
    for (uint32_t i = 0; i < a->nlsi; i++) {
        expect_index(&a->lsi[i], &b->lsi[i]);
    }
    assert_int_equal(a->ngsi, b->ngsi);
    for (uint32_t i = 0; i < a->ngsi; i++) {
        expect_index(&a->gsi[i], &b->gsi[i]);
    }
    assert_int_equal(a->stream.enabled, b->stream.enabled);
    assert_int_equal(a->stream.view, b->stream.view);
    assert_int_equal(a->stream.ttl_deletes, b->stream.ttl_deletes);
    assert_int_equal(a->stream.retention_hours, b->stream.retention_hours);
    assert_int_equal(a->stream.generation, b->stream.generation);
    assert_int_equal(a->stream.since_ms, b->stream.since_ms);
    assert_int_equal(a->replication, b->replication);
    assert_int_equal(a->created_ms, b->created_ms);
}

static void expect_sets(const pmap_replicas *a, const pmap_replicas *b, uint32_t n)
{
    assert_true((a == NULL) == (b == NULL));
    for (uint32_t p = 0; a != NULL && p < n; p++) {
        assert_int_equal(a[p].n, b[p].n);
        assert_memory_equal(a[p].ids, b[p].ids, a[p].n * sizeof(uint32_t));
        assert_int_equal(a[p].in_sync, b[p].in_sync);
        assert_int_equal(a[p].epoch, b[p].epoch);
        assert_int_equal(a[p].changes, b[p].changes);
        assert_int_equal(a[p].last_out, b[p].last_out);
        assert_int_equal(a[p].leaving, b[p].leaving);
        assert_int_equal(a[p].handing_since, b[p].handing_since);
        assert_int_equal(a[p].handing_to, b[p].handing_to);
        assert_int_equal(a[p].joining, b[p].joining);
        assert_int_equal(a[p].joining_since, b[p].joining_since);
    }
}

static void expect_maps_equal(const pmap *a, const pmap *b)
{
    assert_int_equal(a->version, b->version);
    assert_int_equal(a->nnodes, b->nnodes);
    for (size_t i = 0; i < a->nnodes; i++) {
        const pmap_node *x = &a->nodes[i], *y = pmap_node_find(b, x->id);
        assert_non_null(y);
        assert_string_equal(x->address, y->address);
        assert_int_equal(x->state, y->state);
        assert_int_equal(x->lease, y->lease);
        assert_int_equal(x->incarnation, y->incarnation);
        assert_int_equal(x->draining, y->draining);
        assert_int_equal(x->removed, y->removed);
        assert_string_equal(x->zone, y->zone);
    }
    assert_int_equal(a->ntables, b->ntables);
    for (size_t i = 0; i < a->ntables; i++) {
        const pmap_table *x = &a->tables[i], *y = pmap_table_find(b, x->schema.name);
        assert_non_null(y);
        expect_schema(&x->schema, &y->schema);
        expect_sets(x->parts, y->parts, x->schema.partitions);
        for (uint32_t g = 0; g < SCHEMA_MAX_GSI; g++) {
            expect_sets(x->gsi_parts[g], y->gsi_parts[g],
                        g < x->schema.ngsi ? x->schema.gsi[g].partitions : 0);
        }
        expect_sets(x->stream_shards, y->stream_shards, x->schema.partitions);
    }
}

/* Decodes data, which must fail with LAPSE_ECORRUPT and a reason holding
 * want (NULL: any reason). */
static void expect_corrupt(const void *data, size_t len, const char *want)
{
    pmap *pm = (pmap *)1;
    char err[256] = "";
    int rv = pmap_decode(data, len, &pm, err, sizeof err);
    if (rv != LAPSE_ECORRUPT) {
        fail_msg("decoding %zu bytes: %s (want ECORRUPT: %s)", len, lapse_strerror(rv), err);
    }
    assert_null(pm);
    assert_true(err[0] != 0);
    if (want != NULL && strstr(err, want) == NULL) {
        fail_msg("reason \"%s\" lacks \"%s\"", err, want);
    }
}

/* A map written before zones (format V1: no zone after a node's flags)
 * decodes with no zone; a V2 node's zone must be a zone's name. */
static void v1_maps_decode_without_zones(void **state)
{
    (void)state;
    /* format, version 5, one node: id 1, address "a", UP, lease 0,
     * incarnation 0, not draining, not removed; no table. */
    const uint8_t v1[] = {0x01, 5, 1, 1, 1, 'a', 1, 0, 0, 0, 0, 0};
    pmap *pm = NULL;
    char err[256] = "";
    if (pmap_decode(v1, sizeof v1, &pm, err, sizeof err) != 0) {
        fail_msg("decoding a V1 map: %s", err);
    }
    assert_int_equal(pm->version, 5);
    assert_int_equal(pm->nnodes, 1);
    assert_string_equal(pm->nodes[0].address, "a");
    assert_string_equal(pm->nodes[0].zone, "");
    pmap_free(pm);

    const uint8_t v2[] = {0x02, 5, 1, 1, 1, 'a', 1, 0, 0, 0, 0, 2, 'z', '1', 0};
    assert_int_equal(pmap_decode(v2, sizeof v2, &pm, err, sizeof err), 0);
    assert_string_equal(pm->nodes[0].zone, "z1");
    pmap_free(pm);
    const uint8_t bad[] = {0x02, 5, 1, 1, 1, 'a', 1, 0, 0, 0, 0, 2, 'z', ' ', 0};
    expect_corrupt(bad, sizeof bad, "node 1");
    /* the same bytes as V1 have a byte left over */
    uint8_t v1_trailing[sizeof v2];
    memcpy(v1_trailing, v2, sizeof v2);
    v1_trailing[0] = 0x01;
    expect_corrupt(v1_trailing, sizeof v1_trailing, NULL);
}

static void rich_map_round_trips(void **state)
{
    (void)state;
    pmap *pm = rich_map();
    buf b;
    buf_init(&b);
    assert_int_equal(pmap_encode(pm, &b), 0);
    assert_int_equal(b.data[0], PMAP_FORMAT_V2);
    pmap *back = NULL;
    char err[256] = "";
    if (pmap_decode(b.data, b.len, &back, err, sizeof err) != 0) {
        fail_msg("decode: %s", err);
    }
    expect_maps_equal(pm, back);
    expect_maps_equal(back, pm);
    /* The encoding of the decoded map is the same bytes. */
    buf again;
    buf_init(&again);
    assert_int_equal(pmap_encode(back, &again), 0);
    assert_int_equal(again.len, b.len);
    assert_memory_equal(again.data, b.data, b.len);
    buf_fini(&again);
    pmap_free(back);
    pmap_free(pm);
    buf_fini(&b);

    /* An empty map too. */
    pmap *empty = pmap_new();
    assert_non_null(empty);
    buf_init(&b);
    assert_int_equal(pmap_encode(empty, &b), 0);
    assert_int_equal(pmap_decode(b.data, b.len, &back, err, sizeof err), 0);
    expect_maps_equal(empty, back);
    pmap_free(back);
    pmap_free(empty);
    buf_fini(&b);
}

static void bad_input_is_corrupt_with_a_reason(void **state)
{
    (void)state;
    expect_corrupt("", 0, "empty");
    /* A packed lapse.PartitionMap starts with a field tag (version: 0x08). */
    const uint8_t pb[] = {0x08, 0x05, 0x12, 0x00};
    expect_corrupt(pb, sizeof pb, "unknown partition map format 0x08");

    pmap *pm = rich_map();
    buf b;
    buf_init(&b);
    assert_int_equal(pmap_encode(pm, &b), 0);
    assert_int_equal(buf_append_byte(&b, 0), 0);
    expect_corrupt(b.data, b.len, "trailing");
    b.len--;
    /* A set naming a node the map lacks. */
    pm->tables[1].parts[0].ids[0] = 42;
    buf_clear(&b);
    assert_int_equal(pmap_encode(pm, &b), 0);
    expect_corrupt(b.data, b.len, "unknown node");
    /* A handover to a node outside the set. */
    pm->tables[1].parts[0].ids[0] = 1;
    pm->tables[1].parts[0].handing_to = 2;
    buf_clear(&b);
    assert_int_equal(pmap_encode(pm, &b), 0);
    expect_corrupt(b.data, b.len, "handover target 2");
    /* A varint that never ends. */
    uint8_t endless[16];
    memset(endless, 0xff, sizeof endless);
    endless[0] = PMAP_FORMAT_V1;
    expect_corrupt(endless, sizeof endless, "version");
    pmap_free(pm);
    buf_fini(&b);
}

static void every_truncation_is_corrupt(void **state)
{
    (void)state;
    pmap *pm = rich_map();
    buf b;
    buf_init(&b);
    assert_int_equal(pmap_encode(pm, &b), 0);
    /* Bounded by the encoding's length (a few KB): each prefix once. */
    for (size_t len = 0; len < b.len; len++) {
        uint8_t *copy = malloc(len > 0 ? len : 1); /* exact size: ASan sees an overread */
        assert_non_null(copy);
        memcpy(copy, b.data, len);
        expect_corrupt(copy, len, NULL);
        free(copy);
    }
    pmap_free(pm);
    buf_fini(&b);
}

/* Random bytes changed: 3000 tries from a fixed seed, each either a clean
 * ECORRUPT or a map that passes pmap_check and encodes again. */
static void garbled_input_never_crashes(void **state)
{
    (void)state;
    pmap *pm = rich_map();
    buf b;
    buf_init(&b);
    assert_int_equal(pmap_encode(pm, &b), 0);
    srand(15);
    size_t decoded = 0;
    for (int round = 0; round < 3000; round++) {
        uint8_t *copy = malloc(b.len);
        assert_non_null(copy);
        memcpy(copy, b.data, b.len);
        int flips = 1 + rand() % 4;
        for (int f = 0; f < flips; f++) {
            copy[1 + (size_t)rand() % (b.len - 1)] = (uint8_t)rand();
        }
        size_t len = round % 3 == 0 ? (size_t)rand() % b.len : b.len;
        pmap *got = NULL;
        char err[256] = "";
        int rv = pmap_decode(copy, len, &got, err, sizeof err);
        if (rv == 0) {
            assert_true(pmap_check(got));
            buf again;
            buf_init(&again);
            assert_int_equal(pmap_encode(got, &again), 0);
            buf_fini(&again);
            pmap_free(got);
            decoded++;
        } else {
            assert_int_equal(rv, LAPSE_ECORRUPT);
            assert_null(got);
            assert_true(err[0] != 0);
        }
        free(copy);
    }
    print_message("garbled maps: %zu of 3000 still decoded (a changed value in range)\n", decoded);
    pmap_free(pm);
    buf_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rich_map_round_trips),
        cmocka_unit_test(v1_maps_decode_without_zones),
        cmocka_unit_test(bad_input_is_corrupt_with_a_reason),
        cmocka_unit_test(every_truncation_is_corrupt),
        cmocka_unit_test(garbled_input_never_crashes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
