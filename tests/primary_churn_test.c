/*
 * primary_churn_test: no acknowledged write goes missing from an item's
 * history while its partition's primary keeps changing, through failovers
 * and the rebalancer's handovers at once (docs/chaos.md, "Seen once, not
 * explained: an acknowledged write missing from the item's history"), on
 * one etcd member, a coordinator run with --balance-primaries 4 and three
 * real nodes with a fault directory:
 *  - a table of three copies and eight partitions with a stream (both
 *    images); sixteen writer threads, each with its own client and
 *    time-out (one 1.5 s, the others 5 s), put {Id: kK, V: v} with v = 1,
 *    2, ... on 32 keys, each key written by one thread, one put after the
 *    other, so every key sees hundreds of writes and most partitions have a
 *    put under way at any moment;
 *  - meanwhile, up to 24 rounds (45 s at most) of kill -9 and restart of
 *    the node leading most sets. Each kill fails the node's sets over
 *    (epoch + 1); back and joined, the rebalancer hands primaryships back
 *    to it (epoch + 1 again), while the two primaries handing over ship
 *    their records 600 ms late (the slow-ship fault switch, as a slow
 *    link), so writes they began before a step-down wait for their round
 *    across the take-over;
 *  - then every key's stream records, replayed in sequence order, are one
 *    chain (an INSERT first, then MODIFYs whose old image is the previous
 *    record's new image), in increasing versions, holding every
 *    acknowledged version exactly once (an uncertain one, a put that
 *    failed, at most once), ending at the item the table holds; the item
 *    is the key's last acknowledged version or a later uncertain one; the
 *    stream is gapless and the copies identical.
 * And a write in flight when its set falls below min-in-sync copies is not
 * acknowledged: with one follower of a one-partition table down, the
 * primary ships 600 ms late (slow-ship) while the other follower is killed;
 * its DOWN, which the coordinator applies even below min-in-sync, lands
 * before the round leaves, with no follower left to wait for. Before
 * round_end counted the copies holding the record, that put was
 * acknowledged from the primary alone (chaos_rf3_test, seed 704817032,
 * lost it with that copy's disk).
 *
 * A write acknowledged and then lost (overwritten by a later one, its
 * record never made) shows as a missing version in a chain that is
 * otherwise consistent: invariant 1 of the chaos checker cannot see it.
 * Before node/logship_commit.c's written_in_epoch, the old primary shipped
 * such a round under its successor's epoch and had it acknowledged: three
 * runs in three failed ("k8: the acknowledged put of version 115 has no
 * stream record: the chain goes from version 114 to version 116").
 */
#include "testutil.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "../common/clock.h"
#include "replset_testutil.h"
#include "streamread.h"
#include "testmap.h"

#define TABLE "churn"
#define PARTS 8
#define NODES 3
#define KEYS 32
#define WRITERS 16
#define MAXVER 16384   /* versions per key; a writer stops a key there */
#define FAULT_MS 45000 /* the fault phase, at most */
#define MAX_ROUNDS 24  /* kills, at most */
#define WRITE_TAIL_MS 1500

enum { SENT_NONE = 0, SENT_ACKED = 1, SENT_UNCERTAIN = 2 };

/* What the writers did to one key. Written by its writer only, read by the
 * test thread after the writers stopped. */
typedef struct key_log {
    uint32_t last;                /* the last version sent */
    unsigned char st[MAXVER + 1]; /* st[v]: SENT_* */
} key_log;

static key_log g_keys[KEYS];

typedef struct writer {
    int idx;
    int timeout_ms;
    atomic_int *stop;
    long acked, uncertain;
    long by_code[64]; /* failures by Lapse code */
    pthread_t thread;
} writer;

static void *write_loop(void *arg)
{
    writer *w = arg;
    lapse_client *c = NULL;
    lapse_error e = {0};
    if (lapse_connect_timeout(&c, cluster_coordinator_url(rs_cluster()), w->timeout_ms, &e) != 0) {
        return NULL;
    }
    while (!atomic_load(w->stop)) {
        for (int k = w->idx; k < KEYS && !atomic_load(w->stop); k += WRITERS) {
            key_log *kl = &g_keys[k];
            if (kl->last >= MAXVER) {
                continue;
            }
            uint32_t v = ++kl->last;
            lapse_item *it = item_json("{\"Id\":{\"S\":\"k%d\"},\"V\":{\"N\":\"%u\"}}", k, v);
            int rv = lapse_put(c, TABLE, it, NULL, &e);
            lapse_item_free(it);
            /* A failed call may still have been applied: a record left in
             * a primary's log, a time-out while the round was on the wire. */
            kl->st[v] = rv == 0 ? SENT_ACKED : SENT_UNCERTAIN;
            if (rv == 0) {
                w->acked++;
            } else {
                w->uncertain++;
                w->by_code[rv > 0 && rv < 64 ? rv : 0]++;
            }
        }
    }
    lapse_close(c);
    return NULL;
}

