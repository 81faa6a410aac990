/*
 * node_remove_test: `lapse node remove` of a dead node (docs/replication.md,
 * "Removing a dead node") on one etcd member, a coordinator and four real
 * nodes, every item call through liblapse and every copy read through
 * PartitionDigest on its node:
 *  - a table of three copies over four nodes with data; node 2 is killed
 *    (kill -9) and goes DOWN: its sets fail over but keep naming it;
 *  - removing an UP node is refused (ESTATE: drain it), an unknown one too
 *    (ENOTFOUND);
 *  - NodeRemove of node 2 answers at once with the sets that name it; the
 *    coordinator leader makes each of its copies anew on another node from
 *    the surviving ones and drops node 2 from the set, while the test goes
 *    on writing; then no set names node 2, every set has three copies in
 *    sync, every acknowledged write reads back and the copies of every
 *    partition are identical; cluster-status shows node 2 removed with no
 *    replica;
 *  - node 2 started again on its old data dir is refused (it stays DOWN and
 *    is given nothing), and the rebalancer has nothing to do around it.
 * A one-copy table with a stream and a GSI lives beside it: node 2 holds
 * the only copy of some of its partitions and lists, so the removal is
 * refused (ESTATE, naming --lose-data) and changes nothing until it is
 * asked with LAPSE_REMOVE_LOSE_DATA; those copies are then counted in
 * LostCopies and never moved (the mover would wait for ever on a copy
 * filled from what is gone, its moves taken from the replicated table's
 * and the rebalancer's), the table's other keys still read, a key of a
 * lost partition fails rather than reading as absent, and dropping the
 * table takes the lost copies with it.
 * The coordinator runs with --max-concurrent-moves 2: never more than two
 * sets are seen moving at once. With the removal step of the mover
 * disabled, the wait for node 2's copies to go fails.
 */
#include "testutil.h"

#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/item.h"
#include "../placement/hash.h"
#include "move_testutil.h"
#include "replset_testutil.h"
#include "testmap.h"

#define PARTS 16
#define KEYS 200
#define WRITES_MAX 20000
#define DEAD 2

static int setup(void **state)
{
    (void)state;
    return rs_group_setup_coordinator_args(4, "--max-concurrent-moves 2");
}

/* How many sets of table name node id, in the coordinator's map; with
 * lists, how many of its GSI partition and stream shard lists instead. */
static size_t copies_on(const char *table, uint32_t id, int lists)
{
    pmap *pm = testmap_fetch(rs_cluster());
    const pmap_table *t = pmap_table_find(pm, table);
    assert_non_null(t);
    size_t n = 0;
    for (uint32_t p = 0; p < t->schema.partitions; p++) {
        const pmap_replicas *r = lists ? pmap_stream_shard(t, p) : pmap_part(t, p);
        n += r != NULL && pmap_replicas_index(r, id) >= 0;
    }
    for (uint32_t g = 0; lists && g < t->schema.ngsi; g++) {
        for (uint32_t q = 0; q < t->schema.gsi[g].partitions; q++) {
            n += pmap_replicas_index(pmap_gsi_part(t, g, q), id) >= 0;
        }
    }
    pmap_free(pm);
    return n;
}

static size_t sets_naming(const char *table, uint32_t id)
{
    return copies_on(table, id, 0);
}

/* Whether item {Id: id} of table reads back (fails the test on an error). */
static int present(const char *table, const char *fmt, int i)
{
    lapse_error e = {0};
    char id[32];
    snprintf(id, sizeof(id), fmt, i);
    lapse_item *k = item_json("{\"Id\":{\"S\":\"%s\"}}", id), *got = NULL;
    assert_lapse_ok(lapse_get(rs_client(), table, k, &got, &e), &e);
    int there = got != NULL;
    lapse_item_free(got);
    lapse_item_free(k);
    return there;
}

/* The one-copy table: PARTS partitions, a stream, GSI "by_g" on G. */
static void create_single(void)
{
    lapse_error e = {0};
    const lapse_index_def gsi[] = {
        {.name = "by_g", .partition_key = "G", .partition_key_type = 'S'}};
    lapse_table_def d = {.name = "single",
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .partitions = PARTS,
                         .replication = 1,
                         .gsi = gsi,
                         .ngsi = 1,
                         .stream = 1};
    assert_lapse_ok(lapse_create_table(rs_client(), &d, &e), &e);
    for (int i = 0; i < KEYS; i++) {
        lapse_item *it = item_json("{\"Id\":{\"S\":\"s%d\"},\"G\":{\"S\":\"g%d\"}}", i, i % 7);
        assert_lapse_ok(lapse_put(rs_client(), "single", it, NULL, &e), &e);
        lapse_item_free(it);
    }
}

