/*
 * coordinator_test.c: black-box test of lapse-coordinator. The real binary
 * runs as a separate process (fixture.h) and is driven over RPC with three
 * fake nodes. The tests run in order against one coordinator; each is named
 * after what it proves. Waits are bounded by a condition with a deadline,
 * never bare sleeps.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../common/clock.h"
#include "coordinator_testutil.h"

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */
/* ------------------------------------------------------------------------ */

/* Registration validates, returns the full map and bumps the version only
 * when something changed; heartbeats of unknown nodes answer ENOTFOUND. */
static void test_register_and_heartbeat(void **state)
{
    (void)state;
    char err[256];
    Lapse__Response *resp = NULL;
    assert_code(fixture_register_node(0, "tcp://127.0.0.1:1", &resp, err, sizeof(err)),
                LAPSE_EINVAL, err);
    rpc_response_free(resp);
    assert_code(fixture_register_node(1, "", &resp, err, sizeof(err)), LAPSE_EINVAL, err);
    rpc_response_free(resp);
    assert_code(fixture_heartbeat(1, 0, clock_wall_now().ms, &resp, err, sizeof(err)),
                LAPSE_ENOTFOUND, err);
    rpc_response_free(resp);

    uint64_t version = 0;
    for (uint32_t id = 1; id <= FIXTURE_NODES; id++) {
        assert_code(fixture_register_node(id, fx.node_url[id], &resp, err, sizeof(err)), 0, err);
        assert_int_equal(resp->body_case, LAPSE__RESPONSE__BODY_REGISTER_NODE);
        const Lapse__PartitionMap *m = resp->register_node->map;
        assert_non_null(m);
        assert_int_equal(m->n_nodes, id);
        assert_true(m->version > version);
        assert_int_equal(resp->pmap_version, m->version);
        version = m->version;
        rpc_response_free(resp);
    }
    /* Same id, same address, already UP: nothing changes. */
    assert_code(fixture_register_node(2, fx.node_url[2], &resp, err, sizeof(err)), 0, err);
    assert_int_equal(resp->pmap_version, version);
    rpc_response_free(resp);

    int64_t before = clock_wall_now().ms;
    assert_code(fixture_heartbeat(1, version, before, &resp, err, sizeof(err)), 0, err);
    assert_int_equal(resp->body_case, LAPSE__RESPONSE__BODY_HEARTBEAT);
    assert_int_equal(resp->heartbeat->pmap_version, version);
    assert_true(resp->heartbeat->clock_ms >= before - 1000 &&
                resp->heartbeat->clock_ms <= clock_wall_now().ms + 1000);
    rpc_response_free(resp);
    fixture_set_alive(FIXTURE_ALL_ALIVE);
}

/* A 64-partition table (the default) is spread 21/21/22 over three nodes. */
static void test_create_table_balanced(void **state)
{
    (void)state;
    char err[256];
    Lapse__Response *resp = NULL;
    Lapse__PartitionMap *before = fixture_get_map(&resp);
    uint64_t v0 = before->version;
    rpc_response_free(resp);

    assert_code(fixture_create_table("users", "UserName", NULL, 0, &resp, err, sizeof(err)), 0,
                err);
    assert_int_equal(resp->body_case, LAPSE__RESPONSE__BODY_CREATE_TABLE);
    const Lapse__TableMap *t = resp->create_table->table;
    assert_non_null(t);
    assert_string_equal(t->schema->name, "users");
    assert_true(t->schema->id >= 1);
    assert_int_equal(t->schema->partitions, 64);
    assert_int_equal(t->n_partitions, 64);
    assert_int_equal(resp->pmap_version, v0 + 1);
    int count[FIXTURE_NODES + 1] = {0};
    for (size_t i = 0; i < t->n_partitions; i++) {
        assert_int_equal(t->partitions[i]->n_node_ids, 1);
        uint32_t owner = t->partitions[i]->node_ids[0];
        assert_true(owner >= 1 && owner <= FIXTURE_NODES);
        count[owner]++;
    }
    for (int id = 1; id <= FIXTURE_NODES; id++) {
        if (count[id] != 21 && count[id] != 22) {
            fail_msg("node %d owns %d partitions, expected 21 or 22", id, count[id]);
        }
    }
    rpc_response_free(resp);
    /* The failed pushes to the fake nodes were logged, not returned. */
    assert_true(fixture_file_contains(fx.log_path, "push of map version"));
}

