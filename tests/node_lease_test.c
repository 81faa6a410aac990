/*
 * node_lease_test: node liveness by etcd lease, on a real three-member etcd
 * with two coordinators and three nodes. A node holds a lease on
 * /lapse/<cluster>/nodes/<id>: kill -9 leaves the key until the lease runs
 * out, and the coordinators then mark the node DOWN; a clean stop revokes
 * it before the process exits; a node stalled past its lease (SIGSTOP) goes
 * DOWN and comes back UP with a new lease on SIGCONT; the leader that takes
 * over judges liveness from the same keys.
 */
#include "testutil.h"

#include <jansson.h>
#include <signal.h>

#include "../common/clock.h"
#include "../etcd/etcd.h"
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
    if (cluster_start(&g_cluster, &o, err, sizeof(err)) != 0) {
        fprintf(stderr, "cluster_start: %s\n", err);
        return -1;
    }
    lapse_error e;
    if (lapse_connect(&g_client, cluster_coordinator_url(g_cluster), &e) != 0 ||
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
    state[0] = 0;
    char *js = NULL;
    lapse_error e;
    if (lapse_cluster_status(g_client, &js, &e) != 0) {
        return state;
    }
    json_error_t jerr;
    json_t *root = json_loads(js, 0, &jerr);
    lapse_free(js);
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(root, "Nodes"), i, n)
    {
        if (json_integer_value(json_object_get(n, "NodeId")) == (json_int_t)id) {
            snprintf(state, sizeof(state), "%s", json_string_value(json_object_get(n, "State")));
        }
    }
    json_decref(root);
    return state;
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
    assert_string_equal(kv.value, cluster_node_url(g_cluster, (int)id));
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

static void test_kill9_node_goes_down_when_its_lease_expires(void **state)
{
    (void)state;
    assert_int_equal(cluster_kill(g_cluster, 2, SIGKILL), 0);
    /* Nobody revoked the lease: the key outlives the process until its TTL
     * runs out, and only then is the node DOWN. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_node_holds_a_lease),
        cmocka_unit_test(test_kill9_node_goes_down_when_its_lease_expires),
        cmocka_unit_test(test_clean_stop_revokes_the_lease),
        cmocka_unit_test(test_stalled_node_loses_its_lease_and_returns),
        cmocka_unit_test(test_new_leader_judges_from_the_keys),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
