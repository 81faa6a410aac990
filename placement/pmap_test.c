/*
 * pmap_test.c: the partition map: balanced assignment over several tables and
 * nodes (DOWN nodes get nothing), lookups, removal, deep copies and the
 * invariant checker; GSI partitions and stream shards placed with them;
 * sets lost with a removed node.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../common/lapse_err.h"
#include "pmap.h"

static table_schema mk_schema(uint32_t id, const char *name, uint32_t partitions)
{
    table_schema t;
    memset(&t, 0, sizeof(t));
    t.id = id;
    snprintf(t.name, sizeof(t.name), "%s", name);
    snprintf(t.pk.name, sizeof(t.pk.name), "pk");
    t.pk.type = ATTR_S;
    t.partitions = partitions;
    return t;
}

static void add_nodes(pmap *pm, uint32_t n)
{
    for (uint32_t id = 1; id <= n; id++) {
        char addr[64];
        snprintf(addr, sizeof(addr), "tcp://127.0.0.1:%u", 7400 + id);
        assert_int_equal(pmap_set_node(pm, id, addr, PMAP_NODE_UP), 0);
    }
}

static void assert_balanced(const pmap *pm)
{
    size_t lo = SIZE_MAX, hi = 0, total = 0;
    for (size_t i = 0; i < pm->nnodes; i++) {
        if (pm->nodes[i].state != PMAP_NODE_UP) {
            continue;
        }
        size_t c = pmap_partitions_owned(pm, pm->nodes[i].id);
        lo = c < lo ? c : lo;
        hi = c > hi ? c : hi;
        total += c;
    }
    size_t expect = 0;
    for (size_t i = 0; i < pm->ntables; i++) {
        expect += pm->tables[i].schema.partitions;
    }
    assert_int_equal(total, expect);
    if (hi - lo > 1) {
        fail_msg("unbalanced: nodes own between %zu and %zu partitions", lo, hi);
    }
}

static void test_balanced_over_tables_and_nodes(void **state)
{
    (void)state;
    for (uint32_t nodes = 1; nodes <= 5; nodes++) {
        pmap *pm = pmap_new();
        assert_non_null(pm);
        add_nodes(pm, nodes);
        const uint32_t sizes[] = {64, 1, 2, 8, 16, 4, 1, 128};
        for (uint32_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            char name[32];
            snprintf(name, sizeof(name), "table%u", i);
            table_schema t = mk_schema(100 + i, name, sizes[i]);
            assert_int_equal(pmap_add_table(pm, &t), 0);
            assert_balanced(pm);
            assert_true(pmap_check(pm));
        }
        pmap_free(pm);
    }
}

static void test_assignment_order_is_deterministic(void **state)
{
    (void)state;
    pmap *pm = pmap_new();
    add_nodes(pm, 3);
    table_schema a = mk_schema(1, "aaa", 4);
    assert_int_equal(pmap_add_table(pm, &a), 0);
    const pmap_table *t = pmap_table_find(pm, "aaa");
    assert_non_null(t);
    /* Ties go to the lowest id: 1, 2, 3, then 1 again. */
    assert_int_equal(pmap_owner(t, 0), 1);
    assert_int_equal(pmap_owner(t, 1), 2);
    assert_int_equal(pmap_owner(t, 2), 3);
    assert_int_equal(pmap_owner(t, 3), 1);
    /* Node 1 owns 2 now, so the next table starts with 2 and 3. */
    table_schema b = mk_schema(2, "bbb", 2);
    assert_int_equal(pmap_add_table(pm, &b), 0);
    t = pmap_table_find(pm, "bbb");
    assert_int_equal(pmap_owner(t, 0), 2);
    assert_int_equal(pmap_owner(t, 1), 3);
    assert_int_equal(pmap_owner(t, 2), 0); /* out of range */
    assert_int_equal(pmap_partitions_owned(pm, 1), 2);
    assert_int_equal(pmap_partitions_owned(pm, 2), 2);
    assert_int_equal(pmap_partitions_owned(pm, 3), 2);
    assert_int_equal(pmap_partitions_owned(pm, 9), 0);
    assert_int_equal(pmap_owner(NULL, 0), 0);
    pmap_free(pm);
}

