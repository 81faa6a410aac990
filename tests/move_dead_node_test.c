/*
 * move_dead_node_test: a drain that goes on while another node is dead
 * (docs/replication.md, "Draining a node"), on one etcd member, a
 * coordinator and five real nodes:
 *  - a table of three copies with a stream and TTL on, written throughout,
 *    half of its items falling due during the drain;
 *  - node 1 drains; once a move's new copy is being filled on some node X
 *    (a stream shard's copy joining there, or a set's new copy catching
 *    up), X is killed -9 and stays dead;
 *  - the drain still ends: the copy being made on X is given up and made
 *    on another node, and a set naming both node 1 and X (which, with
 *    X's copy and node 1's new one, has no room left) drops X's copy to
 *    make room. Before, such a drain waited for X for ever;
 *  - X back, every set has its three copies in sync, none on node 1, and
 *    every acknowledged write, every item not due and exactly one TTL
 *    delete of each due item are there (mv_check_drained).
 */
#include "testutil.h"

#include <signal.h>

#include "../common/clock.h"
#include "move_testutil.h"
#include "replset_testutil.h"
#include "testmap.h"

#define TABLE "moving"
#define NODES 5

static int setup(void **state)
{
    (void)state;
    return rs_group_setup_faults_nodes(NODES);
}

/* A node on which the map has a copy of t being made for a move off node 1: a
 * stream shard's joining copy first, else a set's copy out of sync in a
 * set naming node 1 and holding one copy more than the table keeps; 0:
 * none. *shard is 1 for the former. */
static uint32_t filling_node(const pmap_table *t, int *shard)
{
    for (uint32_t p = 0; p < MV_PARTS; p++) {
        const pmap_replicas *s = pmap_stream_shard(t, p);
        if (s->joining != 0 && s->joining != 1) {
            *shard = 1;
            return s->joining;
        }
    }
    for (uint32_t p = 0; p < MV_PARTS; p++) {
        const pmap_replicas *r = pmap_part(t, p);
        if (r->n <= 3 || pmap_replicas_index(r, 1) < 0) {
            continue;
        }
        for (uint32_t k = 1; k < r->n; k++) {
            if (r->ids[k] != 1 && !pmap_in_sync(r, k)) {
                *shard = 0;
                return r->ids[k];
            }
        }
    }
    return 0;
}

/* The sets of t naming both node a and node b. */
static size_t sets_with_both(const pmap_table *t, uint32_t a, uint32_t b)
{
    size_t n = 0;
    for (uint32_t p = 0; p < MV_PARTS; p++) {
        n += pmap_replicas_index(pmap_part(t, p), a) >= 0 &&
             pmap_replicas_index(pmap_part(t, p), b) >= 0;
    }
    return n;
}

static void test_drain_while_a_node_is_dead(void **state)
{
    (void)state;
    mv_create_ttl_table(TABLE, 3);
    static mv_writer w;
    mv_writer_start(&w, TABLE);
    /* Stream copies fill slowly (each fill pass waits 1.5 s), so the kill
     * below lands while one is being made. */
    for (int n = 1; n <= NODES; n++) {
        rs_slow_refill(n, 1);
    }
    rs_sleep_ms(300);

    json_int_t held = mv_left_on(1); /* the drain begins */
    assert_true(held >= 6);          /* 16 * 3 copies over 5 nodes, and stream shards */

    uint32_t x = 0;
    int shard = 0;
    size_t both = 0;
    clock_mono deadline = clock_mono_after_ms(30000);
    while (x == 0) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("no copy being made off node 1 30 s after its drain began");
        }
        pmap *pm = testmap_fetch(rs_cluster());
        const pmap_table *t = pmap_table_find(pm, TABLE);
        x = filling_node(t, &shard);
        both = x != 0 ? sets_with_both(t, 1, x) : 0;
        pmap_free(pm);
        if (x == 0) {
            rs_sleep_ms(20);
        }
    }
    assert_int_equal(cluster_kill(rs_cluster(), (int)x, SIGKILL), 0);
    for (int n = 1; n <= NODES; n++) {
        rs_slow_refill(n, 0);
    }
    print_message("move_dead_node_test: node %u killed while a %s copy was made on it; %zu "
                  "set(s) named it and node 1\n",
                  (unsigned)x, shard ? "stream shard's" : "set's", both);
    assert_true(both >= 1); /* a set with no room left for node 1's new copy */
    rs_wait_state(x, "DOWN");

    /* The drain ends with X still dead. */
    mv_wait_left_at_most(1, 0, 120000, "with a node dead");
    pmap *pm = testmap_fetch(rs_cluster());
    const pmap_table *t = pmap_table_find(pm, TABLE);
    size_t with_x = 0;
    for (uint32_t p = 0; p < MV_PARTS; p++) {
        const pmap_replicas *r = pmap_part(t, p);
        assert_int_equal(r->n, 3);
        assert_int_equal(pmap_replicas_index(r, 1), -1);
        assert_int_equal(pmap_stream_shard(t, p)->joining, 0);
        with_x += pmap_replicas_index(r, x) >= 0;
    }
    pmap_free(pm);
    print_message("move_dead_node_test: node 1 drained with node %u dead (%zu sets still name "
                  "it)\n",
                  (unsigned)x, with_x);

    /* X back: its copies catch up, its former ones go. */
    assert_int_equal(cluster_restart(rs_cluster(), (int)x), 0);
    rs_wait_state(x, "UP");
    rs_sleep_ms(500); /* writes go on after the last move */
    mv_writer_stop(&w);
    print_message("move_dead_node_test: %d writes acknowledged (%d failed)\n", w.nacked, w.nfailed);
    assert_true(w.nacked > 0);
    mv_check_drained(TABLE, 3, 1, &w, NODES);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drain_while_a_node_is_dead),
    };
    return cmocka_run_group_tests(tests, setup, rs_group_teardown);
}
