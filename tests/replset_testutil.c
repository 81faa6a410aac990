/* replset_testutil.c: replica set helpers for tests; see replset_testutil.h. */
#include "replset_testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "testmap.h"
#include "testutil.h"

static cluster *g_rs_cluster;
static lapse_client *g_rs_client;

static char g_rs_fault_dir[512]; /* "": none */
static const char *g_rs_zones;   /* cluster_options.node_zones */

static int setup_n(int nodes, int coordinators, const char *node_args, int metrics,
                   const char *coordinator_args)
{
    cluster_options o = {.nodes = nodes,
                         .quiet = 1,
                         .etcd = 1,
                         .coordinators = coordinators,
                         .node_args = node_args,
                         .metrics = metrics,
                         .coordinator_args = coordinator_args,
                         .node_zones = g_rs_zones};
    return cluster_start_client(&g_rs_cluster, &o, &g_rs_client) != 0 ? -1 : 0;
}

int rs_group_setup_zones(int nodes, const char *zones)
{
    g_rs_zones = zones;
    return setup_n(nodes, 1, NULL, 0, NULL);
}

int rs_group_setup_coordinators(int nodes, int coordinators)
{
    return setup_n(nodes, coordinators, NULL, 0, NULL);
}

static int setup(const char *node_args, int metrics)
{
    return setup_n(3, 1, node_args, metrics, NULL);
}

int rs_group_setup_nodes(int nodes)
{
    return setup_n(nodes, 1, NULL, 0, NULL);
}

int rs_group_setup_coordinator_args(int nodes, const char *coordinator_args)
{
    return setup_n(nodes, 1, NULL, 0, coordinator_args);
}

int rs_group_setup_args(const char *node_args)
{
    return setup(node_args, 0);
}

/* Makes the fault directory and starts the group with it (and node_args)
 * on every node. */
static int setup_faults(int nodes, const char *node_args, int metrics, const char *coordinator_args)
{
    static char args[1024];
    char err[256];
    if (cluster_mkdtemp(g_rs_fault_dir, sizeof(g_rs_fault_dir), "faults", err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        g_rs_fault_dir[0] = '\0';
        return -1;
    }
    snprintf(args, sizeof(args), "%s --debug-fault-dir %s", node_args != NULL ? node_args : "",
             g_rs_fault_dir);
    return setup_n(nodes, 1, args, metrics, coordinator_args);
}

int rs_group_setup_faults(const char *node_args, int metrics)
{
    return setup_faults(3, node_args, metrics, NULL);
}

int rs_group_setup_faults_coordinator_args(const char *coordinator_args)
{
    return setup_faults(3, NULL, 0, coordinator_args);
}

int rs_group_setup_faults_nodes(int nodes)
{
    return setup_faults(nodes, NULL, 0, NULL);
}

/* Turns fault switch name of node on or off (node/fault_switch.h). */
static void fault_switch(int node, const char *name, int on)
{
    char path[700];
    assert_true(g_rs_fault_dir[0] != '\0');
    snprintf(path, sizeof(path), "%s/node%d.%s", g_rs_fault_dir, node, name);
    if (on) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fclose(f);
    } else {
        assert_int_equal(unlink(path), 0);
    }
}

void rs_refuse_replicate_log(int node, int on)
{
    fault_switch(node, "refuse-replicate-log", on);
}

void rs_slow_ship(int node, int on)
{
    fault_switch(node, "slow-ship", on);
}

void rs_hold_after_join(int node, int on)
{
    fault_switch(node, "hold-after-join", on);
}

void rs_small_snapshot_calls(int node, int on)
{
    fault_switch(node, "small-snapshot-calls", on);
}

void rs_slow_refill(int node, int on)
{
    fault_switch(node, "slow-refill", on);
}

int rs_group_setup(void **state)
{
    (void)state;
    return rs_group_setup_args(NULL);
}

int rs_group_teardown(void **state)
{
    (void)state;
    int rv = g_rs_cluster != NULL ? stop_cluster(g_rs_cluster, g_rs_client) : 0;
    if (g_rs_fault_dir[0] != '\0') {
        cluster_rm_rf(g_rs_fault_dir);
        g_rs_fault_dir[0] = '\0';
    }
    return rv;
}

cluster *rs_cluster(void)
{
    return g_rs_cluster;
}

lapse_client *rs_client(void)
{
    return g_rs_client;
}

void rs_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int rs_call(int node, Lapse__Request *req, Lapse__Response **resp, char *err, size_t errlen)
{
    rpc_client *rc = NULL;
    *resp = NULL;
    assert_int_equal(rpc_client_open(&rc, cluster_node_url(g_rs_cluster, node), err, errlen), 0);
    int rv = rpc_call(rc, req, 3000, resp, err, errlen);
    if (rv != 0) {
        rpc_response_free(*resp);
        *resp = NULL;
    }
    rpc_client_close(rc);
    return rv;
}

