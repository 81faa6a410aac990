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
 *   primary  kill -9 of the primary of a partition of three copies, --kills
 *            times: time until a put on it succeeds again, until
 *            describe-table names a new primary, and from that promotion
 *            until items that were due by then are deleted
 *   nocoord  every coordinator killed: a new client (its map cache left by
 *            an earlier one) connects and gets an item, --tables times
 *
 * Prints median, p90 and max of each, and how many samples timed out
 * (counted apart, never in the percentiles).
 *
 *   lapse-failover-bench [--bin-dir DIR] [--kills N] [--tables N] [--workloads LIST]
 *
 * Workloads default to create,ttl,failover,node,primary,nocoord (nocoord last: it
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

/* ---- kill -9 of a partition's primary (a table of three copies) ---- */

#define DUE_ITEMS 200

/* The partition's primary and how many copies are in sync, from
 * describe-table's ReplicaSets (0 and 0 when it cannot be read). */
static uint32_t primary_of(const char *table, int *in_sync)
{
    char *js = NULL;
    lapse_error e;
    uint32_t primary = 0;
    *in_sync = 0;
    if (lapse_describe_table(g_client, table, &js, &e) != 0) {
        return 0;
    }
    json_t *root = json_loads(js, 0, NULL);
    json_t *set = json_array_get(json_object_get(json_object_get(root, "Table"), "ReplicaSets"), 0);
    primary = (uint32_t)json_integer_value(json_object_get(set, "Primary"));
    *in_sync = (int)json_array_size(json_object_get(set, "InSync"));
    json_decref(root);
    lapse_free(js);
    return primary;
}

/* Waits (up to 40 s) until all three copies are in sync; returns the
 * primary, or 0 when they are not. */
static uint32_t wait_in_sync(const char *table)
{
    for (int i = 0; i < 400; i++) {
        int in_sync;
        uint32_t p = primary_of(table, &in_sync);
        if (p != 0 && in_sync == 3) {
            return p;
        }
        sleep_ms(100);
    }
    return 0;
}

static lapse_item *due_item(int k, int64_t exp_s)
{
    char json[160];
    lapse_item *it = NULL;
    lapse_error e;
    snprintf(json, sizeof json, "{\"Id\":{\"S\":\"due%d\"},\"Exp\":{\"N\":\"%lld\"}}", k,
             (long long)exp_s);
    return lapse_item_from_json(&it, json, &e) == 0 ? it : NULL;
}

/* How many of the due items are still stored (expired or not), or -1 when
 * the read failed. */
static int due_left(lapse_client *c, const char *table, lapse_item **keys)
{
    lapse_item *out[DUE_ITEMS] = {0};
    lapse_error e;
    if (lapse_batch_get(c, table, keys, DUE_ITEMS, out, &e) != 0) {
        return -1;
    }
    int n = 0;
    for (int k = 0; k < DUE_ITEMS; k++) {
        n += out[k] != NULL;
        lapse_item_free(out[k]);
    }
    return n;
}

/*
 * One partition of three copies, TTL on. Each round: DUE_ITEMS items due
 * about a second after they are written, then kill -9 of the primary;
 * from the kill, puts (client timeout 250 ms, one after the other) until
 * one succeeds, while describe-table is read until it names another
 * primary; then batch gets until the due items are gone. The killed node
 * is restarted and the round waits for the set to be whole again.
 */
static void run_primary_kills(int kills)
{
    const char *table = "FailRf3";
    series write = {"primary kill -9 -> write ok", calloc((size_t)kills, sizeof(int64_t)), 0, 0};
    series promo = {"primary kill -9 -> promoted", calloc((size_t)kills, sizeof(int64_t)), 0, 0};
    series gone = {"promoted -> due items gone", calloc((size_t)kills, sizeof(int64_t)), 0, 0};
    lapse_table_def d = {.name = table, .partition_key = "Id", .partition_key_type = 'S',
                         .partitions = 1, .replication = 3};
    lapse_ttl_spec spec = {.action = LAPSE_TTL_ENABLE, .attribute = "Exp"};
    lapse_item *keys[DUE_ITEMS] = {0}, *probe = NULL;
    lapse_client *w = NULL;
    lapse_error e;
    if (lapse_create_table(g_client, &d, &e) != 0 ||
        lapse_update_ttl(g_client, table, &spec, NULL, &e) != 0 ||
        lapse_connect(&w, cluster_coordinator_url(g_cluster), &e) != 0) {
        fprintf(stderr, "  primary kills: setup failed: %s\n", e.message);
        goto out;
    }
    lapse_set_timeout_ms(w, 250);
    for (int k = 0; k < DUE_ITEMS; k++) {
        char id[32];
        snprintf(id, sizeof id, "due%d", k);
        if ((keys[k] = lapse_item_new()) == NULL || lapse_item_set_s(keys[k], "Id", id) != 0) {
            fprintf(stderr, "  primary kills: out of memory\n");
            goto out;
        }
    }
    probe = due_item(-1, 0);
    for (int i = 0; i < kills; i++) {
        uint32_t victim = wait_in_sync(table);
        if (victim == 0 || !ttl_enabled(table)) {
            fprintf(stderr, "  kill %d: the set is not whole after 40 s: stopping\n", i + 1);
            break;
        }
        int64_t exp_s = wall_ms() / 1000 + 2; /* due 1-2 s from now */
        int put_failed = 0;
        for (int k = 0; k < DUE_ITEMS; k++) {
            lapse_item *it = due_item(k, exp_s);
            put_failed |= it == NULL || lapse_put(g_client, table, it, NULL, &e) != 0;
            lapse_item_free(it);
        }
        if (put_failed) {
            fprintf(stderr, "  kill %d: loading the due items failed: %s\n", i + 1, e.message);
            break;
        }
        int64_t t0 = now_ms(), t_write = -1, t_promo = -1, t_gone = -1;
        const int64_t due_at = t0 + exp_s * 1000 - wall_ms(); /* on now_ms's clock */
        cluster_kill(g_cluster, (int)victim, SIGKILL);
        while (now_ms() - t0 < 20000 && (t_write < 0 || t_promo < 0)) {
            int in_sync;
            uint32_t p = t_promo < 0 ? primary_of(table, &in_sync) : 0;
            if (t_promo < 0 && p != 0 && p != victim) {
                t_promo = now_ms();
            }
            if (t_write < 0 && lapse_put(w, table, probe, NULL, &e) == 0) {
                t_write = now_ms();
            }
            sleep_ms(5);
        }
        /* Gone: counted from the promotion, or from the due instant when
         * that came later. */
        const int64_t from = due_at > t_promo ? due_at : t_promo;
        while (t_promo >= 0 && now_ms() - t0 < 30000) {
            if (due_left(w, table, keys) == 0) {
                t_gone = now_ms();
                break;
            }
            sleep_ms(10);
        }
        t_write >= 0 ? add(&write, t_write - t0) : (void)write.timeouts++;
        t_promo >= 0 ? add(&promo, t_promo - t0) : (void)promo.timeouts++;
        t_gone >= 0 ? add(&gone, t_gone - from) : (void)gone.timeouts++;
        cluster_restart(g_cluster, (int)victim);
        fprintf(stderr, "  primary kill %d/%d: node %u; write ok after %lld ms, promoted after "
                        "%lld ms, due items gone %lld ms after that\n",
                i + 1, kills, (unsigned)victim, (long long)(t_write - t0),
                (long long)(t_promo - t0), (long long)(t_gone >= 0 ? t_gone - from : -1));
    }
    report(&write);
    report(&promo);
    report(&gone);
out:
    for (int k = 0; k < DUE_ITEMS; k++) {
        lapse_item_free(keys[k]);
    }
    lapse_item_free(probe);
    lapse_close(w);
    free(write.ms);
    free(promo.ms);
    free(gone.ms);
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
    const char *workloads = "create,ttl,failover,node,primary,nocoord";
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
                    "[--workloads create,ttl,failover,node,primary,nocoord]\n");
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
    if (has_workload(workloads, "primary")) {
        run_primary_kills(kills);
    }
    if (has_workload(workloads, "nocoord")) {
        run_no_coordinator(tables, cluster_run_dir(g_cluster));
    }
    lapse_close(g_client);
    cluster_free(g_cluster, 1);
    return 0;
}
