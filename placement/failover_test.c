/*
 * failover_test: replica set changes on a node's DOWN and a replica's
 * rejoin (failover.h): followers leave the in-sync set, a dead primary's
 * first in-sync follower takes over with the next epoch, a set with no
 * in-sync follower waits, and only the current primary at the current
 * epoch can bring a member back into the set.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../common/lapse_err.h"
#include "failover.h"

/* A map of nodes 1-3, all UP. */
static pmap *three_nodes(void)
{
    pmap *pm = pmap_new();
    assert_non_null(pm);
    for (uint32_t id = 1; id <= 3; id++) {
        char addr[64];
        snprintf(addr, sizeof(addr), "tcp://127.0.0.1:%u", 7400 + id);
        assert_int_equal(pmap_set_node(pm, id, addr, PMAP_NODE_UP), 0);
    }
    return pm;
}

/* Table 1, "rf3": partition key pk (S), partitions of three copies. */
static table_schema rf3_schema(uint32_t partitions)
{
    table_schema t;
    memset(&t, 0, sizeof(t));
    t.id = 1;
    snprintf(t.name, sizeof(t.name), "rf3");
    snprintf(t.pk.name, sizeof(t.pk.name), "pk");
    t.pk.type = ATTR_S;
    t.partitions = partitions;
    t.replication = 3;
    return t;
}

/* A map of nodes 1-3 with table 1 ("rf3", two partitions: sets {1,2,3}
 * and {2,3,1}) and table 2 (one copy, partition on node 1). */
static pmap *three_sets(void)
{
    pmap *pm = three_nodes();
    table_schema t = rf3_schema(2);
    pmap_replicas parts[2] = {{.n = 3, .ids = {1, 2, 3}, .in_sync = 7, .epoch = 1},
                              {.n = 3, .ids = {2, 3, 1}, .in_sync = 7, .epoch = 4}};
    assert_int_equal(pmap_add_table_assigned(pm, &t, parts), 0);
    table_schema one = t;
    one.id = 2;
    snprintf(one.name, sizeof(one.name), "one");
    one.partitions = 1;
    one.replication = 1;
    pmap_replicas p1 = {.n = 1, .ids = {1}, .in_sync = 1, .epoch = 1};
    assert_int_equal(pmap_add_table_assigned(pm, &one, &p1), 0);
    assert_true(pmap_check(pm));
    return pm;
}

static void assert_set(const pmap_replicas *r, uint32_t a, uint32_t b, uint32_t c, uint32_t in_sync,
                       uint64_t epoch)
{
    assert_int_equal(r->n, 3);
    assert_int_equal(r->ids[0], a);
    assert_int_equal(r->ids[1], b);
    assert_int_equal(r->ids[2], c);
    assert_int_equal(r->in_sync, in_sync);
    assert_int_equal(r->epoch, epoch);
}

static void test_follower_then_primary_down(void **state)
{
    (void)state;
    pmap *pm = three_sets();
    pmap_failover f;
    /* Node 3: a follower of both sets. */
    pmap_fail_node(pm, 3, &f);
    assert_int_equal(f.shrunk, 2);
    assert_int_equal(f.promoted, 0);
    assert_set(&pm->tables[0].parts[0], 1, 2, 3, 3, 1);
    assert_set(&pm->tables[0].parts[1], 2, 3, 1, 5, 4);
    /* Again: nothing left to change. */
    pmap_fail_node(pm, 3, &f);
    assert_int_equal(f.shrunk + f.promoted + f.stranded, 0);
    /* Node 1: primary of set 0 (node 2 takes over at epoch 2), follower of
     * set 1; the one-copy table keeps its owner. */
    pmap_fail_node(pm, 1, &f);
    assert_int_equal(f.promoted, 1);
    assert_int_equal(f.shrunk, 1);
    assert_set(&pm->tables[0].parts[0], 2, 1, 3, 1, 2);
    assert_set(&pm->tables[0].parts[1], 2, 3, 1, 1, 4);
    assert_int_equal(pm->tables[1].parts[0].ids[0], 1);
    /* Node 2 now: no in-sync follower anywhere, so both sets wait for it. */
    pmap_fail_node(pm, 2, &f);
    assert_int_equal(f.stranded, 2);
    assert_set(&pm->tables[0].parts[0], 2, 1, 3, 1, 2);
    assert_true(pmap_check(pm));
    pmap_free(pm);
}

static void test_promotes_first_in_sync_follower(void **state)
{
    (void)state;
    pmap *pm = three_sets();
    pmap_failover f;
    pmap_fail_node(pm, 3, &f); /* set 1 {2,3,1}: 3 leaves, 1 stays in sync */
    pmap_fail_node(pm, 2, &f);
    assert_int_equal(f.promoted, 1);
    assert_int_equal(f.shrunk, 1);
    /* 3 (ids[1]) is out of sync, so 1 (ids[2]) is promoted. */
    assert_set(&pm->tables[0].parts[1], 1, 3, 2, 1, 5);
    assert_set(&pm->tables[0].parts[0], 1, 2, 3, 1, 1);
    pmap_free(pm);
}

