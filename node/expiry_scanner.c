/*
 * expiry_scanner.c: the TTL scanner workers (expiry_engine.h; state in expiry_engine_int.h).
 *
 * Worker w owns the (table, partition) pairs with expiry_engine_worker_of() == w
 * among the enabled, unpaused tables' partitions this node owns. For each it
 * keeps the due instant of the partition's earliest index entry, so it knows
 * exactly when the next item falls due and sleeps until then: there is no
 * polling period that would add lag. The store's expiry hook lowers a
 * pair's instant (and wakes the worker) when a write adds an earlier entry;
 * expiry_engine_sync, the clock verdict and expiry_engine_close wake it too.
 *
 * With --ttl-naive-scan the workers run naive_run instead: full passes over
 * the items without the index, for the benchmark that shows what the index
 * buys.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../partition/expiry.h"
#include "expiry_engine_int.h"

/* Longest single sleep. Not a polling period (a due item never waits for
 * it; the next due instant or a wake-up ends the sleep first): it bounds
 * the damage of a wall-clock step, since the plan is in wall time. */
#define MAX_SLEEP_MS 10000
#define ERROR_BACKOFF_MS 1000

static const double lag_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                    1,     2.5,  5,     10,   30,  60};

static int cmp_slot(const void *a, const void *b)
{
    const expiry_engine_slot *x = a, *y = b;
    if (x->table_id != y->table_id) {
        return x->table_id < y->table_id ? -1 : 1;
    }
    return x->part < y->part ? -1 : x->part > y->part;
}

/* Rebuilds w's pairs from the registry. REQUIRES: lock held. */
static void rebuild(expiry_engine_worker *w)
{
    expiry_engine *e = w->e;
    size_t n = 0;
    for (size_t i = 0; i < e->ntables; i++) {
        const expiry_engine_table *t = &e->tables[i];
        if (!t->schema.ttl.enabled || t->schema.ttl.paused) {
            continue;
        }
        for (uint32_t k = 0; k < t->nparts; k++) {
            n += expiry_engine_worker_of(e, t->schema.id, t->parts[k]) == (size_t)w->index;
        }
    }
    expiry_engine_slot *slots = calloc(n ? n : 1, sizeof(*slots));
    if (slots == NULL) {
        log_error("TTL scanner %d: out of memory; keeping its old partitions", w->index);
        return; /* gen stays old: retried at the next wake-up */
    }
    size_t j = 0;
    for (size_t i = 0; i < e->ntables; i++) {
        const expiry_engine_table *t = &e->tables[i];
        if (!t->schema.ttl.enabled || t->schema.ttl.paused) {
            continue;
        }
        for (uint32_t k = 0; k < t->nparts; k++) {
            if (expiry_engine_worker_of(e, t->schema.id, t->parts[k]) == (size_t)w->index) {
                slots[j].table_id = t->schema.id;
                slots[j].part = t->parts[k];
                slots[j].next_due_ms = EXPIRY_NONE;
                slots[j].refresh = 1;
                j++;
            }
        }
    }
    qsort(slots, n, sizeof(*slots), cmp_slot);
    free(w->slots);
    w->slots = slots;
    w->nslots = n;
    w->gen = e->gen;
}

/* Re-reads the next due instant of every slot marked for it. The instant
 * is set to EXPIRY_NONE first and merged with min afterwards, so an entry
 * the hook reports meanwhile is not lost. Returns with the lock held.
 * REQUIRES: lock held. */
static void refresh(expiry_engine_worker *w)
{
    expiry_engine *e = w->e;
    uint64_t gen = w->gen;
    for (size_t i = 0; i < w->nslots && !e->stopping && w->gen == gen; i++) {
        expiry_engine_slot *s = &w->slots[i];
        if (!s->refresh) {
            continue;
        }
        s->refresh = 0;
        s->next_due_ms = EXPIRY_NONE;
        uint32_t table_id = s->table_id, part = s->part;
        pthread_mutex_unlock(&e->lock);
        int64_t due = EXPIRY_NONE;
        char err[256] = "";
        int rv = expiry_next_due(e->st, table_id, part, &due, err, sizeof(err));
        pthread_mutex_lock(&e->lock);
        if (rv != 0) {
            log_error("TTL scanner %d: next due of table %u partition %u: %s: %s", w->index,
                      table_id, part, lapse_strerror(rv), err);
            s->refresh = 1; /* retried after ERROR_BACKOFF_MS via the sleep cap below */
            due = clock_wall_now().ms + ERROR_BACKOFF_MS;
        }
        if (due < s->next_due_ms) {
            s->next_due_ms = due;
        }
    }
}

