/*
 * expiry_backfiller.c: the TTL backfill threads (expiry_engine.h; state in expiry_engine_int.h).
 *
 * When TTL is enabled on a table that already has items, the expiry index
 * must be built for them; writes after the enable maintain it themselves
 * (expiry.h invariant 1). The threads index every owned partition of every
 * enabled table whose backfill for the current config_version is not done,
 * with expiry_backfill_step, which stores its resume point in the same
 * WriteBatch as the entries it writes: after kill -9 the threads resume
 * where the last step committed (a finished partition answers done at once).
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../partition/expiry.h"
#include "expiry_engine_int.h"

#define ERROR_BACKOFF_MS 1000

/* Whether another backfill thread is stepping (table_id, part). */
static int stepping(const expiry_engine *e, uint32_t table_id, uint32_t part)
{
    for (int i = 0; i < EXPIRY_ENGINE_BACKFILL_THREADS; i++) {
        if (e->bf[i].busy_table == table_id && e->bf[i].busy_part == part) {
            return 1;
        }
    }
    return 0;
}

/* Picks the next (table, partition) to step, round-robin over tables so a
 * small table enabled during a large backfill finishes at once, skipping
 * partitions another thread is stepping. Returns 1 with *t and *k (index
 * into t->parts) set, 0 when nothing is left. REQUIRES: lock held. */
static int pick(expiry_engine *e, expiry_engine_table **t, uint32_t *k)
{
    for (size_t i = 0; i < e->ntables; i++) {
        size_t at = (e->bf_next + i) % e->ntables;
        expiry_engine_table *c = &e->tables[at];
        if (!c->schema.ttl.enabled || c->parts_done == c->nparts) {
            continue;
        }
        for (uint32_t j = 0; j < c->nparts; j++) {
            if (!c->backfilled[j] && !stepping(e, c->schema.id, c->parts[j])) {
                *t = c;
                *k = j;
                e->bf_next = at + 1;
                return 1;
            }
        }
    }
    return 0;
}

static void log_progress(expiry_engine_table *t, int64_t now_mono, int complete)
{
    int64_t ms = now_mono - t->bf_started_mono;
    double rate = ms > 0 ? (double)t->backfill_items * 1000.0 / (double)ms : 0;
    if (complete) {
        log_info("TTL backfill of table \"%s\" (config version %" PRIu64 ") complete: %" PRIu64
                 " items in %u partitions, %" PRId64 " ms (%.0f items/s)",
                 t->schema.name, t->schema.ttl.config_version, t->backfill_items, t->nparts, ms,
                 rate);
        t->bf_complete_logged = 1;
    } else {
        log_info("TTL backfill of table \"%s\" (config version %" PRIu64 "): %" PRIu64
                 " items, %u/%u partitions done (%.0f items/s)",
                 t->schema.name, t->schema.ttl.config_version, t->backfill_items, t->parts_done,
                 t->nparts, rate);
    }
    t->bf_logged_mono = now_mono;
}

/* Step 2 of expiry_engine_backfiller_run, without the lock: one expiry_backfill_step of
 * at most chunk items of (schema, part), its scanned items counted in the
 * metrics. Returns expiry_backfill_step's result, with err. */
static int step(expiry_engine *e, const table_schema *schema, uint32_t part, size_t chunk,
                uint64_t *scanned, uint64_t *ignored, int *done, char *err, size_t errlen)
{
    int rv = expiry_backfill_step(e->st, schema, part, clock_wall_now(), chunk, scanned, ignored,
                                  done, err, errlen);
    if (rv == 0 && *scanned > 0) {
        char labels[SCHEMA_MAX_NAME * 2 + 16];
        metrics_labels(labels, sizeof(labels), "table", schema->name, NULL);
        metrics_counter_add(e->m, "lapse_ttl_backfill_items_total",
                            "Items scanned by the TTL backfill on this node" METRICS_SINCE_START,
                            labels, (double)*scanned);
    }
    return rv;
}

/* Step 3 of expiry_engine_backfiller_run: records a step of partition part of t (the
 * registry's entry for the config the step ran for): its counts, the
 * partition done, the table complete (logged once, on_backfilled called,
 * waiters woken), a progress line about every EXPIRY_ENGINE_BACKFILL_LOG_MS.
 * REQUIRES: lock held. */
static void record(expiry_engine *e, expiry_engine_table *t, uint32_t part, uint64_t scanned,
                   const uint64_t *ignored, int done, int64_t now_mono)
{
    t->backfill_items += scanned;
    /* Items stored before the enable that will never expire count as
     * ignored, as later writes do (expiry_engine_note_write). */
    for (int v = 0; v < TTL_VERDICT_COUNT; v++) {
        t->ignored[v] += ignored[v];
    }
    if (scanned > 0) {
        expiry_engine_slot_touch(e, t->schema.id, part); /* new entries: re-read next due */
    }
    if (done) {
        for (uint32_t j = 0; j < t->nparts; j++) {
            if (t->parts[j] == part && !t->backfilled[j]) {
                t->backfilled[j] = 1;
                t->parts_done++;
                break;
            }
        }
        if (t->parts_done == t->nparts) {
            if (!t->bf_complete_logged) {
                log_progress(t, now_mono, 1);
                if (e->on_backfilled != NULL) {
                    e->on_backfilled(e->on_delete_arg);
                }
            }
            pthread_cond_broadcast(&e->progress);
        }
    }
    if (t->parts_done < t->nparts &&
        now_mono - t->bf_logged_mono >= EXPIRY_ENGINE_BACKFILL_LOG_MS) {
        log_progress(t, now_mono, 0);
    }
}