/* Bad schemas are EINVAL with a reason; an existing name is EEXISTS. */
static void test_create_table_errors(void **state)
{
    (void)state;
    char err[256];
    Lapse__Response *resp = NULL;
    assert_code(fixture_create_table("users", "UserName", NULL, 0, &resp, err, sizeof(err)),
                LAPSE_EEXISTS, err);
    assert_non_null(strstr(err, "users"));
    rpc_response_free(resp);
    assert_code(fixture_create_table("x", "k", NULL, 0, &resp, err, sizeof(err)), LAPSE_EINVAL,
                err);
    assert_true(err[0] != '\0');
    rpc_response_free(resp);
    assert_code(fixture_create_table("no_key", NULL, NULL, 0, &resp, err, sizeof(err)),
                LAPSE_EINVAL, err);
    rpc_response_free(resp);
    assert_code(fixture_create_table("three", "k", NULL, 3, &resp, err, sizeof(err)), LAPSE_EINVAL,
                err);
    rpc_response_free(resp);
    assert_code(fixture_create_table("bad name!", "k", NULL, 0, &resp, err, sizeof(err)),
                LAPSE_EINVAL, err);
    rpc_response_free(resp);
}

typedef struct race_arg {
    int rv;
    char err[256];
} race_arg;

static void *race_create(void *arg)
{
    race_arg *r = arg;
    Lapse__Response *resp = NULL;
    r->rv = fixture_create_table("race", "k", NULL, 4, &resp, r->err, sizeof(r->err));
    rpc_response_free(resp);
    return NULL;
}

/* Two concurrent creates of one name: exactly one wins. */
static void test_create_race(void **state)
{
    (void)state;
    race_arg a[2];
    pthread_t th[2];
    memset(a, 0, sizeof(a));
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, race_create, &a[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
    }
    int ok = (a[0].rv == 0) + (a[1].rv == 0);
    int exists = (a[0].rv == LAPSE_EEXISTS) + (a[1].rv == LAPSE_EEXISTS);
    if (ok != 1 || exists != 1) {
        fail_msg("race: %d (%s) and %d (%s)", a[0].rv, a[0].err, a[1].rv, a[1].err);
    }
    Lapse__Response *resp = NULL;
    char err[256];
    assert_code(fixture_delete_table("race", &resp, err, sizeof(err)), 0, err);
    rpc_response_free(resp);
}

