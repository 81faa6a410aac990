/*
 * replica_repair_test: replica sets repair themselves, on one etcd member,
 * a coordinator and three real nodes that keep only the last 16 records of
 * each partition's log (--replog-retain 16) and send snapshots at the
 * lowest CPU priority (--snapshot-nice 19: the primaries' logs say so).
 *
 * A follower that is UP but does not take its primary's records (a test
 * fault switch makes it refuse every ReplicateLog) leaves the in-sync sets
 * on its primaries' word (docs/replication.md, "Shrinking the in-sync
 * set"): writes go on, every one acknowledged, with no failover; a second
 * such follower is not dropped from a set that would keep fewer than two
 * copies in sync: those writes are refused. Both healed, they rejoin and
 * every copy ends equal.
 *
 * Replicas the log no longer reaches are rebuilt from snapshots
 * (docs/replication.md, "Snapshots and log trimming"):
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
 *
 * A primary restarted right after a round its followers did not confirm
 * sends them the record once back, with no write to come.
 *
 * A primary back on an empty data dir before its lease ran out, while no
 * coordinator looked, is failed over when the leader sees the new
 * incarnation in its registry entry: it never leads its sets empty, and no
 * acknowledged item is lost.
 */
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../etcd/etcd.h"
#include "../etcd/etcd_keys.h"
#include "etcd_members.h"
#include "replset_testutil.h"
#include "streamread.h"
#include "testmap.h"

#define PARTS 4
#define TABLE "snap"
#define CUT "cut"
#define OBX "obx"

static int group_setup(void **state)
{
    (void)state;
    return rs_group_setup_faults("--replog-retain 16 --snapshot-nice 19", 0);
}

/* Creates table name (S key Id) of one partition and rf copies, with a
 * stream when stream is set, or fails the test. */
static void create_one(const char *name, unsigned rf, int stream)
{
    lapse_table_def d = {.name = name,
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .partitions = 1,
                         .stream = stream,
                         .replication = rf};
    lapse_error e = {0};
    assert_lapse_ok(lapse_create_table(rs_client(), &d, &e), &e);
}

static int put_once(const char *table, int i, const char *v, lapse_error *e)
{
    lapse_item *it = item_json("{\"Id\":{\"S\":\"k%d\"},\"V\":{\"S\":\"%s\"}}", i, v);
    int rv = lapse_put(rs_client(), table, it, NULL, e);
    lapse_item_free(it);
    return rv;
}

