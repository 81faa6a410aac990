/* newcopy.c: GSI and stream copies new on this node (newcopy.h). */
#include "newcopy.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../partition/apply.h"
#include "../partition/outbox.h"
#include "../placement/derived.h"
#include "repllock.h"

/* A table that got new copies here with the map of version version. */
struct added {
    uint32_t table_id;
    uint64_t version;
};

struct newcopy {
    pthread_mutex_t lock; /* guards v, n, cap, added, nadded, added_cap */
    newcopy_wait *v;
    size_t n, cap;
    struct added *added; /* the latest per table */
    size_t nadded, added_cap;
    atomic_size_t nwaits;    /* n, read without the lock on the apply path */
    atomic_ullong version;   /* the map newcopy_filling answers for */
    atomic_ullong added_max; /* the highest added[].version */
};

/* Whether list r names id. */
static int holds(const pmap_replicas *r, uint32_t id)
{
    return r != NULL && pmap_replicas_index(r, id) >= 0;
}

/* Whether t names id a copy of stream shard p that ot did not, of the
 * same stream (a stream turned on again is another one, with nothing to
 * miss). */
static int shard_new(const pmap_table *ot, const pmap_table *t, uint32_t p, uint32_t id)
{
    return t->stream_shards != NULL && ot->stream_shards != NULL &&
           t->schema.stream.generation == ot->schema.stream.generation &&
           holds(pmap_stream_shard(t, p), id) && !holds(pmap_stream_shard(ot, p), id);
}

/* Whether id is a destination of partition p's outbox in t. */
static int destination(const pmap_table *t, uint32_t p, uint32_t id)
{
    uint32_t ids[PMAP_MAX_DESTINATIONS];
    size_t n = pmap_outbox_destinations(t, p, ids, PMAP_MAX_DESTINATIONS);
    for (size_t i = 0; i < n && i < PMAP_MAX_DESTINATIONS; i++) {
        if (ids[i] == id) {
            return 1;
        }
    }
    return 0;
}

/* The map version from which a source's lane to node id is new for t: the
 * oldest that added one of id's joining copies of t, else version. */
static uint64_t joined_since(const pmap_table *t, uint32_t id, uint64_t version)
{
    uint64_t since = version;
    return pmap_derived_joining(t, id, &since) && since < version ? since : version;
}

/* Adds a wait on (table_id, part) from map version since. */
static void wait_on(newcopy *nc, uint32_t table_id, uint32_t part, uint64_t since)
{
    pthread_mutex_lock(&nc->lock);
    for (size_t i = 0; i < nc->n; i++) {
        if (nc->v[i].table_id == table_id && nc->v[i].part == part) {
            nc->v[i].since = since > nc->v[i].since ? since : nc->v[i].since;
            pthread_mutex_unlock(&nc->lock);
            return;
        }
    }
    if (nc->n == nc->cap) {
        size_t cap = nc->cap ? nc->cap * 2 : 16;
        newcopy_wait *v = realloc(nc->v, cap * sizeof(*v));
        if (v == NULL) {
            pthread_mutex_unlock(&nc->lock);
            log_error("table id %u: out of memory noting a new copy's source %u: it is not waited "
                      "on",
                      (unsigned)table_id, (unsigned)part);
            return;
        }
        nc->v = v;
        nc->cap = cap;
    }
    nc->v[nc->n++] = (newcopy_wait){table_id, part, since};
    atomic_store(&nc->nwaits, nc->n);
    pthread_mutex_unlock(&nc->lock);
}

/* Waits on every source of each table of pm where id holds a joining copy. */
static void wait_joining(newcopy *nc, const pmap *pm, uint32_t id)
{
    for (size_t i = 0; i < pm->ntables; i++) {
        const pmap_table *t = &pm->tables[i];
        if (!pmap_derived_joining(t, id, NULL)) {
            continue;
        }
        const uint64_t since = joined_since(t, id, pm->version);
        for (uint32_t p = 0; p < t->schema.partitions; p++) {
            if (pmap_owner(t, p) != id) {
                wait_on(nc, t->schema.id, p, since);
            }
        }
    }
}

int newcopy_open(node_server *ns, const pmap *pm)
{
    newcopy *nc = calloc(1, sizeof(*nc));
    if (nc == NULL) {
        return LAPSE_ENOMEM;
    }
    pthread_mutex_init(&nc->lock, NULL);
    atomic_init(&nc->nwaits, 0);
    atomic_init(&nc->version, pm->version);
    atomic_init(&nc->added_max, 0);
    wait_joining(nc, pm, ns->id);
    ns->newcopy = nc;
    return 0;
}

void newcopy_close(node_server *ns)
{
    newcopy *nc = ns->newcopy;
    if (nc == NULL) {
        return;
    }
    pthread_mutex_destroy(&nc->lock);
    free(nc->v);
    free(nc->added);
    free(nc);
    ns->newcopy = NULL;
}

