/* refill.c: the thread filling copies that lost records (refill.h). */
#include "refill.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../partition/apply.h"
#include "gsi_fill.h"
#include "fault_switch.h"
#include "maps.h"
#include "newcopy.h"
#include "repllock.h"
#include "streams.h"

struct refill {
    node_server *ns;      /* fixed */
    pthread_mutex_t lock; /* guards stopping */
    pthread_cond_t cond;  /* wakes the thread to stop */
    int stopping;
    pthread_t thread;
};

static int stopping(refill *r)
{
    pthread_mutex_lock(&r->lock);
    int stop = r->stopping;
    pthread_mutex_unlock(&r->lock);
    return stop;
}

/* Asks the primary of each source a table waits on (newcopy.h) where its
 * outbox stands: one at or below what this node applied has nothing for it
 * to learn, and the table waits on it no longer. Blocks on those calls. */
static void ask_sources(node_server *ns, const pmap *pm)
{
    newcopy_wait *v = NULL;
    size_t n = newcopy_waits(ns, &v);
    for (size_t i = 0; i < n; i++) {
        const pmap_table *t = pmap_table_find_id(pm, v[i].table_id);
        uint64_t seq = 0, version = 0, applied = 0;
        char err[256] = "";
        if (t == NULL) {
            newcopy_reached(ns, v[i].table_id, v[i].part, UINT64_MAX); /* dropped */
            continue;
        }
        if (gsi_fill_primary_seq(ns, pm, t, v[i].part, &seq, &version, err, sizeof(err)) != 0 ||
            apply_applied_seq(ns->st, v[i].table_id, v[i].part, &applied, err, sizeof(err)) != 0) {
            log_debug("table \"%s\" partition %u: asking where it stands for a new copy: %s",
                      t->schema.name, (unsigned)v[i].part, err);
            continue;
        }
        if (seq <= applied) {
            /* A source that never wrote ships nothing at all. With a map
             * that adds the copy, its primary ships us all it writes from
             * now on. */
            newcopy_reached(ns, v[i].table_id, v[i].part, version);
        }
    }
    free(v);
}

/* Drops the marks of source p of t once the copies this node keeps of it
 * are whole (apply_forget_missing; host: it hosts p's stream shard in pm).
 * Not when a map newer than pm gave this node new copies of the table:
 * checked under the source's apply lock, which orders it against
 * newcopy_note, as apply_forget_missing does not look at the stream mark
 * of a shard pm says this node does not host. */
static void forget_if_whole(node_server *ns, const pmap *pm, const pmap_table *t, uint32_t p,
                            int host)
{
    char err[256] = "";
    int dropped = 0, rv = 0;
    pthread_mutex_t *mu = repllock_of(ns, t->schema.id, p);
    pthread_mutex_lock(mu);
    if (!newcopy_added_after(ns, t->schema.id, pm->version)) {
        rv = apply_forget_missing(ns->st, t->schema.id, p, host, t->schema.ngsi > 0, &dropped, err,
                                  sizeof(err));
    }
    pthread_mutex_unlock(mu);
    if (rv != 0) {
        log_error("table %s partition %u: %s", t->schema.name, p, err);
    } else if (dropped) {
        log_info("table %s: this node's copies fed by partition %u are whole again", t->schema.name,
                 p);
    }
}

/* Fills what this node's copies fed by source p of t miss, by the map pm
 * the pass began under, then drops the source's marks if they are whole. */
static void refill_source(node_server *ns, const pmap *pm, const pmap_table *t, uint32_t p)
{
    char err[256] = "";
    uint64_t smark = 0, gmark = 0;
    const int host =
        t->schema.stream.enabled && pmap_replicas_index(pmap_stream_shard(t, p), ns->id) >= 0;
    if (host && streams_shard_gap(ns, &t->schema, p, &smark, err, sizeof(err)) != 0) {
        smark = 0;
    }
    if (t->schema.ngsi > 0 &&
        apply_gsi_gap(ns->st, t->schema.id, p, &gmark, err, sizeof(err)) != 0) {
        gmark = 0;
    }
    /* Which copies this node holds is pm's word: once a newer map gave it
     * new copies of the table, a fill or a forget under pm would pass them
     * over (a stream shard copy new since is empty below its mark,
     * newcopy_note; a GSI copy new since is "nothing here to fill",
     * gsi_fill_source) and call them whole: chaos seed 960797834 had
     * stream shards answer from their mark on, invariant 4. The next pass,
     * under the newer map, fills them. newcopy_note registers the new
     * copies before it writes their marks, so marks read before a check
     * that sees none are older than any it will write, and a fill through
     * them cannot end the new gap. */
    if (newcopy_added_after(ns, t->schema.id, pm->version)) {
        return;
    }
    if (smark != 0) {
        (void)streams_fill_shard(ns, pm, t, p, smark);
    }
    if (gmark != 0) {
        (void)gsi_fill_source(ns, pm, t, p, gmark);
    }
    forget_if_whole(ns, pm, t, p, host); /* no mark left for the reads to look at */
}

/* One pass over the map's tables. Costs nothing while no copy here has
 * missed records since the node opened (apply_missing_any answers from a
 * counter), then one store seek per table, and the gap and fill steps only
 * for a table with a mark left. */
static void pass(refill *r)
{
    node_server *ns = r->ns;
    node_map *m = maps_acquire(ns);
    const pmap *pm = m->pm;
    if (fault_switch_on(ns, "slow-refill")) {
        /* Test fault: a pass that takes its time (many tables, slow fills)
         * while newer maps arrive, as this one's map grows old. */
        clock_sleep_ms(REFILL_SLOW_MS);
    }
    for (size_t i = 0; i < pm->ntables && !stopping(r); i++) {
        const pmap_table *t = &pm->tables[i];
        int missing = 0;
        char err[256] = "";
        if (apply_missing_any(ns->st, t->schema.id, &missing, err, sizeof(err)) != 0) {
            log_error("table %s: %s", t->schema.name, err);
        }
        for (uint32_t p = 0; missing && p < t->schema.partitions && !stopping(r); p++) {
            refill_source(ns, pm, t, p);
        }
    }
    ask_sources(ns, pm);
    maps_release(m);
}

static void *run(void *arg)
{
    refill *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->lock);
        struct timespec ts = clock_mono_abstime(REFILL_PERIOD_MS);
        while (!r->stopping) {
            if (pthread_cond_timedwait(&r->cond, &r->lock, &ts) == ETIMEDOUT) {
                break;
            }
        }
        int stop = r->stopping;
        pthread_mutex_unlock(&r->lock);
        if (stop) {
            return NULL;
        }
        pass(r);
    }
}

int refill_open(refill **out, node_server *ns, char *err, size_t errlen)
{
    *out = NULL;
    refill *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    r->ns = ns;
    pthread_mutex_init(&r->lock, NULL);
    clock_cond_init_mono(&r->cond);
    int rc = pthread_create(&r->thread, NULL, run, r);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start the refill thread: %s", strerror(rc));
        pthread_cond_destroy(&r->cond);
        pthread_mutex_destroy(&r->lock);
        free(r);
        return LAPSE_ENOMEM;
    }
    *out = r;
    return 0;
}

void refill_close(refill *r)
{
    if (r == NULL) {
        return;
    }
    pthread_mutex_lock(&r->lock);
    r->stopping = 1;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->lock);
    free(r);
}