static void test_promotions_counted(void **state)
{
    (void)state;
    pmap *before = three_sets();
    pmap *after = pmap_dup(before);
    assert_non_null(after);
    assert_int_equal(pmap_primary_changes(before), 3); /* epochs 1 and 4 */
    pmap_failover f;
    pmap_fail_node(after, 1, &f); /* set 0: 2 takes over at epoch 2 */
    assert_int_equal(pmap_promotions(before, after, 2), 1);
    assert_int_equal(pmap_promotions(before, after, 1), 0);
    assert_int_equal(pmap_promotions(before, after, 3), 0);
    assert_int_equal(pmap_promotions(after, after, 2), 0); /* no change */
    assert_int_equal(pmap_primary_changes(after), 4);
    pmap_fail_node(after, 2, &f); /* both sets: 3 takes over */
    assert_int_equal(pmap_promotions(before, after, 3), 2);
    assert_int_equal(pmap_primary_changes(after), 6);
    pmap_free(before);
    pmap_free(after);
}

static void test_join(void **state)
{
    (void)state;
    pmap *pm = three_sets();
    pmap_fail_node(pm, 1, NULL); /* set 0: {2,1,3} at epoch 2, in sync 2 and 3 */
    assert_set(&pm->tables[0].parts[0], 2, 1, 3, 5, 2);
    /* Only the primary at its epoch may bring node 1 back. */
    uint64_t c = pm->tables[0].parts[0].changes;
    assert_int_equal(pmap_replica_join(pm, 1, 0, 2, 1, 1, c), LAPSE_EWRONGNODE);
    assert_int_equal(pmap_replica_join(pm, 1, 0, 3, 2, 1, c), LAPSE_EWRONGNODE);
    assert_int_equal(pmap_replica_join(pm, 1, 0, 2, 2, 9, c), LAPSE_EINVAL);
    assert_int_equal(pmap_replica_join(pm, 1, 0, 2, 2, 2, c), LAPSE_EINVAL);
    assert_int_equal(pmap_replica_join(pm, 1, 7, 2, 2, 1, c), LAPSE_ENOTFOUND);
    assert_int_equal(pmap_replica_join(pm, 9, 0, 2, 2, 1, c), LAPSE_ENOTFOUND);
    /* A join asked at another count of changes can never land. */
    assert_int_equal(pmap_replica_join(pm, 1, 0, 2, 2, 1, c - 1), LAPSE_ESTATE);
    assert_set(&pm->tables[0].parts[0], 2, 1, 3, 5, 2);
    assert_int_equal(pmap_replica_join(pm, 1, 0, 2, 2, 1, c), 0);
    assert_set(&pm->tables[0].parts[0], 2, 1, 3, 7, 2);
    assert_true(pm->tables[0].parts[0].changes == c + 1);
    /* Again, at the old count or the new one: no change. */
    assert_int_equal(pmap_replica_join(pm, 1, 0, 2, 2, 1, c), 0);
    assert_int_equal(pmap_replica_join(pm, 1, 0, 2, 2, 1, c + 1), 0);
    assert_set(&pm->tables[0].parts[0], 2, 1, 3, 7, 2);
    assert_true(pm->tables[0].parts[0].changes == c + 1);
    /* Asked, then its follower is shrunk while out (or goes DOWN): the
     * count moves, and the join asked before is refused. */
    assert_int_equal(pmap_replica_shrink(pm, 1, 0, 2, 2, 1), 0);
    c = pm->tables[0].parts[0].changes;
    assert_int_equal(pmap_replica_shrink(pm, 1, 0, 2, 2, 1), 0); /* out already */
    assert_true(pm->tables[0].parts[0].changes == c + 1);
    assert_int_equal(pmap_replica_join(pm, 1, 0, 2, 2, 1, c), LAPSE_ESTATE);
    pmap_fail_node(pm, 1, NULL);
    assert_true(pm->tables[0].parts[0].changes == c + 2);
    assert_int_equal(pmap_replica_join(pm, 1, 0, 2, 2, 1, c + 1), LAPSE_ESTATE);
    assert_int_equal(pmap_replica_join(pm, 1, 0, 2, 2, 1, c + 2), 0);
    assert_set(&pm->tables[0].parts[0], 2, 1, 3, 7, 2);
    /* An old map's set (in_sync 0: all) is made explicit when it changes. */
    pmap_replicas *r = &pm->tables[0].parts[1];
    r->in_sync = 0;
    r->epoch = 0;
    pmap_fail_node(pm, 2, NULL);
    assert_set(r, 3, 2, 1, 5, 2);
    pmap_free(pm);
}

/* A primary takes an unconfirming follower out of its in-sync set, never
 * below min-in-sync copies, never as anyone else or at another epoch. */