/* Takes up to want delete tokens (max_deletes_per_sec), waiting on w's
 * condition until at least one is available. Returns the number taken, 0
 * when the wait was cut short (stop, config or clock change: re-plan).
 * REQUIRES: lock held. */
static size_t take_tokens(expiry_engine_worker *w, size_t want)
{
    expiry_engine *e = w->e;
    uint64_t rate = e->opt.max_deletes_per_sec;
    if (rate == 0) {
        return want;
    }
    double cap = (double)rate / 10.0; /* a burst of 100 ms worth */
    if (cap < 1) {
        cap = 1;
    }
    if (cap > EXPIRY_ENGINE_SWEEP_BATCH) {
        cap = EXPIRY_ENGINE_SWEEP_BATCH;
    }
    int64_t now = clock_mono_now().ms;
    e->tokens += (double)(now - e->tokens_mono_ms) * (double)rate / 1000.0;
    e->tokens_mono_ms = now;
    if (e->tokens > cap) {
        e->tokens = cap;
    }
    if (e->tokens >= 1) {
        size_t n = (size_t)e->tokens;
        if (n > want) {
            n = want;
        }
        e->tokens -= (double)n;
        return n;
    }
    int64_t wait_ms = (int64_t)((1 - e->tokens) * 1000.0 / (double)rate) + 1;
    struct timespec ts = clock_mono_abstime(wait_ms);
    pthread_cond_timedwait(&w->cond, &e->lock, &ts);
    return 0;
}

static void give_back(expiry_engine *e, size_t n)
{
    if (e->opt.max_deletes_per_sec != 0) {
        e->tokens += (double)n;
    }
}

/* Adds one sweep's outcome to the metrics. */
static void record(expiry_engine *e, const table_schema *t, const expiry_sweep_result *res)
{
    char labels[SCHEMA_MAX_NAME * 2 + 16];
    metrics_labels(labels, sizeof(labels), "table", t->name, NULL);
    if (res->deleted > 0) {
        metrics_counter_add(e->m, "lapse_ttl_deleted_items_total",
                            "Items deleted by TTL on this node" METRICS_SINCE_START, labels,
                            (double)res->deleted);
        for (size_t i = 0; i < res->deleted; i++) {
            metrics_histogram_observe(
                e->m, "lapse_ttl_deletion_lag_seconds",
                "Delete commit time minus the item's due instant" METRICS_SINCE_START, lag_bounds,
                sizeof(lag_bounds) / sizeof(lag_bounds[0]), NULL,
                (double)(res->commit_ms - res->due_ms[i]) / 1000.0);
        }
    }
    if (res->undeletable > 0) {
        metrics_counter_add(
            e->m, "lapse_ttl_undeletable_items_total",
            "Expired items that could not be decoded and were skipped" METRICS_SINCE_START, labels,
            (double)res->undeletable);
    }
}

/* Sweeps one batch of slot s. Returns with the lock held.
 * REQUIRES: lock held; s due. */
