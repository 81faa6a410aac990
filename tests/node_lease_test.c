/*
 * node_lease_test: node liveness by etcd lease, on a real three-member etcd
 * with two coordinators and three nodes. A node holds a lease on
 * /lapse/<cluster>/nodes/<id>: after kill -9 the leader finds the node's
 * port closed and revokes the lease, and the node is DOWN; a clean stop revokes
 * it before the process exits; a node stalled past its lease (SIGSTOP) goes
 * DOWN and comes back UP with a new lease on SIGCONT; the leader that takes
 * over judges liveness from the same keys. With every coordinator down, a
 * node restarted meanwhile learns the map from etcd and the time from its
 * peers, so its TTL scanners delete what falls due, and a new CLI process
 * gets its map from the nodes named in its map cache. A client fails at
 * once, naming the node, on a partition whose node the map says is DOWN.
 */
#include "testutil.h"

#include <jansson.h>
#include <signal.h>
#include <unistd.h>

#include "../common/clock.h"
#include "../etcd/etcd.h"
#include "../etcd/etcd_keys.h"
#include "../rpc/rpc.h"
#include "etcd_members.h"

#define WAIT_MS 15000 /* bound of every wait below: a lease is 2 s */

static cluster *g_cluster;
static lapse_client *g_client;
static etcd *g_etcd;