static void test_shrink(void **state)
{
    (void)state;
    pmap *pm = three_sets(); /* set 0: {1,2,3} epoch 1, all in sync */
    pmap_replicas *r = &pm->tables[0].parts[0];
    assert_int_equal(pmap_min_in_sync(r, 3), 2);
    assert_int_equal(pmap_min_in_sync(r, 1), 1);
    assert_int_equal(pmap_replica_shrink(pm, 1, 0, 2, 1, 3), LAPSE_EWRONGNODE);
    assert_int_equal(pmap_replica_shrink(pm, 1, 0, 1, 2, 3), LAPSE_EWRONGNODE);
    assert_int_equal(pmap_replica_shrink(pm, 1, 0, 1, 1, 1), LAPSE_EINVAL);
    assert_int_equal(pmap_replica_shrink(pm, 1, 0, 1, 1, 9), LAPSE_EINVAL);
    assert_int_equal(pmap_replica_shrink(pm, 1, 9, 1, 1, 3), LAPSE_ENOTFOUND);
    assert_set(r, 1, 2, 3, 7, 1);
    assert_int_equal(pmap_replica_shrink(pm, 1, 0, 1, 1, 3), 0);
    assert_set(r, 1, 2, 3, 3, 1);
    assert_int_equal(pmap_replica_shrink(pm, 1, 0, 1, 1, 3), 0); /* already out */
    assert_set(r, 1, 2, 3, 3, 1);
    /* The last follower in sync stays: two copies are the minimum. */
    assert_int_equal(pmap_replica_shrink(pm, 1, 0, 1, 1, 2), LAPSE_EUNAVAILABLE);
    assert_set(r, 1, 2, 3, 3, 1);
    /* The primary's death promotes the follower still in sync, never 3. */
    pmap_fail_node(pm, 1, NULL);
    assert_set(r, 2, 1, 3, 1, 2);
    pmap_free(pm);
}

/* Set 0 {1,2,3}: node 2 DOWN, then node 3: node 1 alone in sync, and node
 * 3, the last to leave, holds every acknowledged write. Node 1 back on an
 * empty dir: node 3 takes over, alone in sync, at the next epoch; node 1
 * is out of sync. A plain DOWN of node 1 would have left the set to it. */
static void test_last_out_takes_over_a_lost_copy(void **state)
{
    (void)state;
    pmap *pm = three_sets();
    pmap_replicas *r = &pm->tables[0].parts[0];
    pmap_fail_node(pm, 2, NULL);
    assert_int_equal(r->last_out, 0); /* two in sync still */
    pmap_fail_node(pm, 3, NULL);
    assert_set(r, 1, 2, 3, 1, 1);
    assert_int_equal(r->last_out, 3);
    pmap *down = pmap_dup(pm);
    pmap_failover f;
    pmap_fail_node(down, 1, &f);
    assert_int_equal(f.stranded, 2); /* a DOWN waits for node 1 (set 1 too) */
    assert_set(&down->tables[0].parts[0], 1, 2, 3, 1, 1);
    pmap_free(down);
    uint64_t changes = r->changes;
    pmap_lose_node_copies(pm, 1, &f);
    assert_int_equal(f.recovered, 2);
    assert_set(r, 3, 2, 1, 1, 2);
    assert_int_equal(r->last_out, 0);
    assert_true(r->changes > changes);
    /* Set 1 {2,3,1} went the same way: 2 then 3 failed over to 1. */
    assert_set(&pm->tables[0].parts[1], 3, 2, 1, 1, 7);
    /* A join brings a second copy in: no last_out any more. */
    assert_int_equal(pmap_replica_join(pm, 1, 0, 3, 2, 1, r->changes), 0);
    assert_set(r, 3, 2, 1, 5, 2);
    assert_int_equal(r->last_out, 0);
    /* With nobody known to hold every write, the set stays with the lost
     * copy (counted stranded). */
    pmap_fail_node(pm, 1, NULL);
    assert_int_equal(r->last_out, 1);
    r->last_out = 0;
    pm->tables[0].parts[1].last_out = 0;
    pmap_lose_node_copies(pm, 3, &f);
    assert_int_equal(f.stranded, 2);
    assert_int_equal(r->ids[0], 3);
    /* A set whose last_out lost its copy forgets it. */
    pmap_free(pm);
    pm = three_sets();
    r = &pm->tables[0].parts[0];
    pmap_fail_node(pm, 2, NULL);
    pmap_fail_node(pm, 3, NULL);
    assert_int_equal(r->last_out, 3);
    pmap_lose_node_copies(pm, 3, &f);
    assert_int_equal(r->last_out, 0);
    assert_int_equal(r->ids[0], 1);
    pmap_free(pm);
}

/* The last_out member is never removed, even out of sync: beside the
 * primary it is the one copy of every acknowledged write (a move's removal
 * of it, then the primary's lost disk, lost 1,500 acknowledged writes in
 * chaos seed 832704477). Another out-of-sync follower goes. */
