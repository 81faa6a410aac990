/*
 * replica_index_test: a table of three copies keeps three copies of each
 * GSI partition and of each stream shard too (docs/replication.md, "GSI
 * partitions and stream shards"), on one etcd member, a coordinator and
 * three real nodes:
 *  - every copy of every GSI partition and of every stream shard is fed
 *    by the base partitions' outboxes on its own and ends holding the same
 *    entries and records (each asked directly: Query, PartitionDigest of
 *    the GSI partition and GetStreamRecords sent to its node);
 *  - with the first copy of a GSI partition killed (kill -9), GSI queries
 *    through liblapse are answered by another copy at once, and so is the
 *    whole stream, gapless; writes go on, and both show them while the
 *    node is down;
 *  - restarted, the node's copies catch up from the outboxes and every copy
 *    matches again.
 * With one copy of each (before), the queries and stream reads that the
 * dead node held fail until it is back.
 */
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "derived_testutil.h"
#include "nodecall.h"
#include "replset_testutil.h"
#include "streamread.h"
#include "testmap.h"

#define TABLE "derived"
#define GSI "ByGrp"
#define PARTS 4
#define GSI_PARTS 2
#define GROUPS 4

static int group_setup(void **state)
{
    (void)state;
    return rs_group_setup_args("");
}

static const dt_table derived = {TABLE, GSI, GSI_PARTS, GROUPS};

/* Creates table name: three copies of PARTS partitions, a GSI on Grp of
 * GSI_PARTS partitions, a stream. */
static void create(const char *name)
{
    dt_table t = derived;
    t.name = name;
    dt_create(&t, PARTS);
}

static void put_range_on(const char *table, int from, int to)
{
    dt_table t = derived;
    t.name = table;
    dt_put_range(&t, from, to);
}

static void put_range(int from, int to)
{
    dt_put_range(&derived, from, to);
}

static uint32_t group_part(int g)
{
    return dt_group_part(&derived, g);
}

static void wait_copies_hold(size_t per_group, size_t records)
{
    dt_wait_copies_hold(&derived, 3, per_group, records, 15000);
}

static int client_sees_on(const char *table, size_t per_group, size_t records, char *why,
                          size_t len)
{
    dt_table t = derived;
    t.name = table;
    return dt_client_sees(&t, per_group, records, why, len);
}

static int client_sees(size_t per_group, size_t records, char *why, size_t len)
{
    return dt_client_sees(&derived, per_group, records, why, len);
}

static void test_gsi_and_stream_copies_survive_a_kill(void **state)
{
    (void)state;
    create(TABLE);
    put_range(0, 40);
    wait_copies_hold(10, 40);

    /* The first copy of g0's GSI partition dies: the client's queries and
     * stream reads go to the other copies at once, before the map says. */
    pmap *pm = testmap_fetch(rs_cluster());
    int victim = (int)pmap_gsi_owner(pmap_table_find(pm, TABLE), 0, group_part(0));
    pmap_free(pm);
    assert_int_equal(cluster_kill(rs_cluster(), victim, SIGKILL), 0);
    char why[512] = "";
    if (!client_sees(10, 40, why, sizeof(why))) {
        fail_msg("node %d killed: %s", victim, why);
    }

    /* Writes go on (its primaries fail over), and both show them. */
    put_range(40, 60);
    int seen = 0;
    for (int i = 0; i < 150 && !seen; i++) {
        if (!(seen = client_sees(15, 60, why, sizeof(why)))) {
            rs_sleep_ms(100);
        }
    }
    if (!seen) {
        fail_msg("node %d down, after 15 s: %s", victim, why);
    }

    /* Back, its copies catch up from the outboxes. */
    assert_int_equal(cluster_restart(rs_cluster(), victim), 0);
    rs_wait_state((uint32_t)victim, "UP");
    pmap_free(rs_wait_all_in_sync(TABLE));
    wait_copies_hold(15, 60);
    rs_assert_copies_match(TABLE);
}

/* Every base partition's primary has trimmed its outbox past record 1 (its
 * first record held is past 1, or it holds none any more). */
static int outboxes_trimmed(const char *table)
{
    pmap *pm = testmap_fetch(rs_cluster());
    const pmap_table *t = pmap_table_find(pm, table);
    assert_non_null(t);
    int all = 1;
    for (uint32_t p = 0; p < t->schema.partitions && all; p++) {
        rs_digest d = rs_node_digest((int)t->parts[p].ids[0], t->schema.id, p);
        all = d.outbox_last > 0 && (d.outbox_first == 0 || d.outbox_first > 1);
    }
    pmap_free(pm);
    return all;
}

/* Re-puts k<i> in group g (its GSI entry moves when g is not its own). */
static void put_in_group(const char *table, int i, int g)
{
    lapse_item *it = item_json("{\"Id\":{\"S\":\"k%d\"},\"Grp\":{\"S\":\"g%d\"}}", i, g);
    lapse_error e = {0};
    assert_lapse_ok(lapse_put(rs_client(), table, it, NULL, &e), &e);
    lapse_item_free(it);
}

/* A client of a copy in r other than the victim's (its node in *other). */
static rpc_client *other_copy(const pmap_replicas *r, int victim, int *other)
{
    *other = (int)(r->ids[0] != (uint32_t)victim ? r->ids[0] : r->ids[1]);
    char err[256] = "";
    rpc_client *c = NULL;
    assert_int_equal(rpc_client_open(&c, cluster_node_url(rs_cluster(), *other), err, sizeof(err)),
                     0);
    return c;
}

/* Waits until the victim's copy of GSI partition gpart of table t answers
 * PartitionDigest with the digest of another copy's. */