/* ============================== watching primaries ============================== */

/* Primary changes seen in the maps the test polled: a change whose former
 * primary is DOWN in the map that shows it counts as a failover, any other
 * as a handover (an epoch that moved by more than one between two polls
 * counts each step of it the same way). */
typedef struct watch {
    uint32_t primary[PARTS];
    uint64_t epoch[PARTS];
    long failovers, handovers;
} watch;

static void watch_map(watch *wt, const pmap *pm)
{
    const pmap_table *t = pmap_table_find(pm, TABLE);
    assert_non_null(t);
    for (uint32_t p = 0; p < PARTS; p++) {
        const pmap_replicas *r = pmap_part(t, p);
        if (wt->epoch[p] == 0) {
            wt->primary[p] = r->ids[0];
            wt->epoch[p] = r->epoch;
            continue;
        }
        if (r->epoch > wt->epoch[p]) {
            const pmap_node *old = pmap_node_find(pm, wt->primary[p]);
            long steps = (long)(r->epoch - wt->epoch[p]);
            if (old != NULL && old->state != PMAP_NODE_UP) {
                wt->failovers += steps;
            } else {
                wt->handovers += steps;
            }
            wt->primary[p] = r->ids[0];
            wt->epoch[p] = r->epoch;
        }
    }
}

/* The coordinator's map now, noted in wt (caller pmap_free). A fetch that
 * times out (the coordinator busy with a failover on a loaded machine) is
 * tried again, up to three times. */
static pmap *watch_fetch(watch *wt)
{
    char err[256] = "";
    pmap *pm = NULL;
    for (int attempt = 0; pm == NULL && attempt < 3; attempt++) {
        if (nodecall_map(cluster_coordinator_url(rs_cluster()), &pm, err, sizeof(err)) != 0) {
            pm = NULL;
        }
    }
    if (pm == NULL) {
        fail_msg("GetPartitionMap, three times: %s", err);
    }
    watch_map(wt, pm);
    return pm;
}

/* The node leading most of TABLE's sets in pm. */
static uint32_t busiest_primary(const pmap *pm)
{
    const pmap_table *t = pmap_table_find(pm, TABLE);
    int led[NODES + 1] = {0};
    uint32_t best = 1;
    for (uint32_t p = 0; p < PARTS; p++) {
        uint32_t id = pmap_part(t, p)->ids[0];
        if (id >= 1 && id <= NODES && ++led[id] > led[best]) {
            best = id;
        }
    }
    return best;
}

/* Waits (up to 15 s) until the map shows node id in state want, noting
 * every map polled meanwhile in wt. */
static void wait_node(watch *wt, uint32_t id, pmap_node_state want)
{
    clock_mono deadline = clock_mono_after_ms(15000);
    for (;;) {
        pmap *pm = watch_fetch(wt);
        const pmap_node *n = pmap_node_find(pm, id);
        int done = n != NULL && n->state == want;
        pmap_free(pm);
        if (done) {
            return;
        }
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("node %u is not %s after 15 s", (unsigned)id,
                     want == PMAP_NODE_UP ? "UP" : "DOWN");
        }
        rs_sleep_ms(20);
    }
}

/* Waits up to timeout_ms until node id is in sync in a set of TABLE it
 * does not lead (back after a restart: a set it joined may be handed to it
 * at the next mover pass). Returns whether it is. */
static int wait_joined(watch *wt, uint32_t id, long timeout_ms)
{
    clock_mono deadline = clock_mono_after_ms(timeout_ms);
    do {
        pmap *pm = watch_fetch(wt);
        const pmap_table *t = pmap_table_find(pm, TABLE);
        int any = 0;
        for (uint32_t p = 0; p < PARTS && !any; p++) {
            const pmap_replicas *r = pmap_part(t, p);
            int i = pmap_replicas_index(r, id);
            any = i > 0 && pmap_in_sync(r, (uint32_t)i);
        }
        pmap_free(pm);
        if (any) {
            return 1;
        }
        rs_sleep_ms(10);
    } while (clock_mono_remaining_ms(deadline) > 0);
    return 0;
}

