/*
 * snapshot_rebuild_test: replicas the log no longer reaches are rebuilt
 * from snapshots (docs/replication.md, "Snapshots and log trimming"), on
 * one etcd member, a coordinator and three real nodes that keep only the
 * last 16 records of each partition's log (--replog-retain 16):
 *  - the logs are trimmed: every primary's log starts past record 1;
 *  - a node killed (kill -9) while every partition took more than 16
 *    writes comes back behind the first record its primaries hold: each
 *    such copy is rebuilt from a snapshot while writes go on, joins its
 *    in-sync sets, and every copy of every partition ends equal with every
 *    acknowledged item;
 *  - a node whose data dir is wiped while it is down comes back empty and
 *    is rebuilt the same way.
 * Without snapshots neither node could rejoin (the log from record 1 is
 * gone): their sets would stay short of a copy for good.
 */
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replset_testutil.h"
#include "testmap.h"

#define PARTS 4
#define TABLE "snap"

static int group_setup(void **state)
{
    (void)state;
    return rs_group_setup_args("--replog-retain 16");
}

/* Puts k<from>..k<to - 1> with value v, each retried while sets change. */
static void put_range(int from, int to, const char *v)
{
    for (int i = from; i < to; i++) {
        char id[32];
        snprintf(id, sizeof(id), "k%d", i);
        rs_put_retrying(TABLE, id, v);
    }
}

/* Fails unless node's log says it installed a snapshot. */
static void assert_rebuilt_from_snapshot(int node)
{
    char *log = cluster_read_file(cluster_log_path(rs_cluster(), node));
    assert_non_null(log);
    if (strstr(log, "was rebuilt from primary node") == NULL) {
        fail_msg("node %d's log shows no snapshot install", node);
    }
    free(log);
}

/* Every partition's primary has trimmed its log. */
static void assert_logs_trimmed(void)
{
    pmap *pm = testmap_fetch(rs_cluster());
    const pmap_table *t = pmap_table_find(pm, TABLE);
    assert_non_null(t);
    for (uint32_t p = 0; p < PARTS; p++) {
        rs_digest d = rs_node_digest((int)t->parts[p].ids[0], t->schema.id, p);
        if (d.log_first <= 1 || d.seq - d.log_first + 1 > 16 + 16 / 4 + 1) {
            fail_msg("partition %u: the primary's log holds records %llu..%llu, not its last 16",
                     (unsigned)p, (unsigned long long)d.log_first, (unsigned long long)d.seq);
        }
    }
    pmap_free(pm);
}

static void test_replicas_behind_the_log_are_rebuilt(void **state)
{
    (void)state;
    cluster *c = rs_cluster();
    lapse_table_def d = {.name = TABLE,
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .partitions = PARTS,
                         .replication = 3};
    lapse_error e = {0};
    assert_lapse_ok(lapse_create_table(rs_client(), &d, &e), &e);
    put_range(0, 200, "a");
    pmap_free(rs_wait_all_in_sync(TABLE));
    assert_int_equal(rs_assert_copies_match(TABLE), 200);
    assert_logs_trimmed();

    /* Down while every partition takes far more than 16 writes. */
    assert_int_equal(cluster_kill(c, 3, SIGKILL), 0);
    rs_wait_state(3, "DOWN");
    put_range(200, 400, "b");
    assert_int_equal(cluster_restart(c, 3), 0);
    rs_wait_state(3, "UP");
    put_range(400, 450, "c"); /* while it is rebuilt */
    pmap_free(rs_wait_all_in_sync(TABLE));
    assert_int_equal(rs_assert_copies_match(TABLE), 450);
    assert_rebuilt_from_snapshot(3);

    /* Its data dir lost while it is down. */
    assert_int_equal(cluster_kill(c, 2, SIGKILL), 0);
    rs_wait_state(2, "DOWN");
    cluster_rm_rf(cluster_data_dir(c, 2));
    put_range(450, 500, "d");
    assert_int_equal(cluster_restart(c, 2), 0);
    rs_wait_state(2, "UP");
    put_range(500, 520, "e");
    pmap_free(rs_wait_all_in_sync(TABLE));
    assert_int_equal(rs_assert_copies_match(TABLE), 520);
    assert_rebuilt_from_snapshot(2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replicas_behind_the_log_are_rebuilt),
    };
    return cmocka_run_group_tests(tests, group_setup, rs_group_teardown);
}