/* Describe, list (sorted), delete, ENOTFOUND, and ids are never reused. */
static void test_describe_list_delete(void **state)
{
    (void)state;
    char err[256];
    Lapse__Response *resp = NULL;
    assert_code(fixture_create_table("orders", "Customer", "OrderNo", 8, &resp, err, sizeof(err)),
                0, err);
    uint32_t orders_id = resp->create_table->table->schema->id;
    rpc_response_free(resp);

    assert_code(fixture_describe("orders", &resp, err, sizeof(err)), 0, err);
    const Lapse__TableMap *t = resp->describe_table->table;
    assert_string_equal(t->schema->partition_key->name, "Customer");
    assert_non_null(t->schema->sort_key);
    assert_string_equal(t->schema->sort_key->name, "OrderNo");
    assert_int_equal(t->schema->sort_key->type, LAPSE__KEY_TYPE__KEY_N);
    assert_int_equal(t->n_partitions, 8);
    assert_int_equal(t->schema->id, orders_id);
    rpc_response_free(resp);

    Lapse__ListTablesRequest lb = LAPSE__LIST_TABLES_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_LIST_TABLES;
    req.list_tables = &lb;
    assert_code(fixture_call(&req, &resp, err, sizeof(err)), 0, err);
    assert_int_equal(resp->list_tables->n_names, 2);
    assert_string_equal(resp->list_tables->names[0], "orders");
    assert_string_equal(resp->list_tables->names[1], "users");
    rpc_response_free(resp);

    assert_code(fixture_delete_table("orders", &resp, err, sizeof(err)), 0, err);
    rpc_response_free(resp);
    assert_code(fixture_delete_table("orders", &resp, err, sizeof(err)), LAPSE_ENOTFOUND, err);
    rpc_response_free(resp);
    assert_code(fixture_describe("orders", &resp, err, sizeof(err)), LAPSE_ENOTFOUND, err);
    assert_true(resp->pmap_version > 0); /* set on errors too */
    rpc_response_free(resp);

    assert_code(fixture_create_table("orders", "Customer", NULL, 8, &resp, err, sizeof(err)), 0,
                err);
    assert_true(resp->create_table->table->schema->id > orders_id);
    rpc_response_free(resp);
    assert_code(fixture_delete_table("orders", &resp, err, sizeof(err)), 0, err);
    rpc_response_free(resp);
}

/* Node calls are refused with a clear message. */
static void test_node_call_refused(void **state)
{
    (void)state;
    char err[256];
    Lapse__Response *resp = NULL;
    Lapse__GetItemRequest body = LAPSE__GET_ITEM_REQUEST__INIT;
    body.table = "users";
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_GET_ITEM;
    req.get_item = &body;
    assert_code(fixture_call(&req, &resp, err, sizeof(err)), LAPSE_EINVAL, err);
    assert_non_null(strstr(err, "not a coordinator call"));
    rpc_response_free(resp);
}

/* NodeRemove and NodeDrain on a coordinator with its own catalog (no
 * etcd, where alone the mover runs) are refused (a drain accepted there
 * would never move a copy), and no node is marked removed. */
static void test_node_remove_needs_etcd(void **state)
{
    (void)state;
    char err[256];
    Lapse__Response *resp = NULL;
    Lapse__NodeRemoveRequest body = LAPSE__NODE_REMOVE_REQUEST__INIT;
    body.node = 1;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_NODE_REMOVE;
    req.node_remove = &body;
    assert_code(fixture_call(&req, &resp, err, sizeof(err)), LAPSE_ESTATE, err);
    assert_non_null(strstr(err, "needs the coordinators on etcd"));
    rpc_response_free(resp);
    assert_int_equal(fixture_node_state(1), LAPSE__NODE_STATE__NODE_UP);

    Lapse__NodeDrainRequest drain = LAPSE__NODE_DRAIN_REQUEST__INIT;
    drain.node = 1;
    req.body_case = LAPSE__REQUEST__BODY_NODE_DRAIN;
    req.node_drain = &drain;
    resp = NULL;
    assert_code(fixture_call(&req, &resp, err, sizeof(err)), LAPSE_ESTATE, err);
    assert_non_null(strstr(err, "node drain needs the coordinators on etcd"));
    rpc_response_free(resp);
}

/* ClusterStatus: every node UP with a recent heartbeat, the partitions it
 * owns, and the clock skew it reported. */
