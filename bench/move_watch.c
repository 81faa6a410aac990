/*
 * move_watch.c: what lapse-move-bench reads of the cluster's moves: the
 * rebalance plan, cluster-status's copies and Moves, describe-table's size,
 * the primaries' snapshot lines in the nodes' logs (move_bench.h).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/nodecall.h"
#include "bench_util.h"
#include "move_bench.h"

static json_int_t field(json_t *o, const char *name)
{
    return json_integer_value(json_object_get(o, name));
}

/* The JSON answer of an admin call of c (lapse_cluster_status,
 * lapse_rebalance_plan), parsed (caller json_decref); NULL when it failed. */
static json_t *admin_doc(lapse_client *c, int (*call)(lapse_client *, char **, lapse_error *))
{
    char *js = NULL;
    lapse_error e;
    int rv = call(c, &js, &e);
    json_t *doc = rv == 0 ? json_loads(js, 0, NULL) : NULL;
    lapse_free(js);
    return doc;
}

/* The rebalancer's plan: moves of TABLE left (*moves), sets moving
 * (*moving). -1 when it cannot be read. */
int watch_plan(lapse_client *c, long *moves, long *moving)
{
    json_t *doc = admin_doc(c, lapse_rebalance_plan);
    if (doc == NULL) {
        return -1;
    }
    *moves = 0;
    json_t *mv;
    size_t i;
    json_array_foreach(json_object_get(doc, "Moves"), i, mv)
    {
        const char *t = json_string_value(json_object_get(mv, "Table"));
        *moves += t != NULL && strcmp(t, TABLE) == 0;
    }
    *moving = (long)field(doc, "Moving");
    json_decref(doc);
    return 0;
}

/* Node id's copies (replicas, from cluster-status), -1 on error; with
 * progress, a line on the moves under way (cluster-status "Moves": each
 * step, and the snapshots' bytes sent of their estimated totals with the
 * longest ETA). */
long watch_copies_on_progress(lapse_client *c, uint32_t id, char *progress, size_t plen)
{
    json_t *doc = admin_doc(c, lapse_cluster_status);
    if (doc == NULL) {
        return -1;
    }
    long n = -1;
    json_t *nd;
    size_t i;
    json_array_foreach(json_object_get(doc, "Nodes"), i, nd)
    {
        if ((uint32_t)field(nd, "NodeId") == id) {
            n = (long)field(nd, "Replicas");
        }
    }
    if (progress != NULL) {
        long copying = 0, other = 0, behind = 0;
        double sent = 0, total = 0, eta = 0;
        json_t *mv;
        json_array_foreach(json_object_get(doc, "Moves"), i, mv)
        {
            const char *step = json_string_value(json_object_get(mv, "Step"));
            json_t *cp = json_object_get(mv, "Copy");
            if (step != NULL && strcmp(step, "copying") == 0) {
                copying++;
            } else {
                other++;
            }
            behind += (long)field(mv, "LagRecords");
            sent += (double)field(cp, "BytesSent");
            total += (double)field(cp, "BytesTotal");
            double e = json_number_value(json_object_get(cp, "EtaSeconds"));
            eta = e > eta ? e : eta;
        }
        snprintf(progress, plen,
                 "%ld copying (%ld records behind; snapshots %.1f of %.1f MB, ETA %.1f s), "
                 "%ld adding, handing over or removing",
                 copying, behind, sent / 1e6, total / 1e6, eta, other);
    }
    json_decref(doc);
    return n;
}

/* The moving sets of TABLE in pm, a bit per partition (the first 64). */
static uint64_t moving_sets(const pmap *pm)
{
    const pmap_table *t = pmap_table_find(pm, TABLE);
    uint64_t m = 0;
    for (uint32_t p = 0; t != NULL && p < t->schema.partitions && p < 64; p++) {
        const pmap_replicas *r = pmap_part(t, p);
        int moving = r->n > schema_replication(&t->schema) || r->handing_since != 0;
        for (uint32_t k = 0; k < r->n && !moving; k++) {
            moving = !pmap_in_sync(r, k);
        }
        m |= (uint64_t)moving << p;
    }
    return m;
}

void *watch_sets_main(void *arg)
{
    set_watch *w = arg;
    char err[256];
    while (atomic_load(w->phase) < PH_N && atomic_load(&w->n) < WATCH_SETS_MAX) {
        pmap *pm = NULL;
        double t = mono_s();
        if (nodecall_map(cluster_coordinator_url(w->cl), &pm, err, sizeof(err)) == 0) {
            long i = atomic_load(&w->n);
            w->at[i] = (float)(t - w->t0);
            w->moving[i] = moving_sets(pm);
            atomic_store(&w->n, i + 1);
            pmap_free(pm);
        }
        sleep_ms(WATCH_SETS_MS);
    }
    return NULL;
}

