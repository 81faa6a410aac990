/*
 * derived_move_test: the copies of GSI partitions and stream shards move
 * off leaving nodes like base copies do (docs/replication.md, "Moving GSI
 * and stream copies"), on one etcd member, a coordinator and four real
 * nodes, with a three-copy table of a GSI and a stream:
 *  - node V is drained while items are put: NodeDrain counts its GSI and
 *    stream copies (DerivedCopiesLeft) down to none; meanwhile GSI queries
 *    through liblapse never miss an item put two seconds before (a copy is
 *    read only once filled); then no list names V or a joining copy, each
 *    has three copies (cluster-status listed the moves while they ran,
 *    none after), every copy asked on its node holds every entry and
 *    record (the copies' digests equal), the stream read through liblapse
 *    is whole and gapless, and V's former GSI copies leave its disk, though
 *    V was killed -9 before it dropped them and started again;
 *  - V's drain stopped, the rebalancer moves GSI and stream copies back
 *    to it until every node holds within one of the others' count, every
 *    copy whole;
 *  - node W is killed (kill -9) and removed: its copies are made anew on
 *    the other nodes from the surviving ones (the shards from another copy,
 *    the GSI from the items), with the same checks.
 * The nodes' refill passes are slowed (the slow-refill fault switch: each
 * holds the map it began under 1.5 s), so new copies arrive while a pass
 * runs under an older map. With a new copy's missed records not noted
 * (node/newcopy.c), or with such a pass dropping the marks of a table that
 * a newer map gave new stream shard copies (node/refill.c; chaos seed
 * 960797834), the copies differ and the test fails.
 */
#include "testutil.h"

#include <jansson.h>
#include <signal.h>
#include <string.h>

#include "../common/clock.h"
#include "derived_testutil.h"
#include "move_testutil.h"
#include "nodecall.h"
#include "replset_testutil.h"
#include "testmap.h"

#define PARTS 8
#define GROUPS 4
#define FIRST 80   /* items put before the moves */
#define PER_STEP 4 /* items put per poll during a move */
#define MAX_ITEMS 4000

static const dt_table table = {"moved", "ByGrp", 4, GROUPS};

/* Items put so far, and when each was acknowledged. */
static int nput;
static int64_t put_ms[MAX_ITEMS];

static int setup(void **state)
{
    (void)state;
    return rs_group_setup_faults_nodes(4);
}

static void put_more(int n)
{
    assert_true(nput + n <= MAX_ITEMS);
    dt_put_range(&table, nput, nput + n);
    int64_t now = clock_mono_now().ms;
    for (int i = nput; i < nput + n; i++) {
        put_ms[i] = now;
    }
    nput += n;
}

/* Copies of GSI partitions and stream shards of the table node id holds,
 * and whether a list has a copy joining. */
static uint32_t derived_held(uint32_t id, int *joining)
{
    pmap *pm = testmap_fetch(rs_cluster());
    const pmap_table *t = pmap_table_find(pm, table.name);
    assert_non_null(t);
    uint32_t n = 0;
    *joining = 0;
    for (uint32_t q = 0; q < table.gsi_parts; q++) {
        n += pmap_replicas_index(pmap_gsi_part(t, 0, q), id) >= 0;
        *joining |= pmap_gsi_part(t, 0, q)->joining != 0;
    }
    for (uint32_t p = 0; p < PARTS; p++) {
        n += pmap_replicas_index(pmap_stream_shard(t, p), id) >= 0;
        *joining |= pmap_stream_shard(t, p)->joining != 0;
    }
    pmap_free(pm);
    return n;
}

/* Every GSI query through liblapse shows at least the items of its group
 * acknowledged two seconds ago (a copy filled, or being fed, holds them;
 * one read before it is filled does not). */
static void assert_queries_whole(void)
{
    int64_t before = clock_mono_now().ms - 2000;
    for (int g = 0; g < GROUPS; g++) {
        size_t floor = 0;
        for (int i = g; i < nput; i += GROUPS) {
            floor += put_ms[i] <= before;
        }
        char pk[32];
        snprintf(pk, sizeof(pk), "{\"S\":\"g%d\"}", g);
        lapse_query_opts o = {.partition_key_json = pk};
        lapse_page *page = NULL;
        lapse_error e = {0};
        if (lapse_query_index(rs_client(), table.name, table.gsi, &o, &page, &e) != 0) {
            continue; /* a copy that left answers no more: the client moves on */
        }
        size_t n = lapse_page_count(page);
        lapse_page_free(page);
        if (n < floor) {
            fail_msg("GSI query of g%d during a move: %zu items, %zu were put 2 s before", g, n,
                     floor);
        }
    }
}