static void test_unconfirming_follower_leaves_the_in_sync_set(void **state)
{
    (void)state;
    rs_create_rf3(CUT, PARTS);
    lapse_error e = {0};
    for (int i = 0; i < 20; i++) {
        assert_lapse_ok(put_once(CUT, i, "a", &e), &e);
    }
    pmap_free(rs_wait_all_in_sync(CUT));
    int followed = 0, led = 0;
    rs_follower_and_primary_sets(CUT, 3, &followed, &led);
    assert_true(followed > 0 && led > 0);

    /* Node 3 refuses its primaries' records: every write is acknowledged
     * all the same, node 3 leaves the sets it follows, and stays UP and
     * the primary of its own (no failover). */
    rs_refuse_replicate_log(3, 1);
    for (int i = 20; i < 120; i++) {
        assert_lapse_ok(put_once(CUT, i, "b", &e), &e);
    }
    int followed_now = 0, led_now = 0;
    rs_follower_and_primary_sets(CUT, 3, &followed_now, &led_now);
    assert_int_equal(followed_now, 0);
    assert_int_equal(led_now, led);

    /* Node 2 refuses too: node 1's sets would keep one copy in sync
     * without it, so it stays in them and their writes are refused; node
     * 3's sets drop node 2 and go on. */
    rs_refuse_replicate_log(2, 1);
    int acked = 120, refused = 0;
    lapse_set_timeout_ms(rs_client(), 1500); /* a refused put is retried until then */
    for (int i = 120; i < 144; i++) {
        lapse_error pe = {0};
        if (put_once(CUT, i, "c", &pe) == 0) {
            acked++;
        } else {
            assert_int_equal(pe.code, LAPSE_EUNAVAILABLE);
            refused++;
        }
    }
    lapse_set_timeout_ms(rs_client(), 5000);
    assert_true(refused > 0);
    assert_true(acked > 120);

    /* Healed, both rejoin every set and every copy is equal. */
    rs_refuse_replicate_log(2, 0);
    rs_refuse_replicate_log(3, 0);
    pmap_free(rs_wait_all_in_sync(CUT));
    uint64_t items = rs_assert_copies_match(CUT);
    assert_true(items >= (uint64_t)acked && items <= 144);
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

/* The most calls any snapshot that rebuilt node took, from the logs of
 * the other nodes (their "node N rebuilt from a snapshot ... K calls)"
 * lines); 0 when none did. */
static unsigned long most_snapshot_calls_to(int node)
{
    char mark[64];
    snprintf(mark, sizeof(mark), "node %d rebuilt from a snapshot", node);
    unsigned long most = 0;
    for (int i = 1; i <= 3; i++) {
        char *log = i == node ? NULL : cluster_read_file(cluster_log_path(rs_cluster(), i));
        for (const char *at = log; at != NULL && (at = strstr(at, mark)) != NULL; at++) {
            const char *eol = strchr(at, '\n');
            const char *ms = strstr(at, " ms, ");
            unsigned long calls = 0;
            if (ms != NULL && (eol == NULL || ms < eol) &&
                sscanf(ms, " ms, %lu calls", &calls) == 1 && calls > most) {
                most = calls;
            }
        }
        free(log);
    }
    return most;
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

/* Whether a node other than to logged a snapshot for node to sent at
 * nice (--snapshot-nice; fails the test if none did). */
static void assert_sent_at_nice(int to, int nice)
{
    char want[64];
    snprintf(want, sizeof(want), "the snapshot for node %d is sent at nice %d", to, nice);
    for (int i = 1; i <= 3; i++) {
        char *log = i != to ? cluster_read_file(cluster_log_path(rs_cluster(), i)) : NULL;
        int found = log != NULL && strstr(log, want) != NULL;
        free(log);
        if (found) {
            return;
        }
    }
    fail_msg("no primary logged \"%s\"", want);
}

static void test_replicas_behind_the_log_are_rebuilt(void **state)
{
    (void)state;
    cluster *c = rs_cluster();
    rs_create_rf3(TABLE, PARTS);
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
    assert_sent_at_nice(3, 19);

    /* Its data dir lost while it is down; rebuilt from snapshots of many
     * small calls each (a call's entries read while the two before are on
     * the wire and installed at once, resync.c), and whole all the same. */
    assert_int_equal(cluster_kill(c, 2, SIGKILL), 0);
    rs_wait_state(2, "DOWN");
    cluster_rm_rf(cluster_data_dir(c, 2));
    put_range(450, 500, "d");
    rs_small_snapshot_calls(1, 1);
    rs_small_snapshot_calls(3, 1);
    assert_int_equal(cluster_restart(c, 2), 0);
    rs_wait_state(2, "UP");
    put_range(500, 520, "e");
    pmap_free(rs_wait_all_in_sync(TABLE));
    rs_small_snapshot_calls(1, 0);
    rs_small_snapshot_calls(3, 0);
    assert_int_equal(rs_assert_copies_match(TABLE), 520);
    assert_rebuilt_from_snapshot(2);
    unsigned long calls = most_snapshot_calls_to(2);
    print_message("node 2's largest snapshot took %lu calls\n", calls);
    assert_true(calls >= 3);
}

/*
 * A change reaches the stream only once every in-sync copy holds the write
 * that made it (docs/replication.md, "The outbox on a replicated
 * partition"). Both followers of a one-partition table refuse their
 * primary's records: the first is dropped from the in-sync set, the second
 * cannot be (two copies must stay), so the next put is refused, though the
 * primary holds it in its store, log and outbox. Its change must not be
 * shipped: a failover to the follower that lacks it would take it back and
 * number the next change with its sequence number. Healed, the write
 * reaches the follower, and then its record reaches the stream, once.
 */
static void test_outbox_ships_only_what_every_copy_holds(void **state)
{
    (void)state;
    create_one(OBX, 3, 1);
    lapse_error e = {0};
    for (int i = 0; i < 10; i++) {
        assert_lapse_ok(put_once(OBX, i, "a", &e), &e);
    }
    streamread s = {0};
    assert_int_equal(rs_stream_until(OBX, &s, 10, 10000), 10);

    pmap *pm = rs_wait_all_in_sync(OBX);
    const pmap_replicas *r = &pmap_table_find(pm, OBX)->parts[0];
    assert_int_equal(r->n, 3);
    int f1 = (int)r->ids[1], f2 = (int)r->ids[2];
    pmap_free(pm);
    rs_refuse_replicate_log(f1, 1);
    rs_refuse_replicate_log(f2, 1);
    lapse_set_timeout_ms(rs_client(), 1500);
    lapse_error pe = {0};
    assert_int_not_equal(put_once(OBX, 10, "b", &pe), 0);
    assert_int_equal(pe.code, LAPSE_EUNAVAILABLE);
    lapse_set_timeout_ms(rs_client(), 5000);

    /* Past the shipper's rescan (1 s) and a retry's backoff: an
     * unconfirmed record would be on the stream by now. */
    rs_sleep_ms(2500);
    assert_int_equal(rs_stream_until(OBX, &s, 11, 0), 10);
    assert_int_equal(rs_stream_records_of(&s, "k10"), 0);

    rs_refuse_replicate_log(f1, 0);
    rs_refuse_replicate_log(f2, 0);
    assert_int_equal(rs_stream_until(OBX, &s, 11, 15000), 11);
    assert_int_equal(rs_stream_records_of(&s, "k10"), 1);
    char why[256];
    if (streamread_gap(&s, 1, why, sizeof(why)) != 0) {
        fail_msg("the stream has a gap: %s", why);
    }
    streamread_free(&s);
    pmap_free(rs_wait_all_in_sync(OBX));
    assert_int_equal(rs_assert_copies_match(OBX), 11);
}

/* A primary restarted (kill -9) right after a round its followers did not
 * confirm forgot that round: the record is in its log only, and a member
 * that lacks it stays in the in-sync set (dropping it would leave fewer
 * than min-in-sync copies). Back up, the primary sends its members the
 * record, with no write to come, and every copy ends equal. Without that
 * (chaos run 961956485) a copy missing the record stayed in sync for good.
 * At RF 2 no member leaves the set at all; at RF 3 one does and rejoins. */
static void restart_after_an_unconfirmed_round(const char *table, unsigned rf)
{
    create_one(table, rf, 0);
    lapse_error e = {0};
    for (int i = 0; i < 10; i++) {
        assert_lapse_ok(put_once(table, i, "a", &e), &e);
    }
    pmap *pm = rs_wait_all_in_sync(table);
    const pmap_replicas *r = &pmap_table_find(pm, table)->parts[0];
    assert_int_equal(r->n, rf);
    pmap_replicas before = *r;
    pmap_free(pm);

    for (uint32_t i = 1; i < before.n; i++) {
        rs_refuse_replicate_log((int)before.ids[i], 1);
    }
    lapse_set_timeout_ms(rs_client(), 1500);
    lapse_error pe = {0};
    assert_int_not_equal(put_once(table, 10, "b", &pe), 0);
    assert_int_equal(pe.code, LAPSE_EUNAVAILABLE);
    lapse_set_timeout_ms(rs_client(), 5000);

    /* Killed before it could send the record on, and back within its
     * lease: as by a supervisor that restarts it before the coordinator
     * leader looks, which would find its port closed and fail it over at
     * once (docs/replication.md, "Leases and fencing"). The leader is
     * stopped until the node listens again. */
    int primary = (int)before.ids[0];
    const int coord = cluster_coordinator_index(rs_cluster(), 0);
    assert_int_equal(cluster_kill(rs_cluster(), coord, SIGSTOP), 0);
    assert_int_equal(cluster_kill(rs_cluster(), primary, SIGKILL), 0);
    for (uint32_t i = 1; i < before.n; i++) {
        rs_refuse_replicate_log((int)before.ids[i], 0);
    }
    assert_int_equal(cluster_restart(rs_cluster(), primary), 0);
    int listening = 0;
    for (int i = 0; i < 600 && !listening; i++) {
        listening = rpc_probe(cluster_node_url(rs_cluster(), primary), 100) == RPC_PROBE_LISTENING;
        if (!listening) {
            rs_sleep_ms(50);
        }
    }
    assert_int_equal(cluster_kill(rs_cluster(), coord, SIGCONT), 0);
    assert_true(listening);

    pm = rs_wait_all_in_sync(table);
    r = &pmap_table_find(pm, table)->parts[0];
    if (r->ids[0] != before.ids[0] || pmap_epoch(r) != pmap_epoch(&before)) {
        fail_msg("table %s: the restart was not back within the lease: node %u leads at epoch "
                 "%llu, was node %u at %llu; the case under test did not happen",
                 table, (unsigned)r->ids[0], (unsigned long long)pmap_epoch(r),
                 (unsigned)before.ids[0], (unsigned long long)pmap_epoch(&before));
    }
    pmap_free(pm);
    assert_int_equal(rs_wait_copies_match(table, 10000), 11);
}

/* Replicas trim their copies of the outbox as their primary trims its own
 * (what every destination acked), so the outbox does not grow for ever on
 * the replicas of a table with a stream: each copy ends holding the last
 * records only, and none past what the primary acked. */
static void test_replica_outboxes_are_trimmed(void **state)
{
    (void)state;
    create_one("trim", 3, 1);
    lapse_error e = {0};
    for (int i = 0; i < 50; i++) {
        assert_lapse_ok(put_once("trim", i, "a", &e), &e);
    }
    pmap *pm = rs_wait_all_in_sync("trim");
    const pmap_table *t = pmap_table_find(pm, "trim");
    pmap_replicas r = t->parts[0];
    uint32_t table_id = t->schema.id;
    pmap_free(pm);
    /* The acks thread trims at most once a second after the acks; the next
     * round carries the mark to the replicas. */
    int trimmed = 0;
    rs_digest dg[PMAP_MAX_REPLICAS];
    for (int i = 50; i < 100 && !trimmed; i++) {
        rs_sleep_ms(200);
        assert_lapse_ok(put_once("trim", i, "b", &e), &e);
        trimmed = 1;
        for (uint32_t k = 0; k < r.n; k++) {
            dg[k] = rs_node_digest((int)r.ids[k], table_id, 0);
            trimmed &= dg[k].outbox_first > 40;
        }
    }
    for (uint32_t k = 0; k < r.n; k++) {
        print_message("node %u (%s): outbox records %llu..%llu\n", (unsigned)r.ids[k],
                      k == 0 ? "primary" : "replica", (unsigned long long)dg[k].outbox_first,
                      (unsigned long long)dg[k].outbox_last);
    }
    if (!trimmed) {
        fail_msg("the outboxes were not all trimmed past record 40 in 10 s");
    }

    /* The primary dies: a trimmed replica takes over and its shipper goes
     * on from the acks its copy recorded, with no gap in the stream and no
     * record shipped twice. */
    streamread s = {0};
    size_t total = (size_t)dg[0].outbox_last;
    assert_int_equal(rs_stream_until("trim", &s, total, 10000), total);
    assert_int_equal(cluster_kill(rs_cluster(), (int)r.ids[0], SIGKILL), 0);
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof(id), "k%d", 200 + i);
        rs_put_retrying("trim", id, "c");
    }
    assert_int_equal(rs_stream_until("trim", &s, total + 5, 15000), total + 5);
    char why[256];
    if (streamread_gap(&s, 0, why, sizeof(why)) != 0) {
        fail_msg("the stream has a gap: %s", why);
    }
    streamread_free(&s);
    pm = testmap_fetch(rs_cluster());
    uint32_t now = pmap_table_find(pm, "trim")->parts[0].ids[0];
    pmap_free(pm);
    assert_int_not_equal(now, r.ids[0]);
    FILE *f = fopen(cluster_log_path(rs_cluster(), (int)now), "r");
    assert_non_null(f);
    char line[1024];
    while (fgets(line, sizeof(line), f) != NULL) {
        /* This table's: another test's wiped node left gaps in others'. */
        if (strstr(line, "were trimmed before") != NULL && strstr(line, "\"trim\"") != NULL) {
            fail_msg("the new primary node %u found a gap in its outbox: %s", (unsigned)now, line);
        }
    }
    fclose(f);
    assert_int_equal(cluster_restart(rs_cluster(), (int)r.ids[0]), 0);
    pmap_free(rs_wait_all_in_sync("trim"));
}