static void test_last_out_is_never_removed(void **state)
{
    (void)state;
    pmap *pm = three_sets();
    assert_int_equal(pmap_set_node(pm, 4, "tcp://127.0.0.1:7404", PMAP_NODE_UP), 0);
    pmap_replicas *r = &pm->tables[0].parts[0];
    assert_int_equal(pmap_replica_add(pm, 1, 0, 4), 0); /* {1,2,3,4}, 4 catching up */
    pmap_fail_node(pm, 2, NULL);
    pmap_fail_node(pm, 3, NULL);
    assert_int_equal(r->in_sync, 1);
    assert_int_equal(r->last_out, 3);
    assert_int_equal(pmap_replica_remove(pm, 1, 0, 3), LAPSE_EUNAVAILABLE);
    assert_int_equal(r->n, 4);
    assert_int_equal(pmap_replica_remove(pm, 1, 0, 2), 0);
    assert_int_equal(pmap_replica_remove(pm, 1, 0, 4), 0);
    assert_int_equal(r->n, 2);
    assert_int_equal(r->last_out, 3);
    /* Back in sync, it is no longer the last_out, and may go once another
     * copy holds every write. */
    assert_int_equal(pmap_replica_join(pm, 1, 0, 1, r->epoch, 3, r->changes), 0);
    assert_int_equal(r->last_out, 0);
    assert_true(pmap_check(pm));
    pmap_free(pm);
}

/* A move of node 1's copy of set 0 ({1,2,3}, epoch 1) to node 4: added out
 * of sync, joined by its primary, the primaryship handed over, node 1's
 * copy removed; each step one change, and refused where it would be
 * unsafe. */
static void test_move_a_copy(void **state)
{
    (void)state;
    pmap *pm = three_sets();
    assert_int_equal(pmap_set_node(pm, 4, "tcp://127.0.0.1:7404", PMAP_NODE_UP), 0);
    pmap_replicas *r = &pm->tables[0].parts[0];
    uint64_t c = r->changes;
    assert_int_equal(pmap_replica_add(pm, 1, 0, 9), LAPSE_EINVAL);    /* no such node */
    assert_int_equal(pmap_replica_add(pm, 1, 9, 4), LAPSE_ENOTFOUND); /* no such set */
    assert_int_equal(pmap_replica_add(pm, 1, 0, 2), LAPSE_EEXISTS);
    assert_int_equal(pmap_replica_add(pm, 1, 0, 4), 0);
    assert_int_equal(r->n, 4);
    assert_int_equal(r->ids[3], 4);
    assert_int_equal(r->in_sync, 7); /* out of sync: writes do not wait for it */
    assert_true(r->changes == c + 1);
    assert_int_equal(pmap_replica_add(pm, 1, 0, 4), LAPSE_EEXISTS);
    assert_true(pmap_check(pm));
    /* Not in sync yet: no handover to it. */
    assert_int_equal(pmap_replica_handover(pm, 1, 0, 4), LAPSE_ESTATE);
    assert_int_equal(pmap_replica_handover(pm, 1, 0, 1), LAPSE_EINVAL); /* the primary */
    /* Its primary joins it. */
    assert_int_equal(pmap_replica_join(pm, 1, 0, 1, 1, 4, r->changes), 0);
    assert_int_equal(r->in_sync, 15);
    /* Full: no fifth copy. */
    assert_int_equal(pmap_set_node(pm, 5, "tcp://127.0.0.1:7405", PMAP_NODE_UP), 0);
    assert_int_equal(pmap_replica_add(pm, 1, 0, 5), LAPSE_EUNAVAILABLE);
    /* The primary cannot be removed; handed over first, at the next epoch,
     * its old copy out of the in-sync set. */
    assert_int_equal(pmap_replica_remove(pm, 1, 0, 1), LAPSE_ESTATE);
    c = r->changes;
    assert_int_equal(pmap_replica_handover(pm, 1, 0, 4), 0);
    assert_int_equal(r->ids[0], 4);
    assert_int_equal(r->ids[3], 1);
    assert_int_equal(r->epoch, 2);
    assert_int_equal(r->in_sync, 7); /* 4, 2, 3 */
    assert_true(r->changes == c + 1);
    assert_int_equal(pmap_replica_remove(pm, 1, 0, 1), 0);
    assert_set(r, 4, 2, 3, 7, 2);
    assert_int_equal(r->ids[3], 0);
    assert_int_equal(pmap_replica_remove(pm, 1, 0, 1), LAPSE_EINVAL);
    assert_true(pmap_check(pm));
    /* Removing an in-sync follower never leaves fewer than min-in-sync. */
    assert_int_equal(pmap_replica_shrink(pm, 1, 0, 4, 2, 3), 0); /* 4, 2 in sync */
    assert_int_equal(pmap_replica_remove(pm, 1, 0, 2), LAPSE_EUNAVAILABLE);
    assert_int_equal(pmap_replica_remove(pm, 1, 0, 3), 0); /* out of sync: goes */
    assert_int_equal(r->n, 2);
    assert_int_equal(r->in_sync, 3);
    /* An old map's set (in_sync 0: all) keeps its members in sync and the
     * added one out. */
    pmap_replicas *o = &pm->tables[0].parts[1];
    o->in_sync = 0;
    assert_int_equal(pmap_replica_add(pm, 1, 1, 4), 0);
    assert_int_equal(o->in_sync, 7);
    pmap_free(pm);
}

/* A handover in two steps: the step-down marks the set (from a map version,
 * to a follower or any), refuses a second one and a follower out of sync,
 * leaves the set out of the rebalancer's plans; the handover or a failover
 * of the primary ends it, and a removed target falls back to another. */