static void test_down_nodes_get_nothing(void **state)
{
    (void)state;
    pmap *pm = pmap_new();
    table_schema t = mk_schema(1, "t1", 8);
    assert_int_equal(pmap_add_table(pm, &t), LAPSE_EUNAVAILABLE);
    assert_int_equal(pm->ntables, 0);
    add_nodes(pm, 3);
    assert_int_equal(pmap_set_node(pm, 2, "tcp://127.0.0.1:7402", PMAP_NODE_DOWN), 0);
    assert_int_equal(pm->nnodes, 3); /* updated, not added */
    assert_int_equal(pmap_add_table(pm, &t), 0);
    assert_int_equal(pmap_partitions_owned(pm, 2), 0);
    assert_int_equal(pmap_partitions_owned(pm, 1), 4);
    assert_int_equal(pmap_partitions_owned(pm, 3), 4);
    /* Node 2 comes back: it takes its even share of a new table, and the
     * one left over since it owns least (not the whole table). */
    assert_int_equal(pmap_set_node(pm, 2, "tcp://127.0.0.1:7412", PMAP_NODE_UP), 0);
    assert_string_equal(pmap_node_find(pm, 2)->address, "tcp://127.0.0.1:7412");
    table_schema u = mk_schema(2, "t2", 4);
    assert_int_equal(pmap_add_table(pm, &u), 0);
    assert_int_equal(pmap_partitions_owned(pm, 2), 2);
    assert_int_equal(pmap_partitions_owned(pm, 1), 5);
    assert_int_equal(pmap_partitions_owned(pm, 3), 5);
    assert_true(pmap_check(pm));
    pmap_free(pm);
}

static void test_lookups_duplicates_remove(void **state)
{
    (void)state;
    pmap *pm = pmap_new();
    add_nodes(pm, 2);
    assert_int_equal(pmap_set_node(pm, 0, "tcp://x", PMAP_NODE_UP), LAPSE_EINVAL);
    assert_null(pmap_node_find(pm, 0));
    assert_non_null(pmap_node_find(pm, 2));
    assert_null(pmap_node_find(pm, 3));

    table_schema a = mk_schema(10, "alpha", 2);
    table_schema b = mk_schema(11, "beta", 2);
    assert_int_equal(pmap_add_table(pm, &a), 0);
    assert_int_equal(pmap_add_table(pm, &b), 0);
    assert_int_equal(pmap_add_table(pm, &a), LAPSE_EEXISTS);
    table_schema same_id = mk_schema(10, "gamma", 2);
    assert_int_equal(pmap_add_table(pm, &same_id), LAPSE_EEXISTS);
    assert_int_equal(pm->ntables, 2);

    assert_int_equal(pmap_table_find(pm, "beta")->schema.id, 11);
    assert_string_equal(pmap_table_find_id(pm, 10)->schema.name, "alpha");
    assert_null(pmap_table_find(pm, "gamma"));
    assert_null(pmap_table_find_id(pm, 12));

    assert_int_equal(pmap_remove_table(pm, "alpha"), 1);
    assert_int_equal(pmap_remove_table(pm, "alpha"), 0);
    assert_null(pmap_table_find(pm, "alpha"));
    assert_non_null(pmap_table_find(pm, "beta"));
    assert_int_equal(pmap_partitions_owned(pm, 1) + pmap_partitions_owned(pm, 2), 2);
    /* The name can be reused (with a new id). */
    table_schema a2 = mk_schema(12, "alpha", 4);
    assert_int_equal(pmap_add_table(pm, &a2), 0);
    assert_true(pmap_check(pm));
    pmap_free(pm);
    pmap_free(NULL);
}

static void test_dup_is_deep(void **state)
{
    (void)state;
    pmap *pm = pmap_new();
    add_nodes(pm, 3);
    pm->version = 42;
    table_schema a = mk_schema(1, "alpha", 16);
    assert_int_equal(pmap_add_table(pm, &a), 0);
    pmap *d = pmap_dup(pm);
    assert_non_null(d);
    assert_int_equal(d->version, 42);
    assert_int_equal(d->nnodes, 3);
    assert_int_equal(d->ntables, 1);
    const pmap_table *t = pmap_table_find(d, "alpha");
    for (uint32_t p = 0; p < 16; p++) {
        assert_int_equal(pmap_owner(t, p), pmap_owner(pmap_table_find(pm, "alpha"), p));
    }
    assert_true(t->parts != pmap_table_find(pm, "alpha")->parts);
    pmap_free(pm); /* the copy stands alone */
    assert_true(pmap_check(d));
    assert_int_equal(pmap_partitions_owned(d, 1), 6);

    pmap *empty = pmap_new();
    pmap *ed = pmap_dup(empty);
    assert_non_null(ed);
    assert_int_equal(ed->ntables, 0);
    pmap_free(empty);
    pmap_free(ed);
    pmap_free(d);
}