static void sweep_one(expiry_engine_worker *w, expiry_engine_slot *s, size_t max_items,
                      clock_wall now)
{
    expiry_engine *e = w->e;
    expiry_engine_table *t = expiry_engine_find(e, s->table_id);
    if (t == NULL || !t->schema.ttl.enabled || t->schema.ttl.paused) {
        give_back(e, max_items);
        return; /* a sync raced us; the gen check re-plans */
    }
    table_schema schema = t->schema;
    w->busy_table = s->table_id;
    s->next_due_ms = EXPIRY_NONE;
    pthread_mutex_unlock(&e->lock);

    expiry_sweep_result res;
    memset(&res, 0, sizeof(res));
    res.due_ms = w->due_ms;
    char err[256] = "";
    int rv = expiry_sweep(e->st, &schema, s->part, now, max_items, &res, err, sizeof(err));
    if (rv == 0) {
        record(e, &schema, &res);
        if (res.deleted > 0 && e->on_delete != NULL) {
            e->on_delete(e->on_delete_arg, schema.id, s->part);
        }
    } else {
        log_error("TTL scanner %d: sweeping table \"%s\" partition %u: %s: %s", w->index,
                  schema.name, s->part, lapse_strerror(rv), err);
    }

    pthread_mutex_lock(&e->lock);
    w->busy_table = 0;
    pthread_cond_broadcast(&e->idle);
    size_t used = rv == 0 ? res.deleted + res.stale + res.undeletable : 0;
    give_back(e, used < max_items ? max_items - used : 0);
    int64_t next;
    if (rv != 0) {
        next = clock_wall_now().ms + ERROR_BACKOFF_MS; /* never spin on a failing store */
    } else if (used == 0 && (res.more || ttl_is_expired(res.next_due_ms, now))) {
        /* Due but nothing done: never spin on it (a guard; expiry.h's
         * next due skips the entries it will not retry). */
        next = clock_wall_now().ms + ERROR_BACKOFF_MS;
    } else if (res.more) {
        next = now.ms - 1; /* still due: the next pass takes another batch */
    } else {
        next = res.next_due_ms;
    }
    if (next < s->next_due_ms) {
        s->next_due_ms = next;
    }
}

/* ======================================================================== */
/* The naive scanner (--ttl-naive-scan, benchmark 6 only)                   */
/* ======================================================================== */

/* Items read per expiry_naive_step: the partition's lock is held that long. */
#define NAIVE_SCAN_STEP 10000

/*
 * What a best-effort background sweep without an index does, to show what
 * the index buys (lapse-ttl-bench naive-burst). Each cycle is one full pass:
 * every (table, partition) pair the worker owns (same ownership as the
 * indexed scanner) is read from its first item to its last, in steps of
 * expiry_naive_step (at most NAIVE_SCAN_STEP items read and EXPIRY_ENGINE_SWEEP_BATCH
 * deleted per step, one WriteBatch under the partition's lock, each item
 * judged by ttl_eval at the pass's one wall-clock snapshot); then the worker
 * sleeps --ttl-naive-interval-ms before the next pass, however much was
 * found. Honours the clock verdict (nothing is deleted unless OK), the busy
 * marker (a disable waits for the step), pause and disable (the table is
 * looked up in the registry before every step; any registry change ends the
 * pass, and the next one starts from the rebuilt pairs), and stop. Not the
 * token bucket: this mode exists only for the benchmark.
 */
static void naive_run(expiry_engine_worker *w)
{
    expiry_engine *e = w->e;
    buf resume;
    buf_init(&resume);
    while (!e->stopping) {
        if (w->gen != e->gen) {
            rebuild(w);
        }
        if (e->clock != EXPIRY_ENGINE_CLOCK_OK || w->nslots == 0) {
            pthread_cond_wait(&w->cond, &e->lock);
            continue;
        }
        clock_wall now = clock_wall_now();
        uint64_t gen = w->gen;
        for (size_t i = 0; i < w->nslots && !e->stopping && e->gen == gen; i++) {
            uint32_t table_id = w->slots[i].table_id, part = w->slots[i].part;
            buf_clear(&resume);
            for (int done = 0;
                 !done && !e->stopping && e->gen == gen && e->clock == EXPIRY_ENGINE_CLOCK_OK;) {
                expiry_engine_table *t = expiry_engine_find(e, table_id);
                if (t == NULL || !t->schema.ttl.enabled || t->schema.ttl.paused) {
                    break;
                }
                table_schema schema = t->schema;
                w->busy_table = table_id;
                pthread_mutex_unlock(&e->lock);
                expiry_sweep_result res;
                memset(&res, 0, sizeof(res));
                res.due_ms = w->due_ms;
                char err[256] = "";
                int rv = expiry_naive_step(e->st, &schema, part, now, NAIVE_SCAN_STEP,
                                           EXPIRY_ENGINE_SWEEP_BATCH, &resume, &done, &res, err,
                                           sizeof(err));
                if (rv == 0) {
                    res.undeletable = 0; /* seen again every pass: not counted */
                    record(e, &schema, &res);
                    if (res.deleted > 0 && e->on_delete != NULL) {
                        e->on_delete(e->on_delete_arg, schema.id, part);
                    }
                } else {
                    log_error("TTL naive scanner %d: table \"%s\" partition %u: %s: %s", w->index,
                              schema.name, part, lapse_strerror(rv), err);
                }
                pthread_mutex_lock(&e->lock);
                w->busy_table = 0;
                pthread_cond_broadcast(&e->idle);
                if (rv != 0) {
                    break; /* the next pass retries */
                }
            }
        }
        /* A fixed interval between passes, whatever they found. */
        struct timespec ts = clock_mono_abstime(e->opt.naive_interval_ms);
        while (!e->stopping && pthread_cond_timedwait(&w->cond, &e->lock, &ts) != ETIMEDOUT) {
        }
    }
    buf_fini(&resume);
}

