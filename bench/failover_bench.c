/*
 * lapse-failover-bench: the control plane on etcd (docs/coordinator.md).
 * A cluster of 3 etcd members, 2 coordinators and 3 nodes on loopback;
 * then, one after the other:
 *
 *   create   create-table latency (8 partitions), --tables times
 *   ttl      update-ttl --enable until describe-ttl says ENABLED on every
 *            node (an empty table: the propagation itself), --tables times
 *   failover kill -9 of the leading coordinator, --kills times: time until
 *            etcd names another leader, and until a create-table through a
 *            client that knows both coordinators succeeds
 *   node     kill -9 of a node, --kills times: time until the leader marks
 *            it DOWN (its etcd lease runs out), then after its restart
 *            until it is UP again
 *   nocoord  every coordinator killed: a new client (its map cache left by
 *            an earlier one) connects and gets an item, --tables times
 *
 * Prints median, p90 and max of each, and how many samples timed out
 * (counted apart, never in the percentiles).
 *
 *   lapse-failover-bench [--bin-dir DIR] [--kills N] [--tables N] [--workloads LIST]
 *
 * Workloads default to create,ttl,failover,node,nocoord (nocoord last: it
 * leaves the coordinators down).
 */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../client/lapse.h"
#include "../tests/cluster.h"
#include "bench_util.h"

static cluster *g_cluster;
static lapse_client *g_client;

typedef struct series {
    const char *name;
    int64_t *ms;
    int n;
    int timeouts;
} series;

static void add(series *s, int64_t ms)
{
    s->ms[s->n++] = ms;
}

static void report(series *s)
{
    if (s->n == 0) {
        printf("%-28s no samples (%d timed out)\n", s->name, s->timeouts);
        return;
    }
    qsort(s->ms, (size_t)s->n, sizeof(int64_t), cmp_i64);
    printf("%-28s n=%d median %lld ms  p90 %lld ms  max %lld ms  (%d timed out)\n", s->name, s->n,
           (long long)s->ms[s->n / 2], (long long)s->ms[(s->n * 9) / 10 < s->n ? (s->n * 9) / 10
                                                                            : s->n - 1],
           (long long)s->ms[s->n - 1], s->timeouts);
}

static int64_t now_ms(void)
{
    return (int64_t)(mono_s() * 1000.0);
}

static int create(const char *name)
{
    lapse_table_def d = {
        .name = name, .partition_key = "Id", .partition_key_type = 'S', .partitions = 8};
    lapse_error e;
    return lapse_create_table(g_client, &d, &e);
}

static int ttl_enabled(const char *table)
{
    char *js = NULL;
    lapse_error e;
    if (lapse_describe_ttl(g_client, table, &js, &e) != 0) {
        return 0;
    }
    json_error_t jerr;
    json_t *root = json_loads(js, 0, &jerr);
    const char *st = json_string_value(
        json_object_get(json_object_get(root, "TimeToLiveDescription"), "TimeToLiveStatus"));
    int ok = st != NULL && strcmp(st, "ENABLED") == 0;
    json_decref(root);
    lapse_free(js);
    return ok;
}

static void run_create_and_ttl(int tables, const char *workloads)
{
    series cr = {"create-table", calloc((size_t)tables, sizeof(int64_t)), 0, 0};
    series tt = {"ttl enable -> ENABLED", calloc((size_t)tables, sizeof(int64_t)), 0, 0};
    for (int i = 0; i < tables; i++) {
        char name[32];
        snprintf(name, sizeof(name), "Bench%d", i);
        int64_t t0 = now_ms();
        if (create(name) != 0) {
            cr.timeouts++;
            continue;
        }
        add(&cr, now_ms() - t0);
        if (!has_workload(workloads, "ttl")) {
            continue;
        }
        lapse_ttl_spec spec = {.action = LAPSE_TTL_ENABLE, .attribute = "Exp"};
        lapse_error e;
        t0 = now_ms();
        int ok = lapse_update_ttl(g_client, name, &spec, NULL, &e) == 0;
        while (ok && !ttl_enabled(name)) {
            if (now_ms() - t0 > 10000) {
                ok = 0;
                break;
            }
            sleep_ms(1);
        }
        if (ok) {
            add(&tt, now_ms() - t0);
        } else {
            tt.timeouts++;
        }
        if ((i + 1) % 10 == 0) {
            fprintf(stderr, "  %d/%d tables\n", i + 1, tables);
        }
    }
    if (has_workload(workloads, "create")) {
        report(&cr);
    }
    if (has_workload(workloads, "ttl")) {
        report(&tt);
    }
    free(cr.ms);
    free(tt.ms);
}

static void run_failover(int kills)
{
    series elect = {"kill -9 -> new leader", calloc((size_t)kills, sizeof(int64_t)), 0, 0};
    series serve = {"kill -9 -> create-table ok", calloc((size_t)kills, sizeof(int64_t)), 0, 0};
    for (int i = 0; i < kills; i++) {
        int leader = cluster_leader(g_cluster, -1, 10000);
        if (leader < 0) {
            elect.timeouts++;
            continue;
        }
        int64_t t0 = now_ms();
        cluster_kill(g_cluster, leader, SIGKILL);
        if (cluster_leader(g_cluster, leader, 10000) < 0) {
            elect.timeouts++;
        } else {
            add(&elect, now_ms() - t0);
        }
        char name[32];
        snprintf(name, sizeof(name), "Failover%d", i);
        int rv;
        while ((rv = create(name)) != 0 && rv != LAPSE_EEXISTS && now_ms() - t0 < 20000) {
            sleep_ms(5);
        }
        if (rv == 0 || rv == LAPSE_EEXISTS) {
            add(&serve, now_ms() - t0);
        } else {
            serve.timeouts++;
        }
        cluster_restart(g_cluster, leader);
        fprintf(stderr, "  kill %d/%d\n", i + 1, kills);
    }
    report(&elect);
    report(&serve);
    free(elect.ms);
    free(serve.ms);
}