static void wait_gsi_copy_equal(rpc_client *c, int victim, const pmap_table *t, uint32_t gpart)
{
    int other = 0;
    rpc_client *oc = other_copy(pmap_gsi_part(t, 0, gpart), victim, &other);
    char err[256] = "";
    int same = 0, rv = 0;
    for (int i = 0; i < 150 && !same; i++) {
        nodecall_digest d = {0}, od = {0};
        rv = nodecall_gsi_digest(c, t->schema.id, t->schema.gsi[0].id, gpart, &d, err, sizeof(err));
        assert_int_equal(nodecall_gsi_digest(oc, t->schema.id, t->schema.gsi[0].id, gpart, &od, err,
                                             sizeof(err)),
                         0);
        same = rv == 0 && d.items == od.items && d.hash == od.hash;
        if (!same) {
            rs_sleep_ms(100);
        }
    }
    rpc_client_close(oc);
    if (!same) {
        fail_msg("node %d's copy of GSI partition %u does not hold node %d's entries after 15 s "
                 "(last: %s)",
                 victim, (unsigned)gpart, other, rv == 0 ? "it answers" : err);
    }
}

/* Waits until the victim's copy of stream shard p of table t holds what
 * another copy holds. */
static void wait_shard_copy_equal(rpc_client *c, int victim, const pmap_table *t, uint32_t p)
{
    int other = 0;
    rpc_client *oc = other_copy(pmap_stream_shard(t, p), victim, &other);
    char err[256] = "";
    int same = 0, rv = 0;
    for (int i = 0; i < 150 && !same; i++) {
        size_t recs = 0, orecs = 0;
        uint64_t last = 0, olast = 0;
        rv = nodecall_stream_shard(c, t->schema.name, p, &recs, &last, err, sizeof(err));
        assert_int_equal(
            nodecall_stream_shard(oc, t->schema.name, p, &orecs, &olast, err, sizeof(err)), 0);
        same = rv == 0 && recs == orecs && last == olast;
        if (!same) {
            rs_sleep_ms(100);
        }
    }
    rpc_client_close(oc);
    if (!same) {
        fail_msg("node %d's copy of stream shard %u does not hold what node %d's holds after 15 s "
                 "(last: %s)",
                 victim, (unsigned)p, other, rv == 0 ? "it answers" : err);
    }
}

/* A node whose data dir is lost comes back with copies of GSI partitions
 * and stream shards that miss records their sources have trimmed since:
 * those copies note it and answer no read (EUNAVAILABLE) while the
 * client's GSI queries and stream reads go to the other copies, whole and
 * gapless (without the note the node answered with entries missing). Then
 * its stream copies are filled from the other copies and its GSI copies
 * from the base partitions' items (docs/replication.md, "A copy that lost
 * records"), while items move between GSI keys, and every copy ends equal
 * to the others. With either fill off, those copies refuse for good. */
static void test_a_copy_that_lost_records_is_filled_again(void **state)
{
    (void)state;
    create("lost");
    put_range_on("lost", 0, 40);
    int trimmed = 0;
    for (int i = 0; i < 100 && !trimmed; i++) {
        rs_sleep_ms(100);
        trimmed = outboxes_trimmed("lost");
    }
    assert_true(trimmed);

    /* Node 3's data dir is lost while it is down. */
    const int victim = 3;
    assert_int_equal(cluster_kill(rs_cluster(), victim, SIGKILL), 0);
    rs_wait_state(victim, "DOWN");
    cluster_rm_rf(cluster_data_dir(rs_cluster(), victim));
    assert_int_equal(cluster_restart(rs_cluster(), victim), 0);
    rs_wait_state(victim, "UP");
    put_range_on("lost", 40, 44);
    /* k0 and k1 trade groups: entries the fill may have put move. */
    put_in_group("lost", 0, 1);
    put_in_group("lost", 1, 0);
    pmap_free(rs_wait_all_in_sync("lost"));

    char err[256] = "";
    rpc_client *c = NULL;
    assert_int_equal(rpc_client_open(&c, cluster_node_url(rs_cluster(), victim), err, sizeof(err)),
                     0);
    pmap *pm = testmap_fetch(rs_cluster());
    const pmap_table *t = pmap_table_find(pm, "lost");
    for (uint32_t gp = 0; gp < GSI_PARTS; gp++) {
        if (pmap_replicas_index(pmap_gsi_part(t, 0, gp), (uint32_t)victim) >= 0) {
            wait_gsi_copy_equal(c, victim, t, gp);
        }
    }
    for (uint32_t p = 0; p < PARTS; p++) {
        wait_shard_copy_equal(c, victim, t, p);
    }
    pmap_free(pm);
    rpc_client_close(c);
    /* Both fills ran: the sources had trimmed records the node lacked. */
    char *log = cluster_read_file(cluster_log_path(rs_cluster(), victim));
    assert_non_null(log);
    if (strstr(log, "miss records") == NULL || strstr(log, "filled from node") == NULL ||
        strstr(log, "GSI copies, missing records") == NULL) {
        fail_msg("node %d noted no loss, or filled no stream or GSI copy: the case under test "
                 "did not happen",
                 victim);
    }
    free(log);

    /* Through liblapse: whole and gapless. */
    char why[512] = "";
    if (!client_sees_on("lost", 11, 46, why, sizeof(why))) {
        fail_msg("%s", why);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gsi_and_stream_copies_survive_a_kill),
        cmocka_unit_test(test_a_copy_that_lost_records_is_filled_again),
    };
    return cmocka_run_group_tests(tests, group_setup, rs_group_teardown);
}
