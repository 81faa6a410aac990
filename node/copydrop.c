/*
 * copydrop.c: dropping the copies this node no longer holds (contract in
 * copydrop.h).
 */
#include "copydrop.h"

#include <stdlib.h>

#include "../common/clock.h"
#include "../common/log.h"

struct copydrop_entry {
    uint32_t table_id, part;
    int64_t due_ms; /* monotonic */
};

void copydrop_init(node_server *ns)
{
    pthread_mutex_init(&ns->drops_lock, NULL);
    ns->drops = NULL;
    ns->ndrops = ns->drops_cap = 0;
    atomic_init(&ns->copies_dropped, 0);
}

void copydrop_fini(node_server *ns)
{
    free(ns->drops);
    ns->drops = NULL;
    ns->ndrops = ns->drops_cap = 0;
    pthread_mutex_destroy(&ns->drops_lock);
}

/* Whether pm names node id a member of partition part of table table_id
 * (0 too when the table or partition is not there). */
static int member(const pmap *pm, uint32_t table_id, uint32_t part, uint32_t id)
{
    const pmap_replicas *r = pmap_part(pmap_table_find_id(pm, table_id), part);
    return r != NULL && pmap_replicas_index(r, id) >= 0;
}

/* The noted entry for (table_id, part), or -1. REQUIRES: drops_lock. */
static long find(const node_server *ns, uint32_t table_id, uint32_t part)
{
    for (size_t i = 0; i < ns->ndrops; i++) {
        if (ns->drops[i].table_id == table_id && ns->drops[i].part == part) {
            return (long)i;
        }
    }
    return -1;
}

/* Notes (table_id, part) due at due_ms unless noted. REQUIRES: drops_lock. */
static void add(node_server *ns, uint32_t table_id, uint32_t part, int64_t due_ms)
{
    if (find(ns, table_id, part) >= 0) {
        return;
    }
    if (ns->ndrops == ns->drops_cap) {
        size_t cap = ns->drops_cap ? ns->drops_cap * 2 : 16;
        struct copydrop_entry *d = realloc(ns->drops, cap * sizeof(*d));
        if (d == NULL) {
            log_warn("table %u partition %u: out of memory noting the copy to drop: its keys stay "
                     "on disk",
                     (unsigned)table_id, (unsigned)part);
            return;
        }
        ns->drops = d;
        ns->drops_cap = cap;
    }
    ns->drops[ns->ndrops++] = (struct copydrop_entry){table_id, part, due_ms};
}

void copydrop_note(node_server *ns, const pmap *old, const pmap *new)
{
    int64_t due = clock_mono_now().ms + COPYDROP_DELAY_MS;
    pthread_mutex_lock(&ns->drops_lock);
    for (size_t i = 0; i < ns->ndrops;) {
        struct copydrop_entry *d = &ns->drops[i];
        if (member(new, d->table_id, d->part, ns->id)) {
            *d = ns->drops[--ns->ndrops]; /* added back: keep it */
        } else {
            i++;
        }
    }
    for (size_t i = 0; i < old->ntables; i++) {
        const pmap_table *t = &old->tables[i];
        const pmap_table *nt = pmap_table_find_id(new, t->schema.id);
        if (nt == NULL) {
            continue; /* dropped whole by maps_apply */
        }
        for (uint32_t p = 0; p < t->schema.partitions; p++) {
            const pmap_replicas *was = pmap_part(t, p), *now = pmap_part(nt, p);
            if (pmap_replicas_index(was, ns->id) >= 0 &&
                (now == NULL || pmap_replicas_index(now, ns->id) < 0)) {
                add(ns, t->schema.id, p, due);
            }
        }
    }
    pthread_mutex_unlock(&ns->drops_lock);
}

size_t copydrop_pending(node_server *ns)
{
    pthread_mutex_lock(&ns->drops_lock);
    size_t n = ns->ndrops;
    pthread_mutex_unlock(&ns->drops_lock);
    return n;
}

int copydrop_take_due(node_server *ns, const pmap *current, uint32_t *table_id, uint32_t *part)
{
    int64_t now = clock_mono_now().ms;
    int got = 0;
    pthread_mutex_lock(&ns->drops_lock);
    for (size_t i = 0; i < ns->ndrops && !got;) {
        struct copydrop_entry d = ns->drops[i];
        if (d.due_ms > now) {
            i++;
            continue;
        }
        ns->drops[i] = ns->drops[--ns->ndrops];
        if (pmap_table_find_id(current, d.table_id) != NULL &&
            !member(current, d.table_id, d.part, ns->id)) {
            *table_id = d.table_id;
            *part = d.part;
            got = 1;
        }
    }
    pthread_mutex_unlock(&ns->drops_lock);
    return got;
}

int copydrop_due(node_server *ns)
{
    int64_t now = clock_mono_now().ms;
    int due = 0;
    pthread_mutex_lock(&ns->drops_lock);
    for (size_t i = 0; i < ns->ndrops && !due; i++) {
        due = ns->drops[i].due_ms <= now;
    }
    pthread_mutex_unlock(&ns->drops_lock);
    return due;
}

void copydrop_postpone(node_server *ns)
{
    int64_t due = clock_mono_now().ms + COPYDROP_DELAY_MS;
    pthread_mutex_lock(&ns->drops_lock);
    for (size_t i = 0; i < ns->ndrops; i++) {
        if (ns->drops[i].due_ms < due) {
            ns->drops[i].due_ms = due;
        }
    }
    pthread_mutex_unlock(&ns->drops_lock);
}
