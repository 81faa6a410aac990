/*
 * coordinator_failover_test: two coordinators on a real three-member etcd and
 * three nodes. kill -9 of the leading coordinator during a create-table and
 * during a TTL enable: another leads within seconds, the change is applied
 * exactly once, every node ends on the leader's map, and TTL deletes go on.
 * A leader stalled past its lease (SIGSTOP) and resumed writes nothing over
 * its successor's changes, and forwards what it is asked from the instant
 * it resumes. Losing one etcd member changes nothing; losing
 * quorum fails control-plane calls with an error naming etcd while item
 * calls go on, and everything resumes with quorum. A single coordinator's
 * catalog is imported into etcd once.
 */
#include "testutil.h"

#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>

#include "../common/clock.h"
#include "../etcd/etcd.h"
#include "../etcd/etcd_keys.h"
#include "etcd_members.h"
#include "nodecall.h"

static cluster *g_cluster;
static lapse_client *g_client; /* knows both coordinators */

static int group_setup(void **state)
{
    (void)state;
    cluster_options o = {.nodes = 3, .quiet = 1, .etcd = 3, .coordinators = 2};
    return cluster_start_client(&g_cluster, &o, &g_client);
}

static int group_teardown(void **state)
{
    (void)state;
    lapse_close(g_client);
    cluster_free(g_cluster, 1);
    return 0;
}

/* Parses the cluster status; asserts every node is UP and on the cluster's
 * map version. Returns whether they were (for waits). */
static int nodes_on_leader_map(void)
{
    char *js = NULL;
    lapse_error e;
    if (lapse_cluster_status(g_client, &js, &e) != 0) {
        return 0;
    }
    json_error_t jerr;
    json_t *root = json_loads(js, 0, &jerr);
    lapse_free(js);
    json_int_t version = json_integer_value(json_object_get(root, "PartitionMapVersion"));
    json_t *nodes = json_object_get(root, "Nodes");
    int ok = json_array_size(nodes) == 3;
    size_t i;
    json_t *n;
    json_array_foreach(nodes, i, n)
    {
        const char *st = json_string_value(json_object_get(n, "State"));
        ok = ok && st != NULL && strcmp(st, "UP") == 0 &&
             json_integer_value(json_object_get(n, "PartitionMapVersion")) == version;
    }
    json_decref(root);
    return ok;
}

static void wait_nodes_on_leader_map(void)
{
    clock_mono deadline = clock_mono_after_ms(15000);
    int on = 0;
    while (!(on = nodes_on_leader_map()) && clock_mono_remaining_ms(deadline) > 0) {
        clock_sleep_ms(100);
    }
    if (!on) {
        /* What each node's State and PartitionMapVersion were, to tell a
         * slow recovery from a stuck one when this fails. */
        char *js = NULL;
        lapse_error e;
        if (lapse_cluster_status(g_client, &js, &e) == 0) {
            fprintf(stderr, "cluster status at the deadline: %s\n", js);
            lapse_free(js);
        } else {
            fprintf(stderr, "cluster status at the deadline: %s\n", e.message);
        }
        fail_msg("the three nodes were not UP on the leader's map within 15 s");
    }
}

/* How many times name appears in list-tables. */
static int table_count(const char *name)
{
    char *js = NULL;
    lapse_error e;
    assert_lapse_ok(lapse_list_tables(g_client, &js, &e), &e);
    json_error_t jerr;
    json_t *root = json_loads(js, 0, &jerr);
    lapse_free(js);
    int count = 0;
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(root, "TableNames"), i, t)
    {
        count += strcmp(json_string_value(t), name) == 0;
    }
    json_decref(root);
    return count;
}

static void create_table(const char *name, int *rv_out)
{
    lapse_table_def d = {
        .name = name, .partition_key = "Id", .partition_key_type = 'S', .partitions = 8};
    lapse_error e;
    *rv_out = lapse_create_table(g_client, &d, &e);
}

/* Creates name until the cluster says it exists: an attempt cut off by a
 * failover may or may not have committed, and a retry tells which. */
static void create_until_exists(const char *name)
{
    clock_mono deadline = clock_mono_after_ms(20000);
    int rv;
    do {
        create_table(name, &rv);
        if (rv == 0 || rv == LAPSE_EEXISTS) {
            return;
        }
        clock_sleep_ms(100);
    } while (clock_mono_remaining_ms(deadline) > 0);
    fail_msg("create-table %s kept failing: %s", name, lapse_strerror(rv));
}