static void test_assigned_and_check(void **state)
{
    (void)state;
    pmap *pm = pmap_new();
    add_nodes(pm, 3);
    table_schema t = mk_schema(5, "assigned", 2);
    pmap_replicas parts[2] = {{.n = 2, .ids = {3, 1}}, {.n = 1, .ids = {2}}};
    assert_int_equal(pmap_add_table_assigned(pm, &t, parts), 0);
    parts[0].ids[0] = 1; /* a copy was taken */
    const pmap_table *pt = pmap_table_find(pm, "assigned");
    assert_int_equal(pmap_owner(pt, 0), 3);
    assert_int_equal(pt->parts[0].ids[1], 1);
    assert_int_equal(pmap_owner(pt, 1), 2);
    assert_true(pmap_check(pm));
    assert_int_equal(pmap_add_table_assigned(pm, &t, parts), LAPSE_EEXISTS);

    table_schema bad = mk_schema(6, "bad", 1);
    pmap_replicas none[1] = {{.n = 0}};
    assert_int_equal(pmap_add_table_assigned(pm, &bad, none), LAPSE_EINVAL);
    pmap_replicas toomany[1] = {{.n = PMAP_MAX_REPLICAS + 1, .ids = {1, 2, 3}}};
    assert_int_equal(pmap_add_table_assigned(pm, &bad, toomany), LAPSE_EINVAL);

    /* pmap_check catches each broken invariant. */
    pmap_replicas unknown[1] = {{.n = 1, .ids = {99}}};
    assert_int_equal(pmap_add_table_assigned(pm, &bad, unknown), 0);
    assert_false(pmap_check(pm));
    assert_int_equal(pmap_remove_table(pm, "bad"), 1);
    assert_true(pmap_check(pm));

    pmap *d = pmap_dup(pm);
    d->nodes[1].id = d->nodes[0].id; /* duplicate node id */
    assert_false(pmap_check(d));
    pmap_free(d);

    d = pmap_dup(pm);
    d->nodes[0].id = 0;
    assert_false(pmap_check(d));
    pmap_free(d);

    d = pmap_dup(pm);
    table_schema other = mk_schema(7, "other", 1);
    assert_int_equal(pmap_add_table(d, &other), 0);
    assert_true(pmap_check(d));
    d->tables[1].schema.id = 5; /* duplicate table id */
    assert_false(pmap_check(d));
    d->tables[1].schema.id = 7;
    snprintf(d->tables[1].schema.name, sizeof(d->tables[1].schema.name), "assigned");
    assert_false(pmap_check(d));
    snprintf(d->tables[1].schema.name, sizeof(d->tables[1].schema.name), "other");
    d->tables[1].parts[0].n = 0;
    assert_false(pmap_check(d));
    pmap_free(d);

    assert_false(pmap_check(NULL));
    pmap_free(pm);
}

/* ---- GSI partitions and stream shards ---- */

/* A table with GSIs of the given partition counts and, with stream, a
 * stream. */
static table_schema mk_indexed(uint32_t id, const char *name, uint32_t partitions,
                               const uint32_t *gsi_parts, uint32_t ngsi, int stream)
{
    table_schema t = mk_schema(id, name, partitions);
    t.ngsi = ngsi;
    for (uint32_t g = 0; g < ngsi; g++) {
        t.gsi[g].id = g + 1;
        snprintf(t.gsi[g].name, sizeof(t.gsi[g].name), "gsi%u", (unsigned)g);
        snprintf(t.gsi[g].pk.name, sizeof(t.gsi[g].pk.name), "a%u", (unsigned)g);
        t.gsi[g].pk.type = ATTR_S;
        t.gsi[g].partitions = gsi_parts[g];
    }
    t.stream.enabled = stream;
    t.stream.ttl_deletes = 1;
    t.stream.retention_hours = 24;
    return t;
}

/* Base plus GSI partitions owned differ by at most one over the UP nodes,
 * and so do stream shards hosted; DOWN nodes have none of either. */
static void assert_balanced_all(const pmap *pm)
{
    size_t lo = SIZE_MAX, hi = 0, slo = SIZE_MAX, shi = 0;
    for (size_t i = 0; i < pm->nnodes; i++) {
        uint32_t id = pm->nodes[i].id;
        size_t c = pmap_partitions_owned(pm, id) + pmap_gsi_partitions_owned(pm, id);
        size_t s = pmap_stream_shards_hosted(pm, id);
        if (pm->nodes[i].state != PMAP_NODE_UP) {
            continue;
        }
        lo = c < lo ? c : lo;
        hi = c > hi ? c : hi;
        slo = s < slo ? s : slo;
        shi = s > shi ? s : shi;
    }
    if (hi - lo > 1 || shi - slo > 1) {
        fail_msg("unbalanced: partitions %zu..%zu, stream shards %zu..%zu", lo, hi, slo, shi);
    }
}

