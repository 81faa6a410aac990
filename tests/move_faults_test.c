/*
 * move_faults_test: a drain (docs/replication.md, "Draining a node") under
 * faults, with TTL deletes falling due while copies move, on one etcd
 * member, two coordinators and four real nodes:
 *  - a table of three copies with a stream and TTL on; half of its items
 *    fall due during the drain, a thread writes throughout;
 *  - once a move is under way, kill -9 of the coordinator leader: the
 *    other coordinator takes the lead and goes on from the map;
 *  - once some copies have left, kill -9 of node 1, the node being
 *    drained (the source of every move), restarted a second later;
 *  - the drain ends: no set or stream shard names node 1 (its shard
 *    copies move too, filled from the others), each set has three copies in sync,
 *    every acknowledged write and every item not due reads back, the
 *    copies are identical, every due item is gone and its stream holds
 *    exactly one TTL delete of it (none of any other item), the stream
 *    is gapless, and node 1 keeps none of the table's keys;
 *  - then the same for a one-copy table drained off node 2, which is
 *    killed -9 mid-drain (its sets wait for it, counted in OtherCopies)
 *    and restarted (docs/replication.md, "Moving a one-copy partition").
 */
#include "testutil.h"

#include <jansson.h>
#include <signal.h>

#include "../common/clock.h"
#include "move_testutil.h"
#include "replset_testutil.h"
#include "testmap.h"

#define TABLE "moving"
#define SINGLE "single" /* a one-copy table */

static int setup(void **state)
{
    (void)state;
    return rs_group_setup_coordinators(4, 2);
}

static void test_drain_through_leader_and_source_kills(void **state)
{
    (void)state;
    mv_create_ttl_table(TABLE, 3);
    static mv_writer w;
    mv_writer_start(&w, TABLE);
    rs_sleep_ms(300);

    json_int_t held = mv_left_on(1); /* the drain begins */
    assert_true(held >= 10);         /* 16 * 3 copies over 4 nodes: 12 */

    /* Fault 1: the coordinator leader dies while a move is under way. */
    clock_mono deadline = clock_mono_after_ms(30000);
    while (mv_moves_now(1) == 0) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("no move off node 1 under way 30 s after the drain began");
        }
        rs_sleep_ms(50);
    }
    int leader = cluster_leader(rs_cluster(), -1, 10000);
    assert_true(leader >= 0);
    assert_int_equal(cluster_kill(rs_cluster(), leader, SIGKILL), 0);
    int next = cluster_leader(rs_cluster(), leader, 20000);
    assert_true(next >= 0);
    print_message("move_faults_test: coordinator %d killed mid-move, %d leads\n", leader, next);

    /* Fault 2: node 1, the source of every move, dies once some copies
     * have left, and starts again a second later. */
    json_int_t left = mv_wait_left_at_most(1, held - 1, 60000, "after the leader's death");
    assert_int_equal(cluster_kill(rs_cluster(), 1, SIGKILL), 0);
    rs_sleep_ms(1000);
    assert_int_equal(cluster_restart(rs_cluster(), 1), 0);
    print_message("move_faults_test: node 1 killed with %lld of %lld copies left, restarted\n",
                  (long long)left, (long long)held);

    mv_wait_left_at_most(1, 0, 120000, "after node 1's restart");
    rs_sleep_ms(500); /* writes go on after the last move */
    mv_writer_stop(&w);
    assert_int_equal(cluster_restart(rs_cluster(), leader), 0);
    print_message("move_faults_test: drained with %d writes acknowledged (%d failed)\n", w.nacked,
                  w.nfailed);
    assert_true(w.nacked > 0);
    mv_check_drained(TABLE, 3, 1, &w, 4);
    json_decref(mv_drain(1, 1, 0)); /* node 1 takes copies again */
}

/* cluster-status's Moves now, of any shape (the rebalancer's moves from the
 * first test may still go on, so a GSI or stream copy's move can list the
 * rebalancer's leaving copy and a draining node's: mv_moves_now's checks
 * are for one drain alone). */
static size_t moves_under_way(void)
{
    char *js = NULL;
    lapse_error e = {0};
    int rv = lapse_cluster_status(rs_client(), &js, &e);
    json_t *doc = rs_json_answer("cluster-status", rv, 0, js, &e);
    size_t n = json_array_size(json_object_get(doc, "Moves"));
    json_decref(doc);
    return n;
}

/* A one-copy table's partitions move too (docs/replication.md, "Moving a
 * one-copy partition"): logged while a second copy is added, rebuilt from
 * a snapshot, handed over, dropped from the source. The source, node 2,
 * dies mid-drain: its copies are then nowhere else, so their moves wait
 * (counted in OtherCopies) until it is back. */