/* Puts and reads back one item per partition's worth of keys. */
static void items_work(const char *table)
{
    lapse_error e;
    for (int i = 0; i < 32; i++) {
        lapse_item *it = item_json("{\"Id\":{\"S\":\"k%d\"},\"V\":{\"N\":\"%d\"}}", i, i);
        assert_lapse_ok(lapse_put(g_client, table, it, NULL, &e), &e);
        lapse_item_free(it);
        lapse_item *key = item_json("{\"Id\":{\"S\":\"k%d\"}}", i);
        lapse_item *got = NULL;
        assert_lapse_ok(lapse_get(g_client, table, key, &got, &e), &e);
        assert_non_null(got);
        lapse_item_free(got);
        lapse_item_free(key);
    }
}

typedef struct create_call {
    const char *name;
    int rv;
} create_call;

static void *create_main(void *arg)
{
    create_call *cc = arg;
    create_table(cc->name, &cc->rv);
    return NULL;
}

static void test_leader_kill_during_create_table(void **state)
{
    (void)state;
    /* The kill lands before, while and after the call reaches the leader. */
    const int delays_ms[] = {0, 2, 5};
    for (int round = 0; round < 3; round++) {
        char during[32], after[32];
        snprintf(during, sizeof(during), "DuringFailover%d", round);
        snprintf(after, sizeof(after), "AfterFailover%d", round);
        int leader = cluster_leader(g_cluster, -1, 10000);
        assert_true(leader >= 0);
        create_call cc = {.name = during};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, create_main, &cc), 0);
        clock_sleep_ms(delays_ms[round]);
        clock_mono killed = clock_mono_now();
        assert_int_equal(cluster_kill(g_cluster, leader, SIGKILL), 0);

        /* Another coordinator leads, and the next change goes through. */
        int next = cluster_leader(g_cluster, leader, 10000);
        assert_true(next >= 0);
        int64_t takeover_ms = clock_mono_now().ms - killed.ms;
        pthread_join(t, NULL);
        fprintf(stderr, "round %d: new leader after %lld ms (the call cut off: %s)\n", round,
                (long long)takeover_ms, lapse_strerror(cc.rv));
        create_until_exists(during);
        assert_int_equal(table_count(during), 1);
        create_until_exists(after);
        assert_int_equal(table_count(after), 1);
        wait_nodes_on_leader_map();
        items_work(during);
        items_work(after);
        assert_int_equal(cluster_restart(g_cluster, leader), 0);
    }
}

/* Polls describe-ttl until table's status is want and every node reported
 * the config version applied. */
static void wait_ttl_enabled(const char *table)
{
    clock_mono deadline = clock_mono_after_ms(20000);
    int ok = 0;
    while (!ok && clock_mono_remaining_ms(deadline) > 0) {
        char *js = NULL;
        lapse_error e;
        if (lapse_describe_ttl(g_client, table, &js, &e) == 0) {
            json_error_t jerr;
            json_t *root = json_loads(js, 0, &jerr);
            const char *st = json_string_value(json_object_get(
                json_object_get(root, "TimeToLiveDescription"), "TimeToLiveStatus"));
            ok = st != NULL && strcmp(st, "ENABLED") == 0;
            json_decref(root);
            lapse_free(js);
        }
        if (!ok) {
            clock_sleep_ms(100);
        }
    }
    assert_true(ok);
}