/* The node of table name's key id's partition, in the coordinator's map. */
static uint32_t owner_of(const char *name, const char *id)
{
    pmap *pm = testmap_fetch(rs_cluster());
    const pmap_table *t = pmap_table_find(pm, name);
    assert_non_null(t);
    attr_value v;
    uint32_t part = 0;
    assert_int_equal(item_value_init_bytes(&v, ATTR_S, id, strlen(id)), 0);
    assert_int_equal(hash_partition(&v, t->schema.partitions, &part), 0);
    item_value_fini(&v);
    uint32_t owner = pmap_owner(t, part);
    pmap_free(pm);
    return owner;
}

static void test_remove_dead_node_makes_its_copies_anew(void **state)
{
    (void)state;
    static char acked[WRITES_MAX];
    rs_create_rf3("removed", PARTS);
    create_single();
    size_t single_base = sets_naming("single", DEAD), single_lists = copies_on("single", DEAD, 1);
    assert_true(single_base > 0); /* 16 partitions over 4 nodes: 4 */
    lapse_error e = {0};
    for (int i = 0; i < KEYS; i++) {
        lapse_item *it = item_json("{\"Id\":{\"S\":\"k%d\"},\"V\":{\"S\":\"a\"}}", i);
        assert_lapse_ok(lapse_put(rs_client(), "removed", it, NULL, &e), &e);
        lapse_item_free(it);
    }
    size_t held = sets_naming("removed", DEAD);
    assert_true(held >= 10); /* 16 * 3 copies over 4 nodes: 12 */

    assert_int_equal(cluster_kill(rs_cluster(), DEAD, SIGKILL), 0);
    rs_wait_state(DEAD, "DOWN");
    /* Failed over, not removed: its sets still name it. Writes go on (the
     * client learns the new primaries here, not while the copies move). */
    assert_int_equal(sets_naming("removed", DEAD), held);
    for (int i = 0; i < PARTS; i++) {
        char id[16];
        snprintf(id, sizeof(id), "d%d", i);
        rs_put_retrying("removed", id, "after the kill");
    }

    mv_remove(3, LAPSE_ESTATE); /* UP: drain it instead */
    mv_remove(9, LAPSE_ENOTFOUND);

    /* The one-copy table's copies would be lost: refused, nothing done. */
    char *js = NULL;
    assert_int_equal(lapse_node_remove(rs_client(), DEAD, 0, &js, &e), LAPSE_ESTATE);
    print_message("node_remove_test: refused: %s\n", e.message);
    assert_non_null(strstr(e.message, "--lose-data"));
    assert_non_null(strstr(e.message, "single"));
    json_t *node = NULL, *doc = rs_status_of(DEAD, &node);
    assert_false(json_is_true(json_object_get(node, "Removed")));
    json_decref(doc);
    assert_int_equal(sets_naming("removed", DEAD), held);

    json_t *d = mv_remove_lose_data(DEAD);
    assert_true(json_is_true(json_object_get(d, "Removed")));
    assert_int_equal(rs_json_int(d, "BaseCopiesLeft"), (json_int_t)held);
    assert_int_equal(rs_json_int(d, "OtherCopies"), 0);
    assert_int_equal(rs_json_int(d, "LostCopies"), (json_int_t)(single_base + single_lists));
    json_decref(d);

    /* Bounded: a hang check, not a speed target. Writes go on meanwhile,
     * one attempt each; the acknowledged ones must all read back. */
    clock_mono deadline = clock_mono_after_ms(60000);
    json_int_t left = (json_int_t)held, most_moves = 0;
    int nwrites = 0, nacked = 0;
    while (left > 0) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("node %d is still named by %lld sets or lists 60 s after its removal", DEAD,
                     (long long)left);
        }
        d = mv_remove(DEAD, 0); /* again: it only answers what is left */
        left = rs_json_int(d, "BaseCopiesLeft") + rs_json_int(d, "DerivedCopiesLeft");
        assert_int_equal(rs_json_int(d, "LostCopies"), (json_int_t)(single_base + single_lists));
        json_int_t moves = rs_json_int(d, "Moves");
        if (moves > 2) {
            fail_msg("%lld sets moving at once, want at most 2 (--max-concurrent-moves)",
                     (long long)moves);
        }
        most_moves = moves > most_moves ? moves : most_moves;
        json_decref(d);
        for (int k = 0; k < 5 && nwrites < WRITES_MAX; k++) {
            int i = nwrites++;
            lapse_item *it = item_json("{\"Id\":{\"S\":\"w%d\"},\"V\":{\"N\":\"%d\"}}", i, i);
            acked[i] = lapse_put(rs_client(), "removed", it, NULL, &e) == 0;
            nacked += acked[i];
            lapse_item_free(it);
        }
        rs_sleep_ms(50);
    }
    print_message("node_remove_test: %zu copies of node %d made anew while %d of %d writes were "
                  "acknowledged\n",
                  held, DEAD, nacked, nwrites);
    assert_true(nacked > 0);
    assert_true(most_moves >= 1);

    /* No set names the dead node; each has three copies, all in sync. */
    pmap *pm = rs_wait_all_in_sync("removed");
    const pmap_table *t = pmap_table_find(pm, "removed");
    for (uint32_t p = 0; p < PARTS; p++) {
        const pmap_replicas *r = pmap_part(t, p);
        assert_int_equal(r->n, 3);
        assert_int_equal(pmap_replicas_index(r, DEAD), -1);
    }
    pmap_free(pm);
    /* Every acknowledged write reads back; every copy is identical. */
    int there = 0;
    for (int i = 0; i < KEYS; i++) {
        if (!present("removed", "k%d", i)) {
            fail_msg("k%d lost in the removal", i);
        }
    }
    for (int i = 0; i < nwrites; i++) {
        int p = present("removed", "w%d", i);
        if (acked[i] && !p) {
            fail_msg("acknowledged write w%d lost in the removal", i);
        }
        there += p;
    }
    for (int i = 0; i < PARTS; i++) {
        if (!present("removed", "d%d", i)) {
            fail_msg("d%d lost in the removal", i);
        }
    }
    assert_int_equal(rs_wait_copies_match("removed", 20000), (uint64_t)(KEYS + PARTS + there));

    /* The one-copy table: its keys on other nodes read back; one of a
     * lost partition fails, never reads as absent. */
    int lost_key = -1, read_back = 0;
    for (int i = 0; i < KEYS; i++) {
        char id[16];
        snprintf(id, sizeof(id), "s%d", i);
        if (owner_of("single", id) != DEAD) {
            read_back += present("single", "s%d", i);
        } else if (lost_key < 0) {
            lost_key = i;
        }
    }
    assert_true(read_back > 0);
    assert_true(lost_key >= 0);
    lapse_item *k = item_json("{\"Id\":{\"S\":\"s%d\"}}", lost_key), *got = NULL;
    int rv = lapse_get(rs_client(), "single", k, &got, &e);
    print_message("node_remove_test: %d of the one-copy table's keys on live partitions read "
                  "back; s%d, on a lost one: %s\n",
                  read_back, lost_key, rv != 0 ? e.message : "read");
    assert_int_equal(rv, LAPSE_EUNAVAILABLE);
    assert_non_null(strstr(e.message, "was lost with node 2"));
    assert_null(got);
    lapse_item_free(k);

    /* The map still names node 2 for the lost copies, until the table
     * that lost them is dropped, which takes them with it. */
    doc = rs_status_of(DEAD, &node);
    assert_int_equal(rs_json_int(node, "Replicas"), (json_int_t)(single_base + single_lists));
    json_decref(doc);
    assert_lapse_ok(lapse_delete_table(rs_client(), "single", &e), &e);
    d = mv_remove(DEAD, 0);
    assert_int_equal(rs_json_int(d, "LostCopies"), 0);
    json_decref(d);

    doc = rs_status_of(DEAD, &node);
    assert_true(json_is_true(json_object_get(node, "Removed")));
    assert_string_equal(json_string_value(json_object_get(node, "State")), "DOWN");
    assert_int_equal(rs_json_int(node, "Replicas"), 0);
    json_decref(doc);

    /* Back on its old data dir, the removed node is refused: it stays
     * DOWN, holds nothing, and says why in its log. */
    assert_int_equal(cluster_restart(rs_cluster(), DEAD), 0);
    deadline = clock_mono_after_ms(20000);
    for (;;) {
        char *log = cluster_read_file(cluster_log_path(rs_cluster(), DEAD));
        int refused = log != NULL && strstr(log, "was removed from the cluster") != NULL;
        free(log);
        if (refused) {
            break;
        }
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("node %d started again was not refused within 20 s", DEAD);
        }
        rs_sleep_ms(200);
    }
    doc = rs_status_of(DEAD, &node);
    assert_string_equal(json_string_value(json_object_get(node, "State")), "DOWN");
    assert_int_equal(rs_json_int(node, "Replicas"), 0);
    json_decref(doc);
    assert_int_equal(sets_naming("removed", DEAD), 0);

    /* The removed node does not hold the rebalancer up: a new table on the
     * three nodes left is balanced, and the plan empties (the handovers
     * that even out primaries after the failovers made, then nothing;
     * a plan waiting on the removed node never would). */
    rs_create_rf3("after_remove", 8);
    assert_int_equal(sets_naming("after_remove", DEAD), 0);
    pmap_free(rs_wait_rebalanced("after_remove"));
    assert_int_equal(sets_naming("after_remove", DEAD), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remove_dead_node_makes_its_copies_anew),
    };
    return cmocka_run_group_tests(tests, setup, rs_group_teardown);
}