rs_digest rs_node_digest(int node, uint32_t table_id, uint32_t part)
{
    char err[256];
    rpc_client *rc = NULL;
    rs_digest d = {0};
    assert_int_equal(rpc_client_open(&rc, cluster_node_url(g_rs_cluster, node), err, sizeof(err)),
                     0);
    int rv = nodecall_partition_digest(rc, table_id, part, &d, err, sizeof(err));
    rpc_client_close(rc);
    if (rv != 0) {
        fail_msg("PartitionDigest on node %d: %s", node, err);
    }
    return d;
}

/* Compares every copy of every partition of table with its primary's:
 * the items over all partitions (counted on the primaries), or -1 with
 * the first difference in why. */
static int64_t copies_compare(const char *table, char *why, size_t whylen)
{
    pmap *pm = testmap_fetch(g_rs_cluster);
    const pmap_table *t = pmap_table_find(pm, table);
    assert_non_null(t);
    int64_t total = 0;
    for (uint32_t p = 0; p < t->schema.partitions && total >= 0; p++) {
        const pmap_replicas *r = pmap_part(t, p);
        rs_digest want = rs_node_digest((int)r->ids[0], t->schema.id, p);
        for (uint32_t i = 1; i < r->n && total >= 0; i++) {
            rs_digest got = rs_node_digest((int)r->ids[i], t->schema.id, p);
            if (got.items != want.items || got.hash != want.hash || got.seq != want.seq ||
                got.epoch != want.epoch) {
                snprintf(why, whylen,
                         "table %s partition %u: node %u has %llu items at seq %llu, primary "
                         "node %u %llu at seq %llu (digests %s)",
                         table, (unsigned)p, (unsigned)r->ids[i], (unsigned long long)got.items,
                         (unsigned long long)got.seq, (unsigned)r->ids[0],
                         (unsigned long long)want.items, (unsigned long long)want.seq,
                         got.hash == want.hash ? "equal" : "differ");
                total = -1;
            }
        }
        total = total >= 0 ? total + (int64_t)want.items : total;
    }
    pmap_free(pm);
    return total;
}

uint64_t rs_assert_copies_match(const char *table)
{
    char why[512] = "";
    int64_t items = copies_compare(table, why, sizeof(why));
    if (items < 0) {
        fail_msg("%s", why);
    }
    return (uint64_t)items;
}

uint64_t rs_wait_copies_match(const char *table, long timeout_ms)
{
    char why[512] = "";
    int64_t items = copies_compare(table, why, sizeof(why));
    for (long waited = 0; items < 0 && waited < timeout_ms; waited += 100) {
        rs_sleep_ms(100);
        items = copies_compare(table, why, sizeof(why));
    }
    if (items < 0) {
        fail_msg("after %ld ms: %s", timeout_ms, why);
    }
    return (uint64_t)items;
}

void rs_create_rf3(const char *name, unsigned partitions)
{
    lapse_table_def d = {.name = name,
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .partitions = partitions,
                         .replication = 3};
    lapse_error e = {0};
    assert_lapse_ok(lapse_create_table(g_rs_client, &d, &e), &e);
}

void rs_follower_and_primary_sets(const char *table, uint32_t node, int *in_sync_follower,
                                  int *primary)
{
    pmap *pm = testmap_fetch(g_rs_cluster);
    const pmap_table *t = pmap_table_find(pm, table);
    assert_non_null(t);
    const pmap_node *n = pmap_node_find(pm, node);
    assert_non_null(n);
    assert_int_equal(n->state, PMAP_NODE_UP);
    *in_sync_follower = 0;
    *primary = 0;
    for (uint32_t p = 0; p < t->schema.partitions; p++) {
        const pmap_replicas *r = &t->parts[p];
        int i = pmap_replicas_index(r, node);
        *primary += i == 0;
        *in_sync_follower += i > 0 && pmap_in_sync(r, (uint32_t)i);
    }
    pmap_free(pm);
}

/* Whether a set of pm is handing its primaryship over, or the
 * rebalancer's plan lists a handover it would start now: every node of pm
 * UP and none draining (else it starts nothing). */
static int handover_due(const pmap *pm)
{
    for (size_t t = 0; t < pm->ntables; t++) {
        for (uint32_t p = 0; p < pm->tables[t].schema.partitions; p++) {
            if (pm->tables[t].parts[p].handing_since != 0) {
                return 1;
            }
        }
    }
    for (size_t i = 0; i < pm->nnodes; i++) {
        if ((pm->nodes[i].state != PMAP_NODE_UP && !pm->nodes[i].removed) ||
            pm->nodes[i].draining) {
            return 0;
        }
    }
    json_t *plan = rs_rebalance_plan();
    const json_t *moves = json_object_get(plan, "Moves");
    int due = 0;
    for (size_t i = 0; i < json_array_size(moves) && !due; i++) {
        const char *kind = json_string_value(json_object_get(json_array_get(moves, i), "Kind"));
        due = kind != NULL && strcmp(kind, "handover") == 0;
    }
    json_decref(plan);
    return due;
}