static void test_leader_kill_during_ttl_enable(void **state)
{
    (void)state;
    create_until_exists("TtlFailover");
    wait_nodes_on_leader_map();
    lapse_error e;
    /* Items due in 2 s. */
    int64_t due = clock_wall_now().ms / 1000 + 2;
    for (int i = 0; i < 20; i++) {
        lapse_item *it =
            item_json("{\"Id\":{\"S\":\"t%d\"},\"Exp\":{\"N\":\"%lld\"}}", i, (long long)due);
        assert_lapse_ok(lapse_put(g_client, "TtlFailover", it, NULL, &e), &e);
        lapse_item_free(it);
    }
    int leader = cluster_leader(g_cluster, -1, 10000);
    assert_true(leader >= 0);
    lapse_ttl_spec spec = {.action = LAPSE_TTL_ENABLE, .attribute = "Exp"};
    int rv = lapse_update_ttl(g_client, "TtlFailover", &spec, NULL, &e);
    assert_int_equal(cluster_kill(g_cluster, leader, SIGKILL), 0);
    fprintf(stderr, "enable before the kill: %s\n", lapse_strerror(rv));
    /* Once, whatever the first call's fate: an enabled table refuses a
     * second enable (ESTATE), an unapplied one takes it. */
    clock_mono deadline = clock_mono_after_ms(20000);
    while (rv != 0 && rv != LAPSE_ESTATE && clock_mono_remaining_ms(deadline) > 0) {
        rv = lapse_update_ttl(g_client, "TtlFailover", &spec, NULL, &e);
        if (rv != 0 && rv != LAPSE_ESTATE) {
            clock_sleep_ms(100);
        }
    }
    assert_true(rv == 0 || rv == LAPSE_ESTATE);
    wait_ttl_enabled("TtlFailover");
    wait_nodes_on_leader_map();
    /* TTL deletes continue: every item goes. */
    deadline = clock_mono_after_ms(20000);
    int left = 20;
    while (left > 0 && clock_mono_remaining_ms(deadline) > 0) {
        left = 0;
        for (int i = 0; i < 20; i++) {
            lapse_item *key = item_json("{\"Id\":{\"S\":\"t%d\"}}", i);
            lapse_item *got = NULL;
            assert_lapse_ok(lapse_get(g_client, "TtlFailover", key, &got, &e), &e);
            left += got != NULL;
            lapse_item_free(got);
            lapse_item_free(key);
        }
        if (left > 0) {
            clock_sleep_ms(200);
        }
    }
    assert_int_equal(left, 0);
}

/* A describe sent to one coordinator, answered on a thread of its own. */
typedef struct describe_call {
    lapse_client *c;
    const char *table;
    int rv;
    lapse_error e;
} describe_call;

static void *describe_main(void *arg)
{
    describe_call *d = arg;
    char *js = NULL;
    d->rv = lapse_describe_table(d->c, d->table, &js, &d->e);
    lapse_free(js);
    return NULL;
}

static void test_stalled_leader_writes_nothing(void **state)
{
    (void)state;
    int stalled = cluster_leader(g_cluster, -1, 10000);
    assert_true(stalled >= 0);
    lapse_client *direct = NULL; /* this coordinator alone */
    lapse_error e;
    assert_lapse_ok(lapse_connect(&direct, cluster_url(g_cluster, stalled), &e), &e);
    lapse_set_timeout_ms(direct, 30000);
    assert_int_equal(cluster_kill(g_cluster, stalled, SIGSTOP), 0);
    /* Past its 2 s lease another leads and changes the map. */
    int next = cluster_leader(g_cluster, stalled, 10000);
    assert_true(next >= 0);
    create_until_exists("WhileStalled");
    /* A call waits in the stalled one's socket for it to resume. Its
     * handler runs at once then, well before the leader thread learns the
     * lease is gone: it must forward, not answer from the old map (which
     * has no WhileStalled). */
    describe_call d = {direct, "WhileStalled", -1, {0}};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, describe_main, &d), 0);
    clock_sleep_ms(300); /* the call is sent */
    assert_int_equal(cluster_kill(g_cluster, stalled, SIGCONT), 0);
    pthread_join(th, NULL);
    if (d.rv != 0) {
        fail_msg("the resumed coordinator answered from its old map: %s", d.e.message);
    }
    lapse_close(direct);
    /* Resumed, it notices; its old state (without WhileStalled) is never
     * written back over its successor's. */
    clock_mono deadline = clock_mono_after_ms(10000);
    int noticed = 0;
    while (!noticed && clock_mono_remaining_ms(deadline) > 0) {
        FILE *f = fopen(cluster_log_path(g_cluster, stalled), "r");
        char line[1024];
        while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
            noticed = noticed || strstr(line, "no longer leading") != NULL;
        }
        if (f != NULL) {
            fclose(f);
        }
        clock_sleep_ms(50);
    }
    assert_true(noticed);
    create_until_exists("AfterStall");
    assert_int_equal(table_count("WhileStalled"), 1);
    assert_int_equal(table_count("AfterStall"), 1);
    wait_nodes_on_leader_map();
    items_work("WhileStalled");
}

/* A ReplicaJoin for a member already in sync changes nothing, so no save
 * fences its answer: the leader asks etcd first. After the map's key moved
 * behind its back (as a successor's commit moves it while a leader's lease
 * runs out), the "yes" it would give from its own map is refused instead,
 * and it leads again only after loading the catalog anew. */
