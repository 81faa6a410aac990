/*
 * join_lag_test: a change reaches the stream only once every member its
 * write waits for holds it, also when that member joined the set in the
 * very resync pass that confirms the log (docs/chaos.md, "Seen twice, then
 * explained and fixed: writes applied to an item without their stream
 * records"; docs/replication.md, "The outbox on a replicated partition"),
 * on one etcd member, a coordinator and three real nodes with a fault
 * directory.
 *
 * A table of one partition, three copies and a stream; both followers
 * killed, so the primary alone is in sync. One comes back: the primary's
 * resync pass, which began with no member to wait for, makes it join, and
 * then holds (the hold-after-join fault switch) before the partition's
 * send_lag. Meanwhile the member refuses its primary's records, and a put
 * is written and refused (the member cannot be dropped: one copy in sync
 * is too few), so a round failed and send_lag is due. The hold released,
 * send_lag must wait for the member that joined: the put's record may not
 * reach the stream while that member lacks it. Before the fix send_lag
 * waited for the members read at the start of the pass, none, and
 * confirmed the log through the put: its record was on the stream within
 * a second, though the only other copy in sync lacked the write (a
 * failover to it would then give its next write the same outbox seq,
 * which every shard copy skips as applied). Healed, the record reaches
 * the stream once, the stream gapless, the copies equal.
 */
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "replset_testutil.h"
#include "streamread.h"
#include "testmap.h"

#define TABLE "joinlag"

static int group_setup(void **state)
{
    (void)state;
    return rs_group_setup_faults(NULL, 0);
}

static int put_once(int i, const char *v, lapse_error *e)
{
    lapse_item *it = item_json("{\"Id\":{\"S\":\"k%d\"},\"V\":{\"S\":\"%s\"}}", i, v);
    int rv = lapse_put(rs_client(), TABLE, it, NULL, e);
    lapse_item_free(it);
    return rv;
}

/* Waits (up to 20 s) until the map shows node id in (in_sync set) or out
 * of the in-sync set of TABLE's partition; returns that set. */
static pmap_replicas wait_in_sync(uint32_t id, int in_sync)
{
    pmap_replicas r = {0};
    for (int i = 0; i < 200; i++) {
        pmap *pm = testmap_fetch(rs_cluster());
        r = pmap_table_find(pm, TABLE)->parts[0];
        pmap_free(pm);
        int at = pmap_replicas_index(&r, id);
        if (at >= 0 && pmap_in_sync(&r, (uint32_t)at) == in_sync) {
            return r;
        }
        rs_sleep_ms(100);
    }
    fail_msg("node %u is still %s the in-sync set of %s after 20 s", (unsigned)id,
             in_sync ? "out of" : "in", TABLE);
    return r;
}

/* Fails unless node primary's log shows its resync pass held after node
 * f1's join (the case under test happened). */
static void assert_held(int primary, int f1)
{
    char want[128];
    snprintf(want, sizeof(want), "holds after node %d's join", f1);
    FILE *f = fopen(cluster_log_path(rs_cluster(), primary), "r");
    assert_non_null(f);
    char line[1024];
    int held = 0;
    while (!held && fgets(line, sizeof(line), f) != NULL) {
        held = strstr(line, "hold-after-join") != NULL && strstr(line, want) != NULL;
    }
    fclose(f);
    if (!held) {
        fail_msg("node %d's resync pass did not hold after node %d's join (no such line in its "
                 "log): the case under test did not happen",
                 primary, f1);
    }
}

static void test_member_joined_in_the_pass_is_waited_for(void **state)
{
    (void)state;
    lapse_table_def d = {.name = TABLE,
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .partitions = 1,
                         .stream = 1,
                         .replication = 3};
    lapse_error e = {0};
    assert_lapse_ok(lapse_create_table(rs_client(), &d, &e), &e);
    for (int i = 0; i < 10; i++) {
        assert_lapse_ok(put_once(i, "a", &e), &e);
    }
    streamread s = {0};
    assert_int_equal(rs_stream_until(TABLE, &s, 10, 10000), 10);
    pmap *pm = rs_wait_all_in_sync(TABLE);
    const pmap_replicas *r = &pmap_table_find(pm, TABLE)->parts[0];
    assert_int_equal(r->n, 3);
    const int primary = (int)r->ids[0], f1 = (int)r->ids[1], f2 = (int)r->ids[2];
    const uint64_t epoch = pmap_epoch(r);
    pmap_free(pm);

    /* Both followers down: the primary alone in sync, no write taken. */
    assert_int_equal(cluster_kill(rs_cluster(), f2, SIGKILL), 0);
    rs_wait_state((uint32_t)f2, "DOWN");
    wait_in_sync((uint32_t)f2, 0);
    assert_int_equal(cluster_kill(rs_cluster(), f1, SIGKILL), 0);
    rs_wait_state((uint32_t)f1, "DOWN");
    pmap_replicas now = wait_in_sync((uint32_t)f1, 0);
    assert_int_equal(now.ids[0], (uint32_t)primary);
    assert_int_equal(pmap_in_sync_count(&now), 1);

    /* f1 back: a pass that began with no member to wait for makes it join
     * and holds before its send_lag. The join is in the map by then. */
    rs_hold_after_join(primary, 1);
    assert_int_equal(cluster_restart(rs_cluster(), f1), 0);
    now = wait_in_sync((uint32_t)f1, 1);
    assert_int_equal(now.ids[0], (uint32_t)primary);
    assert_true(pmap_epoch(&now) == epoch);

    /* f1 refuses the put's round: written on the primary, refused (f1
     * cannot leave: one copy in sync is too few), a round failed. */
    rs_refuse_replicate_log(f1, 1);
    lapse_set_timeout_ms(rs_client(), 1500);
    lapse_error pe = {0};
    assert_int_not_equal(put_once(10, "b", &pe), 0);
    if (pe.code != LAPSE_EUNAVAILABLE && pe.code != LAPSE_ETIMEDOUT) {
        fail_msg("the put f1 refuses: %s", pe.message); /* a slow machine's: timed out */
    }
    lapse_set_timeout_ms(rs_client(), 5000);

    /* The pass goes on to send_lag. Read for 3 s, past the shipper's
     * rescan (1 s) and a retry's backoff: a record confirmed without f1
     * would be on the stream by then (within a second, before the fix). */
    rs_hold_after_join(primary, 0);
    assert_held(primary, f1);
    size_t got = rs_stream_until(TABLE, &s, 11, 3000);
    if (got != 10 || rs_stream_records_of(&s, "k10") != 0) {
        fail_msg("the stream holds %zu records, %zu of k10, whose write only the primary node %d "
                 "holds: send_lag confirmed it without node %d, which joined in its pass",
                 got, rs_stream_records_of(&s, "k10"), primary, f1);
    }

    /* Healed, f1 takes the record, and then the stream does, once. */
    rs_refuse_replicate_log(f1, 0);
    assert_int_equal(rs_stream_until(TABLE, &s, 11, 15000), 11);
    assert_int_equal(rs_stream_records_of(&s, "k10"), 1);
    char why[256];
    if (streamread_gap(&s, 1, why, sizeof(why)) != 0) {
        fail_msg("the stream has a gap: %s", why);
    }
    streamread_free(&s);
    assert_int_equal(cluster_restart(rs_cluster(), f2), 0);
    pmap_free(rs_wait_all_in_sync(TABLE));
    assert_int_equal(rs_wait_copies_match(TABLE, 15000), 11);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_member_joined_in_the_pass_is_waited_for),
    };
    return cmocka_run_group_tests(tests, group_setup, rs_group_teardown);
}