static void test_gsi_and_stream_placement(void **state)
{
    (void)state;
    for (uint32_t nodes = 2; nodes <= 5; nodes++) {
        pmap *pm = pmap_new();
        add_nodes(pm, nodes);
        const uint32_t g1[] = {16, 4};
        const uint32_t g2[] = {1};
        table_schema a = mk_indexed(1, "alpha", 64, g1, 2, 1);
        table_schema b = mk_indexed(2, "beta", 8, g2, 1, 0);
        table_schema c = mk_indexed(3, "gamma", 32, NULL, 0, 1);
        table_schema d = mk_schema(4, "delta", 2);
        assert_int_equal(pmap_add_table(pm, &a), 0);
        assert_balanced_all(pm);
        assert_int_equal(pmap_add_table(pm, &b), 0);
        assert_int_equal(pmap_add_table(pm, &c), 0);
        assert_int_equal(pmap_add_table(pm, &d), 0);
        assert_balanced_all(pm);
        assert_true(pmap_check(pm));

        size_t gsi_total = 0, shards = 0;
        for (uint32_t id = 1; id <= nodes; id++) {
            gsi_total += pmap_gsi_partitions_owned(pm, id);
            shards += pmap_stream_shards_hosted(pm, id);
        }
        assert_int_equal(gsi_total, 16 + 4 + 1);
        assert_int_equal(shards, 64 + 32);
        /* A shard never sits on its partition's owner when another node is up. */
        const pmap_table *ts[] = {pmap_table_find(pm, "alpha"), pmap_table_find(pm, "gamma")};
        for (size_t k = 0; k < 2; k++) {
            for (uint32_t p = 0; p < ts[k]->schema.partitions; p++) {
                uint32_t host = pmap_stream_host(ts[k], p);
                assert_true(host >= 1 && host <= nodes);
                assert_int_not_equal(host, pmap_owner(ts[k], p));
            }
        }
        pmap_free(pm);
    }
}

static void test_gsi_and_stream_lookups(void **state)
{
    (void)state;
    pmap *pm = pmap_new();
    add_nodes(pm, 3);
    const uint32_t g[] = {4, 2};
    table_schema a = mk_indexed(1, "alpha", 4, g, 2, 1);
    assert_int_equal(pmap_add_table(pm, &a), 0);
    const pmap_table *t = pmap_table_find(pm, "alpha");
    /* Base 1,2,3,1; then GSI 0 from the least loaded: 2,3,1,2; GSI 1: 3,1. */
    assert_int_equal(pmap_gsi_owner(t, 0, 0), 2);
    assert_int_equal(pmap_gsi_owner(t, 0, 1), 3);
    assert_int_equal(pmap_gsi_owner(t, 0, 2), 1);
    assert_int_equal(pmap_gsi_owner(t, 0, 3), 2);
    assert_int_equal(pmap_gsi_owner(t, 1, 0), 3);
    assert_int_equal(pmap_gsi_owner(t, 1, 1), 1);
    assert_int_equal(pmap_gsi_owner(t, 1, 2), 0); /* out of range */
    assert_int_equal(pmap_gsi_owner(t, 2, 0), 0);
    assert_int_equal(pmap_gsi_owner(NULL, 0, 0), 0);
    assert_int_equal(pmap_gsi_find(t, "gsi1"), 1);
    assert_int_equal(pmap_gsi_find(t, "nope"), -1);
    assert_int_equal(pmap_gsi_find(NULL, "gsi1"), -1);
    /* Shards: owners 1,2,3,1 -> hosts 2,1,1... least shards, not the owner. */
    assert_int_equal(pmap_stream_host(t, 0), 2);
    assert_int_equal(pmap_stream_host(t, 1), 1);
    assert_int_equal(pmap_stream_host(t, 2), 1);
    assert_int_equal(pmap_stream_host(t, 3), 3);
    assert_int_equal(pmap_stream_host(t, 4), 0);

    /* Destinations of partition 0: every GSI owner (1, 2, 3) and host 2. */
    uint32_t ids[4] = {0};
    assert_int_equal(pmap_outbox_destinations(t, 0, ids, 4), 3);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 2);
    assert_int_equal(ids[2], 3);
    assert_int_equal(pmap_outbox_destinations(t, 0, ids, 1), 3); /* truncated, count kept */
    assert_int_equal(ids[0], 1);
    assert_int_equal(pmap_outbox_destinations(t, 9, ids, 4), 0);

    /* Stream only, on one node: the shard shares the owner's node. */
    pmap *one = pmap_new();
    add_nodes(one, 1);
    table_schema s = mk_indexed(2, "solo", 2, NULL, 0, 1);
    assert_int_equal(pmap_add_table(one, &s), 0);
    t = pmap_table_find(one, "solo");
    assert_int_equal(pmap_stream_host(t, 0), 1);
    assert_int_equal(pmap_stream_host(t, 1), 1);
    assert_int_equal(pmap_outbox_destinations(t, 1, ids, 4), 1);
    assert_int_equal(ids[0], 1);
    /* No outbox at all: no destinations, no shards. */
    table_schema plain = mk_schema(3, "plain", 2);
    assert_int_equal(pmap_add_table(one, &plain), 0);
    t = pmap_table_find(one, "plain");
    assert_int_equal(pmap_stream_host(t, 0), 0);
    assert_int_equal(pmap_outbox_destinations(t, 0, ids, 4), 0);
    assert_true(pmap_check(one));
    pmap_free(one);

    /* DOWN nodes get neither GSI partitions nor shards. */
    assert_int_equal(pmap_set_node(pm, 3, "tcp://127.0.0.1:7403", PMAP_NODE_DOWN), 0);
    size_t g3 = pmap_gsi_partitions_owned(pm, 3), s3 = pmap_stream_shards_hosted(pm, 3);
    const uint32_t big[] = {64};
    table_schema b = mk_indexed(4, "beta", 16, big, 1, 1);
    assert_int_equal(pmap_add_table(pm, &b), 0);
    assert_int_equal(pmap_gsi_partitions_owned(pm, 3), g3);
    assert_int_equal(pmap_stream_shards_hosted(pm, 3), s3);
    t = pmap_table_find(pm, "beta");
    for (uint32_t p = 0; p < 16; p++) {
        assert_int_not_equal(pmap_stream_host(t, p), pmap_owner(t, p));
    }
    assert_true(pmap_check(pm));

    /* Deep copies; removal frees everything (ASan would tell). */
    pmap *d = pmap_dup(pm);
    assert_non_null(d);
    const pmap_table *dt = pmap_table_find(d, "beta");
    assert_true(dt->gsi_parts[0] != t->gsi_parts[0]);
    assert_true(dt->stream_shards != t->stream_shards);
    for (uint32_t p = 0; p < 64; p++) {
        assert_int_equal(pmap_gsi_owner(dt, 0, p), pmap_gsi_owner(t, 0, p));
    }
    assert_int_equal(pmap_remove_table(pm, "alpha"), 1);
    pmap_free(pm);
    assert_true(pmap_check(d));
    pmap_free(d);
}