/* A group-commit call (ReplicateLog with more) answers each part with its
 * own status: a part from a sender with no epoch is refused (EPERM), one
 * that is not records only (a pull) is invalid, and the call itself
 * succeeds; the node keeps serving. */
static void test_group_call_answers_each_part(void **state)
{
    (void)state;
    Lapse__ReplicateLogRequest part0 = LAPSE__REPLICATE_LOG_REQUEST__INIT;
    Lapse__ReplicateLogRequest part1 = LAPSE__REPLICATE_LOG_REQUEST__INIT;
    Lapse__ReplicateLogRequest part2 = LAPSE__REPLICATE_LOG_REQUEST__INIT;
    Lapse__ReplicateLogRequest *more[] = {&part1, &part2};
    part0.table_id = 1;
    part0.source_node = 2;
    part0.more = more;
    part0.n_more = 2;
    part2.table_id = 1; /* part0's partition again: one batch holds each once */
    part2.source_node = 2;
    part2.epoch = 1;
    part1.table_id = 1;
    part1.partition = 1;
    part1.source_node = 2;
    part1.epoch = 1;
    part1.pull = 1;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_REPLICATE_LOG;
    req.replicate_log = &part0;
    Lapse__Response *resp = NULL;
    char err[256] = "";
    assert_int_equal(rs_call(1, &req, &resp, err, sizeof(err)), 0);
    assert_int_equal(resp->body_case, LAPSE__RESPONSE__BODY_REPLICATE_LOG);
    const Lapse__ReplicateLogResponse *got = resp->replicate_log;
    assert_int_equal(got->status, LAPSE__STATUS__EPERM);
    assert_int_equal(got->n_more, 2);
    assert_int_equal(got->more[0]->status, LAPSE__STATUS__EINVAL);
    assert_non_null(strstr(got->more[0]->message, "more than records"));
    assert_int_equal(got->more[1]->status, LAPSE__STATUS__EINVAL);
    assert_non_null(strstr(got->more[1]->message, "repeats table 1 partition 0"));
    rpc_response_free(resp);
    rs_node_digest(1, 1, 0); /* still serving */
}