static void test_cluster_status(void **state)
{
    (void)state;
    char err[256];
    Lapse__Response *resp = NULL;
    /* Wait for a heartbeat round that carries the skew. */
    clock_mono deadline = clock_mono_after_ms(3000);
    const Lapse__NodeStatus *skewed = NULL;
    do {
        rpc_response_free(resp);
        assert_code(fixture_cluster_status(&resp, err, sizeof(err)), 0, err);
        skewed = fixture_find_status(resp->cluster_status, FIXTURE_SKEW_NODE);
        if (skewed != NULL && skewed->clock_skew_ms > FIXTURE_SKEW_MS / 2) {
            break;
        }
        clock_sleep_ms(50);
    } while (clock_mono_remaining_ms(deadline) > 0);
    const Lapse__ClusterStatusResponse *cs = resp->cluster_status;
    assert_int_equal(cs->tables, 1);
    assert_int_equal(cs->pmap_version, resp->pmap_version);
    assert_int_equal(cs->n_nodes, FIXTURE_NODES);
    uint32_t total = 0;
    for (size_t i = 0; i < cs->n_nodes; i++) {
        const Lapse__NodeStatus *ns = cs->nodes[i];
        assert_int_equal(ns->state, LAPSE__NODE_STATE__NODE_UP);
        assert_string_equal(ns->address, fx.node_url[ns->id]);
        assert_true(ns->last_heartbeat_age_ms >= 0 && ns->last_heartbeat_age_ms < 3000);
        assert_true(ns->partitions == 21 || ns->partitions == 22);
        total += ns->partitions;
        int64_t want = ns->id == FIXTURE_SKEW_NODE ? FIXTURE_SKEW_MS : 0;
        if (ns->clock_skew_ms < want - 1000 || ns->clock_skew_ms > want + 1000) {
            fail_msg("node %u skew %lld, expected about %lld", ns->id, (long long)ns->clock_skew_ms,
                     (long long)want);
        }
    }
    assert_int_equal(total, 64);
    rpc_response_free(resp);
}

/* Garbage bytes get an EPROTO reply and the coordinator keeps serving. */
static void test_garbage_frames(void **state)
{
    (void)state;
    static const uint8_t junk[][8] = {
        {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
        {0x0a, 0x7f, 0x01, 0x02, 0x03, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
        void *reply = NULL;
        size_t len = 0;
        char err[256];
        assert_code(rpc_call_raw(fx.cli, junk[i], sizeof(junk[i]), FIXTURE_CALL_TIMEOUT_MS, &reply,
                                 &len, err, sizeof(err)),
                    0, err);
        Lapse__Response *resp = lapse__response__unpack(NULL, len, reply);
        free(reply);
        assert_non_null(resp);
        assert_int_equal(resp->status, LAPSE__STATUS__EPROTO);
        lapse__response__free_unpacked(resp, NULL);
    }
    Lapse__Response *resp = NULL;
    char err[256];
    assert_code(fixture_cluster_status(&resp, err, sizeof(err)), 0, err);
    rpc_response_free(resp);
}

/* A node that stops heartbeating is DOWN within timeout + a membership
 * period (3.25 s), and UP again with its next heartbeat. */
static void test_silent_node_goes_down(void **state)
{
    (void)state;
    fixture_set_alive(FIXTURE_ALL_ALIVE & ~(1u << 3));
    int64_t last = fixture_last_heartbeat_ms(3);
    clock_mono deadline = clock_mono_after_ms(6000);
    while (fixture_node_state(3) != LAPSE__NODE_STATE__NODE_DOWN) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("node 3 still UP after 6 s of silence (log: %s)", fx.log_path);
        }
        clock_sleep_ms(50);
    }
    int64_t silent = clock_mono_now().ms - last;
    if (silent > 3500 + 1000) { /* 1 s of slack for loaded, sanitized runs */
        fail_msg("node 3 went DOWN only after %lld ms of silence", (long long)silent);
    }
    assert_true(silent >= 2900);
    assert_int_equal(fixture_node_state(1), LAPSE__NODE_STATE__NODE_UP);
    assert_int_equal(fixture_node_state(2), LAPSE__NODE_STATE__NODE_UP);
    assert_true(fixture_file_contains(fx.log_path, "is DOWN"));

    fixture_set_alive(FIXTURE_ALL_ALIVE);
    deadline = clock_mono_after_ms(3000);
    while (fixture_node_state(3) != LAPSE__NODE_STATE__NODE_UP) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("node 3 not UP again after heartbeats resumed");
        }
        clock_sleep_ms(50);
    }
}

