/*
 * replstat.c: what the replica sets this node leads look like
 * (docs/replication.md, "Watching replica sets"): each follower's lag from
 * what the primary last heard of it (logship_heard), for the heartbeat (the
 * coordinator shows it in cluster-status and describe-table) and for
 * /metrics.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/schema.h"
#include "../partition/replog.h"
#include "../placement/failover.h"
#include "logship_int.h"

/* Appends one row per follower of r (partition part of table t, led by
 * this node) to *rows. REQUIRES: ls->lock held. 0 or LAPSE_ENOMEM. */
static int add_set(logship *ls, const pmap_table *t, uint32_t part, const pmap_replicas *r,
                   uint64_t my_seq, logship_lag **rows, size_t *n, size_t *cap)
{
    part_state *p = logship_state(ls, t->schema.id, part);
    for (uint32_t i = 1; i < r->n; i++) {
        if (*n == *cap) {
            size_t c = *cap ? *cap * 2 : 16;
            logship_lag *v = realloc(*rows, c * sizeof(*v));
            if (v == NULL) {
                return LAPSE_ENOMEM;
            }
            *rows = v;
            *cap = c;
        }
        logship_lag *row = &(*rows)[(*n)++];
        memset(row, 0, sizeof(*row));
        row->table_id = t->schema.id;
        row->part = part;
        row->node = r->ids[i];
        for (size_t k = 0; p != NULL && k < PMAP_MAX_REPLICAS; k++) {
            if (p->heard_id[k] == r->ids[i]) {
                row->known = 1;
                row->lag = my_seq > p->heard_seq[k] ? my_seq - p->heard_seq[k] : 0;
            }
            if (p->copy_id[k] == r->ids[i]) {
                int64_t ms = clock_mono_now().ms - p->copy_start_ms[k];
                row->copy_bytes = p->copy_bytes[k];
                row->copy_total = p->copy_total[k];
                row->copy_keys = p->copy_keys[k];
                row->copy_ms = ms > 0 ? (uint64_t)ms : 1;
            }
        }
    }
    return 0;
}

int logship_lags(logship *ls, logship_lag **out, size_t *n, logship_sets *sets)
{
    node_map *m = maps_acquire(ls->ns);
    logship_lag *rows = NULL;
    logship_sets counted;
    size_t cap = 0;
    int rv = 0;
    *out = NULL;
    *n = 0;
    memset(&counted, 0, sizeof(counted));
    for (size_t t = 0; rv == 0 && t < m->pm->ntables; t++) {
        const pmap_table *tb = &m->pm->tables[t];
        if (!pmap_logged(tb, PMAP_ANY_PART, ls->ns->id)) {
            continue; /* one copy everywhere: no followers to lag */
        }
        for (uint32_t part = 0; rv == 0 && part < tb->schema.partitions; part++) {
            const pmap_replicas *r = pmap_part(tb, part);
            uint64_t epoch = 0, my_seq = 0;
            if (r == NULL || r->ids[0] != ls->ns->id) {
                continue;
            }
            uint32_t in_sync = pmap_in_sync_count(r);
            counted.led++;
            counted.under += in_sync < r->n;
            counted.by_in_sync[in_sync]++;
            /* An unreadable position reads as 0: lags show as 0, not wrong. */
            replog_position(ls->ns->st, tb->schema.id, part, &epoch, &my_seq, NULL, 0);
            pthread_mutex_lock(&ls->lock);
            rv = add_set(ls, tb, part, r, my_seq, &rows, n, &cap);
            pthread_mutex_unlock(&ls->lock);
        }
    }
    maps_release(m);
    if (rv != 0) {
        free(rows);
        *n = 0;
        return rv;
    }
    *out = rows;
    if (sets != NULL) {
        *sets = counted;
    }
    return 0;
}

int logship_lag_pb(logship *ls, arena *a, Lapse__ReplicaLag ***out, size_t *n)
{
    logship_lag *rows = NULL;
    size_t nrows = 0;
    *out = NULL;
    *n = 0;
    int rv = logship_lags(ls, &rows, &nrows, NULL);
    if (rv != 0 || nrows == 0) {
        return rv;
    }
    Lapse__ReplicaLag **v = arena_alloc(a, nrows * sizeof(*v));
    for (size_t i = 0; v != NULL && i < nrows; i++) {
        Lapse__ReplicaLag *l = arena_alloc(a, sizeof(*l));
        if (l == NULL) {
            v = NULL;
            break;
        }
        lapse__replica_lag__init(l);
        l->table_id = rows[i].table_id;
        l->partition = rows[i].part;
        l->node = rows[i].node;
        l->lag_records = rows[i].lag;
        l->known = rows[i].known != 0;
        l->copy_bytes = rows[i].copy_bytes;
        l->copy_bytes_total = rows[i].copy_total;
        l->copy_keys = rows[i].copy_keys;
        l->copy_ms = rows[i].copy_ms;
        v[i] = l;
    }
    free(rows);
    if (v == NULL) {
        return LAPSE_ENOMEM;
    }
    *out = v;
    *n = nrows;
    return 0;
}