/* ============================== the checks ============================== */

static uint32_t version_of(const lapse_item *it)
{
    const char *v = it != NULL ? lapse_item_get_n(it, "V") : NULL;
    return v != NULL ? (uint32_t)strtoul(v, NULL, 10) : 0;
}

/* Key k's item as the table holds it: its version (0: no item). */
static uint32_t final_version(int k)
{
    lapse_error e = {0};
    lapse_item *key = item_json("{\"Id\":{\"S\":\"k%d\"}}", k), *got = NULL;
    assert_lapse_ok(lapse_get(rs_client(), TABLE, key, &got, &e), &e);
    uint32_t v = version_of(got);
    lapse_item_free(got);
    lapse_item_free(key);
    return v;
}

/* Key k's records in sr, in sequence order, into out (at most cap); returns
 * how many. */
static size_t key_records(const streamread *sr, int k, const lapse_stream_record **out, size_t cap)
{
    char id[16];
    snprintf(id, sizeof(id), "k%d", k);
    size_t n = 0;
    for (size_t i = 0; i < sr->n; i++) {
        const char *s = lapse_item_get_s(sr->r[i]->keys, "Id");
        if (s != NULL && strcmp(s, id) == 0) {
            assert_true(n < cap);
            out[n++] = sr->r[i];
        }
    }
    return n;
}

/* Replays key k's records against what its writer did and the item the
 * table holds (version final); fails the test at the first problem. */
static void check_key(int k, const lapse_stream_record **r, size_t n, uint32_t final)
{
    const key_log *kl = &g_keys[k];
    static unsigned char seen[MAXVER + 1];
    memset(seen, 0, sizeof(seen));
    const lapse_item *cur = NULL;
    uint32_t prev_v = 0;
    for (size_t i = 0; i < n; i++) {
        const lapse_stream_record *x = r[i];
        uint32_t v = version_of(x->new_image);
        if (i > 0 && x->shard != r[0]->shard) {
            fail_msg("k%d: records in shards %u and %u", k, r[0]->shard, x->shard);
        }
        if (x->event == LAPSE_STREAM_REMOVE || v == 0) {
            fail_msg("k%d: record %u-%" PRIu64 " is a REMOVE or has no version (never deleted)", k,
                     x->shard, x->sequence_number);
        }
        int chained = x->event == LAPSE_STREAM_INSERT ? cur == NULL && x->old_image == NULL
                                                      : cur != NULL && x->old_image != NULL &&
                                                            lapse_item_equal(x->old_image, cur);
        if (!chained) {
            fail_msg("k%d: record %u-%" PRIu64 " (%s, old version %u, new %u) does not follow "
                     "the record before it (new version %u): a record is missing or repeated",
                     k, x->shard, x->sequence_number,
                     x->event == LAPSE_STREAM_INSERT ? "INSERT" : "MODIFY",
                     version_of(x->old_image), v, prev_v);
        }
        if (v > kl->last || kl->st[v] == SENT_NONE) {
            fail_msg("k%d: record %u-%" PRIu64 " of version %u, never sent (last sent %u)", k,
                     x->shard, x->sequence_number, v, kl->last);
        }
        if (seen[v]++) {
            fail_msg("k%d: version %u (%s) has two records, the second %u-%" PRIu64, k, v,
                     kl->st[v] == SENT_ACKED ? "acknowledged" : "uncertain", x->shard,
                     x->sequence_number);
        }
        if (v <= prev_v) {
            fail_msg("k%d: record %u-%" PRIu64 " of version %u after version %u: applied out of "
                     "the order the writer sent them",
                     k, x->shard, x->sequence_number, v, prev_v);
        }
        cur = x->new_image;
        prev_v = v;
    }
    uint32_t last_acked = 0;
    for (uint32_t v = 1; v <= kl->last; v++) {
        if (kl->st[v] == SENT_ACKED) {
            last_acked = v;
            if (!seen[v]) {
                /* Name what surrounds the lost write: the records before
                 * and after it in the chain. */
                uint32_t before = 0, after = 0;
                uint64_t seq_after = 0;
                for (size_t i = 0; i < n; i++) {
                    uint32_t x = version_of(r[i]->new_image);
                    if (x < v) {
                        before = x;
                    } else if (after == 0) {
                        after = x;
                        seq_after = r[i]->sequence_number;
                    }
                }
                fail_msg("k%d: the acknowledged put of version %u has no stream record: the "
                         "chain goes from version %u to version %u (record %u-%" PRIu64 ")",
                         k, v, before, after, n > 0 ? r[0]->shard : 0, seq_after);
            }
        }
    }
    if (final < last_acked || final > kl->last || kl->st[final] == SENT_NONE) {
        fail_msg("k%d: the table holds version %u; the last acknowledged is %u, the last sent %u",
                 k, final, last_acked, kl->last);
    }
    if (prev_v != final) {
        fail_msg("k%d: the stream ends at version %u, the table holds %u", k, prev_v, final);
    }
}