static void test_step_down(void **state)
{
    (void)state;
    pmap *pm = three_nodes();
    table_schema t = rf3_schema(2);
    pmap_replicas parts[2] = {
        {.n = 3, .ids = {1, 2, 3}, .in_sync = 7, .epoch = 1},
        {.n = 3, .ids = {1, 2, 3}, .in_sync = 3, .epoch = 1},
    };
    assert_int_equal(pmap_add_table_assigned(pm, &t, parts), 0);
    pmap_replicas *r = &pm->tables[0].parts[0];
    assert_int_equal(pmap_handover_target(r), 0);                           /* none under way */
    assert_int_equal(pmap_replica_step_down(pm, 1, 1, 3, 5), LAPSE_ESTATE); /* 3 out of sync */
    assert_int_equal(pmap_replica_step_down(pm, 1, 0, 9, 5), LAPSE_EINVAL);
    assert_int_equal(pmap_replica_step_down(pm, 1, 0, 1, 5), LAPSE_EINVAL); /* the primary */
    uint64_t changes = r->changes;
    assert_int_equal(pmap_replica_step_down(pm, 1, 0, 3, 5), 0);
    assert_int_equal(r->changes, changes); /* a join asked meanwhile still lands */
    assert_int_equal(r->ids[0], 1);
    assert_int_equal(pmap_replica_step_down(pm, 1, 0, 2, 6), LAPSE_ESTATE);
    assert_int_equal(pmap_handover_target(r), 3);
    assert_true(pmap_check(pm));
    /* Its target removed: another in-sync follower takes over. */
    assert_int_equal(pmap_replica_remove(pm, 1, 0, 3), 0);
    assert_int_equal(r->handing_since, 5);
    assert_int_equal(pmap_handover_target(r), 2);
    assert_int_equal(pmap_replica_handover(pm, 1, 0, 2), 0);
    assert_int_equal(r->ids[0], 2);
    assert_int_equal(r->handing_since, 0);
    assert_int_equal(r->handing_to, 0);
    /* A failover of a stepping-down primary ends the handover too. */
    assert_int_equal(pmap_replica_step_down(pm, 1, 1, 0, 8), 0);
    assert_int_equal(pmap_handover_target(&pm->tables[0].parts[1]), 2);
    pmap_fail_node(pm, 1, NULL);
    assert_int_equal(pm->tables[0].parts[1].ids[0], 2);
    assert_int_equal(pm->tables[0].parts[1].handing_since, 0);
    pmap_free(pm);
}

/* Carries out the n planned moves of mv on table 1 as the mover and the
 * primaries would: a move's new copy joined and the leaving one removed; a
 * handover made and the old primary, caught up, joined again. */
static void carry_out(pmap *pm, const pmap_move *mv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        pmap_replicas *s = &pm->tables[0].parts[mv[i].part];
        assert_int_equal(pmap_move_start(pm, &mv[i], 7), 0);
        if (mv[i].handover) {
            /* Begun: the primary steps down first (same primary, marked). */
            assert_int_equal(s->ids[0], mv[i].from);
            assert_int_equal(s->handing_since, 7);
            assert_int_equal(pmap_handover_target(s), mv[i].to);
            assert_int_equal(pmap_replica_handover(pm, 1, mv[i].part, pmap_handover_target(s)), 0);
            assert_int_equal(s->handing_since, 0);
            assert_int_equal(s->ids[0], mv[i].to);
            assert_int_equal(
                pmap_replica_join(pm, 1, mv[i].part, s->ids[0], s->epoch, mv[i].from, s->changes),
                0);
        } else {
            assert_int_equal(
                pmap_replica_join(pm, 1, mv[i].part, s->ids[0], s->epoch, mv[i].to, s->changes), 0);
            assert_int_equal(pmap_replica_remove(pm, 1, mv[i].part, mv[i].from), 0);
        }
        assert_int_equal(pmap_in_sync_count(s), 3);
    }
}

/* The rebalancer's plan: 8 sets of three on nodes 1-3, node 4 empty: six
 * moves to node 4, two off each of the others, followers' copies first;
 * none once the moves are done, none from or to a draining or DOWN node,
 * none of a set already moving. */
