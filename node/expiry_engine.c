/*
 * expiry_engine.c: the expiry engine's registry of tables, its sync with the
 * partition map, progress reports, the clock verdict and the metrics it
 * computes on demand (contract in expiry_engine.h; state in expiry_engine_int.h).
 */
#include "expiry_engine_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../partition/expiry.h"

#define BACKLOG_CAP 100000 /* per table: expiry_backlog stops counting here */
/* The cap as text, for the metric's help (docs and prometheus.yml quote it). */
#define TEXT_OF_(x) #x
#define TEXT_OF(x) TEXT_OF_(x)
/* The backlog is counted by walking the expiry index; a scrape within this
 * long of the last count reuses it, so a tight scrape loop cannot keep the
 * node walking a large backlog. */
#define BACKLOG_REUSE_MS 1000

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

size_t expiry_engine_worker_of(const expiry_engine *e, uint32_t table_id, uint32_t part)
{
    uint64_t h = ((uint64_t)table_id << 32 | part) * 0x9E3779B97F4A7C15ULL;
    return (size_t)((h >> 32) % (uint64_t)e->opt.workers);
}

expiry_engine_table *expiry_engine_find(expiry_engine *e, uint32_t table_id)
{
    for (size_t i = 0; i < e->ntables; i++) {
        if (e->tables[i].schema.id == table_id) {
            return &e->tables[i];
        }
    }
    return NULL;
}