/* Reads the whole stream (waiting up to 30 s for every key's last record to
 * arrive: the outbox ships after the writes) and checks every key. Returns
 * the records read. */
static size_t check_histories(void)
{
    uint32_t final[KEYS];
    for (int k = 0; k < KEYS; k++) {
        final[k] = final_version(k);
    }
    static const lapse_stream_record *recs[KEYS * (MAXVER + 1)];
    streamread sr = {0};
    lapse_error e = {0};
    clock_mono deadline = clock_mono_after_ms(30000);
    for (;;) {
        assert_lapse_ok(streamread_more(rs_client(), TABLE, &sr, &e), &e);
        int behind = -1;
        for (int k = 0; k < KEYS && behind < 0; k++) {
            size_t n = key_records(&sr, k, recs, KEYS * (MAXVER + 1));
            uint32_t end = n > 0 ? version_of(recs[n - 1]->new_image) : 0;
            behind = end != final[k] ? k : -1;
        }
        if (behind < 0 || clock_mono_remaining_ms(deadline) == 0) {
            break;
        }
        rs_sleep_ms(250);
    }
    char why[256];
    if (streamread_gap(&sr, 1, why, sizeof(why)) != 0) {
        fail_msg("%s", why);
    }
    for (int k = 0; k < KEYS; k++) {
        size_t n = key_records(&sr, k, recs, KEYS * (MAXVER + 1));
        check_key(k, recs, n, final[k]);
    }
    size_t total = sr.n;
    streamread_free(&sr);
    return total;
}

/* ============================== the test ============================== */

static int setup(void **state)
{
    (void)state;
    return rs_group_setup_faults_coordinator_args("--balance-primaries 4");
}

static void test_acknowledged_writes_survive_primary_churn(void **state)
{
    (void)state;
    lapse_error e = {0};
    lapse_table_def d = {.name = TABLE,
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .partitions = PARTS,
                         .replication = 3,
                         .stream = 1};
    assert_lapse_ok(lapse_create_table(rs_client(), &d, &e), &e);
    pmap_free(rs_wait_rebalanced(TABLE));

    int timeouts_ms[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        timeouts_ms[i] = i == 0 ? 1500 : 5000; /* one writer gives up early: uncertain puts */
    }
    static writer w[WRITERS];
    atomic_int stop = 0;
    memset(g_keys, 0, sizeof(g_keys));
    for (int i = 0; i < WRITERS; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].idx = i;
        w[i].timeout_ms = timeouts_ms[i];
        w[i].stop = &stop;
        assert_int_equal(pthread_create(&w[i].thread, NULL, write_loop, &w[i]), 0);
    }

    watch wt = {0};
    pmap_free(watch_fetch(&wt));
    rs_sleep_ms(500);
    clock_mono end = clock_mono_after_ms(FAULT_MS);
    int rounds = 0, stalls = 0;
    for (; rounds < MAX_ROUNDS && clock_mono_remaining_ms(end) > 0; rounds++) {
        /* The node leading most sets: its kill moves most primaryships,
         * and the rebalancer hands most back. */
        pmap *now = watch_fetch(&wt);
        uint32_t victim = busiest_primary(now);
        pmap_free(now);
        assert_int_equal(cluster_kill(rs_cluster(), (int)victim, SIGKILL), 0);
        wait_node(&wt, victim, PMAP_NODE_DOWN);
        assert_int_equal(cluster_restart(rs_cluster(), (int)victim), 0);
        wait_node(&wt, victim, PMAP_NODE_UP);
        /* Back in its sets, the victim is handed primaryships back within
         * a mover pass or two of each join. Meanwhile the other two nodes,
         * the primaries handing over, ship their records 600 ms late: a
         * write begun before a step-down still waits for its round when
         * the successor takes over (a slow link does the same). */
        for (uint32_t n = 1; n <= NODES; n++) {
            if (n != victim) {
                rs_slow_ship((int)n, 1);
            }
        }
        wait_joined(&wt, victim, 2500);
        rs_sleep_ms(1500);
        for (uint32_t n = 1; n <= NODES; n++) {
            if (n != victim) {
                rs_slow_ship((int)n, 0);
            }
        }
        stalls++;
    }
    rs_sleep_ms(WRITE_TAIL_MS); /* writes go on after the last fault */
    atomic_store(&stop, 1);
    long acked = 0, uncertain = 0, by_code[64] = {0};
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(w[i].thread, NULL);
        acked += w[i].acked;
        uncertain += w[i].uncertain;
        for (int c = 0; c < 64; c++) {
            by_code[c] += w[i].by_code[c];
        }
    }
    pmap *pm = rs_wait_all_in_sync(TABLE);
    watch_map(&wt, pm);
    pmap_free(pm);
    char codes[256] = "";
    for (int c = 0; c < 64; c++) {
        if (by_code[c] > 0) {
            size_t at = strlen(codes);
            snprintf(codes + at, sizeof(codes) - at, " %s:%ld", lapse_strerror(c), by_code[c]);
        }
    }
    print_message("primary_churn_test: %d kills, %d slow-ship phases, %ld failovers, %ld "
                  "handovers, %ld puts acknowledged, %ld uncertain (%s)\n",
                  rounds, stalls, wt.failovers, wt.handovers, acked, uncertain,
                  codes[0] != '\0' ? codes + 1 : "none");
    assert_true(acked > 0);
    assert_true(wt.failovers > 0);

    size_t records = check_histories();
    uint64_t items = rs_wait_copies_match(TABLE, 20000);
    print_message("primary_churn_test: %zu stream records, %llu items, every history whole\n",
                  records, (unsigned long long)items);
}