/* This node leads partition p of t and just became a destination of its
 * outbox: the records its outbox trimmed before are missed too. */
static void note_own_outbox(node_server *ns, const pmap_table *t, uint32_t p)
{
    uint64_t first = 0, last = 0;
    int noted = 0;
    char err[256] = "";
    int rv = outbox_first_seq(ns->st, t->schema.id, p, &first, err, sizeof(err));
    if (rv == 0) {
        rv = outbox_last_seq(ns->st, t->schema.id, p, &last, err, sizeof(err));
    }
    if (rv == 0) {
        uint64_t first_kept = first != 0 ? first : last + 1;
        rv = apply_note_missing(ns->st, t->schema.id, p, first_kept, &noted, err, sizeof(err));
    }
    if (rv != 0) {
        log_error("table \"%s\" partition %u: reading what its outbox trimmed for a new copy "
                  "failed: %s",
                  t->schema.name, (unsigned)p, err);
    }
}

/* Records that table_id got new copies here with the map of version
 * version. */
static void note_added(newcopy *nc, uint32_t table_id, uint64_t version)
{
    pthread_mutex_lock(&nc->lock);
    size_t i = 0;
    while (i < nc->nadded && nc->added[i].table_id != table_id) {
        i++;
    }
    if (i == nc->nadded && nc->nadded == nc->added_cap) {
        size_t cap = nc->added_cap ? nc->added_cap * 2 : 8;
        struct added *a = realloc(nc->added, cap * sizeof(*a));
        if (a == NULL) {
            pthread_mutex_unlock(&nc->lock);
            log_error("out of memory noting new copies of table id %u: a batch filtered by an "
                      "older map may skip them",
                      (unsigned)table_id);
            return;
        }
        nc->added = a;
        nc->added_cap = cap;
    }
    if (i == nc->nadded) {
        nc->nadded++;
    }
    nc->added[i] = (struct added){table_id, version};
    if (version > atomic_load(&nc->added_max)) {
        atomic_store(&nc->added_max, version);
    }
    pthread_mutex_unlock(&nc->lock);
}

/* This node's copies in t of GSI partitions and of stream shards (gsi 0:
 * shards) that ot, the same table in the map before, did not name: how
 * many. With drop, each one's keys are deleted as well: a copy held once
 * and left may not have been dropped (a crash before the drop,
 * copydrop.h), and a fill only adds. */
static size_t new_copies(node_server *ns, const pmap_table *ot, const pmap_table *t, int gsi,
                         int drop)
{
    size_t n = 0;
    char err[256] = "";
    for (uint32_t g = 0; gsi && g < t->schema.ngsi && g < ot->schema.ngsi; g++) {
        for (uint32_t q = 0; q < t->schema.gsi[g].partitions; q++) {
            if (!holds(pmap_gsi_part(t, g, q), ns->id) || holds(pmap_gsi_part(ot, g, q), ns->id)) {
                continue;
            }
            n++;
            if (drop && apply_drop_copy(ns->st, t->schema.id, t->schema.gsi[g].id, q, err,
                                        sizeof(err)) != 0) {
                log_error("table \"%s\": clearing new GSI copy %u/%u: %s", t->schema.name,
                          (unsigned)g, (unsigned)q, err);
            }
        }
    }
    for (uint32_t p = 0; !gsi && p < t->schema.partitions; p++) {
        if (!shard_new(ot, t, p, ns->id)) {
            continue;
        }
        n++;
        if (drop && apply_drop_copy(ns->st, t->schema.id, 0, p, err, sizeof(err)) != 0) {
            log_error("table \"%s\": clearing new stream shard copy %u: %s", t->schema.name,
                      (unsigned)p, err);
        }
    }
    return n;
}

/* Notes what node id's new copies of t (ot before), if any, miss, source
 * by source. */