static void test_rebalance_plan(void **state)
{
    (void)state;
    pmap *pm = three_nodes();
    table_schema t = rf3_schema(8);
    assert_int_equal(pmap_add_table(pm, &t), 0);
    pmap_move mv[16];
    assert_int_equal(pmap_rebalance_plan(pm, mv, 16, 16), 0); /* balanced */
    assert_int_equal(pmap_set_node(pm, 4, "tcp://127.0.0.1:7404", PMAP_NODE_UP), 0);
    size_t n = pmap_rebalance_plan(pm, mv, 16, 16);
    assert_int_equal(n, 6);
    size_t from[5] = {0};
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(mv[i].to, 4);
        const pmap_replicas *r = pmap_part(&pm->tables[0], mv[i].part);
        assert_true(pmap_replicas_index(r, mv[i].from) > 0); /* a follower's copy */
        from[mv[i].from]++;
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(mv[j].part, mv[i].part); /* one move per set */
        }
    }
    assert_int_equal(from[1], 2);
    assert_int_equal(from[2], 2);
    assert_int_equal(from[3], 2);
    assert_int_equal(pmap_rebalance_plan(pm, mv, 2, 16), 2); /* bounded */
    /* A draining node takes part in no plan; neither does a DOWN one. */
    assert_int_equal(pmap_set_node_draining(pm, 4, 1), 0);
    assert_int_equal(pmap_rebalance_plan(pm, mv, 16, 16), 0);
    assert_int_equal(pmap_set_node_draining(pm, 4, 0), 0);
    assert_int_equal(pmap_set_node(pm, 4, "tcp://127.0.0.1:7404", PMAP_NODE_DOWN), 0);
    assert_int_equal(pmap_rebalance_plan(pm, mv, 16, 16), 0);
    assert_int_equal(pmap_set_node(pm, 4, "tcp://127.0.0.1:7404", PMAP_NODE_UP), 0);
    /* Started: the leaving member is marked and the new copy out of sync;
     * the set is left out of the next plan. */
    n = pmap_rebalance_plan(pm, mv, 16, 16);
    assert_int_equal(pmap_move_start(pm, &mv[0], 7), 0);
    pmap_replicas *r = &pm->tables[0].parts[mv[0].part];
    assert_int_equal(r->leaving, mv[0].from);
    assert_int_equal(r->n, 4);
    assert_int_equal(pmap_move_start(pm, &mv[0], 7), LAPSE_EINVAL); /* moving already */
    pmap_move again[16];
    size_t m = pmap_rebalance_plan(pm, again, 16, 16);
    for (size_t i = 0; i < m; i++) {
        assert_int_not_equal(again[i].part, mv[0].part);
    }
    /* Every move carried out (joined, then the leaving copy removed):
     * balanced, 6 copies each. */
    for (size_t i = 0; i < n; i++) {
        pmap_replicas *s = &pm->tables[0].parts[mv[i].part];
        if (i > 0) {
            assert_int_equal(pmap_move_start(pm, &mv[i], 7), 0);
        }
        assert_int_equal(pmap_replica_join(pm, 1, mv[i].part, s->ids[0], s->epoch, 4, s->changes),
                         0);
        assert_int_equal(pmap_replica_remove(pm, 1, mv[i].part, mv[i].from), 0);
        assert_int_equal(s->leaving, 0);
        assert_int_equal(s->n, 3);
    }
    for (uint32_t id = 1; id <= 4; id++) {
        assert_int_equal(pmap_partitions_owned(pm, id) + pmap_follower_copies(pm, id), 6);
    }
    /* Only followers' copies moved: node 4 leads nothing, so the plan is
     * handovers to it now (rebalance_primaries below), unless none may be
     * planned, then nothing. */
    assert_int_equal(pmap_rebalance_plan(pm, mv, 16, 0), 0);
    n = pmap_rebalance_plan(pm, mv, 16, 16);
    assert_true(n > 0);
    for (size_t i = 0; i < n; i++) {
        assert_true(mv[i].handover);
        assert_int_equal(mv[i].to, 4);
    }
    carry_out(pm, mv, n);
    assert_int_equal(pmap_rebalance_plan(pm, mv, 16, 16), 0);
    for (uint32_t id = 1; id <= 4; id++) {
        assert_int_equal(pmap_partitions_owned(pm, id), 2);
    }
    assert_true(pmap_check(pm));
    pmap_free(pm);
}

/* Copies of a set on as many zones as there are (docs/replication.md,
 * "Zones"): nodes 1 and 2 in zone a, 3 in b, 4 in c. A new table's sets
 * each hold one copy in every zone, so nodes 3 and 4 hold twice what 1
 * and 2 do, and the rebalancer plans no copy move (each would put two
 * copies in one zone), only handovers. A fifth node in zone b takes half
 * of node 3's copies, and no move ever lowers a set's zones. */
