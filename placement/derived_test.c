/*
 * derived_test: moving a GSI partition's or stream shard's copies
 * (derived.h): add marks the copy joining, settle lets the leaving copy go
 * and keeps the new one, drop takes a copy out but never the last; the
 * invariants hold after each.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "../common/lapse_err.h"
#include "derived.h"

static pmap_replicas list3(void)
{
    pmap_replicas r = {.n = 3, .ids = {1, 2, 3}, .in_sync = 7, .epoch = 1};
    return r;
}

/* Invariants 1 and 2 of derived.h, and the in-sync bits of every member. */
static void assert_well_formed(const pmap_replicas *r)
{
    assert_true(r->n >= 1);
    assert_int_equal(r->in_sync, (1u << r->n) - 1);
    if (r->joining != 0) {
        assert_true(pmap_replicas_index(r, r->joining) >= 0);
        assert_true(r->joining_since > 0);
    }
}

static void test_add_then_settle(void **state)
{
    (void)state;
    pmap_replicas r = list3();
    assert_int_equal(pmap_derived_add(&r, 2, 9), LAPSE_EEXISTS);
    assert_int_equal(pmap_derived_settle(&r, 1), LAPSE_ESTATE); /* nothing joining */
    assert_int_equal(pmap_derived_add(&r, 4, 9), 0);
    assert_well_formed(&r);
    assert_int_equal(r.n, 4);
    assert_int_equal(r.ids[3], 4); /* at the end: read last */
    assert_int_equal(r.joining, 4);
    assert_int_equal(r.joining_since, 9);
    assert_int_equal(pmap_derived_add(&r, 5, 10), LAPSE_ESTATE); /* one at a time */
    assert_int_equal(pmap_derived_settle(&r, 4), LAPSE_EINVAL);  /* not the new one */
    assert_int_equal(pmap_derived_settle(&r, 7), LAPSE_EINVAL);  /* not a member */
    uint64_t changes = r.changes;
    assert_int_equal(pmap_derived_settle(&r, 1), 0);
    assert_well_formed(&r);
    assert_int_equal(r.n, 3);
    assert_int_equal(r.ids[0], 2);
    assert_int_equal(r.ids[2], 4);
    assert_int_equal(r.joining, 0);
    assert_true(r.changes > changes);
}

static void test_drop(void **state)
{
    (void)state;
    pmap_replicas r = list3();
    r.leaving = 3;
    assert_int_equal(pmap_derived_add(&r, 4, 5), 0);
    assert_int_equal(pmap_derived_drop(&r, 4), 0); /* the new copy's node left too */
    assert_well_formed(&r);
    assert_int_equal(r.n, 3);
    assert_int_equal(r.joining, 0);
    assert_int_equal(pmap_derived_drop(&r, 3), 0);
    assert_int_equal(r.leaving, 0); /* gone with its member */
    assert_int_equal(pmap_derived_drop(&r, 9), LAPSE_EINVAL);
    assert_int_equal(pmap_derived_drop(&r, 1), 0);
    assert_int_equal(pmap_derived_drop(&r, 2), LAPSE_ESTATE); /* the last copy stays */
    assert_well_formed(&r);
    assert_int_equal(r.n, 1);
}

static void test_full_list(void **state)
{
    (void)state;
    pmap_replicas r = {.n = PMAP_MAX_REPLICAS, .epoch = 1};
    for (uint32_t k = 0; k < PMAP_MAX_REPLICAS; k++) {
        r.ids[k] = k + 1;
    }
    r.in_sync = (1u << r.n) - 1;
    assert_int_equal(pmap_derived_add(&r, 100, 3), LAPSE_EUNAVAILABLE);
}

/* pmap_derived_joining: a node's joining copies among a table's GSI
 * partitions and stream shards, and the oldest version they join from. */
static void test_joining(void **state)
{
    (void)state;
    pmap_replicas parts[2] = {list3(), list3()};
    pmap_replicas gsi[2] = {list3(), list3()};
    pmap_replicas shards[2] = {list3(), list3()};
    pmap_table t = {.parts = parts, .stream_shards = shards};
    t.schema.partitions = 2;
    t.schema.ngsi = 1;
    t.schema.gsi[0].partitions = 2;
    t.gsi_parts[0] = gsi;
    uint64_t since = 0;
    assert_false(pmap_derived_joining(&t, 4, &since));
    assert_int_equal(pmap_derived_add(&shards[1], 4, 12), 0);
    assert_true(pmap_derived_joining(&t, 4, &since));
    assert_int_equal(since, 12);
    assert_int_equal(pmap_derived_add(&gsi[0], 4, 7), 0);
    assert_true(pmap_derived_joining(&t, 4, &since));
    assert_int_equal(since, 7);                      /* the oldest */
    assert_false(pmap_derived_joining(&t, 1, NULL)); /* a member, not joining */
    assert_int_equal(pmap_derived_settle(&gsi[0], 1), 0);
    assert_int_equal(pmap_derived_settle(&shards[1], 2), 0);
    assert_false(pmap_derived_joining(&t, 4, NULL));
    t.stream_shards = NULL; /* a table without a stream */
    assert_false(pmap_derived_joining(&t, 4, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_then_settle),
        cmocka_unit_test(test_drop),
        cmocka_unit_test(test_full_list),
        cmocka_unit_test(test_joining),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