/* Creates table (one partition, three copies), puts k0..k19 and waits
 * until every copy is in sync; returns the set then. */
static pmap_replicas twenty_in_sync(const char *table)
{
    create_one(table, 3, 0);
    lapse_error e = {0};
    for (int i = 0; i < 20; i++) {
        assert_lapse_ok(put_once(table, i, "a", &e), &e);
    }
    pmap *pm = rs_wait_all_in_sync(table);
    pmap_replicas r = pmap_table_find(pm, table)->parts[0];
    pmap_free(pm);
    return r;
}

/* Fails unless k0..k19 of table read back (strongly consistent reads). */
static void assert_twenty_present(const char *table)
{
    for (int i = 0; i < 20; i++) {
        lapse_item *key = item_json("{\"Id\":{\"S\":\"k%d\"}}", i);
        lapse_item *got = NULL;
        lapse_error e = {0};
        assert_lapse_ok(lapse_get(rs_client(), table, key, &got, &e), &e);
        if (got == NULL) {
            fail_msg("table %s: acknowledged item k%d is gone", table, i);
        }
        lapse_item_free(got);
        lapse_item_free(key);
    }
}

/* The incarnation in node id's registry entry in etcd; 0 while it has no
 * key (or one with none). */
static uint64_t incarnation_of(int id)
{
    char err[512], key[128], url[256];
    etcd *ec = NULL;
    assert_int_equal(
        etcd_open(&ec, etcd_members_endpoints(cluster_etcd(rs_cluster())), 2000, err, sizeof(err)),
        0);
    snprintf(key, sizeof(key), "/lapse/test/nodes/%d", id);
    etcd_kv kv;
    uint64_t inc = 0;
    char zone[64];
    int rv = etcd_get(ec, key, &kv, NULL, err, sizeof(err));
    assert_true(rv == 0 || rv == LAPSE_ENOTFOUND);
    if (rv == 0) {
        assert_int_equal(etcd_keys_node_parse(kv.value, kv.value_len, url, sizeof(url), &inc, zone,
                                              sizeof(zone)),
                         0);
        assert_string_equal(url, cluster_node_url(rs_cluster(), id));
        etcd_kv_fini(&kv);
    }
    etcd_close(ec);
    return inc;
}

