/*
 * shipper.c: the outbox shipper (contract in shipper.h; state in
 * shipper_int.h): lanes built from the map, the workers that claim a
 * destination and run a round to it (shipper_round.c), wake-ups, the
 * pending gauge and the life cycle.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../partition/outbox.h"
#include "maps.h"
#include "shipper_int.h"

/* ======================================================================== */
/* Lanes from the map                                                       */
/* ======================================================================== */

/* The entry of node id (appended when new), or (size_t)-1 on OOM.
 * REQUIRES: lock held. */
static size_t dest_of(shipper *s, uint32_t id)
{
    for (size_t i = 0; i < s->ndests; i++) {
        if (s->dests[i].id == id) {
            return i;
        }
    }
    if (s->ndests == s->dcap) {
        size_t cap = s->dcap ? s->dcap * 2 : 8;
        dest *d = realloc(s->dests, cap * sizeof(*d));
        if (d == NULL) {
            return (size_t)-1;
        }
        s->dests = d;
        s->dcap = cap;
    }
    dest *d = &s->dests[s->ndests];
    memset(d, 0, sizeof(*d));
    d->id = id;
    return s->ndests++;
}

static int cmp_source(const void *a, const void *b)
{
    const source *x = a, *y = b;
    if (x->table_id != y->table_id) {
        return x->table_id < y->table_id ? -1 : 1;
    }
    return x->part < y->part ? -1 : x->part > y->part;
}

static void sources_free(source *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].lanes);
    }
    free(v);
}

/* Rebuilds the sources from pm, carrying over the state of lanes that stay
 * (invariant 3). Every lane starts dirty. Returns 0, or LAPSE_ENOMEM with
 * the old lanes kept (the caller retries later). REQUIRES: lock held. */
static int rebuild(shipper *s, const pmap *pm)
{
    uint32_t ids[PMAP_MAX_DESTINATIONS];
    size_t n = 0;
    for (size_t i = 0; i < pm->ntables; i++) {
        const pmap_table *t = &pm->tables[i];
        for (uint32_t p = 0; schema_has_outbox(&t->schema) && p < t->schema.partitions; p++) {
            n += pmap_owner(t, p) == s->self;
        }
    }
    source *v = calloc(n ? n : 1, sizeof(*v));
    if (v == NULL) {
        log_error("outbox shipper: out of memory following map version %" PRIu64, pm->version);
        return LAPSE_ENOMEM;
    }
    for (size_t i = 0; i < s->ndests; i++) {
        s->dests[i].in_map = 0;
    }
    size_t k = 0;
    for (size_t i = 0; i < pm->ntables; i++) {
        const pmap_table *t = &pm->tables[i];
        for (uint32_t p = 0; schema_has_outbox(&t->schema) && p < t->schema.partitions; p++) {
            if (pmap_owner(t, p) != s->self) {
                continue;
            }
            source *src = &v[k++];
            src->table_id = t->schema.id;
            src->part = p;
            size_t nd = pmap_outbox_destinations(t, p, ids, PMAP_MAX_DESTINATIONS);
            if ((src->lanes = calloc(nd ? nd : 1, sizeof(lane))) == NULL) {
                goto oom;
            }
            source *old = shipper_source(s, src->table_id, p);
            src->trimmed = old != NULL ? old->trimmed : 0;
            src->trim_at_ms = old != NULL ? old->trim_at_ms : 0;
            for (size_t j = 0; j < nd; j++) {
                const pmap_node *node = pmap_node_find(pm, ids[j]);
                size_t di = dest_of(s, ids[j]);
                if (di == (size_t)-1) {
                    goto oom;
                }
                dest *d = &s->dests[di];
                d->in_map = 1;
                d->has_dirty = 1;
                if (node != NULL) {
                    snprintf(d->url, sizeof(d->url), "%s", node->address);
                }
                lane *l = &src->lanes[src->nlanes++];
                const lane *ol = shipper_lane(old, ids[j]);
                if (ol != NULL) {
                    *l = *ol;
                }
                /* A new lease is a restart: what it acked may be lost. A new
                 * lane (this node just took the partition over, or started)
                 * starts from the stored ack, which may be as stale. */
                int64_t lease = node != NULL ? node->lease : 0;
                l->check |= ol == NULL || (ol->lease != 0 && lease != ol->lease);
                l->lease = lease;
                l->dest = ids[j];
                l->di = di;
                l->dirty = 1;
            }
        }
    }
    /* Tables are in map order, not id order: sort by key for lookups. */
    if (k > 1) {
        qsort(v, k, sizeof(*v), cmp_source);
    }
    sources_free(s->sources, s->nsources);
    s->sources = v;
    s->nsources = k;
    s->map_version = pm->version;
    log_debug("outbox shipper: %zu source partitions, %zu destinations (map version %" PRIu64 ")",
              k, s->ndests, pm->version);
    return 0;
oom:
    sources_free(v, k);
    for (size_t i = 0; i < s->nsources; i++) { /* the old lanes stay in service */
        for (size_t j = 0; j < s->sources[i].nlanes; j++) {
            s->dests[s->sources[i].lanes[j].di].in_map = 1;
        }
    }
    log_error("outbox shipper: out of memory following map version %" PRIu64, pm->version);
    return LAPSE_ENOMEM;
}