pmap *rs_wait_all_in_sync(const char *table)
{
    for (int i = 0; i < 400; i++) {
        pmap *pm = testmap_fetch(g_rs_cluster);
        const pmap_table *t = pmap_table_find(pm, table);
        assert_non_null(t);
        int all = 1;
        for (uint32_t p = 0; p < t->schema.partitions; p++) {
            for (uint32_t k = 0; k < t->parts[p].n; k++) {
                all &= pmap_in_sync(&t->parts[p], k);
            }
        }
        if (all && !handover_due(pm)) {
            return pm;
        }
        pmap_free(pm);
        rs_sleep_ms(100);
    }
    fail_msg("table %s: not every copy is back in sync, with no handover due, after 40 s", table);
    return NULL;
}

pmap *rs_wait_rebalanced(const char *table)
{
    for (int i = 0; i < 600; i++) {
        json_t *plan = rs_rebalance_plan();
        int idle = json_array_size(json_object_get(plan, "Moves")) == 0 &&
                   rs_json_int(plan, "Moving") == 0;
        uint64_t version = (uint64_t)rs_json_int(plan, "PartitionMapVersion");
        json_decref(plan);
        pmap *pm = testmap_fetch(g_rs_cluster);
        const pmap_table *t = pmap_table_find(pm, table);
        assert_non_null(t);
        int all = idle && pm->version == version; /* the plan is of this map */
        for (uint32_t p = 0; all && p < t->schema.partitions; p++) {
            all = pmap_in_sync_count(&t->parts[p]) == t->parts[p].n;
        }
        if (all) {
            return pm;
        }
        pmap_free(pm);
        rs_sleep_ms(100);
    }
    fail_msg("table %s: the rebalancer is not idle on a map with every copy in sync after 60 s",
             table);
    return NULL;
}

void rs_wait_state(uint32_t id, const char *want)
{
    char st[32] = "";
    for (int i = 0; i < 200; i++) {
        if (strcmp(cluster_node_state(g_rs_client, id, st, sizeof(st)), want) == 0) {
            return;
        }
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    fail_msg("node %u is %s, not %s, after 20 s", (unsigned)id, st, want);
}

void rs_put_retrying(const char *table, const char *id, const char *v)
{
    lapse_item *it = item_json("{\"Id\":{\"S\":\"%s\"},\"V\":{\"S\":\"%s\"}}", id, v);
    lapse_error e = {0};
    int rv = 0;
    for (int attempt = 0; attempt < 150; attempt++) {
        if ((rv = lapse_put(g_rs_client, table, it, NULL, &e)) == 0) {
            break;
        }
        rs_sleep_ms(100);
    }
    lapse_item_free(it);
    if (rv != 0) {
        fail_msg("put %s=%s on %s kept failing for 15 s: %s", id, v, table, e.message);
    }
}

json_t *rs_json_answer(const char *what, int rv, int want_rv, char *js, const lapse_error *e)
{
    if (rv != want_rv) {
        fail_msg("%s: %s (%d), want %d", what, e->message, rv, want_rv);
    }
    if (rv != 0) {
        assert_null(js);
        return NULL;
    }
    json_error_t jerr;
    json_t *doc = json_loads(js, 0, &jerr);
    assert_non_null(doc);
    lapse_free(js);
    return doc;
}

json_int_t rs_json_int(json_t *doc, const char *name)
{
    json_t *v = json_object_get(doc, name);
    if (!json_is_integer(v)) {
        char *s = json_dumps(doc, 0);
        fail_msg("no integer %s in %s", name, s);
    }
    return json_integer_value(v);
}

json_t *rs_status_of(uint32_t id, json_t **node)
{
    char *js = NULL;
    lapse_error e = {0};
    assert_lapse_ok(lapse_cluster_status(g_rs_client, &js, &e), &e);
    json_t *doc = rs_json_answer("cluster-status", 0, 0, js, &e), *n;
    size_t i;
    json_array_foreach(json_object_get(doc, "Nodes"), i, n)
    {
        if (json_integer_value(json_object_get(n, "NodeId")) == (json_int_t)id) {
            *node = n;
            return doc;
        }
    }
    fail_msg("node %u not in cluster-status", (unsigned)id);
    return NULL;
}

json_t *rs_rebalance_plan(void)
{
    char *js = NULL;
    lapse_error e = {0};
    assert_lapse_ok(lapse_rebalance_plan(g_rs_client, &js, &e), &e);
    return rs_json_answer("rebalance", 0, 0, js, &e);
}

size_t rs_stream_until(const char *table, streamread *s, size_t want, long wait_ms)
{
    for (long waited = 0;; waited += 100) {
        lapse_error e = {0};
        assert_lapse_ok(streamread_more(rs_client(), table, s, &e), &e);
        if (s->n >= want || waited >= wait_ms) {
            return s->n;
        }
        rs_sleep_ms(100);
    }
}

size_t rs_stream_records_of(const streamread *s, const char *id)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) {
        const char *k = lapse_item_get_s(s->r[i]->keys, "Id");
        n += k != NULL && strcmp(k, id) == 0;
    }
    return n;
}