static expiry_engine_slot *slot_find(expiry_engine_worker *w, uint32_t table_id, uint32_t part)
{
    size_t lo = 0, hi = w->nslots;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        expiry_engine_slot *s = &w->slots[mid];
        if (s->table_id == table_id && s->part == part) {
            return s;
        }
        if (s->table_id < table_id || (s->table_id == table_id && s->part < part)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

void expiry_engine_slot_touch(expiry_engine *e, uint32_t table_id, uint32_t part)
{
    expiry_engine_worker *w = &e->workers[expiry_engine_worker_of(e, table_id, part)];
    expiry_engine_slot *s = slot_find(w, table_id, part);
    if (s != NULL) {
        s->refresh = 1;
    }
    pthread_cond_signal(&w->cond);
}

/* The store's expiry hook (store_set_expiry_hook): a write added an entry
 * due at due_ms; lowers its slot's next due instant and wakes the scanner
 * when that is before its plan. Here, not in expiry_scanner.c, because it needs
 * slot_find. */
static void due_hook(void *arg, uint32_t table_id, uint32_t part, int64_t due_ms)
{
    expiry_engine *e = arg;
    expiry_engine_worker *w = &e->workers[expiry_engine_worker_of(e, table_id, part)];
    pthread_mutex_lock(&e->lock);
    expiry_engine_slot *s = slot_find(w, table_id, part);
    if (s != NULL) {
        if (due_ms < s->next_due_ms) {
            s->next_due_ms = due_ms;
        }
        /* Expired at due + 1 ms: wake only when that is before the plan. */
        if (due_ms + 1 < w->wake_at_ms) {
            pthread_cond_signal(&w->cond);
        }
    }
    pthread_mutex_unlock(&e->lock);
}

static int ttl_configured(const table_schema *t)
{
    return t->ttl.attribute[0] != 0 || t->ttl.config_version != 0;
}

static void table_fini(expiry_engine_table *t)
{
    free(t->parts);
    free(t->backfilled);
    t->parts = NULL;
    t->backfilled = NULL;
}

static void wake_all(expiry_engine *e)
{
    for (int i = 0; i < e->opt.workers; i++) {
        pthread_cond_signal(&e->workers[i].cond);
    }
    pthread_cond_broadcast(&e->bf_cond);
}

static int busy_with(expiry_engine *e, uint32_t table_id)
{
    for (int i = 0; i < EXPIRY_ENGINE_BACKFILL_THREADS; i++) {
        if (e->bf[i].busy_table == table_id) {
            return 1;
        }
    }
    for (int i = 0; i < e->opt.workers; i++) {
        if (e->workers[i].busy_table == table_id) {
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Sync with the map                                                         */
/* ------------------------------------------------------------------------ */

/* Builds the registry entry of t from the map, carrying over what old (the
 * previous entry of the same table, or NULL) still says. Returns 0 or
 * LAPSE_ENOMEM (nt untouched). */
static int table_build(expiry_engine_table *nt, const pmap_table *pt,
                       const expiry_engine_table *old, uint32_t node_id)
{
    const table_schema *s = &pt->schema;
    uint32_t n = 0;
    for (uint32_t p = 0; p < s->partitions; p++) {
        n += pmap_owner(pt, p) == node_id;
    }
    uint32_t *parts = calloc(n ? n : 1, sizeof(*parts));
    uint8_t *done = calloc(n ? n : 1, 1);
    if (parts == NULL || done == NULL) {
        free(parts);
        free(done);
        return LAPSE_ENOMEM;
    }
    memset(nt, 0, sizeof(*nt));
    nt->schema = *s;
    nt->parts = parts;
    nt->backfilled = done;
    int same_config = old != NULL && old->schema.ttl.enabled && s->ttl.enabled &&
                      old->schema.ttl.config_version == s->ttl.config_version;
    if (old != NULL) {
        memcpy(nt->ignored, old->ignored, sizeof(nt->ignored));
        nt->dropped = old->dropped && !s->ttl.enabled;
    }
    if (same_config) {
        nt->backfill_items = old->backfill_items;
        nt->bf_started_mono = old->bf_started_mono;
        nt->bf_logged_mono = old->bf_logged_mono;
        nt->bf_complete_logged = old->bf_complete_logged;
    } else {
        memset(nt->ignored, 0, sizeof(nt->ignored));
    }
    uint32_t j = 0;
    for (uint32_t p = 0; p < s->partitions; p++) {
        if (pmap_owner(pt, p) != node_id) {
            continue;
        }
        parts[j] = p;
        if (same_config) {
            /* Keep a partition's verdict while we keep owning it. */
            for (uint32_t k = 0; k < old->nparts; k++) {
                if (old->parts[k] == p) {
                    done[j] = old->backfilled[k];
                    break;
                }
            }
        }
        nt->parts_done += done[j];
        j++;
    }
    nt->nparts = n;
    return 0;
}

static void log_change(const expiry_engine_table *old, const table_schema *s)
{
    const table_ttl *n = &s->ttl;
    if (n->enabled && (old == NULL || !old->schema.ttl.enabled ||
                       old->schema.ttl.config_version != n->config_version)) {
        log_info("TTL on table \"%s\" (id %u): enabled, attribute \"%s\", offset %" PRId64
                 " s, guard %d years, config version %" PRIu64 "%s",
                 s->name, s->id, n->attribute, n->offset_s,
                 n->guard_years ? n->guard_years : TTL_DEFAULT_GUARD_YEARS, n->config_version,
                 n->paused ? " (paused)" : "");
        return;
    }
    if (old == NULL) {
        return;
    }
    if (!n->enabled && old->schema.ttl.enabled) {
        log_info("TTL on table \"%s\" (id %u): disabled (config version %" PRIu64
                 "): scanners stop, index dropped",
                 s->name, s->id, n->config_version);
    } else if (n->enabled && n->paused != old->schema.ttl.paused) {
        log_info("TTL on table \"%s\" (id %u): %s", s->name, s->id,
                 n->paused ? "paused (index kept, no deletes)" : "resumed");
    }
}

void expiry_engine_sync(expiry_engine *e, const pmap *pm)
{
    size_t cap = pm->ntables;
    expiry_engine_table *nts = calloc(cap ? cap : 1, sizeof(*nts));
    uint32_t *to_drop = calloc(cap ? cap : 1, sizeof(*to_drop));
    size_t n = 0, ndrop = 0;
    if (nts == NULL || to_drop == NULL) {
        log_error("TTL: out of memory following map version %" PRIu64 "; keeping the old config",
                  pm->version);
        free(nts);
        free(to_drop);
        return;
    }
    pthread_mutex_lock(&e->lock);
    for (size_t i = 0; i < pm->ntables; i++) {
        const pmap_table *pt = &pm->tables[i];
        if (!ttl_configured(&pt->schema)) {
            continue;
        }
        expiry_engine_table *old = expiry_engine_find(e, pt->schema.id);
        if (table_build(&nts[n], pt, old, e->node_id) != 0) {
            log_error("TTL: out of memory following table \"%s\"", pt->schema.name);
            continue;
        }
        log_change(old, &pt->schema);
        if (!pt->schema.ttl.enabled && (old == NULL || !old->dropped)) {
            to_drop[ndrop++] = pt->schema.id;
        }
        n++;
    }
    /* Tables gone from the map, or whose config vanished, are forgotten:
     * maps.c drops a deleted table's index with its items. */
    for (size_t i = 0; i < e->ntables; i++) {
        table_fini(&e->tables[i]);
    }
    free(e->tables);
    e->tables = nts;
    e->ntables = n;
    e->bf_next = 0;
    e->gen++;
    wake_all(e);
    pthread_cond_broadcast(&e->progress);
    /* Invariant 1: no step or sweep of a table to drop may still run. */
    for (size_t i = 0; i < ndrop; i++) {
        while (busy_with(e, to_drop[i])) {
            pthread_cond_wait(&e->idle, &e->lock);
        }
    }
    pthread_mutex_unlock(&e->lock);

    for (size_t i = 0; i < ndrop; i++) {
        char err[256] = "";
        int rv = expiry_drop_table(e->st, to_drop[i], err, sizeof(err));
        if (rv != 0) {
            log_error("TTL: dropping the expiry index of table id %u failed: %s: %s (retried at "
                      "the next map)",
                      to_drop[i], lapse_strerror(rv), err);
            continue;
        }
        pthread_mutex_lock(&e->lock);
        expiry_engine_table *t = expiry_engine_find(e, to_drop[i]);
        if (t != NULL && !t->schema.ttl.enabled) {
            t->dropped = 1;
        }
        pthread_mutex_unlock(&e->lock);
    }
    free(to_drop);
}

/* ------------------------------------------------------------------------ */
/* Progress                                                                  */
/* ------------------------------------------------------------------------ */

static int all_backfilled(expiry_engine *e)
{
    for (size_t i = 0; i < e->ntables; i++) {
        const expiry_engine_table *t = &e->tables[i];
        if (t->schema.ttl.enabled && t->parts_done < t->nparts) {
            return 0;
        }
    }
    return 1;
}

void expiry_engine_wait_backfilled(expiry_engine *e, int timeout_ms)
{
    struct timespec ts = clock_mono_abstime(timeout_ms);
    pthread_mutex_lock(&e->lock);
    while (!e->stopping && !all_backfilled(e)) {
        if (pthread_cond_timedwait(&e->progress, &e->lock, &ts) == ETIMEDOUT) {
            break;
        }
    }
    pthread_mutex_unlock(&e->lock);
}

int expiry_engine_progress_pb(expiry_engine *e, arena *a, Lapse__TtlProgress ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&e->lock);
    int rv = 0;
    if (e->ntables == 0) {
        goto out;
    }
    Lapse__TtlProgress **list = arena_alloc(a, e->ntables * sizeof(*list));
    if (list == NULL) {
        rv = LAPSE_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < e->ntables; i++) {
        const expiry_engine_table *t = &e->tables[i];
        Lapse__TtlProgress *p = arena_alloc(a, sizeof(*p));
        if (p == NULL) {
            rv = LAPSE_ENOMEM;
            goto out;
        }
        lapse__ttl_progress__init(p);
        p->table_id = t->schema.id;
        p->config_version = t->schema.ttl.config_version;
        p->partitions_total = t->nparts;
        if (t->schema.ttl.enabled) {
            p->backfill_done = t->parts_done == t->nparts;
            p->partitions_done = t->parts_done;
            p->backfill_items = t->backfill_items;
        } else {
            p->backfill_done = t->dropped != 0;
            p->partitions_done = t->dropped ? t->nparts : 0;
        }
        list[i] = p;
    }
    *out = list;
    *n = e->ntables;
out:
    pthread_mutex_unlock(&e->lock);
    return rv;
}

/* ------------------------------------------------------------------------ */
/* Clock safety                                                              */
/* ------------------------------------------------------------------------ */

void expiry_engine_clock_report(expiry_engine *e, int64_t skew_ms, int64_t rtt_ms)
{
    int64_t mag = skew_ms < 0 ? -skew_ms : skew_ms;
    expiry_engine_clock_state next =
        mag > e->opt.max_clock_skew_ms ? EXPIRY_ENGINE_CLOCK_SKEWED : EXPIRY_ENGINE_CLOCK_OK;
    pthread_mutex_lock(&e->lock);
    expiry_engine_clock_state prev = e->clock;
    e->clock = next;
    e->skew_ms = skew_ms;
    if (prev != next) {
        wake_all(e);
    }
    pthread_mutex_unlock(&e->lock);
    if (prev == next) {
        return;
    }
    if (next == EXPIRY_ENGINE_CLOCK_SKEWED) {
        log_warn("TTL scanners paused: this node's clock is %" PRId64
                 " ms %s the coordinator's (round trip %" PRId64
                 " ms), beyond --max-clock-skew-ms %" PRId64 "; nothing expires here until it "
                 "is back within bounds",
                 mag, skew_ms > 0 ? "ahead of" : "behind", rtt_ms, e->opt.max_clock_skew_ms);
    } else if (prev == EXPIRY_ENGINE_CLOCK_SKEWED) {
        log_info("TTL scanners resumed: clock skew %" PRId64 " ms (round trip %" PRId64
                 " ms) is within --max-clock-skew-ms %" PRId64,
                 skew_ms, rtt_ms, e->opt.max_clock_skew_ms);
    } else {
        log_info("TTL scanners start: clock skew %" PRId64 " ms (round trip %" PRId64
                 " ms) is within --max-clock-skew-ms %" PRId64,
                 skew_ms, rtt_ms, e->opt.max_clock_skew_ms);
    }
}

expiry_engine_clock_state expiry_engine_clock(expiry_engine *e, int64_t *skew_ms)
{
    pthread_mutex_lock(&e->lock);
    expiry_engine_clock_state s = e->clock;
    if (skew_ms != NULL) {
        *skew_ms = e->skew_ms;
    }
    pthread_mutex_unlock(&e->lock);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Metrics                                                                   */
/* ------------------------------------------------------------------------ */

void expiry_engine_note_write(expiry_engine *e, const table_schema *t, const item *it)
{
    if (e == NULL || !t->ttl.enabled || it == NULL) {
        return;
    }
    ttl_verdict v = ttl_eval(&t->ttl, it, clock_wall_now(), NULL);
    if (v == TTL_ELIGIBLE || (unsigned)v >= TTL_VERDICT_COUNT) {
        return;
    }
    pthread_mutex_lock(&e->lock);
    expiry_engine_table *et = expiry_engine_find(e, t->id);
    if (et != NULL) {
        et->ignored[v]++;
    }
    pthread_mutex_unlock(&e->lock);
}

/* What the collector needs of one table, copied out under the lock. */
typedef struct collect_row {
    uint32_t id;
    char name[SCHEMA_MAX_NAME + 1];
    int enabled;
    uint64_t config_version;
    uint32_t *parts; /* owned copy */
    uint32_t nparts;
    uint64_t ignored[TTL_VERDICT_COUNT];
    int fresh; /* backlog/oldest below are recent: reuse them */
    uint64_t backlog;
    int64_t oldest;
} collect_row;

/* Counts the expired items not yet deleted of row's partitions (up to
 * BACKLOG_CAP) and the earliest due instant among them. No lock held. */
static void count_backlog(expiry_engine *e, collect_row *row, clock_wall now)
{
    row->backlog = 0;
    row->oldest = EXPIRY_NONE;
    for (uint32_t k = 0; row->enabled && k < row->nparts && row->backlog < BACKLOG_CAP; k++) {
        uint64_t cnt = 0;
        int64_t due = EXPIRY_NONE;
        char err[256] = "";
        if (expiry_backlog(e->st, row->id, row->parts[k], now, BACKLOG_CAP - row->backlog, &cnt,
                           &due, err, sizeof(err)) != 0) {
            log_debug("TTL backlog of table %u partition %u: %s", row->id, row->parts[k], err);
            continue;
        }
        row->backlog += cnt;
        if (cnt > 0 && due < row->oldest) {
            row->oldest = due;
        }
    }
}

void expiry_engine_collect(expiry_engine *e, metrics *m)
{
    const int64_t mono = clock_mono_now().ms;
    pthread_mutex_lock(&e->lock);
    size_t n = e->ntables;
    collect_row *rows = calloc(n ? n : 1, sizeof(*rows));
    for (size_t i = 0; rows != NULL && i < n; i++) {
        const expiry_engine_table *t = &e->tables[i];
        rows[i].id = t->schema.id;
        memcpy(rows[i].name, t->schema.name, sizeof(rows[i].name));
        rows[i].enabled = t->schema.ttl.enabled;
        rows[i].config_version = t->schema.ttl.config_version;
        rows[i].parts = malloc((t->nparts ? t->nparts : 1) * sizeof(uint32_t));
        if (rows[i].parts != NULL) {
            memcpy(rows[i].parts, t->parts, t->nparts * sizeof(uint32_t));
            rows[i].nparts = t->nparts;
        }
        memcpy(rows[i].ignored, t->ignored, sizeof(rows[i].ignored));
        if (t->backlog_at_mono != 0 && mono - t->backlog_at_mono < BACKLOG_REUSE_MS) {
            rows[i].fresh = 1;
            rows[i].backlog = t->backlog;
            rows[i].oldest = t->backlog_oldest;
        }
    }
    expiry_engine_clock_state clock = e->clock;
    int64_t skew_ms = e->skew_ms;
    pthread_mutex_unlock(&e->lock);

    metrics_gauge_set(m, "lapse_clock_skew_seconds",
                      "This node's wall clock minus the coordinator's, from the last heartbeat",
                      NULL, (double)skew_ms / 1000.0);
    metrics_gauge_set(m, "lapse_ttl_paused_for_clock",
                      "1 when the TTL scanners are paused because the clock skew is too large",
                      NULL, clock == EXPIRY_ENGINE_CLOCK_SKEWED ? 1 : 0);
    if (rows == NULL) {
        return;
    }
    clock_wall now = clock_wall_now();
    for (size_t i = 0; i < n; i++) {
        char labels[SCHEMA_MAX_NAME * 2 + 64];
        metrics_labels(labels, sizeof(labels), "table", rows[i].name, NULL);
        metrics_gauge_set(m, "lapse_ttl_config_version",
                          "TTL config version applied on this node (0: never configured)", labels,
                          (double)rows[i].config_version);
        if (!rows[i].fresh) {
            count_backlog(e, &rows[i], now);
            pthread_mutex_lock(&e->lock);
            expiry_engine_table *et = expiry_engine_find(e, rows[i].id);
            if (et != NULL) {
                et->backlog_at_mono = mono;
                et->backlog = rows[i].backlog;
                et->backlog_oldest = rows[i].oldest;
            }
            pthread_mutex_unlock(&e->lock);
        }
        const uint64_t backlog = rows[i].backlog;
        const int64_t oldest = rows[i].oldest;
        metrics_gauge_set(m, "lapse_ttl_expired_backlog_items",
                          "Expired items not yet deleted on this node (counted up to " TEXT_OF(
                              BACKLOG_CAP) ", at most once a second)",
                          labels, (double)backlog);
        double age = oldest == EXPIRY_NONE || oldest >= now.ms ? 0 : (now.ms - oldest) / 1000.0;
        metrics_gauge_set(m, "lapse_ttl_oldest_undeleted_age_seconds",
                          "Time since the due instant of the oldest expired item not yet deleted",
                          labels, age);
        for (int v = 1; v < TTL_VERDICT_COUNT; v++) {
            char l2[SCHEMA_MAX_NAME * 2 + 96];
            metrics_labels(l2, sizeof(l2), "table", rows[i].name, "reason",
                           ttl_verdict_name((ttl_verdict)v), NULL);
            metrics_gauge_set(m, "lapse_ttl_ignored_items",
                              "Items found by the backfill or written under the enabled TTL rule "
                              "whose value it ignores, per reason (since the node started or the "
                              "rule changed)",
                              l2, (double)rows[i].ignored[v]);
        }
        free(rows[i].parts);
    }
    free(rows);
}

/* ------------------------------------------------------------------------ */
/* Life cycle                                                                */
/* ------------------------------------------------------------------------ */

int expiry_engine_open(expiry_engine **out, store *st, uint32_t node_id, const pmap *pm,
                       const expiry_engine_options *opt, metrics *m,
                       const expiry_engine_hooks *hooks, char *err, size_t errlen)
{
    *out = NULL;
    expiry_engine *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    e->st = st;
    e->node_id = node_id;
    e->opt = *opt;
    if (e->opt.workers < 1 || e->opt.workers > EXPIRY_ENGINE_MAX_WORKERS) {
        e->opt.workers = EXPIRY_ENGINE_DEFAULT_WORKERS;
    }
    if (e->opt.naive_interval_ms <= 0) {
        e->opt.naive_interval_ms = EXPIRY_ENGINE_DEFAULT_NAIVE_INTERVAL_MS;
    }
    e->m = m;
    if (hooks != NULL) {
        e->on_delete = hooks->on_delete;
        e->on_delete_arg = hooks->arg;
        e->on_backfilled = hooks->on_backfilled;
    }
    e->clock = EXPIRY_ENGINE_CLOCK_UNKNOWN;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->idle, NULL);
    clock_cond_init_mono(&e->progress);
    clock_cond_init_mono(&e->bf_cond);
    e->tokens_mono_ms = clock_mono_now().ms;
    e->workers = calloc((size_t)e->opt.workers, sizeof(*e->workers));
    if (e->workers == NULL) {
        goto oom;
    }
    for (int i = 0; i < e->opt.workers; i++) {
        expiry_engine_worker *w = &e->workers[i];
        w->e = e;
        w->index = i;
        w->wake_at_ms = INT64_MAX;
        clock_cond_init_mono(&w->cond);
        if ((w->due_ms = calloc(EXPIRY_ENGINE_SWEEP_BATCH, sizeof(*w->due_ms))) == NULL) {
            goto oom;
        }
    }
    expiry_engine_sync(e, pm);
    store_set_expiry_hook(st, due_hook, e);
    int rc;
    e->bf_paced_ms = (double)clock_mono_now().ms;
    for (int i = 0; i < EXPIRY_ENGINE_BACKFILL_THREADS; i++) {
        e->bf[i].e = e;
        if ((rc = pthread_create(&e->bf[i].thread, NULL, expiry_engine_backfiller_run,
                                 &e->bf[i])) != 0) {
            snprintf(err, errlen, "cannot start a TTL backfill thread: %s", strerror(rc));
            expiry_engine_close(e);
            return LAPSE_ENOMEM;
        }
        e->bf[i].started = 1;
    }
    for (int i = 0; i < e->opt.workers; i++) {
        rc = pthread_create(&e->workers[i].thread, NULL, expiry_engine_scanner_run, &e->workers[i]);
        if (rc != 0) {
            snprintf(err, errlen, "cannot start TTL scanner %d: %s", i, strerror(rc));
            expiry_engine_close(e);
            return LAPSE_ENOMEM;
        }
        e->workers[i].started = 1;
    }
    log_info("TTL engine: %d scanner%s, deletes %s, backfill %s, max clock skew %" PRId64
             " ms; scanners wait for the first clock check",
             e->opt.workers, e->opt.workers == 1 ? "" : "s",
             e->opt.max_deletes_per_sec ? "rate-limited" : "unlimited",
             e->opt.backfill_items_per_s ? "rate-limited" : "unlimited", e->opt.max_clock_skew_ms);
    if (e->opt.naive_scan) {
        log_warn("benchmark flag --ttl-naive-scan: the scanners ignore the expiry index and read "
                 "every item of every TTL table each pass, then sleep %" PRId64 " ms",
                 e->opt.naive_interval_ms);
    }
    *out = e;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    expiry_engine_close(e);
    return LAPSE_ENOMEM;
}

void expiry_engine_close(expiry_engine *e)
{
    if (e == NULL) {
        return;
    }
    store_set_expiry_hook(e->st, NULL, NULL);
    pthread_mutex_lock(&e->lock);
    e->stopping = 1;
    if (e->workers != NULL) {
        wake_all(e);
    }
    pthread_cond_broadcast(&e->progress);
    pthread_mutex_unlock(&e->lock);
    for (int i = 0; i < EXPIRY_ENGINE_BACKFILL_THREADS; i++) {
        if (e->bf[i].started) {
            pthread_join(e->bf[i].thread, NULL);
        }
    }
    for (int i = 0; e->workers != NULL && i < e->opt.workers; i++) {
        if (e->workers[i].started) {
            pthread_join(e->workers[i].thread, NULL);
        }
    }
    for (int i = 0; e->workers != NULL && i < e->opt.workers; i++) {
        free(e->workers[i].slots);
        free(e->workers[i].due_ms);
        pthread_cond_destroy(&e->workers[i].cond);
    }
    free(e->workers);
    for (size_t i = 0; i < e->ntables; i++) {
        table_fini(&e->tables[i]);
    }
    free(e->tables);
    pthread_cond_destroy(&e->bf_cond);
    pthread_cond_destroy(&e->progress);
    pthread_cond_destroy(&e->idle);
    pthread_mutex_destroy(&e->lock);
    free(e);
}