/* ======================================================================== */
/* Workers                                                                  */
/* ======================================================================== */

/* The next destination to ship to: it has dirty lanes, is in the map, no
 * worker is in a round to it, it is not backing off, and a probe slot is
 * free when it is down. SIZE_MAX when none; *wake_at is lowered to when
 * one backing off may go. REQUIRES: lock held. */
static size_t pick(shipper *s, int64_t now, int64_t *wake_at)
{
    for (size_t k = 0; k < s->ndests; k++) {
        size_t i = (s->cursor + k) % s->ndests;
        dest *d = &s->dests[i];
        if (!d->in_map || !d->has_dirty || d->claimed) {
            continue;
        }
        if (d->retry_at_ms > now) {
            *wake_at = d->retry_at_ms < *wake_at ? d->retry_at_ms : *wake_at;
            continue;
        }
        if (d->down && s->probing >= s->max_probes) {
            continue; /* a finished round broadcasts */
        }
        s->cursor = i + 1;
        return i;
    }
    return SIZE_MAX;
}

/*
 * A worker. Each iteration: follow a new map (rebuild the lanes); every
 * SHIPPER_RESCAN_MS mark every lane dirty (the safety net); pick a
 * destination (pick), collect its ready dirty lanes and run one round to
 * it (shipper_round: bounded by SHIPPER_ROUND_LANES batches, SHIPPER_ROUND_BYTES
 * and one RPC timeout); with nothing to do, sleep until woken by a write, a
 * finished round, a backoff ending or the next rescan. Ends when stopping.
 */
static void *worker_run(void *arg)
{
    shipper *s = arg;
    job *jobs = calloc(SHIPPER_ROUND_LANES, sizeof(*jobs));
    if (jobs == NULL) {
        log_error("outbox shipper: out of memory; a worker does not start");
        return NULL;
    }
    pthread_mutex_lock(&s->lock);
    while (!s->stopping) {
        if (maps_version(s->ns) != s->map_version) {
            node_map *m = maps_acquire(s->ns);
            int rv = rebuild(s, m->pm);
            maps_release(m);
            if (rv != 0) {
                struct timespec ts = clock_mono_abstime(SHIPPER_BACKOFF_MAX_MS);
                pthread_cond_timedwait(&s->cond, &s->lock, &ts);
                continue;
            }
        }
        int64_t now = clock_mono_now().ms;
        if (now < s->start_at_ms) {
            struct timespec ts = clock_mono_abstime(s->start_at_ms - now);
            pthread_cond_timedwait(&s->cond, &s->lock, &ts);
            continue;
        }
        if (now >= s->rescan_at_ms) {
            for (size_t i = 0; i < s->nsources; i++) {
                for (size_t k = 0; k < s->sources[i].nlanes; k++) {
                    shipper_mark_dirty(s, &s->sources[i].lanes[k]);
                }
            }
            s->rescan_at_ms = now + SHIPPER_RESCAN_MS;
        }
        int64_t wake_at = s->rescan_at_ms;
        size_t di = pick(s, now, &wake_at);
        if (di == SIZE_MAX) {
            struct timespec ts = clock_mono_abstime(wake_at - now);
            pthread_cond_timedwait(&s->cond, &s->lock, &ts);
            continue;
        }
        size_t n = shipper_collect_jobs(s, di, jobs, now);
        if (n == 0) {
            continue;
        }
        int probe = s->dests[di].down;
        s->dests[di].claimed = 1;
        s->probing += probe;
        shipper_round(s, di, jobs, n);
        s->dests[di].claimed = 0; /* re-indexed: dests may have grown meanwhile */
        s->probing -= probe;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    free(jobs);
    return NULL;
}

void shipper_notify(shipper *s, uint32_t table_id, uint32_t part)
{
    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&s->lock);
    source *src = shipper_source(s, table_id, part);
    for (size_t i = 0; src != NULL && i < src->nlanes; i++) {
        shipper_mark_dirty(s, &src->lanes[i]);
    }
    /* Without lanes (a map newer than them) the woken worker rebuilds. */
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

void shipper_notify_table(shipper *s, const table_schema *t, uint32_t part)
{
    if (schema_has_outbox(t)) {
        shipper_notify(s, t->id, part);
    }
}

/* ======================================================================== */
/* Metrics                                                                  */
/* ======================================================================== */

/* A lane copied out for the collector. */
typedef struct lane_row {
    uint32_t table_id, part;
    size_t di;
    uint32_t dest;
    uint64_t acked;
    int known;
} lane_row;

void shipper_collect(shipper *s, metrics *m)
{
    pthread_mutex_lock(&s->lock);
    size_t nl = 0, nd = s->ndests;
    for (size_t i = 0; i < s->nsources; i++) {
        nl += s->sources[i].nlanes;
    }
    lane_row *rows = calloc(nl ? nl : 1, sizeof(*rows));
    uint64_t *sum = calloc(nd ? nd : 1, sizeof(*sum));
    int *show = calloc(nd ? nd : 1, sizeof(*show));
    uint32_t *ids = calloc(nd ? nd : 1, sizeof(*ids));
    if (rows == NULL || sum == NULL || show == NULL || ids == NULL) {
        pthread_mutex_unlock(&s->lock);
        goto out;
    }
    size_t k = 0;
    for (size_t i = 0; i < s->nsources; i++) {
        for (size_t j = 0; j < s->sources[i].nlanes; j++) {
            const lane *l = &s->sources[i].lanes[j];
            rows[k++] =
                (lane_row){s->sources[i].table_id, s->sources[i].part, l->di, l->dest, l->acked,
                           l->acked_known};
        }
    }
    for (size_t i = 0; i < nd; i++) {
        /* A destination that left the map reports 0 once it had a series. */
        show[i] = s->dests[i].in_map || s->dests[i].reported;
        s->dests[i].reported = show[i];
        ids[i] = s->dests[i].id;
    }
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; i < nl; i++) {
        uint64_t last = 0, acked = rows[i].acked;
        char err[256] = "";
        if (outbox_last_seq(s->st, rows[i].table_id, rows[i].part, &last, err, sizeof(err)) != 0 ||
            (!rows[i].known && outbox_acked(s->st, rows[i].table_id, rows[i].part, rows[i].dest,
                                            &acked, err, sizeof(err)) != 0)) {
            log_debug("outbox pending of table id %u partition %u: %s", rows[i].table_id,
                      rows[i].part, err);
            continue;
        }
        sum[rows[i].di] += last > acked ? last - acked : 0;
    }
    for (size_t i = 0; i < nd; i++) {
        if (!show[i]) {
            continue;
        }
        char labels[32], id[16];
        snprintf(id, sizeof(id), "%u", ids[i]);
        metrics_labels(labels, sizeof(labels), "dest", id, NULL);
        metrics_gauge_set(m, "lapse_outbox_pending_records",
                          "Outbox records not yet acked by a destination node, summed over the "
                          "partitions this node owns",
                          labels, (double)sum[i]);
    }
out:
    free(rows);
    free(sum);
    free(show);
    free(ids);
}