static void test_unchanged_join_is_confirmed_by_etcd(void **state)
{
    (void)state;
    lapse_table_def d = {.name = "JoinConfirm",
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .partitions = 2,
                         .replication = 3};
    lapse_error e;
    assert_lapse_ok(lapse_create_table(g_client, &d, &e), &e);
    wait_nodes_on_leader_map();
    int leader = cluster_leader(g_cluster, -1, 10000);
    assert_true(leader >= 0);
    const char *url = cluster_url(g_cluster, leader);
    char err[512];
    pmap *pm = NULL;
    assert_int_equal(nodecall_map(url, &pm, err, sizeof(err)), 0);
    const pmap_table *t = pmap_table_find(pm, "JoinConfirm");
    assert_non_null(t);
    const pmap_replicas *r = &t->parts[0];
    assert_int_equal(r->n, 3);
    nodecall_join j = {t->schema.id, 0, r->ids[0], pmap_epoch(r), r->ids[1], r->changes};
    uint64_t version = 0;
    if (nodecall_replica_join(url, &j, &version, err, sizeof(err)) != 0) {
        fail_msg("a join of an in-sync member was refused: %s", err);
    }
    assert_int_equal(version, pm->version);

    /* The same bytes put back: only the key's revision moves. */
    etcd *ec = NULL;
    etcd_keys keys;
    etcd_kv kv;
    assert_int_equal(etcd_keys_init(&keys, "test", err, sizeof(err)), 0);
    assert_int_equal(
        etcd_open(&ec, etcd_members_endpoints(cluster_etcd(g_cluster)), 3000, err, sizeof(err)), 0);
    assert_int_equal(etcd_get(ec, keys.pmap, &kv, NULL, err, sizeof(err)), 0);
    assert_int_equal(etcd_put(ec, keys.pmap, kv.value, kv.value_len, 0, NULL, err, sizeof(err)), 0);
    etcd_kv_fini(&kv);
    etcd_close(ec);
    int rv = nodecall_replica_join(url, &j, &version, err, sizeof(err));
    if (rv == 0) {
        fail_msg("a leader whose map etcd no longer holds said yes from map version %llu",
                 (unsigned long long)version);
    }
    pmap_free(pm);
    /* It (or the other) leads again on the catalog as etcd has it. */
    create_until_exists("AfterConfirm");
    wait_nodes_on_leader_map();
    items_work("AfterConfirm");
}

static void test_etcd_member_loss_and_quorum_loss(void **state)
{
    (void)state;
    etcd_members *m = cluster_etcd(g_cluster);
    /* One member down: nothing changes. */
    assert_int_equal(etcd_members_kill(m, 0, SIGKILL), 0);
    create_until_exists("OneMemberDown");
    assert_int_equal(table_count("OneMemberDown"), 1);
    wait_nodes_on_leader_map();
    items_work("OneMemberDown");

    /* Quorum lost: item calls go on; control-plane changes fail, saying
     * etcd, within a bounded time, never hang. */
    assert_int_equal(etcd_members_kill(m, 1, SIGKILL), 0);
    items_work("OneMemberDown");
    lapse_table_def d = {
        .name = "NoQuorum", .partition_key = "Id", .partition_key_type = 'S', .partitions = 8};
    lapse_error e;
    clock_mono t0 = clock_mono_now();
    int rv = lapse_create_table(g_client, &d, &e);
    assert_int_not_equal(rv, 0);
    fprintf(stderr, "create-table without quorum: %s: %s (%lld ms)\n", lapse_strerror(rv),
            e.message, (long long)(clock_mono_now().ms - t0.ms));
    assert_non_null(strstr(e.message, "etcd"));
    assert_true(clock_mono_now().ms - t0.ms < 15000);
    items_work("OneMemberDown");

    /* Quorum back: everything resumes. */
    assert_int_equal(etcd_members_restart(m, 0, 15000), 0);
    assert_int_equal(etcd_members_restart(m, 1, 15000), 0);
    create_until_exists("NoQuorum");
    assert_int_equal(table_count("NoQuorum"), 1);
    wait_nodes_on_leader_map();
    items_work("NoQuorum");
}

/* After each test, whatever it left: every coordinator running (and not
 * stopped) and every etcd member up. */