static void test_no_ack_below_min_in_sync(void **state)
{
    (void)state;
    lapse_error e = {0};
    rs_create_rf3("minsync", 1);
    pmap *pm = rs_wait_all_in_sync("minsync");
    pmap_replicas r = pmap_table_find(pm, "minsync")->parts[0];
    pmap_free(pm);
    int primary = (int)r.ids[0], f1 = (int)r.ids[1], f2 = (int)r.ids[2];
    lapse_client *c = NULL;
    assert_lapse_ok(lapse_connect_timeout(&c, cluster_coordinator_url(rs_cluster()), 1500, &e), &e);
    lapse_item *it = item_json("{\"Id\":{\"S\":\"m\"},\"V\":{\"S\":\"two\"}}");
    assert_lapse_ok(lapse_put(c, "minsync", it, NULL, &e), &e); /* the route is known */
    lapse_item_free(it);
    /* One follower down: two copies in sync, writes go on. */
    assert_int_equal(cluster_kill(rs_cluster(), f1, SIGKILL), 0);
    rs_wait_state((uint32_t)f1, "DOWN");
    it = item_json("{\"Id\":{\"S\":\"m\"},\"V\":{\"S\":\"one down\"}}");
    assert_lapse_ok(lapse_put(c, "minsync", it, NULL, &e), &e);
    lapse_item_free(it);
    /* The other follower killed as a put begins, its round 600 ms late. */
    rs_slow_ship(primary, 1);
    assert_int_equal(cluster_kill(rs_cluster(), f2, SIGKILL), 0);
    it = item_json("{\"Id\":{\"S\":\"m\"},\"V\":{\"S\":\"alone\"}}");
    int rv = lapse_put(c, "minsync", it, NULL, &e);
    lapse_item_free(it);
    rs_slow_ship(primary, 0);
    if (rv == 0) {
        fail_msg("a put was acknowledged with node %d down and node %d killed: one copy of three",
                 f1, f2);
    }
    print_message("primary_churn_test: the put with one copy left was refused: %s\n", e.message);
    rs_wait_state((uint32_t)f2, "DOWN");
    lapse_close(c);
    assert_int_equal(cluster_restart(rs_cluster(), f1), 0);
    assert_int_equal(cluster_restart(rs_cluster(), f2), 0);
    assert_int_equal(cluster_wait_up(rs_cluster(), f1, 20000), 0);
    assert_int_equal(cluster_wait_up(rs_cluster(), f2, 20000), 0);
    pmap_free(rs_wait_all_in_sync("minsync"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acknowledged_writes_survive_primary_churn),
        cmocka_unit_test(test_no_ack_below_min_in_sync),
    };
    return cmocka_run_group_tests(tests, setup, rs_group_teardown);
}
