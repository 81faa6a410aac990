/*
 * copydrop.c: dropping the copies this node no longer holds (contract in
 * copydrop.h).
 */
#include "copydrop.h"

#include <stdlib.h>

#include "../common/clock.h"
#include "../common/log.h"
#include "../partition/apply.h"
#include "../partition/replog.h"
#include "../partition/store.h"

struct copydrop_entry {
    copydrop_copy c;
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

/* The copy list of c in t (NULL: none). */
static const pmap_replicas *list_of(const pmap_table *t, const copydrop_copy *c)
{
    if (t == NULL) {
        return NULL;
    }
    if (c->kind == COPYDROP_BASE) {
        return pmap_part(t, c->part);
    }
    if (c->kind == COPYDROP_SHARD) {
        return t->stream_shards != NULL && c->part < t->schema.partitions
                   ? pmap_stream_shard(t, c->part)
                   : NULL;
    }
    return (uint32_t)c->kind < t->schema.ngsi && c->part < t->schema.gsi[c->kind].partitions
               ? pmap_gsi_part(t, (uint32_t)c->kind, c->part)
               : NULL;
}

/* Whether pm names node id a member of copy c's list (0 too when the table
 * or list is not there). */
static int member(const pmap *pm, const copydrop_copy *c, uint32_t id)
{
    const pmap_replicas *r = list_of(pmap_table_find_id(pm, c->table_id), c);
    return r != NULL && pmap_replicas_index(r, id) >= 0;
}

/* The noted entry for c, or -1. REQUIRES: drops_lock. */
static long find(const node_server *ns, const copydrop_copy *c)
{
    for (size_t i = 0; i < ns->ndrops; i++) {
        const copydrop_copy *d = &ns->drops[i].c;
        if (d->table_id == c->table_id && d->part == c->part && d->kind == c->kind) {
            return (long)i;
        }
    }
    return -1;
}

/* Notes c due at due_ms unless noted. REQUIRES: drops_lock. */
static void add(node_server *ns, copydrop_copy c, int64_t due_ms)
{
    if (find(ns, &c) >= 0) {
        return;
    }
    if (ns->ndrops == ns->drops_cap) {
        size_t cap = ns->drops_cap ? ns->drops_cap * 2 : 16;
        struct copydrop_entry *d = realloc(ns->drops, cap * sizeof(*d));
        if (d == NULL) {
            log_warn("table %u partition %u: out of memory noting the copy to drop: its keys stay "
                     "on disk",
                     (unsigned)c.table_id, (unsigned)c.part);
            return;
        }
        ns->drops = d;
        ns->drops_cap = cap;
    }
    ns->drops[ns->ndrops++] = (struct copydrop_entry){c, due_ms};
}

/* Notes every copy of kind kind (COPYDROP_*) whose list in t names this
 * node and in nt does not, n lists of them. */
static void note_lists(node_server *ns, const pmap_table *t, const pmap_table *nt, int kind,
                       uint32_t n, int64_t due)
{
    for (uint32_t p = 0; p < n; p++) {
        copydrop_copy c = {t->schema.id, p, kind};
        const pmap_replicas *was = list_of(t, &c), *now = list_of(nt, &c);
        if (was != NULL && pmap_replicas_index(was, ns->id) >= 0 &&
            (now == NULL || pmap_replicas_index(now, ns->id) < 0)) {
            add(ns, c, due);
        }
    }
}

void copydrop_note(node_server *ns, const pmap *old, const pmap *new)
{
    int64_t due = clock_mono_now().ms + COPYDROP_DELAY_MS;
    pthread_mutex_lock(&ns->drops_lock);
    for (size_t i = 0; i < ns->ndrops;) {
        struct copydrop_entry *d = &ns->drops[i];
        if (member(new, &d->c, ns->id)) {
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
        note_lists(ns, t, nt, COPYDROP_BASE, t->schema.partitions, due);
        if (t->schema.stream.generation == nt->schema.stream.generation) {
            /* (a stream turned off or on again goes whole: maps_apply) */
            note_lists(ns, t, nt, COPYDROP_SHARD, t->schema.partitions, due);
        }
        for (uint32_t g = 0; g < t->schema.ngsi; g++) {
            note_lists(ns, t, nt, (int)g, t->schema.gsi[g].partitions, due);
        }
    }
    pthread_mutex_unlock(&ns->drops_lock);
}

/* Whether this node's store holds anything of copy c of table t: a base
 * partition's item or log position, a GSI partition's entry, a stream
 * shard's record. An error counts as holding (the drop then says what
 * failed). */
static int held(node_server *ns, const pmap_table *t, const copydrop_copy *c)
{
    char err[256];
    if (c->kind != COPYDROP_BASE) {
        int any = 0;
        uint32_t index_id = c->kind == COPYDROP_SHARD ? 0 : t->schema.gsi[c->kind].id;
        int rv = apply_copy_held(ns->st, c->table_id, index_id, c->part, &any, err, sizeof(err));
        return rv != 0 || any;
    }
    store_size size = {0};
    uint64_t epoch = 0, seq = 0;
    if (store_estimate(ns->st, c->table_id, c->part, 1, &size, err, sizeof(err)) != 0 ||
        replog_position(ns->st, c->table_id, c->part, &epoch, &seq, err, sizeof(err)) != 0) {
        return 1;
    }
    return size.items > 0 || seq > 0;
}

/* Notes every copy of kind kind (COPYDROP_*) of t, n lists of them, that pm
 * does not name this node in and that it holds (held), due at due; adds
 * how many to *noted. */
static void note_held_lists(node_server *ns, const pmap *pm, const pmap_table *t, int kind,
                            uint32_t n, int64_t due, size_t *noted)
{
    for (uint32_t p = 0; p < n; p++) {
        copydrop_copy c = {t->schema.id, p, kind};
        if (member(pm, &c, ns->id) || !held(ns, t, &c)) {
            continue;
        }
        pthread_mutex_lock(&ns->drops_lock);
        add(ns, c, due);
        pthread_mutex_unlock(&ns->drops_lock);
        (*noted)++;
    }
}

size_t copydrop_note_held(node_server *ns, const pmap *pm)
{
    int64_t due = clock_mono_now().ms + COPYDROP_DELAY_MS;
    size_t noted = 0;
    for (size_t i = 0; i < pm->ntables; i++) {
        const pmap_table *t = &pm->tables[i];
        note_held_lists(ns, pm, t, COPYDROP_BASE, t->schema.partitions, due, &noted);
        if (t->stream_shards != NULL) {
            note_held_lists(ns, pm, t, COPYDROP_SHARD, t->schema.partitions, due, &noted);
        }
        for (uint32_t g = 0; g < t->schema.ngsi; g++) {
            note_held_lists(ns, pm, t, (int)g, t->schema.gsi[g].partitions, due, &noted);
        }
    }
    return noted;
}

size_t copydrop_pending(node_server *ns)
{
    pthread_mutex_lock(&ns->drops_lock);
    size_t n = ns->ndrops;
    pthread_mutex_unlock(&ns->drops_lock);
    return n;
}

int copydrop_take_due(node_server *ns, const pmap *current, copydrop_copy *out)
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
        if (pmap_table_find_id(current, d.c.table_id) != NULL && !member(current, &d.c, ns->id)) {
            *out = d.c;
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