/* A primary killed, its data dir lost, and back on an empty one within its
 * lease, while the coordinator leader was stopped (as when it restarts
 * before any leader looks: a supervisor's quick restart, or a leader
 * failing over). Its map entry still names it primary and in sync; only its
 * new incarnation tells that it holds nothing. The leader fails it over as
 * it records the new lease: a follower that holds every item leads, and
 * the empty node is rebuilt from a snapshot. Without that (chaos run
 * 3878298) the empty node led its sets again at the same epoch: every
 * acknowledged item there read as absent. */
static void test_primary_back_on_an_empty_dir_is_failed_over(void **state)
{
    (void)state;
    const char *table = "wiped";
    pmap_replicas before = twenty_in_sync(table);
    pmap *pm = NULL;
    int primary = (int)before.ids[0];
    uint64_t inc = incarnation_of(primary);
    assert_true(inc != 0);

    const int coord = cluster_coordinator_index(rs_cluster(), 0);
    assert_int_equal(cluster_kill(rs_cluster(), coord, SIGSTOP), 0);
    assert_int_equal(cluster_kill(rs_cluster(), primary, SIGKILL), 0);
    cluster_rm_rf(cluster_data_dir(rs_cluster(), primary));
    assert_int_equal(cluster_restart(rs_cluster(), primary), 0);
    uint64_t now = 0;
    for (int i = 0; i < 300 && (now == 0 || now == inc); i++) {
        if ((now = incarnation_of(primary)) == 0 || now == inc) {
            rs_sleep_ms(50);
        }
    }
    assert_int_equal(cluster_kill(rs_cluster(), coord, SIGCONT), 0);
    if (now == 0 || now == inc) {
        fail_msg("node %d's registry entry shows no new incarnation (%016llx, was %016llx)",
                 primary, (unsigned long long)now, (unsigned long long)inc);
    }

    /* The leader records the new incarnation with its verdict. */
    int recorded = 0;
    for (int i = 0; i < 200 && !recorded; i++) {
        pm = testmap_fetch(rs_cluster());
        const pmap_node *n = pmap_node_find(pm, (uint32_t)primary);
        recorded = n != NULL && n->incarnation == now;
        pmap_free(pm);
        if (!recorded) {
            rs_sleep_ms(50);
        }
    }
    if (!recorded) {
        fail_msg("the map never recorded node %d's new incarnation %016llx", primary,
                 (unsigned long long)now);
    }
    pm = rs_wait_all_in_sync(table);
    const pmap_replicas *r = &pmap_table_find(pm, table)->parts[0];
    if (r->ids[0] == before.ids[0] || pmap_epoch(r) <= pmap_epoch(&before)) {
        fail_msg("table %s: node %u leads at epoch %llu (was node %u at %llu): the node back "
                 "on an empty dir was not failed over",
                 table, (unsigned)r->ids[0], (unsigned long long)pmap_epoch(r),
                 (unsigned)before.ids[0], (unsigned long long)pmap_epoch(&before));
    }
    pmap_free(pm);
    assert_twenty_present(table);
    assert_int_equal(rs_wait_copies_match(table, 10000), 20);
}