/* ======================================================================== */
/* Life cycle                                                               */
/* ======================================================================== */

int shipper_open(shipper **out, node_server *ns, int workers, char *err, size_t errlen)
{
    *out = NULL;
    shipper *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    s->ns = ns;
    s->st = ns->st;
    s->self = ns->id;
    s->nworkers =
        workers >= 1 && workers <= SHIPPER_MAX_WORKERS ? workers : SHIPPER_DEFAULT_WORKERS;
    s->max_probes = s->nworkers > 1 ? s->nworkers - 1 : 1;
    s->start_at_ms = ns->debug_repl_hold_ms > 0 ? clock_mono_now().ms + ns->debug_repl_hold_ms : 0;
    pthread_mutex_init(&s->lock, NULL);
    clock_cond_init_mono(&s->cond);
    clock_cond_init_mono(&s->acks_cond);
    node_map *m = maps_acquire(ns);
    pthread_mutex_lock(&s->lock);
    (void)rebuild(s, m->pm); /* on OOM the workers retry */
    size_t nsources = s->nsources;
    pthread_mutex_unlock(&s->lock);
    maps_release(m);
    if ((s->threads = calloc((size_t)s->nworkers, sizeof(*s->threads))) == NULL) {
        snprintf(err, errlen, "out of memory");
        shipper_close(s);
        return LAPSE_ENOMEM;
    }
    for (int i = 0; i < s->nworkers; i++) {
        int rc = pthread_create(&s->threads[i], NULL, worker_run, s);
        if (rc != 0) {
            snprintf(err, errlen, "cannot start outbox shipper worker %d: %s", i, strerror(rc));
            shipper_close(s);
            return LAPSE_ENOMEM;
        }
        s->nstarted++;
    }
    int rc = pthread_create(&s->acks_thread, NULL, shipper_acks_run, s);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start the outbox shipper's acks thread: %s", strerror(rc));
        shipper_close(s);
        return LAPSE_ENOMEM;
    }
    s->acks_started = 1;
    log_info("outbox shipper: %d worker%s, %zu source partitions", s->nworkers,
             s->nworkers == 1 ? "" : "s", nsources);
    *out = s;
    return 0;
}

void shipper_close(shipper *s)
{
    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < s->nstarted; i++) {
        pthread_join(s->threads[i], NULL);
    }
    /* After the workers: its last step stores the acks of their last rounds. */
    pthread_mutex_lock(&s->lock);
    s->acks_stopping = 1;
    pthread_cond_broadcast(&s->acks_cond);
    pthread_mutex_unlock(&s->lock);
    if (s->acks_started) {
        pthread_join(s->acks_thread, NULL);
    }
    /* No worker runs: the clients are unused (invariant 4). */
    for (size_t i = 0; i < s->ndests; i++) {
        rpc_client_close(s->dests[i].client);
    }
    free(s->dests);
    sources_free(s->sources, s->nsources);
    free(s->threads);
    pthread_cond_destroy(&s->acks_cond);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