/* kill -9 and restart on the same dir: the table, its assignment and the
 * map version survive; nodes start DOWN and come back with heartbeats. */
static void test_durable_across_kill9(void **state)
{
    (void)state;
    fixture_set_alive(0);
    Lapse__Response *before_resp = NULL;
    Lapse__PartitionMap *before = fixture_get_map(&before_resp);

    kill(fx.pid, SIGKILL);
    int status;
    assert_true(fixture_wait_exit(fx.pid, 10000, &status));
    fx.pid = 0;
    fixture_start_coordinator();

    Lapse__Response *resp = NULL;
    Lapse__PartitionMap *after = fixture_get_map(&resp);
    assert_int_equal(after->version, before->version);
    assert_int_equal(after->n_tables, 1);
    assert_int_equal(after->n_nodes, FIXTURE_NODES);
    for (size_t i = 0; i < after->n_nodes; i++) {
        assert_int_equal(after->nodes[i]->state, LAPSE__NODE_STATE__NODE_DOWN);
    }
    const Lapse__TableMap *ta = after->tables[0], *tb = before->tables[0];
    assert_string_equal(ta->schema->name, "users");
    assert_int_equal(ta->schema->id, tb->schema->id);
    assert_int_equal(ta->n_partitions, tb->n_partitions);
    for (size_t i = 0; i < ta->n_partitions; i++) {
        assert_int_equal(ta->partitions[i]->node_ids[0], tb->partitions[i]->node_ids[0]);
    }
    uint64_t version = after->version;
    rpc_response_free(resp);
    rpc_response_free(before_resp);

    /* No node is UP yet. */
    char err[256];
    assert_code(fixture_create_table("later", "k", NULL, 4, &resp, err, sizeof(err)),
                LAPSE_EUNAVAILABLE, err);
    assert_non_null(strstr(err, "no node is up"));
    rpc_response_free(resp);

    /* A known node's heartbeat brings it UP (no re-registration needed). */
    assert_code(fixture_heartbeat(1, version, clock_wall_now().ms, &resp, err, sizeof(err)), 0,
                err);
    assert_int_equal(resp->heartbeat->pmap_version, version + 1);
    rpc_response_free(resp);
    assert_int_equal(fixture_node_state(1), LAPSE__NODE_STATE__NODE_UP);
    fixture_set_alive(FIXTURE_ALL_ALIVE);
}

/* A second coordinator on a locked data dir exits 1 with a clear message. */
static void test_second_coordinator_same_dir(void **state)
{
    (void)state;
    char url[64], log[1200];
    snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", freeport_loopback());
    snprintf(log, sizeof(log), "%s/second.log", fx.run_dir);
    const char *args[] = {"--listen", url, "--data", fx.data_dir, NULL};
    pid_t pid = fixture_spawn(log, args);
    int status = 0;
    if (!fixture_wait_exit(pid, 15000, &status)) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("a second coordinator on the same data dir kept running");
    }
    fixture_assert_no_sanitizer_report(log);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    if (!fixture_file_contains(log, "in use by another process")) {
        fail_msg("no clear message in %s", log);
    }
}

/* A port in use: exit 1, saying so. */
static void test_port_in_use(void **state)
{
    (void)state;
    char data[1200], log[1200];
    snprintf(data, sizeof(data), "%s/other-data", fx.run_dir);
    snprintf(log, sizeof(log), "%s/port.log", fx.run_dir);
    const char *args[] = {"--listen", fx.url, "--data", data, NULL};
    pid_t pid = fixture_spawn(log, args);
    int status = 0;
    if (!fixture_wait_exit(pid, 15000, &status)) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("a coordinator on a used port kept running");
    }
    fixture_assert_no_sanitizer_report(log);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    if (!fixture_file_contains(log, "cannot listen on")) {
        fail_msg("no clear message in %s", log);
    }
}