static int group_setup(void **state)
{
    (void)state;
    cluster_options o = {.nodes = 3, .quiet = 1, .etcd = 3, .coordinators = 2};
    char err[512];
    if (cluster_start_client(&g_cluster, &o, &g_client) != 0 ||
        etcd_open(&g_etcd, etcd_members_endpoints(cluster_etcd(g_cluster)), 2000, err,
                  sizeof(err)) != 0) {
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    etcd_close(g_etcd);
    lapse_close(g_client);
    cluster_free(g_cluster, 1);
    return 0;
}

/* Node id's state in the leader's cluster status: "UP", "DOWN", or "" when
 * the status cannot be read. */
static const char *node_state(uint32_t id)
{
    static char state[16];
    return cluster_node_state(g_client, id, state, sizeof(state));
}

/* Waits until node id is in state want; returns the ms it took or -1. */
static int64_t wait_state(uint32_t id, const char *want)
{
    clock_mono start = clock_mono_now();
    clock_mono deadline = clock_mono_after_ms(WAIT_MS);
    while (strcmp(node_state(id), want) != 0) {
        if (clock_mono_remaining_ms(deadline) <= 0) {
            return -1;
        }
        clock_sleep_ms(50);
    }
    return clock_mono_now().ms - start.ms;
}

/* Whether node id's key is in etcd; its lease in *lease. */
static int has_key(uint32_t id, int64_t *lease)
{
    char key[128], err[512];
    snprintf(key, sizeof(key), "/lapse/test/nodes/%u", id);
    etcd_kv kv;
    int rv = etcd_get(g_etcd, key, &kv, NULL, err, sizeof(err));
    assert_true(rv == 0 || rv == LAPSE_ENOTFOUND);
    if (rv != 0) {
        return 0;
    }
    if (lease != NULL) {
        *lease = kv.lease;
    }
    char url[256];
    char zone[64];
    uint64_t incarnation = 0;
    assert_int_equal(etcd_keys_node_parse(kv.value, kv.value_len, url, sizeof(url), &incarnation,
                                          zone, sizeof(zone)),
                     0);
    assert_string_equal(url, cluster_node_url(g_cluster, (int)id));
    assert_true(incarnation != 0);
    etcd_kv_fini(&kv);
    return 1;
}

static void test_every_node_holds_a_lease(void **state)
{
    (void)state;
    for (uint32_t id = 1; id <= 3; id++) {
        int64_t lease = 0;
        assert_true(has_key(id, &lease));
        assert_true(lease != 0);
        assert_string_equal(node_state(id), "UP");
    }
}

static void test_kill9_node_goes_down(void **state)
{
    (void)state;
    assert_int_equal(cluster_kill(g_cluster, 2, SIGKILL), 0);
    /* The leader finds the node's port closed and revokes its lease
     * (dead_node_test shows it with leases too long to wait out): the key
     * goes, and the node is DOWN. */
    int64_t ms = wait_state(2, "DOWN");
    assert_true(ms >= 0);
    assert_false(has_key(2, NULL));
    fprintf(stderr, "node 2 DOWN %lld ms after kill -9\n", (long long)ms);
    assert_int_equal(cluster_restart(g_cluster, 2), 0);
    assert_true(wait_state(2, "UP") >= 0);
    assert_true(has_key(2, NULL));
}

static void test_clean_stop_revokes_the_lease(void **state)
{
    (void)state;
    assert_int_equal(cluster_kill(g_cluster, 3, SIGTERM), 0); /* reaped when it returns */
    assert_false(has_key(3, NULL));                           /* gone before the exit */
    assert_true(wait_state(3, "DOWN") >= 0);
    assert_int_equal(cluster_restart(g_cluster, 3), 0);
    assert_true(wait_state(3, "UP") >= 0);
}

static void test_stalled_node_loses_its_lease_and_returns(void **state)
{
    (void)state;
    int64_t before = 0, after = 0;
    assert_true(has_key(1, &before));
    assert_int_equal(cluster_kill(g_cluster, 1, SIGSTOP), 0);
    assert_true(wait_state(1, "DOWN") >= 0);
    assert_int_equal(cluster_kill(g_cluster, 1, SIGCONT), 0);
    assert_true(wait_state(1, "UP") >= 0);
    assert_true(has_key(1, &after));
    assert_true(after != before); /* a new lease: the old one expired */
}

static void test_new_leader_judges_from_the_keys(void **state)
{
    (void)state;
    int leader = cluster_leader(g_cluster, -1, WAIT_MS);
    assert_true(leader >= 0);
    assert_int_equal(cluster_kill(g_cluster, leader, SIGKILL), 0);
    assert_int_equal(cluster_kill(g_cluster, 2, SIGKILL), 0);
    assert_true(cluster_leader(g_cluster, leader, WAIT_MS) >= 0);
    assert_true(wait_state(2, "DOWN") >= 0);
    assert_string_equal(node_state(1), "UP");
    assert_string_equal(node_state(3), "UP");
    assert_int_equal(cluster_restart(g_cluster, 2), 0);
    assert_int_equal(cluster_restart(g_cluster, leader), 0);
    assert_true(wait_state(2, "UP") >= 0);
}

/* Restarts every coordinator that is not running and waits for a leader. */
static void restart_coordinators(void)
{
    for (int k = 0; k < cluster_coordinators(g_cluster); k++) {
        int idx = cluster_coordinator_index(g_cluster, k);
        if (cluster_pid(g_cluster, idx) == 0) {
            assert_int_equal(cluster_restart(g_cluster, idx), 0);
        }
    }
    assert_true(cluster_leader(g_cluster, -1, WAIT_MS) >= 0);
}

/* Creates table (partition key Id:S, 8 partitions), retrying while a new
 * leader is still taking over, or after etcd refused a leader's change
 * (ESTATE: nothing was written; it steps down and loads etcd's state). */
static void create_table(const char *name)
{
    lapse_table_def d = {
        .name = name, .partition_key = "Id", .partition_key_type = 'S', .partitions = 8};
    lapse_error e = {0};
    clock_mono deadline = clock_mono_after_ms(WAIT_MS);
    int rv;
    while (
        ((rv = lapse_create_table(g_client, &d, &e)) == LAPSE_EUNAVAILABLE || rv == LAPSE_ESTATE) &&
        clock_mono_remaining_ms(deadline) > 0) {
        clock_sleep_ms(100);
    }
    assert_lapse_ok(rv, &e);
}

/* Items of table in partition p (a one-partition segment of the scan). */
static size_t items_in_partition(lapse_client *c, const char *table, unsigned p, unsigned n)
{
    lapse_scan_opts o = {.segment = p, .total_segments = n};
    lapse_page *page = NULL;
    lapse_error e = {0};
    assert_lapse_ok(lapse_scan(c, table, &o, &page, &e), &e);
    size_t count = lapse_page_count(page);
    assert_null(lapse_page_last_key(page)); /* one page: a few items */
    lapse_page_free(page);
    return count;
}

/* The map version node id holds, from the node itself. */
static uint64_t node_map_version(uint32_t id)
{
    rpc_client *rc = NULL;
    char err[256];
    assert_int_equal(rpc_client_open(&rc, cluster_node_url(g_cluster, (int)id), err, sizeof(err)),
                     0);
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__GetPartitionMapRequest body = LAPSE__GET_PARTITION_MAP_REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_GET_PARTITION_MAP;
    req.get_partition_map = &body;
    Lapse__Response *resp = NULL;
    uint64_t v = 0;
    if (rpc_call(rc, &req, 1000, &resp, err, sizeof(err)) == 0 &&
        resp->body_case == LAPSE__RESPONSE__BODY_GET_PARTITION_MAP) {
        v = resp->get_partition_map->map->version;
    }
    rpc_response_free(resp);
    rpc_client_close(rc);
    return v;
}

static void test_node_restarted_while_coordinators_down_expires(void **state)
{
    (void)state;
    lapse_error e = {0};
    create_table("sessions");
    lapse_ttl_spec spec = {.action = LAPSE_TTL_ENABLE, .attribute = "ExpiresAt"};
    assert_lapse_ok(lapse_update_ttl(g_client, "sessions", &spec, NULL, &e), &e);
    /* The data plane's client: its map is fetched now, while node 1 is UP. */
    lapse_client *c = NULL;
    assert_lapse_ok(lapse_connect(&c, cluster_coordinator_url(g_cluster), &e), &e);
    uint32_t *owners = NULL;
    size_t nparts = 0;
    assert_lapse_ok(lapse_partition_owners(c, "sessions", &owners, &nparts, &e), &e);

    /* Node 1 misses a change of the map, then every coordinator dies. */
    assert_int_equal(cluster_kill(g_cluster, 1, SIGKILL), 0);
    assert_true(wait_state(1, "DOWN") >= 0);
    create_table("later");
    char *js = NULL;
    assert_lapse_ok(lapse_cluster_status(g_client, &js, &e), &e);
    json_t *root = json_loads(js, 0, NULL);
    uint64_t version = (uint64_t)json_integer_value(json_object_get(root, "PartitionMapVersion"));
    json_decref(root);
    lapse_free(js);
    for (int k = 0; k < cluster_coordinators(g_cluster); k++) {
        assert_int_equal(cluster_kill(g_cluster, cluster_coordinator_index(g_cluster, k), SIGKILL),
                         0);
    }
    assert_int_equal(cluster_restart(g_cluster, 1), 0);
    clock_mono deadline = clock_mono_after_ms(WAIT_MS);
    while (node_map_version(1) < version && clock_mono_remaining_ms(deadline) > 0) {
        clock_sleep_ms(50);
    }
    assert_int_equal(node_map_version(1), version); /* from etcd */

    /* Items due in 2 s, on every partition; node 1's must go too. */
    int64_t due = clock_wall_now().ms / 1000 + 2;
    for (int i = 0; i < 64; i++) {
        lapse_item *it =
            item_json("{\"Id\":{\"S\":\"s%d\"},\"ExpiresAt\":{\"N\":\"%lld\"}}", i, (long long)due);
        assert_lapse_ok(lapse_put(c, "sessions", it, NULL, &e), &e);
        lapse_item_free(it);
    }
    size_t on_node1 = 0;
    for (unsigned p = 0; p < nparts; p++) {
        on_node1 += owners[p] == 1 ? items_in_partition(c, "sessions", p, (unsigned)nparts) : 0;
    }
    assert_true(on_node1 > 0);
    deadline = clock_mono_after_ms(WAIT_MS + 5000);
    size_t left = 1;
    while (left > 0 && clock_mono_remaining_ms(deadline) > 0) {
        clock_sleep_ms(200);
        left = 0;
        for (unsigned p = 0; p < nparts; p++) {
            left += items_in_partition(c, "sessions", p, (unsigned)nparts);
        }
    }
    fprintf(stderr, "%zu of node 1's items expired with every coordinator down; %zu items left\n",
            on_node1, left);
    assert_int_equal(left, 0);
    assert_true(cluster_log_contains(g_cluster, 1, "clock checked against"));
    lapse_free(owners);
    lapse_close(c);
    restart_coordinators();
}

/* Runs the CLI; returns its exit status, *out its stdout; stderr is
 * printed when the status is not want. */
static int cli(char **out, int want, const char *const *args)
{
    char *err = NULL;
    int rv = cluster_cli_run(g_cluster, args, NULL, out, &err);
    if (rv != want) {
        fprintf(stderr, "lapse %s: exit %d: %s", args[0], rv, err);
    }
    free(err);
    return rv;
}

static void test_new_cli_works_while_coordinators_down(void **state)
{
    (void)state;
    char cache[700];
    snprintf(cache, sizeof(cache), "%s/map-cache", cluster_run_dir(g_cluster));
    setenv("LAPSE_MAP_CACHE", cache, 1);
    char *out = NULL;
    const char *create[] = {"create-table", "cli", "--partition-key", "Id:S", NULL};
    assert_int_equal(cli(&out, 0, create), 0);
    free(out);
    const char *put1[] = {"put", "cli", "{\"Id\":{\"S\":\"before\"}}", NULL};
    assert_int_equal(cli(&out, 0, put1), 0); /* leaves the map in the cache */
    free(out);
    assert_int_equal(access(cache, R_OK), 0);

    for (int k = 0; k < cluster_coordinators(g_cluster); k++) {
        assert_int_equal(cluster_kill(g_cluster, cluster_coordinator_index(g_cluster, k), SIGKILL),
                         0);
    }
    const char *put2[] = {"put", "cli", "{\"Id\":{\"S\":\"during\"},\"V\":{\"N\":\"7\"}}", NULL};
    assert_int_equal(cli(&out, 0, put2), 0);
    free(out);
    const char *get[] = {"get", "cli", "{\"Id\":{\"S\":\"during\"}}", NULL};
    assert_int_equal(cli(&out, 0, get), 0);
    assert_non_null(strstr(out, "\"V\":{\"N\":\"7\"}"));
    free(out);
    const char *scan[] = {"scan", "cli", NULL};
    assert_int_equal(cli(&out, 0, scan), 0);
    assert_non_null(strstr(out, "before"));
    free(out);
    /* Control-plane calls say why they cannot be done. */
    const char *create2[] = {"create-table", "cli2", "--partition-key", "Id:S", NULL};
    char *err = NULL;
    assert_int_equal(cluster_cli_run(g_cluster, create2, NULL, &out, &err), 1);
    assert_non_null(strstr(err, "no coordinator is reachable"));
    free(out);
    free(err);
    /* Without the cache, a new client has nowhere to get a map from. */
    setenv("LAPSE_MAP_CACHE", "", 1);
    assert_int_equal(cli(&out, 1, get), 1);
    free(out);
    unsetenv("LAPSE_MAP_CACHE");
    restart_coordinators();
}

static void test_client_fails_fast_on_a_down_node(void **state)
{
    (void)state;
    lapse_error e = {0};
    create_table("fast");
    uint32_t *owners = NULL;
    size_t nparts = 0;
    assert_int_equal(cluster_kill(g_cluster, 2, SIGKILL), 0);
    assert_true(wait_state(2, "DOWN") >= 0);
    lapse_client *c = NULL; /* a client whose map says node 2 is DOWN */
    assert_lapse_ok(lapse_connect(&c, cluster_coordinator_url(g_cluster), &e), &e);
    assert_lapse_ok(lapse_partition_owners(c, "fast", &owners, &nparts, &e), &e);
    int down_seen = 0, ok = 0;
    for (int i = 0; i < 32; i++) {
        lapse_item *it = item_json("{\"Id\":{\"S\":\"k%d\"}}", i);
        int rv = lapse_put(c, "fast", it, NULL, &e);
        lapse_item_free(it);
        if (rv == 0) {
            ok++;
            continue;
        }
        /* Not a time-out: the map said so, and the error names the node. */
        assert_int_equal(rv, LAPSE_EUNAVAILABLE);
        assert_non_null(strstr(e.message, "node 2 ("));
        assert_non_null(strstr(e.message, "is down"));
        down_seen++;
    }
    fprintf(stderr, "%d puts ok, %d refused at once (node 2 down)\n", ok, down_seen);
    size_t owned = 0;
    for (size_t p = 0; p < nparts; p++) {
        owned += owners[p] == 2;
    }
    assert_true(owned > 0 ? down_seen > 0 : down_seen == 0);
    assert_true(ok > 0);
    lapse_free(owners);
    lapse_close(c);
    assert_int_equal(cluster_restart(g_cluster, 2), 0);
    assert_true(wait_state(2, "UP") >= 0);
}

/* A map committed to etcd reaches the nodes by their watch of the catalog
 * key, not only by the coordinator's push: here nobody pushes it (it is
 * written behind the coordinators' backs, who still answer heartbeats with
 * their older version, so the nodes pull nothing either). */
static void test_nodes_apply_maps_from_their_watch(void **state)
{
    (void)state;
    char err[512];
    etcd_kv kv;
    assert_int_equal(etcd_get(g_etcd, "/lapse/test/catalog/pmap", &kv, NULL, err, sizeof(err)), 0);
    Lapse__PartitionMap *pb =
        lapse__partition_map__unpack(NULL, kv.value_len, (const uint8_t *)kv.value);
    etcd_kv_fini(&kv);
    assert_non_null(pb);
    uint64_t next = ++pb->version;
    size_t len = lapse__partition_map__get_packed_size(pb);
    uint8_t *bytes = malloc(len);
    lapse__partition_map__pack(pb, bytes);
    lapse__partition_map__free_unpacked(pb, NULL);
    assert_int_equal(
        etcd_put(g_etcd, "/lapse/test/catalog/pmap", bytes, len, 0, NULL, err, sizeof(err)), 0);
    free(bytes);
    clock_mono deadline = clock_mono_after_ms(WAIT_MS);
    for (uint32_t id = 1; id <= 3; id++) {
        while (node_map_version(id) < next && clock_mono_remaining_ms(deadline) > 0) {
            clock_sleep_ms(20);
        }
        assert_int_equal(node_map_version(id), next);
    }
    /* The leader's next change finds etcd ahead of it: it steps down, loads
     * it, and goes on from there. */
    create_table("after-watch");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_node_holds_a_lease),
        cmocka_unit_test(test_kill9_node_goes_down),
        cmocka_unit_test(test_clean_stop_revokes_the_lease),
        cmocka_unit_test(test_stalled_node_loses_its_lease_and_returns),
        cmocka_unit_test(test_new_leader_judges_from_the_keys),
        cmocka_unit_test(test_node_restarted_while_coordinators_down_expires),
        cmocka_unit_test(test_new_cli_works_while_coordinators_down),
        cmocka_unit_test(test_client_fails_fast_on_a_down_node),
        cmocka_unit_test(test_nodes_apply_maps_from_their_watch),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