/* GSI and stream moves cluster-status listed (its "Moves", "Kind"). */
static size_t status_derived_moves(void)
{
    char *js = NULL;
    lapse_error e = {0};
    int rv = lapse_cluster_status(rs_client(), &js, &e);
    json_t *doc = rs_json_answer("cluster-status", rv, 0, js, &e), *mv;
    size_t i, n = 0;
    json_array_foreach(json_object_get(doc, "Moves"), i, mv)
    {
        n += json_object_get(mv, "Kind") != NULL;
    }
    json_decref(doc);
    return n;
}

/* Polls node's drain or removal (remove 1) until it holds no copy,
 * putting items and querying meanwhile. Returns the largest
 * DerivedCopiesLeft seen. */
static json_int_t follow(uint32_t node, int remove)
{
    clock_mono deadline = clock_mono_after_ms(90000);
    json_int_t most = 0;
    size_t listed = 0;
    for (;;) {
        json_t *d = remove ? mv_remove(node, 0) : mv_drain(node, 0, 0);
        json_int_t base = rs_json_int(d, "BaseCopiesLeft");
        json_int_t derived = rs_json_int(d, "DerivedCopiesLeft");
        json_decref(d);
        most = derived > most ? derived : most;
        if (base == 0 && derived == 0) {
            /* cluster-status showed them while they ran, none after */
            assert_true(listed > 0);
            assert_int_equal(status_derived_moves(), 0);
            return most;
        }
        listed += status_derived_moves();
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("node %u still holds %lld base and %lld GSI/stream copies after 90 s",
                     (unsigned)node, (long long)base, (long long)derived);
        }
        put_more(PER_STEP);
        assert_queries_whole();
        rs_sleep_ms(200);
    }
}

/* After a move off node id: no list names it or has a copy joining, and
 * every copy, and liblapse, hold every item. */
static void assert_moved_off(uint32_t id)
{
    int joining = 1;
    for (int i = 0; i < 100 && joining; i++) {
        assert_int_equal(derived_held(id, &joining), 0);
        if (joining) {
            rs_sleep_ms(100);
        }
    }
    assert_false(joining);
    dt_wait_copies_hold(&table, 3, (size_t)(nput / GROUPS), (size_t)nput, 30000);
    char why[512] = "";
    if (!dt_client_sees(&table, (size_t)(nput / GROUPS), (size_t)nput, why, sizeof(why))) {
        fail_msg("after the move off node %u: %s", (unsigned)id, why);
    }
}

/* A client of node id, and the ids of the table and its GSI. */
static rpc_client *gsi_node(uint32_t id, uint32_t *tid, uint32_t *index_id)
{
    pmap *pm = testmap_fetch(rs_cluster());
    const pmap_table *t = pmap_table_find(pm, table.name);
    *tid = t->schema.id;
    *index_id = t->schema.gsi[0].id;
    pmap_free(pm);
    char err[256];
    rpc_client *c = NULL;
    assert_int_equal(rpc_client_open(&c, cluster_node_url(rs_cluster(), (int)id), err, sizeof(err)),
                     0);
    return c;
}

/* How many of the table's GSI partitions gparts (bit q: partition q)
 * node id holds entries of now. */
static unsigned gsi_held_now(uint32_t id, unsigned gparts)
{
    uint32_t tid = 0, index_id = 0;
    rpc_client *c = gsi_node(id, &tid, &index_id);
    char err[256];
    unsigned n = 0;
    for (uint32_t q = 0; q < table.gsi_parts; q++) {
        nodecall_digest d = {0};
        if ((gparts >> q & 1u) &&
            nodecall_gsi_digest(c, tid, index_id, q, &d, err, sizeof(err)) == 0) {
            n += d.items > 0;
        }
    }
    rpc_client_close(c);
    return n;
}

/* Waits (up to 30 s) until node id holds no entry of the table's GSI
 * partitions gparts (bit q: partition q), its former copies. */
static void wait_gsi_dropped(uint32_t id, unsigned gparts)
{
    uint32_t tid = 0, index_id = 0;
    rpc_client *c = gsi_node(id, &tid, &index_id);
    char err[256];
    for (uint32_t q = 0; q < table.gsi_parts; q++) {
        nodecall_digest d = {0};
        clock_mono deadline = clock_mono_after_ms(30000);
        while (
            (gparts >> q & 1u) &&
            (nodecall_gsi_digest(c, tid, index_id, q, &d, err, sizeof(err)) != 0 || d.items > 0)) {
            if (clock_mono_remaining_ms(deadline) == 0) {
                fail_msg("node %u still holds %llu entries of GSI partition %u 30 s after its "
                         "copy left",
                         (unsigned)id, (unsigned long long)d.items, (unsigned)q);
            }
            rs_sleep_ms(200);
        }
    }
    rpc_client_close(c);
}