static int restore(void **state)
{
    (void)state;
    for (int k = 0; k < cluster_coordinators(g_cluster); k++) {
        int idx = cluster_coordinator_index(g_cluster, k);
        if (cluster_pid(g_cluster, idx) > 0) {
            cluster_kill(g_cluster, idx, SIGCONT);
        } else if (cluster_restart(g_cluster, idx) != 0) {
            return -1;
        }
    }
    etcd_members *m = cluster_etcd(g_cluster);
    for (int i = 0; i < etcd_members_count(m); i++) {
        if (etcd_members_pid(m, i) == 0 && etcd_members_restart(m, i, 15000) != 0) {
            return -1;
        }
    }
    return 0;
}

extern char **environ;

/* Starts a coordinator of cluster "imported" on g_cluster's etcd importing
 * the local catalog in dir; its log goes to log. Returns its pid. */
static pid_t spawn_importer(const char *url, const char *dir, const char *log)
{
    char bin[600];
    const char *bin_dir = getenv("LAPSE_BIN_DIR");
    snprintf(bin, sizeof(bin), "%s/lapse-coordinator", bin_dir != NULL ? bin_dir : "build/bin");
    char *argv[] = {bin,
                    "--listen",
                    (char *)url,
                    "--etcd",
                    (char *)etcd_members_endpoints(cluster_etcd(g_cluster)),
                    "--cluster-name",
                    "imported",
                    "--import-catalog",
                    (char *)dir,
                    NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = 0;
    assert_int_equal(posix_spawn(&pid, bin, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

/* The tables the coordinator at url lists, as list-tables' JSON. */
static char *tables_at(const char *url)
{
    lapse_client *cl = NULL;
    lapse_error e;
    char *js = NULL;
    clock_mono deadline = clock_mono_after_ms(15000);
    while (clock_mono_remaining_ms(deadline) > 0) {
        if (cl == NULL && lapse_connect_timeout(&cl, url, 1000, &e) != 0) {
            cl = NULL;
        }
        if (cl != NULL && lapse_list_tables(cl, &js, &e) == 0) {
            break;
        }
        clock_sleep_ms(100);
    }
    lapse_close(cl);
    return js;
}

static void stop(pid_t pid)
{
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* A single coordinator's catalog (--data) moves into etcd once with
 * --import-catalog; a second import leaves the cluster's catalog alone. */
static void test_import_catalog(void **state)
{
    (void)state;
    cluster *old = start_cluster(1, NULL);
    lapse_client *cl = connect_client(old);
    lapse_table_def d = {
        .name = "Imported", .partition_key = "Id", .partition_key_type = 'S', .partitions = 4};
    lapse_error e;
    assert_lapse_ok(lapse_create_table(cl, &d, &e), &e);
    lapse_close(cl);
    char dir[700], log[700], url[64];
    snprintf(dir, sizeof(dir), "%s/coordinator", cluster_run_dir(old));
    snprintf(log, sizeof(log), "%s/importer.log", cluster_run_dir(old));
    snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", cluster_free_port());
    assert_int_equal(cluster_kill(old, 0, SIGTERM), 0); /* frees the catalog's lock */

    pid_t pid = spawn_importer(url, dir, log);
    char *js = tables_at(url);
    assert_non_null(js);
    assert_non_null(strstr(js, "\"Imported\""));
    lapse_free(js);
    stop(pid);
    /* Again: the cluster has a catalog now, so nothing is imported. */
    pid = spawn_importer(url, dir, log);
    js = tables_at(url);
    assert_non_null(js);
    assert_string_equal(js, "{\"TableNames\":[\"Imported\"]}");
    lapse_free(js);
    stop(pid);
    FILE *f = fopen(log, "r");
    char line[1024];
    int imported = 0, skipped = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        imported += strstr(line, "imported the catalog") != NULL;
        skipped += strstr(line, "already has a catalog") != NULL;
    }
    if (f != NULL) {
        fclose(f);
    }
    assert_int_equal(imported, 1);
    assert_int_equal(skipped, 1);
    cluster_free(old, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_leader_kill_during_create_table, restore),
        cmocka_unit_test_teardown(test_leader_kill_during_ttl_enable, restore),
        cmocka_unit_test_teardown(test_stalled_leader_writes_nothing, restore),
        cmocka_unit_test_teardown(test_unchanged_join_is_confirmed_by_etcd, restore),
        cmocka_unit_test_teardown(test_etcd_member_loss_and_quorum_loss, restore),
        cmocka_unit_test_teardown(test_import_catalog, restore),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