static void test_placed_and_check(void **state)
{
    (void)state;
    pmap *pm = pmap_new();
    add_nodes(pm, 3);
    const uint32_t g[] = {2};
    table_schema t = mk_indexed(1, "placed", 2, g, 1, 1);
    pmap_replicas base[2] = {{.n = 1, .ids = {1}}, {.n = 1, .ids = {2}}};
    pmap_replicas gsi[2] = {{.n = 1, .ids = {3}}, {.n = 2, .ids = {1, 2}}};
    pmap_replicas hosts[2] = {{.n = 1, .ids = {2}}, {.n = 1, .ids = {3}}};
    pmap_placement pl;
    memset(&pl, 0, sizeof(pl));
    pl.parts = base;
    pl.gsi_parts[0] = gsi;
    pl.stream_shards = hosts;

    /* The old entry point cannot place a table with GSIs or a stream. */
    assert_int_equal(pmap_add_table_assigned(pm, &t, base), LAPSE_EINVAL);
    pl.stream_shards = NULL; /* a stream without hosts */
    assert_int_equal(pmap_add_table_placed(pm, &t, &pl), LAPSE_EINVAL);
    pl.stream_shards = hosts;
    hosts[1].ids[0] = 0;
    assert_int_equal(pmap_add_table_placed(pm, &t, &pl), LAPSE_EINVAL);
    hosts[1].ids[0] = 3;
    hosts[1].n = 0;
    assert_int_equal(pmap_add_table_placed(pm, &t, &pl), LAPSE_EINVAL);
    hosts[1].n = 1;
    pl.gsi_parts[0] = NULL; /* a GSI without placement */
    assert_int_equal(pmap_add_table_placed(pm, &t, &pl), LAPSE_EINVAL);
    pl.gsi_parts[0] = gsi;
    pl.gsi_parts[1] = gsi; /* a placement for a GSI that is not there */
    assert_int_equal(pmap_add_table_placed(pm, &t, &pl), LAPSE_EINVAL);
    pl.gsi_parts[1] = NULL;
    gsi[0].n = 0;
    assert_int_equal(pmap_add_table_placed(pm, &t, &pl), LAPSE_EINVAL);
    gsi[0].n = 1;
    assert_int_equal(pm->ntables, 0);

    assert_int_equal(pmap_add_table_placed(pm, &t, &pl), 0);
    gsi[1].ids[0] = 3; /* copies were taken */
    hosts[0].ids[0] = 1;
    const pmap_table *pt = pmap_table_find(pm, "placed");
    assert_int_equal(pmap_gsi_owner(pt, 0, 1), 1);
    assert_int_equal(pt->gsi_parts[0][1].ids[1], 2);
    assert_int_equal(pmap_stream_host(pt, 0), 2);
    assert_true(pmap_check(pm));
    assert_int_equal(pmap_add_table_placed(pm, &t, &pl), LAPSE_EEXISTS);

    /* pmap_check catches broken placements. */
    pmap *d = pmap_dup(pm);
    d->tables[0].gsi_parts[0][0].ids[0] = 99; /* unknown node */
    assert_false(pmap_check(d));
    pmap_free(d);
    d = pmap_dup(pm);
    d->tables[0].stream_shards[1].ids[0] = 99;
    assert_false(pmap_check(d));
    pmap_free(d);
    d = pmap_dup(pm);
    d->tables[0].schema.stream.enabled = 0; /* hosts without a stream */
    assert_false(pmap_check(d));
    pmap_free(d);
    d = pmap_dup(pm);
    d->tables[0].schema.ngsi = 0; /* a placement past ngsi */
    assert_false(pmap_check(d));
    pmap_free(d);
    d = pmap_dup(pm);
    d->tables[0].gsi_parts[0][1].n = PMAP_MAX_REPLICAS + 1;
    assert_false(pmap_check(d));
    pmap_free(d);
    pmap_free(pm);
}