/*
 * The worker. Each iteration of the loop is one planning step:
 *
 *  1. Rebuild the pairs when the registry changed (expiry_engine_sync bumped gen),
 *     and re-read the next due instant of every pair marked for it.
 *  2. With the clock verdict not OK, or nothing owned, sleep until woken.
 *  3. Take one wall-clock snapshot `now`. If no pair is due (earliest
 *     instant >= now), sleep until earliest + 1 ms (the first instant at
 *     which it is expired) or a wake-up, at most MAX_SLEEP_MS.
 *  4. Otherwise one pass: every pair due at `now`, in order, gets ONE sweep
 *     of at most EXPIRY_ENGINE_SWEEP_BATCH items (fewer when the delete token
 *     bucket has fewer), so a huge backlog in one partition cannot starve
 *     the others; each sweep is one WriteBatch under that partition's lock
 *     only. A pair whose sweep reports `more` stays due for the next pass.
 *
 * Budget per step: at most one batch per due pair, each bounded by
 * EXPIRY_ENGINE_SWEEP_BATCH and by the shared token bucket (--ttl-max-deletes-per-
 * sec: a backlog drains at exactly that rate). The pass stops early when the
 * registry changes (gen), the clock verdict leaves OK, or the engine stops;
 * the next step resumes from the instants kept per pair, so nothing is
 * rescanned. The loop ends only when the engine stops.
 */
void *expiry_engine_scanner_run(void *arg)
{
    expiry_engine_worker *w = arg;
    expiry_engine *e = w->e;
    pthread_mutex_lock(&e->lock);
    if (e->opt.naive_scan) {
        naive_run(w); /* instead of the index: benchmark 6 only */
        pthread_mutex_unlock(&e->lock);
        return NULL;
    }
    while (!e->stopping) {
        if (w->gen != e->gen) {
            rebuild(w);
        }
        if (e->clock != EXPIRY_ENGINE_CLOCK_OK || w->nslots == 0) {
            w->wake_at_ms = INT64_MAX;
            pthread_cond_wait(&w->cond, &e->lock);
            continue;
        }
        refresh(w);
        if (w->gen != e->gen || e->stopping) {
            continue;
        }
        clock_wall now = clock_wall_now();
        int64_t earliest = EXPIRY_NONE;
        for (size_t i = 0; i < w->nslots; i++) {
            if (w->slots[i].next_due_ms < earliest) {
                earliest = w->slots[i].next_due_ms;
            }
        }
        if (!ttl_is_expired(earliest, now)) {
            int64_t sleep_ms = earliest == EXPIRY_NONE ? MAX_SLEEP_MS : earliest + 1 - now.ms;
            if (sleep_ms > MAX_SLEEP_MS) {
                sleep_ms = MAX_SLEEP_MS;
            }
            w->wake_at_ms = now.ms + sleep_ms;
            struct timespec ts = clock_mono_abstime(sleep_ms);
            pthread_cond_timedwait(&w->cond, &e->lock, &ts);
            w->wake_at_ms = INT64_MAX;
            continue;
        }
        w->wake_at_ms = now.ms; /* busy: the hook need not wake us */
        uint64_t gen = w->gen;
        for (size_t i = 0; i < w->nslots; i++) {
            if (e->stopping || w->gen != gen || e->gen != gen ||
                e->clock != EXPIRY_ENGINE_CLOCK_OK) {
                break;
            }
            expiry_engine_slot *s = &w->slots[i];
            if (!ttl_is_expired(s->next_due_ms, now)) {
                continue;
            }
            size_t n = take_tokens(w, EXPIRY_ENGINE_SWEEP_BATCH);
            if (n == 0) {
                break; /* waited for tokens: re-plan with a fresh now */
            }
            sweep_one(w, s, n, now);
        }
        w->wake_at_ms = INT64_MAX;
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}