int watch_sets_moving(const set_watch *w, double t, uint32_t p)
{
    long n = atomic_load(&w->n), lo = 0, hi = n; /* the first sample after t */
    float x = (float)(t - w->t0);
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        if (w->at[mid] <= x) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    uint64_t m = (lo < n ? w->moving[lo] : 0) | (lo > 0 ? w->moving[lo - 1] : 0);
    return p < 64 && (m >> p & 1u);
}

/* Node id's copies of table's partitions (cluster-status ReplicaSets), -1
 * on error. */
long watch_table_copies_on(const cluster *cl, const char *table, uint32_t id)
{
    char err[256];
    pmap *pm = NULL;
    if (nodecall_map(cluster_coordinator_url(cl), &pm, err, sizeof(err)) != 0) {
        fprintf(stderr, "lapse-move-bench: the map: %s\n", err);
        return -1;
    }
    const pmap_table *t = pmap_table_find(pm, table);
    long n = t != NULL ? 0 : -1;
    for (uint32_t p = 0; t != NULL && p < t->schema.partitions; p++) {
        n += pmap_replicas_index(pmap_part(t, p), id) >= 0;
    }
    pmap_free(pm);
    return n;
}

long watch_copies_on(lapse_client *c, uint32_t id)
{
    return watch_copies_on_progress(c, id, NULL, 0);
}

/* The table's bytes (describe-table's TableSizeBytes), or the items' raw
 * size when it reports none. */
double watch_table_bytes(lapse_client *c, const config *cfg)
{
    char *js = NULL;
    lapse_error e;
    double raw = (double)cfg->items * (double)(cfg->value_bytes + 11 + 2 + 1);
    if (lapse_describe_table(c, TABLE, &js, &e) != 0) {
        return raw;
    }
    json_t *doc = json_loads(js, 0, NULL);
    lapse_free(js);
    json_t *t = json_object_get(doc, "Table");
    double b = (double)json_integer_value(json_object_get(t != NULL ? t : doc, "TableSizeBytes"));
    json_decref(doc);
    return b > 0 ? b : raw;
}

/* The nodes' log sizes now, to read what a phase logged (snapshots). */
void watch_log_marks(cluster *cl, long marks[5])
{
    for (int i = 1; i <= 4; i++) {
        char *all = cluster_read_file(cluster_log_path(cl, i));
        marks[i] = all != NULL ? (long)strlen(all) : 0;
        free(all);
    }
}

/* The snapshots the primaries logged since marks ("node N rebuilt from a
 * snapshot at record S (K keys, B bytes, T ms)", node/resync.c): prints
 * their count, bytes and each one's rate (median and lowest). */
void watch_report_snapshots(cluster *cl, const long marks[5])
{
    double rates[256], bytes_all = 0;
    int n = 0;
    for (int i = 1; i <= 4; i++) {
        char *all = cluster_read_file(cluster_log_path(cl, i));
        const char *at = all != NULL && (long)strlen(all) >= marks[i] ? all + marks[i] : "";
        const char *key = "rebuilt from a snapshot at record ";
        while ((at = strstr(at, key)) != NULL) {
            unsigned long long rec, keys, bytes;
            long long ms;
            at += strlen(key);
            if (sscanf(at, "%llu (%llu keys, %llu bytes, %lld ms)", &rec, &keys, &bytes, &ms) ==
                    4 &&
                n < 256) {
                bytes_all += (double)bytes;
                rates[n++] = (double)bytes / 1e6 / ((double)(ms > 0 ? ms : 1) / 1000.0);
            }
        }
        free(all);
    }
    if (n == 0) {
        printf("%-13s no snapshot (the new copies caught up from the primaries' logs)\n", "");
        return;
    }
    for (int i = 1; i < n; i++) { /* insertion sort: a few dozen */
        for (int j = i; j > 0 && rates[j - 1] > rates[j]; j--) {
            double t = rates[j];
            rates[j] = rates[j - 1];
            rates[j - 1] = t;
        }
    }
    printf("%-13s %d snapshots, %.1f MB: each at median %.1f MB/s, lowest %.1f MB/s (bytes sent "
           "over the snapshot's time, on its primary)\n",
           "", n, bytes_all / 1e6, rates[n / 2], rates[0]);
}