/* Replication N: N distinct nodes per base partition, primaries balanced as
 * with one copy, follower copies balanced, every set in sync at epoch 1;
 * more copies than UP nodes is refused and leaves the map unchanged. */
/* pmap_set_lost and pmap_table_lost: a set or list is lost once every
 * member but a joining copy is on a removed node; a DOWN node loses
 * nothing, and a table is lost with any one base set. */
static void test_lost_sets(void **state)
{
    (void)state;
    pmap *pm = pmap_new();
    add_nodes(pm, 3);
    table_schema one = mk_schema(1, "one", 4), three = mk_schema(2, "three", 4);
    three.replication = 3;
    assert_int_equal(pmap_add_table(pm, &one), 0);
    assert_int_equal(pmap_add_table(pm, &three), 0);
    const pmap_table *t1 = pmap_table_find(pm, "one"), *t3 = pmap_table_find(pm, "three");
    uint32_t p2 = 0;
    while (pmap_owner(t1, p2) != 2) {
        p2++;
    }
    assert_int_equal(pmap_set_node(pm, 2, "tcp://127.0.0.1:7402", PMAP_NODE_DOWN), 0);
    assert_false(pmap_set_lost(pm, pmap_part(t1, p2))); /* down, not removed */
    assert_false(pmap_table_lost(pm, t1));
    assert_int_equal(pmap_set_node_removed(pm, 2), 0);
    t1 = pmap_table_find(pm, "one");
    t3 = pmap_table_find(pm, "three");
    assert_true(pmap_set_lost(pm, pmap_part(t1, p2)));
    assert_false(pmap_set_lost(pm, pmap_part(t1, (p2 + 1) % 4))); /* on node 1 or 3 */
    assert_true(pmap_table_lost(pm, t1));
    for (uint32_t p = 0; p < 4; p++) {
        assert_false(pmap_set_lost(pm, pmap_part(t3, p))); /* two copies left */
    }
    assert_false(pmap_table_lost(pm, t3));
    /* A copy joining does not count: it holds nothing whole yet. */
    pmap_replicas r = {.n = 2, .ids = {2, 3}, .joining = 3};
    assert_true(pmap_set_lost(pm, &r));
    r.joining = 0;
    assert_false(pmap_set_lost(pm, &r));
    pmap_replicas empty = {.n = 0};
    assert_false(pmap_set_lost(pm, &empty));
    pmap_free(pm);
}

static void test_replicated_placement(void **state)
{
    (void)state;
    pmap *pm = pmap_new();
    add_nodes(pm, 3);
    table_schema t = mk_schema(1, "rf3", 8);
    t.replication = 3;
    assert_int_equal(pmap_add_table(pm, &t), 0);
    table_schema u = mk_schema(2, "rf2", 16);
    u.replication = 2;
    assert_int_equal(pmap_add_table(pm, &u), 0);
    assert_true(pmap_check(pm));
    for (size_t i = 0; i < pm->ntables; i++) {
        const pmap_table *pt = &pm->tables[i];
        for (uint32_t p = 0; p < pt->schema.partitions; p++) {
            const pmap_replicas *r = pmap_part(pt, p);
            assert_non_null(r);
            assert_int_equal(r->n, pt->schema.replication);
            assert_int_equal(r->epoch, 1);
            assert_int_equal(r->in_sync, (1u << r->n) - 1);
            for (uint32_t k = 0; k < r->n; k++) {
                assert_int_equal(pmap_replicas_index(r, r->ids[k]), (int)k);
                assert_true(pmap_in_sync(r, k));
            }
            assert_int_equal(pmap_owner(pt, p), r->ids[0]);
        }
    }
    assert_null(pmap_part(&pm->tables[0], 8));
    assert_int_equal(pmap_replicas_index(pmap_part(&pm->tables[0], 0), 99), -1);
    assert_balanced(pm);
    /* 8 * 2 + 16 * 1 = 32 follower copies over 3 nodes. */
    size_t lo = SIZE_MAX, hi = 0, sum = 0;
    for (uint32_t id = 1; id <= 3; id++) {
        size_t c = pmap_follower_copies(pm, id);
        lo = c < lo ? c : lo;
        hi = c > hi ? c : hi;
        sum += c;
    }
    assert_int_equal(sum, 32);
    assert_true(hi - lo <= 1);
    /* An old map's set (epoch 0, in_sync 0) counts every member in sync. */
    pmap_replicas old = {.n = 2, .ids = {1, 2}};
    assert_true(pmap_in_sync(&old, 1));
    assert_false(pmap_in_sync(&old, 2));

    pmap_set_node(pm, 3, "tcp://127.0.0.1:3", PMAP_NODE_DOWN);
    table_schema v = mk_schema(3, "too_many", 4);
    v.replication = 3;
    uint64_t version = pm->version;
    assert_int_equal(pmap_add_table(pm, &v), LAPSE_EUNAVAILABLE);
    assert_int_equal(pm->ntables, 2);
    assert_int_equal(pm->version, version);
    v.replication = 2;
    assert_int_equal(pmap_add_table(pm, &v), 0);
    pmap_free(pm);
}

