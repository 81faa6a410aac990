/*
 * zones_test: copies spread over zones (docs/replication.md, "Zones") on
 * one etcd member, a coordinator and five real nodes started with --zone:
 * nodes 1 and 2 in zone a, 3 in b, 4 and 5 in c.
 *  - cluster-status names each node's zone;
 *  - a table of three copies gets one copy of every partition in each
 *    zone (so node 3, alone in b, holds every partition);
 *  - draining node 4 moves each of its copies to node 5, the other node
 *    of zone c, though nodes 1 and 2 hold as few copies: every set still
 *    spans three zones, and every item written reads back;
 *  - the drain stopped, the rebalancer moves copies back onto node 4 from
 *    node 5 only (a move off zone a or b would put two copies in one
 *    zone), until they hold within one of each other.
 */
#include "testutil.h"

#include <string.h>

#include "../common/clock.h"
#include "move_testutil.h"
#include "replset_testutil.h"
#include "testmap.h"

#define TABLE "zoned"
#define PARTS 16
#define ITEMS 200

static int setup(void **state)
{
    (void)state;
    return rs_group_setup_zones(5, "a,a,b,c,c");
}

/* The zones table's sets span in pm, the fewest of any set. */
static uint32_t fewest_zones(const pmap *pm)
{
    const pmap_table *t = pmap_table_find(pm, TABLE);
    assert_non_null(t);
    uint32_t fewest = 99;
    for (uint32_t p = 0; p < PARTS; p++) {
        uint32_t z = pmap_zones_of(pm, pmap_part(t, p), 0, 0);
        fewest = z < fewest ? z : fewest;
    }
    return fewest;
}

static size_t copies_on(const pmap *pm, uint32_t id)
{
    return pmap_partitions_owned(pm, id) + pmap_follower_copies(pm, id);
}

static void test_copies_spread_over_zones(void **state)
{
    (void)state;
    /* cluster-status names the zones */
    const char *want[] = {"", "a", "a", "b", "c", "c"};
    for (uint32_t id = 1; id <= 5; id++) {
        json_t *node = NULL, *doc = rs_status_of(id, &node);
        assert_non_null(node);
        assert_string_equal(json_string_value(json_object_get(node, "Zone")), want[id]);
        json_decref(doc);
    }

    lapse_error e = {0};
    lapse_table_def d = {.name = TABLE,
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .partitions = PARTS,
                         .replication = 3};
    assert_lapse_ok(lapse_create_table(rs_client(), &d, &e), &e);
    for (int i = 0; i < ITEMS; i++) {
        lapse_item *it = item_json("{\"Id\":{\"S\":\"z%d\"},\"V\":{\"N\":\"%d\"}}", i, i);
        assert_lapse_ok(lapse_put(rs_client(), TABLE, it, NULL, &e), &e);
        lapse_item_free(it);
    }
    pmap *pm = testmap_fetch(rs_cluster());
    assert_int_equal(fewest_zones(pm), 3);
    assert_int_equal(copies_on(pm, 3), PARTS); /* alone in zone b */
    assert_int_equal(copies_on(pm, 4) + copies_on(pm, 5), PARTS);
    size_t on4 = copies_on(pm, 4);
    pmap_free(pm);

    /* Node 4's copies go to node 5, its zone's other node. */
    json_decref(mv_drain(4, 0, 0));
    mv_wait_left_at_most(4, 0, 60000, "draining node 4");
    pm = rs_wait_all_in_sync(TABLE);
    assert_int_equal(copies_on(pm, 4), 0);
    assert_int_equal(copies_on(pm, 5), PARTS);
    assert_int_equal(fewest_zones(pm), 3);
    pmap_free(pm);
    print_message("zones_test: node 4's %zu copies moved to node 5, every set in three zones\n",
                  on4);

    /* The drain stopped: copies come back to node 4 from node 5 alone. */
    json_decref(mv_drain(4, 1, 0));
    pm = rs_wait_rebalanced(TABLE);
    size_t c4 = copies_on(pm, 4), c5 = copies_on(pm, 5);
    print_message("zones_test: rebalanced: nodes 1-5 hold %zu, %zu, %zu, %zu, %zu copies\n",
                  copies_on(pm, 1), copies_on(pm, 2), copies_on(pm, 3), c4, c5);
    assert_true(c4 + 1 >= c5 && c5 + 1 >= c4);
    assert_int_equal(copies_on(pm, 3), PARTS);
    assert_int_equal(fewest_zones(pm), 3);
    pmap_free(pm);

    for (int i = 0; i < ITEMS; i++) {
        lapse_item *k = item_json("{\"Id\":{\"S\":\"z%d\"}}", i), *got = NULL;
        assert_lapse_ok(lapse_get(rs_client(), TABLE, k, &got, &e), &e);
        if (got == NULL) {
            fail_msg("item z%d lost in the moves", i);
        }
        lapse_item_free(got);
        lapse_item_free(k);
    }
    rs_wait_copies_match(TABLE, 20000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copies_spread_over_zones),
    };
    return cmocka_run_group_tests(tests, setup, rs_group_teardown);
}
