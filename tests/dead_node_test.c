/*
 * dead_node_test: a dead node fails over without waiting out its etcd lease
 * (docs/replication.md, "Failover"), on one etcd member, a coordinator and
 * three nodes whose leases last 20 s (--lease-ttl 20):
 *  - kill -9 of a primary: the coordinator leader's connection to it drops,
 *    its port refuses a probe, and the leader revokes its lease, so the
 *    node is DOWN and its partitions have new primaries well before the
 *    20 s lease could have run out (the wait below gives up at 10 s);
 *    writes go on, and back it is resynced and every copy is equal;
 *  - SIGSTOP of a primary: a stopped process refuses nothing, so it keeps
 *    its lease and its partitions for as long as the lease lasts (checked
 *    for 3 s, well inside it); on SIGCONT it serves them again.
 */
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "../common/clock.h"
#include "replset_testutil.h"
#include "testmap.h"

#define TABLE "dead"
#define PARTS 4
#define KEYS 40

static int group_setup(void **state)
{
    (void)state;
    return rs_group_setup_args("--lease-ttl 20");
}

/* The primary of partition 0 of TABLE in the coordinator's map. */
static uint32_t primary_of_part0(void)
{
    pmap *pm = testmap_fetch(rs_cluster());
    const pmap_table *t = pmap_table_find(pm, TABLE);
    assert_non_null(t);
    uint32_t id = t->parts[0].ids[0];
    pmap_free(pm);
    return id;
}

/* How many partitions of TABLE node id is the primary of, and their
 * epochs summed, in the coordinator's map. */
static int primaries_of(uint32_t id, uint64_t *epochs)
{
    pmap *pm = testmap_fetch(rs_cluster());
    const pmap_table *t = pmap_table_find(pm, TABLE);
    assert_non_null(t);
    int n = 0;
    *epochs = 0;
    for (uint32_t p = 0; p < t->schema.partitions; p++) {
        if (t->parts[p].ids[0] == id) {
            n++;
            *epochs += t->parts[p].epoch;
        }
    }
    pmap_free(pm);
    return n;
}

static void put_all(const char *v)
{
    for (int i = 0; i < KEYS; i++) {
        char id[16];
        snprintf(id, sizeof(id), "k%d", i);
        rs_put_retrying(TABLE, id, v);
    }
}

static void test_killed_primary_fails_over_before_its_lease_runs_out(void **state)
{
    (void)state;
    rs_create_rf3(TABLE, PARTS);
    pmap_free(rs_wait_all_in_sync(TABLE));
    put_all("before");
    const uint32_t victim = primary_of_part0();
    assert_int_equal(cluster_kill(rs_cluster(), (int)victim, SIGKILL), 0);
    clock_mono killed = clock_mono_now();
    char st[32] = "";
    while (strcmp(cluster_node_state(rs_client(), victim, st, sizeof(st)), "DOWN") != 0) {
        if (clock_mono_now().ms - killed.ms > 10000) {
            fail_msg("node %u is %s 10 s after kill -9: its 20 s lease was not revoked",
                     (unsigned)victim, st);
        }
        rs_sleep_ms(20);
    }
    print_message("node %u DOWN %lld ms after kill -9 (lease 20 s)\n", (unsigned)victim,
                  (long long)(clock_mono_now().ms - killed.ms));
    assert_int_not_equal(primary_of_part0(), victim);
    put_all("during");

    assert_int_equal(cluster_restart(rs_cluster(), (int)victim), 0);
    assert_int_equal(cluster_wait_up(rs_cluster(), 3, 20000), 0);
    pmap_free(rs_wait_all_in_sync(TABLE));
    put_all("after");
    assert_int_equal(rs_assert_copies_match(TABLE), KEYS);
}

static void test_stopped_primary_keeps_its_lease(void **state)
{
    (void)state;
    /* The node back from the kill above leads nothing: the rebalancer hands
     * primaryships to it first, which is no failover. */
    pmap_free(rs_wait_rebalanced(TABLE));
    const uint32_t victim = primary_of_part0();
    uint64_t epochs = 0, epochs_now = 0;
    const int led = primaries_of(victim, &epochs);
    assert_true(led > 0);
    assert_int_equal(cluster_kill(rs_cluster(), (int)victim, SIGSTOP), 0);
    rs_sleep_ms(3000); /* twelve membership passes of the leader */
    char st[32] = "";
    const char *state_now = cluster_node_state(rs_client(), victim, st, sizeof(st));
    const int led_now = primaries_of(victim, &epochs_now);
    assert_int_equal(cluster_kill(rs_cluster(), (int)victim, SIGCONT), 0);
    assert_string_equal(state_now, "UP");
    assert_int_equal(led_now, led);
    assert_int_equal(epochs_now, epochs); /* no failover came and went */
    put_all("resumed");
    assert_int_equal(rs_assert_copies_match(TABLE), KEYS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_killed_primary_fails_over_before_its_lease_runs_out),
        cmocka_unit_test(test_stopped_primary_keeps_its_lease),
    };
    return cmocka_run_group_tests(tests, group_setup, rs_group_teardown);
}