/* Counts of t's sets of one kind (base partitions, a GSI's, shards) per
 * node id (1..4): firsts[id] first copies, all[id] copies. */
static void count_sets(const pmap_replicas *sets, uint32_t n, size_t *firsts, size_t *all)
{
    for (uint32_t p = 0; p < n; p++) {
        firsts[sets[p].ids[0]]++;
        for (uint32_t k = 0; k < sets[p].n; k++) {
            all[sets[p].ids[k]]++;
            for (uint32_t m = 0; m < k; m++) {
                assert_int_not_equal(sets[p].ids[k], sets[p].ids[m]); /* two copies on one node */
            }
        }
    }
}

/* Issue 13's skew: after a 64-partition table on nodes 1-3, a fourth node
 * used to take 32 of the next table's 64 partitions. Each kind of set of a
 * new table is now spread evenly: 16 first copies and 48 copies of its 64
 * sets of three on every node (each within one), GSI partitions and stream
 * shards alike, while the older table stays where it was. */
static void test_new_node_gets_an_even_share_of_a_new_table(void **state)
{
    (void)state;
    pmap *pm = pmap_new();
    add_nodes(pm, 3);
    const uint32_t g[] = {16};
    table_schema a = mk_indexed(1, "before", 64, g, 1, 1);
    a.replication = 3;
    assert_int_equal(pmap_add_table(pm, &a), 0);
    char addr[] = "tcp://127.0.0.1:7404";
    assert_int_equal(pmap_set_node(pm, 4, addr, PMAP_NODE_UP), 0);
    table_schema b = mk_indexed(2, "after", 64, g, 1, 1);
    b.replication = 3;
    assert_int_equal(pmap_add_table(pm, &b), 0);
    assert_true(pmap_check(pm));
    const pmap_table *t = pmap_table_find(pm, "after");
    struct {
        const pmap_replicas *sets;
        uint32_t n;
    } kinds[] = {{t->parts, 64}, {t->gsi_parts[0], 16}, {t->stream_shards, 64}};
    for (size_t k = 0; k < 3; k++) {
        size_t firsts[5] = {0}, all[5] = {0};
        count_sets(kinds[k].sets, kinds[k].n, firsts, all);
        for (uint32_t id = 1; id <= 4; id++) {
            size_t f = kinds[k].n / 4, c = kinds[k].n * 3 / 4;
            if (firsts[id] < f || firsts[id] > f + 1 || all[id] < c - 1 || all[id] > c + 1) {
                fail_msg("kind %zu: node %u holds %zu first copies and %zu copies, want %zu and "
                         "%zu (each within one)",
                         k, id, firsts[id], all[id], f, c);
            }
        }
    }
    /* The older table is not moved: node 4 holds none of it. */
    size_t firsts[5] = {0}, all[5] = {0};
    count_sets(pmap_table_find(pm, "before")->parts, 64, firsts, all);
    assert_int_equal(all[4], 0);
    pmap_free(pm);
}

/* A table of N copies gives each GSI partition and stream shard N copies on
 * distinct nodes too (stream shards first off their partition's owner), and
 * its outbox ships to every copy; derived copies are balanced. */