void logship_collect(logship *ls, metrics *m)
{
    logship_lag *rows = NULL;
    logship_sets sets;
    size_t nrows = 0;
    if (logship_lags(ls, &rows, &nrows, &sets) != 0) {
        return; /* out of memory: the gauges keep their last values */
    }
    metrics_gauge_set(m, "lapse_replica_sets_led",
                      "Replicated partitions this node is the primary of", NULL, (double)sets.led);
    uint64_t sending = 0, sent = 0;
    for (size_t i = 0; i < nrows; i++) {
        sending += rows[i].copy_ms > 0;
        sent += rows[i].copy_bytes;
    }
    metrics_gauge_set(m, "lapse_snapshots_sending",
                      "Snapshots this node is sending to followers now (a move's new copy, or a "
                      "copy too far behind for the log)",
                      NULL, (double)sending);
    metrics_gauge_set(m, "lapse_snapshot_bytes_sent",
                      "Bytes the snapshots under way have sent so far", NULL, (double)sent);
    metrics_gauge_set(m, "lapse_replica_sets_under_replicated",
                      "Replicated partitions this node leads with a member out of the in-sync set",
                      NULL, (double)sets.under);
    for (size_t size = 1; size <= PMAP_MAX_REPLICAS; size++) {
        char labels[32], text[8];
        snprintf(text, sizeof(text), "%zu", size);
        metrics_gauge_set(m, "lapse_replica_sets_by_in_sync",
                          "Replicated partitions this node leads, by how many copies are in sync",
                          metrics_labels(labels, sizeof(labels), "in_sync", text, NULL),
                          (double)sets.by_in_sync[size]);
    }
    /* Per follower node the worst lag over the sets led here: one series
     * per node of the map, so a set that moved away leaves no stale one. */
    node_map *nm = maps_acquire(ls->ns);
    for (size_t i = 0; i < nm->pm->nnodes; i++) {
        uint32_t id = nm->pm->nodes[i].id;
        uint64_t worst = 0;
        for (size_t k = 0; k < nrows; k++) {
            if (rows[k].node == id && rows[k].lag > worst) {
                worst = rows[k].lag;
            }
        }
        if (id == ls->ns->id) {
            continue;
        }
        char labels[64], idtext[16];
        snprintf(idtext, sizeof(idtext), "%u", (unsigned)id);
        metrics_gauge_set(m, "lapse_replication_lag_records",
                          "Records the follower node lacks of this primary's log, the worst over "
                          "the partitions this node leads, as last heard from it",
                          metrics_labels(labels, sizeof(labels), "follower", idtext, NULL),
                          (double)worst);
    }
    maps_release(nm);
    free(rows);
    /* Group commit: records per round is round_records / rounds, rounds
     * per call rounds / calls. */
    metrics_counter_add(m, "lapse_replication_rounds_total",
                        "Replication rounds this node shipped as a primary (a partition's records "
                        "queued meanwhile, for each in-sync follower)" METRICS_SINCE_START,
                        NULL, (double)atomic_exchange(&ls->rounds, 0));
    metrics_counter_add(
        m, "lapse_replication_calls_total",
        "ReplicateLog calls that carried those rounds (one per follower per "
        "shipment, with the rounds of every partition bound for it)" METRICS_SINCE_START,
        NULL, (double)atomic_exchange(&ls->calls, 0));
    metrics_counter_add(m, "lapse_replication_round_records_total",
                        "Records those replication rounds carried" METRICS_SINCE_START, NULL,
                        (double)atomic_exchange(&ls->round_records, 0));
}

/* The buckets of both replication timings: 50 us to 2 s (a round's
 * time-out). */
static void observe_us(logship *ls, const char *name, const char *help, int64_t us)
{
    static const double bounds[] = {0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002,
                                    0.005,   0.01,   0.05,   0.1,    0.5,   2};
    metrics_histogram_observe(ls->ns->metrics, name, help, bounds,
                              sizeof(bounds) / sizeof(bounds[0]), NULL, (double)us / 1e6);
}

void logship_time_round(logship *ls, int64_t us)
{
    observe_us(ls, "lapse_replication_round_seconds",
               "A shipment of replication rounds this node led, from sending it to its "
               "followers to the last one's answer" METRICS_SINCE_START,
               us);
}

void logship_time_apply(logship *ls, int64_t us)
{
    observe_us(ls, "lapse_replication_apply_seconds",
               "A follower's apply of one ReplicateLog call of records, from its arrival to "
               "its answer" METRICS_SINCE_START,
               us);
}