/* Waits until the set of table's partition 0 has a primary other than
 * not_id at an epoch above epoch; returns the map (caller frees). */
static pmap *wait_new_primary(const char *table, uint32_t not_id, uint64_t epoch)
{
    for (int i = 0; i < 300; i++) {
        pmap *pm = testmap_fetch(rs_cluster());
        const pmap_replicas *r = &pmap_table_find(pm, table)->parts[0];
        if (r->ids[0] != not_id && pmap_epoch(r) > epoch) {
            return pm;
        }
        pmap_free(pm);
        rs_sleep_ms(100);
    }
    fail_msg("table %s: node %u still leads at epoch %llu or below after 30 s", table,
             (unsigned)not_id, (unsigned long long)epoch);
    return NULL;
}

/* The primary is the only copy in sync (one follower DOWN, the other
 * DOWN then back but refusing its records, so it cannot rejoin) when its
 * data dir is lost. The follower that left the in-sync set last holds
 * every acknowledged write (no write is acknowledged with one copy in
 * sync): when the primary comes back empty, that follower takes over,
 * and no item is lost; the empty copy is rebuilt from it. Without that,
 * the empty node led the set again: every item read as absent, and the
 * others' copies were dropped on its word (chaos run 3878298, second
 * replay). */
static void test_last_copy_out_takes_over_from_an_empty_primary(void **state)
{
    (void)state;
    const char *table = "lastout";
    pmap_replicas before = twenty_in_sync(table);
    pmap *pm = NULL;
    int primary = (int)before.ids[0], a = (int)before.ids[1], b = (int)before.ids[2];

    assert_int_equal(cluster_kill(rs_cluster(), a, SIGKILL), 0);
    rs_wait_state((uint32_t)a, "DOWN");
    rs_refuse_replicate_log(b, 1);
    assert_int_equal(cluster_kill(rs_cluster(), b, SIGKILL), 0);
    rs_wait_state((uint32_t)b, "DOWN");
    pm = testmap_fetch(rs_cluster());
    const pmap_replicas *r = &pmap_table_find(pm, table)->parts[0];
    assert_int_equal(r->ids[0], (uint32_t)primary);
    assert_int_equal(r->in_sync, 1u);
    assert_int_equal(r->last_out, (uint32_t)b);
    pmap_free(pm);
    assert_int_equal(cluster_restart(rs_cluster(), b), 0); /* UP, but refusing */
    rs_wait_state((uint32_t)b, "UP");

    assert_int_equal(cluster_kill(rs_cluster(), primary, SIGKILL), 0);
    cluster_rm_rf(cluster_data_dir(rs_cluster(), primary));
    assert_int_equal(cluster_restart(rs_cluster(), primary), 0);
    pm = wait_new_primary(table, (uint32_t)primary, pmap_epoch(&before));
    r = &pmap_table_find(pm, table)->parts[0];
    assert_int_equal(r->ids[0], (uint32_t)b);
    pmap_free(pm);
    rs_refuse_replicate_log(b, 0);
    assert_twenty_present(table);
    assert_int_equal(cluster_restart(rs_cluster(), a), 0);
    pmap_free(rs_wait_all_in_sync(table));
    assert_int_equal(rs_wait_copies_match(table, 15000), 20);
}

static void test_restarted_primary_sends_what_it_forgot(void **state)
{
    (void)state;
    restart_after_an_unconfirmed_round("lost2", 2);
    restart_after_an_unconfirmed_round("lost3", 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unconfirming_follower_leaves_the_in_sync_set),
        cmocka_unit_test(test_replicas_behind_the_log_are_rebuilt),
        cmocka_unit_test(test_outbox_ships_only_what_every_copy_holds),
        cmocka_unit_test(test_restarted_primary_sends_what_it_forgot),
        cmocka_unit_test(test_primary_back_on_an_empty_dir_is_failed_over),
        cmocka_unit_test(test_last_copy_out_takes_over_from_an_empty_primary),
        cmocka_unit_test(test_group_call_answers_each_part),
        cmocka_unit_test(test_replica_outboxes_are_trimmed),
    };
    return cmocka_run_group_tests(tests, group_setup, rs_group_teardown);
}