static void note_table(node_server *ns, const pmap_table *ot, const pmap_table *t, uint64_t version)
{
    const uint32_t id = ns->id;
    const int gnew = new_copies(ns, ot, t, 1, 0) > 0;
    if (!gnew && new_copies(ns, ot, t, 0, 0) == 0) {
        return;
    }
    /* From now on a batch filtered by an older map is refused
     * (replicate_apply), so each mark below divides the batches exactly. */
    note_added(ns->newcopy, t->schema.id, version);
    /* Before the marks: every record applied since is refilled. */
    new_copies(ns, ot, t, 1, 1);
    new_copies(ns, ot, t, 0, 1);
    size_t shards = 0, waits = 0;
    const uint64_t since = joined_since(t, id, version);
    for (uint32_t p = 0; p < t->schema.partitions; p++) {
        const int snew = shard_new(ot, t, p, id);
        if (!gnew && !snew) {
            continue;
        }
        shards += (size_t)snew;
        uint64_t mark = 0;
        char err[256] = "";
        pthread_mutex_t *mu = repllock_of(ns, t->schema.id, p);
        pthread_mutex_lock(mu); /* no batch of p is applied meanwhile (replicate.c) */
        int rv = apply_note_new_copy(ns->st, t->schema.id, p, gnew, snew, &mark, err, sizeof(err));
        pthread_mutex_unlock(mu);
        if (rv != 0) {
            log_error("table \"%s\" partition %u: noting what a new copy misses failed (it may "
                      "answer reads with entries missing): %s",
                      t->schema.name, (unsigned)p, err);
        }
        if (destination(ot, p, id)) {
            continue; /* its lane to us held every record we had not applied */
        }
        if (pmap_owner(t, p) == id) {
            note_own_outbox(ns, t, p); /* our own lane to us is new: see what it trimmed */
        } else {
            /* The source's lane to this node is new: it says what it no
             * longer holds when it first reaches us (shipper.h). */
            wait_on(ns->newcopy, t->schema.id, p, since);
            waits++;
        }
    }
    log_info("table \"%s\": copies new here (%s%zu stream shard(s)): filled before they are read "
             "(%zu source(s) to hear from first)",
             t->schema.name, gnew ? "GSI partitions, " : "", shards, waits);
}

void newcopy_note(node_server *ns, const pmap *old, const pmap *new)
{
    if (ns->newcopy == NULL) {
        return;
    }
    for (size_t i = 0; i < new->ntables; i++) {
        const pmap_table *t = &new->tables[i];
        const pmap_table *ot = pmap_table_find_id(old, t->schema.id);
        if (ot != NULL) {
            note_table(ns, ot, t, new->version);
        }
    }
    atomic_store(&ns->newcopy->version, new->version);
}

void newcopy_reached(node_server *ns, uint32_t table_id, uint32_t src_part, uint64_t src_version)
{
    newcopy *nc = ns->newcopy;
    if (nc == NULL || atomic_load(&nc->nwaits) == 0) {
        return;
    }
    pthread_mutex_lock(&nc->lock);
    for (size_t i = 0; i < nc->n; i++) {
        if (nc->v[i].table_id == table_id && nc->v[i].part == src_part &&
            src_version >= nc->v[i].since) {
            nc->v[i] = nc->v[--nc->n];
            atomic_store(&nc->nwaits, nc->n);
            break;
        }
    }
    pthread_mutex_unlock(&nc->lock);
}

int newcopy_waiting(node_server *ns, uint32_t table_id)
{
    newcopy *nc = ns->newcopy;
    if (nc == NULL || atomic_load(&nc->nwaits) == 0) {
        return 0;
    }
    int found = 0;
    pthread_mutex_lock(&nc->lock);
    for (size_t i = 0; i < nc->n && !found; i++) {
        found = nc->v[i].table_id == table_id;
    }
    pthread_mutex_unlock(&nc->lock);
    return found;
}

size_t newcopy_filling(node_server *ns, const pmap *pm, uint32_t *ids, size_t max,
                       uint64_t *version)
{
    newcopy *nc = ns->newcopy;
    *version = nc != NULL ? atomic_load(&nc->version) : 0;
    size_t n = 0;
    for (size_t i = 0; i < pm->ntables && n < max; i++) {
        const pmap_table *t = &pm->tables[i];
        int missing = 0;
        char err[256] = "";
        if (newcopy_waiting(ns, t->schema.id)) {
            ids[n++] = t->schema.id;
        } else if (apply_missing_any(ns->st, t->schema.id, &missing, err, sizeof(err)) != 0 ||
                   missing) {
            ids[n++] = t->schema.id; /* a failed look counts as filling */
        }
    }
    return n;
}

size_t newcopy_waits(node_server *ns, newcopy_wait **out)
{
    newcopy *nc = ns->newcopy;
    *out = NULL;
    if (nc == NULL || atomic_load(&nc->nwaits) == 0) {
        return 0;
    }
    pthread_mutex_lock(&nc->lock);
    size_t n = nc->n;
    if (n > 0 && (*out = malloc(n * sizeof(**out))) != NULL) {
        memcpy(*out, nc->v, n * sizeof(**out));
    } else {
        n = 0;
    }
    pthread_mutex_unlock(&nc->lock);
    return n;
}

int newcopy_added_after(node_server *ns, uint32_t table_id, uint64_t version)
{
    newcopy *nc = ns->newcopy;
    if (nc == NULL || version >= atomic_load(&nc->added_max)) {
        return 0;
    }
    int after = 0;
    pthread_mutex_lock(&nc->lock);
    for (size_t i = 0; i < nc->nadded && !after; i++) {
        after = nc->added[i].table_id == table_id && nc->added[i].version > version;
    }
    pthread_mutex_unlock(&nc->lock);
    return after;
}