static void test_one_copy_drain_through_source_kill(void **state)
{
    (void)state;
    mv_create_ttl_table(SINGLE, 1);
    static mv_writer w;
    /* Quiet long enough for the outboxes to be acknowledged and trimmed
     * (each source at most every second): a stream shard's new copy then
     * finds every record of its source trimmed. A one-copy source once
     * moved such a lane past its last record, and the copy missed every
     * later record (the TTL deletes below). The writer starts with the
     * drain. */
    rs_sleep_ms(2500);

    json_t *d = mv_drain(2, 0, 0);
    mv_writer_start(&w, SINGLE);
    json_int_t held = rs_json_int(d, "BaseCopiesLeft");
    assert_int_equal(rs_json_int(d, "OtherCopies"), 0);
    json_decref(d);
    assert_true(held >= 2); /* 16 one-copy sets over 4 nodes: 4 */

    /* The kill lands as soon as moves are under way, while node 2 still
     * leads one-copy sets (a move takes a snapshot, a join and a handover:
     * several mover passes). */
    clock_mono deadline = clock_mono_after_ms(30000);
    while (moves_under_way() == 0) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("no move under way 30 s after node 2's drain began");
        }
        rs_sleep_ms(20);
    }
    pmap *pm = testmap_fetch(rs_cluster());
    const pmap_table *t = pmap_table_find(pm, SINGLE);
    size_t led = 0;
    for (uint32_t p = 0; p < MV_PARTS; p++) {
        led += pmap_part(t, p)->ids[0] == 2;
    }
    pmap_free(pm);
    assert_int_equal(cluster_kill(rs_cluster(), 2, SIGKILL), 0);
    assert_true(led >= 1); /* the kill hit the drain mid-way */
    rs_wait_state(2, "DOWN");
    d = mv_drain(2, 0, 0);
    json_int_t other = rs_json_int(d, "OtherCopies");
    json_decref(d);
    assert_true(other <= (json_int_t)led); /* its sets left wait for it */
    assert_int_equal(cluster_restart(rs_cluster(), 2), 0);
    print_message("move_faults_test: node 2 killed leading %zu one-copy sets (%lld of them "
                  "waiting while it was down), restarted\n",
                  led, (long long)other);

    mv_wait_left_at_most(2, 0, 120000, "after node 2's restart");
    rs_sleep_ms(500);
    mv_writer_stop(&w);
    print_message("move_faults_test: one-copy table drained with %d writes acknowledged (%d "
                  "failed)\n",
                  w.nacked, w.nfailed);
    assert_true(w.nacked > 0);
    mv_check_drained(SINGLE, 1, 2, &w, 4);

    /* Its drain stopped, node 2 is empty and the rebalancer gives it copies
     * again (followers' of the three-copy table first, one-copy sets if
     * need be), until every node holds within one of the others. */
    json_decref(mv_drain(2, 1, 0));
    deadline = clock_mono_after_ms(60000);
    for (;;) {
        json_t *plan = rs_rebalance_plan();
        size_t planned = json_array_size(json_object_get(plan, "Moves"));
        json_int_t moving = rs_json_int(plan, "Moving");
        json_decref(plan);
        if (planned == 0 && moving == 0) {
            break;
        }
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("rebalancing onto node 2: %zu moves planned and %lld sets moving after 60 s",
                     planned, (long long)moving);
        }
        rs_sleep_ms(250);
    }
    pm = testmap_fetch(rs_cluster());
    t = pmap_table_find(pm, SINGLE);
    size_t on2 = 0;
    for (uint32_t p = 0; p < MV_PARTS; p++) {
        assert_int_equal(pmap_part(t, p)->n, 1);
        on2 += pmap_part(t, p)->ids[0] == 2;
    }
    for (uint32_t id = 1; id <= 4; id++) {
        size_t c = pmap_partitions_owned(pm, id) + pmap_follower_copies(pm, id);
        size_t lo = (pmap_partitions_owned(pm, 1) + pmap_follower_copies(pm, 1));
        for (uint32_t o = 2; o <= 4; o++) {
            size_t oc = pmap_partitions_owned(pm, o) + pmap_follower_copies(pm, o);
            lo = oc < lo ? oc : lo;
        }
        if (c > lo + 1) {
            fail_msg("after rebalancing node %u holds %zu copies, the fewest %zu", (unsigned)id, c,
                     lo);
        }
    }
    pmap_free(pm);
    print_message("move_faults_test: rebalanced; node 2 leads %zu one-copy sets\n", on2);
    assert_int_equal(rs_wait_copies_match(SINGLE, 20000),
                     (uint64_t)(MV_KEYS / 2 + mv_writer_check(&w, SINGLE)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drain_through_leader_and_source_kills),
        cmocka_unit_test(test_one_copy_drain_through_source_kill),
    };
    return cmocka_run_group_tests(tests, setup, rs_group_teardown);
}