static void test_zones(void **state)
{
    (void)state;
    pmap *pm = three_nodes();
    assert_int_equal(pmap_set_node(pm, 4, "tcp://127.0.0.1:7404", PMAP_NODE_UP), 0);
    const char *zone[] = {"", "a", "a", "b", "c", "b"};
    for (uint32_t id = 1; id <= 4; id++) {
        assert_int_equal(pmap_set_node_zone(pm, id, zone[id]), 0);
    }
    assert_int_equal(pmap_set_node_zone(pm, 1, "a b"), LAPSE_EINVAL);
    assert_string_equal(pmap_node_find(pm, 1)->zone, "a");
    table_schema t = rf3_schema(8);
    assert_int_equal(pmap_add_table(pm, &t), 0);
    const pmap_table *tb = &pm->tables[0];
    for (uint32_t p = 0; p < 8; p++) {
        assert_int_equal(pmap_zones_of(pm, pmap_part(tb, p), 0, 0), 3);
    }
    assert_int_equal(pmap_partitions_owned(pm, 3) + pmap_follower_copies(pm, 3), 8);
    assert_int_equal(pmap_partitions_owned(pm, 4) + pmap_follower_copies(pm, 4), 8);
    assert_int_equal(pmap_partitions_owned(pm, 1) + pmap_follower_copies(pm, 1), 4);

    pmap_move mv[16];
    size_t n = pmap_rebalance_plan(pm, mv, 16, 16);
    for (size_t i = 0; i < n; i++) {
        assert_true(mv[i].handover);
    }
    carry_out(pm, mv, n);
    n = pmap_rebalance_plan(pm, mv, 16, 16);
    for (size_t i = 0; i < n; i++) {
        assert_true(mv[i].handover);
    }
    carry_out(pm, mv, n);

    assert_int_equal(pmap_set_node(pm, 5, "tcp://127.0.0.1:7405", PMAP_NODE_UP), 0);
    assert_int_equal(pmap_set_node_zone(pm, 5, zone[5]), 0);
    size_t moved = 0;
    for (int round = 0; round < 8 && (n = pmap_rebalance_plan(pm, mv, 16, 0)) > 0; round++) {
        for (size_t i = 0; i < n; i++) {
            assert_false(mv[i].handover);
            assert_int_equal(mv[i].from, 3); /* zone b's copies only: b to b */
            assert_int_equal(mv[i].to, 5);
        }
        carry_out(pm, mv, n);
        moved += n;
    }
    assert_int_equal(moved, 4);
    for (uint32_t p = 0; p < 8; p++) {
        assert_int_equal(pmap_zones_of(pm, pmap_part(tb, p), 0, 0), 3);
    }
    assert_int_equal(pmap_partitions_owned(pm, 3) + pmap_follower_copies(pm, 3), 4);
    assert_int_equal(pmap_partitions_owned(pm, 5) + pmap_follower_copies(pm, 5), 4);
    assert_int_equal(pmap_partitions_owned(pm, 4) + pmap_follower_copies(pm, 4), 8);
    /* Without zones the same map evens out: node 4's copies move too. */
    for (uint32_t id = 1; id <= 5; id++) {
        assert_int_equal(pmap_set_node_zone(pm, id, ""), 0);
    }
    n = pmap_rebalance_plan(pm, mv, 16, 0);
    assert_true(n > 0);
    assert_int_equal(mv[0].from, 4);
    assert_true(pmap_check(pm));
    pmap_free(pm);
}

/* A one-copy table's set moves as any (docs/replication.md, "Moving a
 * one-copy partition"): eight such sets on nodes 1-3 (3, 3, 2) and node 4
 * empty, the plan moves one copy each off nodes 1 and 2 to node 4 (their
 * primaries' copies: there is no follower); while a set has its new copy it is logged
 * and needs only its primary in sync; joined, the primaryship handed over
 * (epoch + 1) and the old copy removed, it is one copy again, unlogged on
 * its new primary and logged on any other node. */
static void test_one_copy_moves(void **state)
{
    (void)state;
    pmap *pm = three_nodes();
    table_schema t = rf3_schema(8);
    t.replication = 1;
    assert_int_equal(pmap_add_table(pm, &t), 0);
    const pmap_table *tb = &pm->tables[0];
    pmap_move mv[8];
    assert_int_equal(pmap_rebalance_plan(pm, mv, 8, 8), 0); /* 3, 3, 2: balanced */
    assert_int_equal(pmap_logged(tb, PMAP_ANY_PART, 1), 0);
    assert_int_equal(pmap_set_node(pm, 4, "tcp://127.0.0.1:7404", PMAP_NODE_UP), 0);
    size_t n = pmap_rebalance_plan(pm, mv, 8, 8);
    assert_int_equal(n, 2); /* 3, 3, 2, 0 to 2, 2, 2, 2 */
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(mv[i].to, 4);
        assert_int_equal(mv[i].handover, 0);
        assert_int_equal(mv[i].from, i + 1);
    }
    uint32_t part = mv[0].part, from = mv[0].from;
    pmap_replicas *r = &pm->tables[0].parts[part];
    assert_int_equal(r->ids[0], from);
    assert_int_equal(pmap_logged(tb, part, from), 0);
    assert_int_equal(pmap_logged(tb, part, 4), 1); /* not its primary: refused at commit */

    assert_int_equal(pmap_move_start(pm, &mv[0], 7), 0);
    assert_int_equal(r->n, 2);
    assert_int_equal(pmap_logged(tb, part, from), 1);
    assert_int_equal(pmap_logged(tb, PMAP_ANY_PART, from), 1);
    assert_int_equal(pmap_min_in_sync(r, 1), 1); /* the new copy is not waited for */
    assert_int_equal(pmap_replica_join(pm, 1, part, from, r->epoch, 4, r->changes), 0);
    assert_int_equal(pmap_in_sync_count(r), 2);
    /* A join's copy that stops confirming may leave: one copy in sync is
     * enough for a one-copy table. */
    assert_int_equal(pmap_replica_shrink(pm, 1, part, from, r->epoch, 4), 0);
    assert_int_equal(pmap_replica_join(pm, 1, part, from, r->epoch, 4, r->changes), 0);
    uint64_t epoch = r->epoch;
    assert_int_equal(pmap_replica_step_down(pm, 1, part, 4, 8), 0);
    assert_int_equal(pmap_handover_target(r), 4);
    assert_int_equal(pmap_replica_handover(pm, 1, part, 4), 0);
    assert_int_equal(r->ids[0], 4);
    assert_int_equal(r->epoch, epoch + 1);
    assert_int_equal(pmap_replica_remove(pm, 1, part, from), 0);
    assert_int_equal(r->n, 1);
    assert_int_equal(r->leaving, 0);
    assert_int_equal(pmap_logged(tb, part, 4), 0);
    assert_int_equal(pmap_logged(tb, part, from), 1);
    assert_int_equal(pmap_logged(tb, PMAP_ANY_PART, 4), 0);
    assert_int_equal(pmap_rebalance_plan(pm, mv, 8, 8), 1); /* the other one still */
    assert_true(pmap_check(pm));
    pmap_free(pm);
}