/* Flags: bad or unknown ones exit 2 with a message; --help exits 0;
 * an unusable data dir, etcd endpoint list or cluster name exits 1. */
static void test_flags(void **state)
{
    (void)state;
    struct {
        const char *args[8];
        int code;
        const char *says;
    } cases[] = {
        {{"--bogus", NULL}, 2, "unknown flag"},
        {{"--listen", fx.url, NULL}, 2, "--data DIR (or --etcd URLs) is required"},
        {{"--data", fx.data_dir, "--etcd", "http://127.0.0.1:1", NULL}, 2, "exclude each other"},
        {{"--data", fx.data_dir, "--import-catalog", fx.data_dir, NULL}, 2, "need --etcd"},
        {{"--etcd", "", NULL}, 2, "wants its members' URLs"},
        {{"--etcd", "https://127.0.0.1:1", NULL}, 1, "is not http://HOST:PORT"},
        {{"--etcd", "http://127.0.0.1:1", "--cluster-name", "a/b", NULL}, 1, "cluster name"},
        {{"--data", fx.data_dir, "--heartbeat-timeout-ms", "soon", NULL}, 2, "milliseconds"},
        {{"--data", fx.data_dir, "--log-level", "loud", NULL}, 2, "--log-level"},
        {{"--data", fx.data_dir, "--default-replication", "4", NULL}, 2, "wants 1, 2 or 3"},
        {{"--data", fx.data_dir, "--default-replication", "", NULL}, 2, "wants 1, 2 or 3"},
        {{"--data", fx.data_dir, "--max-concurrent-moves", "0", NULL}, 2, "from 1 to 64"},
        {{"--data", fx.data_dir, "--max-concurrent-moves", "4x", NULL}, 2, "from 1 to 64"},
        {{"--data", fx.data_dir, "--balance-primaries", "-1", NULL}, 2, "from 0 to 64"},
        {{"--data", fx.data_dir, "extra", NULL}, 2, "unexpected argument"},
        {{"--data", NULL}, 2, "needs a value"},
        {{"--help", NULL}, 0, "usage:"},
        {{"--data", "/proc/no/such/dir", NULL}, 1, "cannot create data dir"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char log[1200];
        snprintf(log, sizeof(log), "%s/flags-%zu.log", fx.run_dir, i);
        pid_t pid = fixture_spawn(log, cases[i].args);
        int status = 0;
        if (!fixture_wait_exit(pid, 10000, &status)) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fail_msg("case %zu (%s) kept running", i, cases[i].args[0]);
        }
        fixture_assert_no_sanitizer_report(log);
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status) != cases[i].code || !fixture_file_contains(log, cases[i].says)) {
            fail_msg("case %zu (%s): exit %d, expected %d saying '%s' (see %s)", i,
                     cases[i].args[0], WEXITSTATUS(status), cases[i].code, cases[i].says, log);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_and_heartbeat),
        cmocka_unit_test(test_create_table_balanced),
        cmocka_unit_test(test_create_table_errors),
        cmocka_unit_test(test_create_race),
        cmocka_unit_test(test_describe_list_delete),
        cmocka_unit_test(test_node_call_refused),
        cmocka_unit_test(test_node_remove_needs_etcd),
        cmocka_unit_test(test_cluster_status),
        cmocka_unit_test(test_garbage_frames),
        cmocka_unit_test(test_silent_node_goes_down),
        cmocka_unit_test(test_durable_across_kill9),
        cmocka_unit_test(test_second_coordinator_same_dir),
        cmocka_unit_test(test_port_in_use),
        cmocka_unit_test(test_flags),
    };
    return cmocka_run_group_tests(tests, fixture_setup, fixture_teardown);
}