static void test_replicated_gsi_and_stream(void **state)
{
    (void)state;
    pmap *pm = pmap_new();
    add_nodes(pm, 4);
    const uint32_t g[] = {4};
    table_schema t = mk_indexed(1, "rf3", 8, g, 1, 1);
    t.replication = 3;
    assert_int_equal(pmap_add_table(pm, &t), 0);
    assert_true(pmap_check(pm));
    const pmap_table *pt = pmap_table_find(pm, "rf3");
    const pmap_replicas *sets[4 + 8];
    for (uint32_t p = 0; p < 4; p++) {
        sets[p] = pmap_gsi_part(pt, 0, p);
        assert_int_equal(pmap_gsi_owner(pt, 0, p), sets[p]->ids[0]);
    }
    for (uint32_t p = 0; p < 8; p++) {
        sets[4 + p] = pmap_stream_shard(pt, p);
        assert_int_equal(pmap_stream_host(pt, p), sets[4 + p]->ids[0]);
        assert_int_not_equal(sets[4 + p]->ids[0], pmap_owner(pt, p));
    }
    for (size_t k = 0; k < 12; k++) {
        assert_non_null(sets[k]);
        assert_int_equal(sets[k]->n, 3);
        for (uint32_t i = 0; i < 3; i++) {
            assert_int_equal(pmap_replicas_index(sets[k], sets[k]->ids[i]), (int)i);
        }
    }
    assert_null(pmap_gsi_part(pt, 0, 4));
    assert_null(pmap_gsi_part(pt, 1, 0));
    assert_null(pmap_stream_shard(pt, 8));
    /* Every copy of every GSI partition and of the shard is a destination:
     * all four nodes here. */
    uint32_t ids[8] = {0};
    assert_int_equal(pmap_outbox_destinations(pt, 0, ids, 8), 4);
    /* (4 + 8) * 2 derived copies beyond the first; 8 + 4 + 8 sets of three
     * copies over 4 nodes: 15 each on average, every node within one. */
    size_t lo = SIZE_MAX, hi = 0, sum = 0;
    for (uint32_t id = 1; id <= 4; id++) {
        size_t c = pmap_partitions_owned(pm, id) + pmap_gsi_partitions_owned(pm, id) +
                   pmap_stream_shards_hosted(pm, id) + pmap_follower_copies(pm, id) +
                   pmap_derived_copies(pm, id);
        sum += pmap_derived_copies(pm, id);
        lo = c < lo ? c : lo;
        hi = c > hi ? c : hi;
    }
    assert_int_equal(sum, 24);
    assert_true(lo >= 14 && hi <= 16);
    pmap_free(pm);
}

/* pmap_set_stream: on places a shard per base partition, each with the
 * table's copies, first copies off their partition's owner and spread
 * within one over the nodes; off drops them; the map stays valid each
 * time, and an unknown table or too few UP nodes change nothing. */
static void test_stream_set_on_and_off(void **state)
{
    (void)state;
    pmap *pm = pmap_new();
    add_nodes(pm, 3);
    table_schema t = mk_schema(1, "later", 8);
    t.replication = 2;
    assert_int_equal(pmap_add_table(pm, &t), 0);
    table_stream on = {.enabled = 1, .view = STREAM_VIEW_KEYS_ONLY, .generation = 1};
    assert_int_equal(pmap_set_stream(pm, "nope", &on), LAPSE_ENOTFOUND);
    assert_int_equal(pmap_set_stream(pm, "later", &on), 0);
    assert_true(pmap_check(pm));
    const pmap_table *pt = pmap_table_find(pm, "later");
    assert_int_equal(pt->schema.stream.generation, 1);
    for (uint32_t p = 0; p < 8; p++) {
        const pmap_replicas *r = pmap_stream_shard(pt, p);
        assert_non_null(r);
        assert_int_equal(r->n, 2);
        assert_int_not_equal(r->ids[0], pmap_owner(pt, p));
    }
    for (uint32_t id = 1; id <= 3; id++) { /* 8 first copies over 3 nodes */
        size_t hosted = pmap_stream_shards_hosted(pm, id);
        assert_true(hosted == 2 || hosted == 3);
    }
    table_stream off = {.generation = 1};
    assert_int_equal(pmap_set_stream(pm, "later", &off), 0);
    assert_true(pmap_check(pm));
    pt = pmap_table_find(pm, "later");
    assert_null(pt->stream_shards);
    assert_int_equal(pt->schema.stream.generation, 1);
    assert_int_equal(pmap_outbox_destinations(pt, 0, NULL, 0), 0);
    /* Two copies need two UP nodes. */
    assert_int_equal(pmap_set_node(pm, 2, "tcp://127.0.0.1:7402", PMAP_NODE_DOWN), 0);
    assert_int_equal(pmap_set_node(pm, 3, "tcp://127.0.0.1:7403", PMAP_NODE_DOWN), 0);
    assert_int_equal(pmap_set_stream(pm, "later", &on), LAPSE_EUNAVAILABLE);
    assert_null(pmap_table_find(pm, "later")->stream_shards);
    assert_false(pmap_table_find(pm, "later")->schema.stream.enabled);
    pmap_free(pm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_balanced_over_tables_and_nodes),
        cmocka_unit_test(test_assignment_order_is_deterministic),
        cmocka_unit_test(test_down_nodes_get_nothing),
        cmocka_unit_test(test_lookups_duplicates_remove),
        cmocka_unit_test(test_dup_is_deep),
        cmocka_unit_test(test_assigned_and_check),
        cmocka_unit_test(test_gsi_and_stream_placement),
        cmocka_unit_test(test_gsi_and_stream_lookups),
        cmocka_unit_test(test_placed_and_check),
        cmocka_unit_test(test_replicated_placement),
        cmocka_unit_test(test_lost_sets),
        cmocka_unit_test(test_replicated_gsi_and_stream),
        cmocka_unit_test(test_new_node_gets_an_even_share_of_a_new_table),
        cmocka_unit_test(test_stream_set_on_and_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