/* Primaries: 8 sets of three on four nodes, six copies each (balanced),
 * but led 5, 2, 1, 0 by nodes 1-4: the plan is handovers only, each from a
 * set's primary to one of its followers, one per set, bounded by max, from
 * settled sets only; carried out (the old primaries rejoined) every node
 * leads two, no copy having moved. */
static void test_rebalance_primaries(void **state)
{
    (void)state;
    pmap *pm = three_nodes();
    assert_int_equal(pmap_set_node(pm, 4, "tcp://127.0.0.1:7404", PMAP_NODE_UP), 0);
    table_schema t = rf3_schema(8);
    pmap_replicas parts[8] = {
        {.n = 3, .ids = {1, 2, 3}, .in_sync = 7, .epoch = 1},
        {.n = 3, .ids = {1, 3, 4}, .in_sync = 7, .epoch = 1},
        {.n = 3, .ids = {1, 2, 4}, .in_sync = 7, .epoch = 1},
        {.n = 3, .ids = {1, 3, 4}, .in_sync = 7, .epoch = 1},
        {.n = 3, .ids = {1, 2, 3}, .in_sync = 7, .epoch = 1},
        {.n = 3, .ids = {2, 3, 4}, .in_sync = 7, .epoch = 1},
        {.n = 3, .ids = {2, 1, 4}, .in_sync = 7, .epoch = 1},
        {.n = 3, .ids = {3, 2, 4}, .in_sync = 7, .epoch = 1},
    };
    assert_int_equal(pmap_add_table_assigned(pm, &t, parts), 0);
    pmap_move mv[16];
    assert_int_equal(pmap_rebalance_plan(pm, mv, 1, 16), 1); /* bounded */
    assert_int_equal(pmap_rebalance_plan(pm, mv, 16, 2), 2);
    assert_int_equal(pmap_rebalance_plan(pm, mv, 16, 0), 0); /* not asked for */
    size_t n = pmap_rebalance_plan(pm, mv, 16, 16);
    assert_true(n >= 3);
    for (size_t i = 0; i < n; i++) {
        const pmap_replicas *r = pmap_part(&pm->tables[0], mv[i].part);
        assert_true(mv[i].handover);
        assert_int_equal(r->ids[0], mv[i].from);
        assert_true(pmap_replicas_index(r, mv[i].to) > 0);
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(mv[j].part, mv[i].part); /* one per set */
        }
    }
    /* A set with a member out of sync is not settled: left out. */
    pmap_replicas *r0 = &pm->tables[0].parts[mv[0].part];
    uint32_t keep = r0->in_sync;
    r0->in_sync = 3;
    pmap_move again[16];
    size_t m = pmap_rebalance_plan(pm, again, 16, 16);
    for (size_t i = 0; i < m; i++) {
        assert_int_not_equal(again[i].part, mv[0].part);
    }
    r0->in_sync = keep;
    /* Carried out until the plan is empty (each pass as the mover would). */
    for (int pass = 0; pass < 8 && n > 0; pass++) {
        carry_out(pm, mv, n);
        n = pmap_rebalance_plan(pm, mv, 16, 16);
    }
    assert_int_equal(n, 0);
    for (uint32_t id = 1; id <= 4; id++) {
        assert_int_equal(pmap_partitions_owned(pm, id), 2);
        assert_int_equal(pmap_partitions_owned(pm, id) + pmap_follower_copies(pm, id), 6);
    }
    /* A handover whose from no longer leads the set is refused. */
    pmap_move stale = {1, 0, 9, pm->tables[0].parts[0].ids[1], 1};
    assert_int_equal(pmap_move_start(pm, &stale, 7), LAPSE_EINVAL);
    assert_true(pmap_check(pm));
    pmap_free(pm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_follower_then_primary_down),
        cmocka_unit_test(test_promotes_first_in_sync_follower),
        cmocka_unit_test(test_promotions_counted),
        cmocka_unit_test(test_join),
        cmocka_unit_test(test_shrink),
        cmocka_unit_test(test_last_out_takes_over_a_lost_copy),
        cmocka_unit_test(test_last_out_is_never_removed),
        cmocka_unit_test(test_move_a_copy),
        cmocka_unit_test(test_rebalance_plan),
        cmocka_unit_test(test_zones),
        cmocka_unit_test(test_rebalance_primaries),
        cmocka_unit_test(test_one_copy_moves),
        cmocka_unit_test(test_step_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
