/*
 * pmap_test.c: the partition map: balanced assignment over several tables and
 * nodes (DOWN nodes get nothing), lookups, removal, deep copies and the
 * invariant checker.
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
    /* Node 2 comes back: new tables go to it first. */
    assert_int_equal(pmap_set_node(pm, 2, "tcp://127.0.0.1:7412", PMAP_NODE_UP), 0);
    assert_string_equal(pmap_node_find(pm, 2)->address, "tcp://127.0.0.1:7412");
    table_schema u = mk_schema(2, "t2", 4);
    assert_int_equal(pmap_add_table(pm, &u), 0);
    assert_int_equal(pmap_partitions_owned(pm, 2), 4);
    assert_balanced(pm);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_balanced_over_tables_and_nodes),
        cmocka_unit_test(test_assignment_order_is_deterministic),
        cmocka_unit_test(test_down_nodes_get_nothing),
        cmocka_unit_test(test_lookups_duplicates_remove),
        cmocka_unit_test(test_dup_is_deep),
        cmocka_unit_test(test_assigned_and_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