/*
 * A thread (EXPIRY_ENGINE_BACKFILL_THREADS of them, each on its own partition, so
 * both cores index). Each iteration is one step:
 *
 *  1. pick: under the lock, the next (table, partition) not yet backfilled
 *     for its table's current config_version and not being stepped by the
 *     other thread (round-robin over tables); nothing left: sleep until
 *     expiry_engine_sync, a finished step or stop wakes us.
 *  2. step: without the lock (busy marker set, so a disable waits for
 *     us), run one expiry_backfill_step of at most EXPIRY_ENGINE_BACKFILL_CHUNK
 *     items. The step holds that partition's write lock only for its own
 *     chunk, so foreground writes interleave between chunks.
 *  3. record: the progress, if the registry still describes the same config
 *     (a sync in between may have disabled or re-enabled the table: then
 *     the result is dropped; the stored resume point decides anyway), tell
 *     the partition's scanner to re-read its next due instant, log about
 *     every EXPIRY_ENGINE_BACKFILL_LOG_MS per table and at completion.
 *  4. With --ttl-backfill-rate R, wait until the items scanned so far (by
 *     all threads) fit R items/s (the chunk shrinks to R/10 so the pace
 *     stays smooth).
 *
 * Budget per step: one chunk of one partition. Stops between steps when
 * the engine stops; a store error backs off ERROR_BACKOFF_MS and retries.
 */
void *expiry_engine_backfiller_run(void *arg)
{
    expiry_engine_backfiller *self = arg;
    expiry_engine *e = self->e;
    uint64_t rate = e->opt.backfill_items_per_s;
    size_t chunk = EXPIRY_ENGINE_BACKFILL_CHUNK;
    if (rate != 0 && rate / 10 < chunk) {
        chunk = rate / 10 > 0 ? (size_t)(rate / 10) : 1;
    }

    pthread_mutex_lock(&e->lock);
    while (!e->stopping) {
        expiry_engine_table *t = NULL;
        uint32_t k = 0;
        if (!pick(e, &t, &k)) {
            pthread_cond_wait(&e->bf_cond, &e->lock);
            continue;
        }
        if (rate != 0) {
            int64_t wait_ms = (int64_t)e->bf_paced_ms - clock_mono_now().ms;
            if (wait_ms > 0) {
                struct timespec ts = clock_mono_abstime(wait_ms);
                pthread_cond_timedwait(&e->bf_cond, &e->lock, &ts);
                continue; /* re-pick: the registry may have changed */
            }
        }
        table_schema schema = t->schema;
        uint32_t part = t->parts[k];
        uint64_t gen = e->gen;
        self->busy_table = schema.id;
        self->busy_part = part;
        if (t->bf_started_mono == 0) {
            t->bf_started_mono = clock_mono_now().ms;
            t->bf_logged_mono = t->bf_started_mono;
        }
        pthread_mutex_unlock(&e->lock);

        uint64_t scanned = 0, ignored[TTL_VERDICT_COUNT] = {0};
        int done = 0;
        char err[256] = "";
        int rv = step(e, &schema, part, chunk, &scanned, ignored, &done, err, sizeof(err));

        pthread_mutex_lock(&e->lock);
        self->busy_table = 0;
        self->busy_part = 0;
        pthread_cond_broadcast(&e->idle);
        pthread_cond_broadcast(&e->bf_cond); /* the partition is free to pick again */
        if (rv != 0) {
            log_error("TTL backfill of table \"%s\" partition %u: %s: %s (retrying)", schema.name,
                      part, lapse_strerror(rv), err);
            struct timespec ts = clock_mono_abstime(ERROR_BACKOFF_MS);
            pthread_cond_timedwait(&e->bf_cond, &e->lock, &ts);
            continue;
        }
        int64_t now_mono = clock_mono_now().ms;
        if (rate != 0) {
            if (e->bf_paced_ms < (double)now_mono - 1000) {
                e->bf_paced_ms = (double)now_mono - 1000; /* no credit for idle time beyond 1 s */
            }
            e->bf_paced_ms += (double)scanned * 1000.0 / (double)rate;
        }
        /* The registry may have been rebuilt while we stepped: find the
         * table again, and keep the result only for the same config. */
        t = e->gen == gen ? t : expiry_engine_find(e, schema.id);
        if (t == NULL || !t->schema.ttl.enabled ||
            t->schema.ttl.config_version != schema.ttl.config_version) {
            continue;
        }
        record(e, t, part, scanned, ignored, done, now_mono);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}