/* Adds the ms until node id is in state want (since t0) to s, or counts a
 * time-out after 20 s. */
static void time_state(series *s, uint32_t id, const char *want, int64_t t0)
{
    char state[16];
    while (strcmp(cluster_node_state(g_client, id, state, sizeof(state)), want) != 0) {
        if (now_ms() - t0 > 20000) {
            s->timeouts++;
            return;
        }
        sleep_ms(10);
    }
    add(s, now_ms() - t0);
}

static void run_node_kills(int kills)
{
    series down = {"node kill -9 -> DOWN", calloc((size_t)kills, sizeof(int64_t)), 0, 0};
    series up = {"node restart -> UP", calloc((size_t)kills, sizeof(int64_t)), 0, 0};
    for (int i = 0; i < kills; i++) {
        int64_t t0 = now_ms();
        cluster_kill(g_cluster, 2, SIGKILL);
        time_state(&down, 2, "DOWN", t0);
        t0 = now_ms();
        cluster_restart(g_cluster, 2);
        time_state(&up, 2, "UP", t0);
        fprintf(stderr, "  node kill %d/%d\n", i + 1, kills);
    }
    report(&down);
    report(&up);
    free(down.ms);
    free(up.ms);
}

/* Every coordinator down: new clients connect (map from the nodes named in
 * the map cache) and get one item. */
static void run_no_coordinator(int n, const char *cache_dir)
{
    series conn = {"no coordinator: connect+get", calloc((size_t)n, sizeof(int64_t)), 0, 0};
    char cache[600];
    snprintf(cache, sizeof(cache), "%s/map-cache", cache_dir);
    lapse_connect_options o = {.map_cache = cache};
    lapse_client *c = NULL;
    lapse_error e;
    lapse_item *key = NULL;
    if (create("NoCoord") != 0 && create("NoCoord") != LAPSE_EEXISTS) {
        fprintf(stderr, "  cannot create table NoCoord\n");
    }
    if (lapse_connect_opts(&c, cluster_coordinator_url(g_cluster), &o, &e) != 0 ||
        lapse_item_from_json(&key, "{\"Id\":{\"S\":\"k\"}}", &e) != 0 ||
        lapse_put(c, "NoCoord", key, NULL, &e) != 0) {
        fprintf(stderr, "  no coordinator: setup failed: %s\n", e.message);
        lapse_close(c);
        lapse_item_free(key);
        return;
    }
    lapse_close(c);
    for (int k = 0; k < cluster_coordinators(g_cluster); k++) {
        cluster_kill(g_cluster, cluster_coordinator_index(g_cluster, k), SIGKILL);
    }
    for (int i = 0; i < n; i++) {
        int64_t t0 = now_ms();
        lapse_item *got = NULL;
        if (lapse_connect_opts(&c, cluster_coordinator_url(g_cluster), &o, &e) == 0 &&
            lapse_get(c, "NoCoord", key, &got, &e) == 0 && got != NULL) {
            add(&conn, now_ms() - t0);
        } else {
            conn.timeouts++;
        }
        lapse_item_free(got);
        lapse_close(c);
        c = NULL;
    }
    report(&conn);
    lapse_item_free(key);
    free(conn.ms);
}

int main(int argc, char **argv)
{
    const char *bin_dir = NULL;
    const char *workloads = "create,ttl,failover,node,nocoord";
    int kills = 20, tables = 20;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--bin-dir") == 0 && i + 1 < argc) {
            bin_dir = argv[++i];
        } else if (strcmp(argv[i], "--kills") == 0 && i + 1 < argc) {
            kills = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--tables") == 0 && i + 1 < argc) {
            tables = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--workloads") == 0 && i + 1 < argc) {
            workloads = argv[++i];
        } else {
            fprintf(stderr,
                    "usage: lapse-failover-bench [--bin-dir DIR] [--kills N] [--tables N] "
                    "[--workloads create,ttl,failover,node,nocoord]\n");
            return 2;
        }
    }
    if (kills < 1 || kills > 1000 || tables < 1 || tables > 1000) {
        fprintf(stderr, "lapse-failover-bench: --kills and --tables want 1..1000\n");
        return 2;
    }
    cluster_options o = {
        .nodes = 3, .quiet = 1, .etcd = 3, .coordinators = 2, .bin_dir = bin_dir};
    char err[512];
    fprintf(stderr, "starting 3 etcd members, 2 coordinators, 3 nodes\n");
    if (cluster_start(&g_cluster, &o, err, sizeof(err)) != 0) {
        fprintf(stderr, "lapse-failover-bench: %s\n", err);
        return 1;
    }
    lapse_error e;
    if (lapse_connect(&g_client, cluster_coordinator_url(g_cluster), &e) != 0) {
        fprintf(stderr, "lapse-failover-bench: cannot connect\n");
        cluster_free(g_cluster, 1);
        return 1;
    }
    if (has_workload(workloads, "create") || has_workload(workloads, "ttl")) {
        run_create_and_ttl(tables, workloads);
    }
    if (has_workload(workloads, "failover")) {
        run_failover(kills);
    }
    if (has_workload(workloads, "node")) {
        run_node_kills(kills);
    }
    if (has_workload(workloads, "nocoord")) {
        run_no_coordinator(tables, cluster_run_dir(g_cluster));
    }
    lapse_close(g_client);
    cluster_free(g_cluster, 1);
    return 0;
}