/* Waits (up to 60 s) until no list has a copy joining and nodes 1-4 hold
 * counts of GSI and stream copies within one of each other (the
 * rebalancer's), the reads whole meanwhile. */
static void wait_derived_balanced(void)
{
    clock_mono deadline = clock_mono_after_ms(60000);
    for (;;) {
        uint32_t lo = UINT32_MAX, hi = 0;
        int any_joining = 0;
        for (uint32_t id = 1; id <= 4; id++) {
            int joining = 0;
            uint32_t n = derived_held(id, &joining);
            any_joining |= joining;
            lo = n < lo ? n : lo;
            hi = n > hi ? n : hi;
        }
        if (!any_joining && hi <= lo + 1) {
            return;
        }
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("GSI and stream copies not balanced after 60 s: %u to %u per node%s",
                     (unsigned)lo, (unsigned)hi, any_joining ? ", copies joining" : "");
        }
        assert_queries_whole();
        rs_sleep_ms(250);
    }
}

/* The node (not skip) holding most GSI and stream copies; *gparts gets
 * the GSI partitions it holds (bit per partition). */
static uint32_t fullest(uint32_t skip, unsigned *gparts)
{
    uint32_t best = 0, most = 0;
    for (uint32_t id = 1; id <= 4; id++) {
        int joining = 0;
        uint32_t n = derived_held(id, &joining);
        if (id != skip && n > most) {
            best = id;
            most = n;
        }
    }
    pmap *pm = testmap_fetch(rs_cluster());
    const pmap_table *t = pmap_table_find(pm, table.name);
    *gparts = 0;
    for (uint32_t q = 0; q < table.gsi_parts; q++) {
        *gparts |= (pmap_replicas_index(pmap_gsi_part(t, 0, q), best) >= 0 ? 1u : 0u) << q;
    }
    pmap_free(pm);
    assert_true(most > 0);
    return best;
}

static void test_gsi_and_stream_copies_move(void **state)
{
    (void)state;
    dt_create(&table, PARTS);
    put_more(FIRST);
    dt_wait_copies_hold(&table, 3, FIRST / GROUPS, FIRST, 15000);
    /* Every refill pass from now on holds its map 1.5 s before it looks at
     * the copies, so moves land while a pass runs under the map before. */
    for (int i = 1; i <= 4; i++) {
        rs_slow_refill(i, 1);
    }

    /* Drain V under writes. */
    unsigned gparts = 0;
    uint32_t v = fullest(0, &gparts);
    int joining = 0;
    uint32_t held = derived_held(v, &joining);
    json_t *d = mv_drain(v, 0, 0);
    assert_int_equal(rs_json_int(d, "DerivedCopiesLeft"), (json_int_t)held);
    assert_int_equal(rs_json_int(d, "OtherCopies"), 0);
    json_decref(d);
    json_int_t most = follow(v, 0);
    print_message("derived_move_test: node %u drained of %u GSI and stream copies (%lld counted "
                  "at most) while %d items were put\n",
                  (unsigned)v, (unsigned)held, (long long)most, nput - FIRST);
    /* V dies at once, before it drops its former copies (3 s after the
     * map): back, it drops them anyway (copydrop_note_held). */
    unsigned still = gparts != 0 ? gsi_held_now(v, gparts) : 0;
    assert_int_equal(cluster_kill(rs_cluster(), (int)v, SIGKILL), 0);
    assert_int_equal(cluster_restart(rs_cluster(), (int)v), 0);
    rs_wait_state(v, "UP");
    print_message("derived_move_test: node %u killed holding %u former GSI copies, restarted\n",
                  (unsigned)v, still);
    assert_moved_off(v);
    if (gparts != 0) {
        wait_gsi_dropped(v, gparts);
    }

    /* V takes copies again, its share of the GSI and stream copies too;
     * then W dies and is removed. */
    json_decref(mv_drain(v, 1, 0));
    pmap_free(rs_wait_rebalanced(table.name));
    wait_derived_balanced();
    assert_true(derived_held(v, &joining) > 0);
    dt_wait_copies_hold(&table, 3, (size_t)(nput / GROUPS), (size_t)nput, 30000);
    uint32_t w = fullest(v, &gparts);
    assert_int_equal(cluster_kill(rs_cluster(), (int)w, SIGKILL), 0);
    rs_wait_state(w, "DOWN");
    int before = nput;
    most = follow(w, 1);
    print_message("derived_move_test: node %u removed; its %lld GSI and stream copies made anew "
                  "while %d items were put\n",
                  (unsigned)w, (long long)most, nput - before);
    assert_true(most > 0);
    assert_moved_off(w);
    rs_assert_copies_match(table.name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gsi_and_stream_copies_move),
    };
    return cmocka_run_group_tests(tests, setup, rs_group_teardown);
}
