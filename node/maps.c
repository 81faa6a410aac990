/*
 * maps.c: the node's partition map (contract in maps.h). The persisted form
 * is placement's own encoding (pmap_encode) in store meta NODE_META_PMAP;
 * a map an older node persisted as a packed protobuf is still read, by
 * rpc/ (docs/storage-format.md, "The partition map in `meta`").
 */
#include "maps.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/buf.h"
#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../partition/expiry.h"
#include "../partition/stream.h"
#include "../placement/failover.h"
#include "../rpc/wire.h"
#include "copydrop.h"
#include "newcopy.h"

/* ------------------------------------------------------------------------ */
/* References                                                                */
/* ------------------------------------------------------------------------ */

static node_map *map_wrap(pmap *pm)
{
    node_map *m = malloc(sizeof(*m));
    if (m == NULL) {
        return NULL;
    }
    m->pm = pm;
    atomic_init(&m->refs, 1);
    return m;
}

/* Notes in ns whether pm moves a one-copy table's set (a second member):
 * before pm is published, so a commit that reads the flag after a thread
 * acquired pm sees it (maps_logged). Never cleared. */
static void note_single_moves(node_server *ns, const pmap *pm)
{
    for (size_t t = 0; t < pm->ntables && !atomic_load(&ns->single_moved); t++) {
        const pmap_table *tb = &pm->tables[t];
        if (schema_replication(&tb->schema) < 2 && pmap_logged(tb, PMAP_ANY_PART, 0)) {
            atomic_store(&ns->single_moved, 1);
        }
    }
}

int maps_logged(node_server *ns, uint32_t table_id, uint32_t part)
{
    if (!atomic_load(&ns->single_moved)) {
        return 0;
    }
    node_map *m = maps_acquire(ns);
    const pmap_table *t = pmap_table_find_id(m->pm, table_id);
    int logged = t != NULL && pmap_logged(t, part, ns->id);
    maps_release(m);
    return logged;
}

node_map *maps_acquire(node_server *ns)
{
    pthread_rwlock_rdlock(&ns->map_lock);
    node_map *m = ns->map;
    atomic_fetch_add(&m->refs, 1);
    pthread_rwlock_unlock(&ns->map_lock);
    return m;
}

void maps_release(node_map *m)
{
    if (m == NULL) {
        return;
    }
    if (atomic_fetch_sub(&m->refs, 1) == 1) {
        pmap_free(m->pm);
        free(m);
    }
}

uint64_t maps_version(node_server *ns)
{
    node_map *m = maps_acquire(ns);
    uint64_t v = m->pm->version;
    maps_release(m);
    return v;
}

/* ------------------------------------------------------------------------ */
/* Persistence                                                               */
/* ------------------------------------------------------------------------ */

static int persist(node_server *ns, const pmap *pm, char *err, size_t errlen)
{
    buf bytes;
    buf_init(&bytes);
    int rv = pmap_encode(pm, &bytes);
    if (rv != 0) {
        snprintf(err, errlen, "cannot encode the partition map: %s", lapse_strerror(rv));
        goto out;
    }
    /* Not synced: an fsync here also wrote every unsynced WAL byte before
     * it (~50 MB right after a 1M-item load: ~130 ms before an enable could
     * start its backfill). The copy survives kill -9 in the OS's page
     * cache; an OS crash can lose it, and then the node starts on an older
     * map exactly as one that was down during the change does, and pulls
     * the current one when it registers (the data written under the newer
     * map was not synced either). */
    rv = store_meta_put(ns->st, NODE_META_PMAP, bytes.data, bytes.len, 0, err, errlen);
out:
    buf_fini(&bytes);
    return rv;
}

/* A value that starts with PMAP_FORMAT_V1 or V2 is pmap_encode's; anything else
 * (an empty map packs to nothing) is the packed lapse.PartitionMap that
 * nodes wrote before it, which rpc/ reads: a data dir from an older node
 * keeps its map, rewritten in the new format with the next change. */
static int load(node_server *ns, pmap **out, char *err, size_t errlen)
{
    buf val;
    buf_init(&val);
    int found = 0;
    char why[256] = "";
    int rv = store_meta_get(ns->st, NODE_META_PMAP, &val, &found, err, errlen);
    if (rv != 0) {
        goto out;
    }
    if (!found) {
        *out = pmap_new();
        rv = *out == NULL ? LAPSE_ENOMEM : 0;
        goto out;
    }
    int legacy = val.len == 0 || (val.data[0] != PMAP_FORMAT_V1 && val.data[0] != PMAP_FORMAT_V2);
    if (legacy) {
        rv = wire_pmap_unpack(val.data, val.len, out, why, sizeof(why));
    } else {
        rv = pmap_decode(val.data, val.len, out, why, sizeof(why));
    }
    if (rv == LAPSE_EINVAL || rv == LAPSE_ECORRUPT) {
        snprintf(err, errlen, "persisted partition map (meta \"%s\", %s format) is corrupt: %s",
                 NODE_META_PMAP, legacy ? "legacy protobuf" : "pmap_encode", why);
        rv = LAPSE_ECORRUPT;
    } else if (rv != 0) {
        snprintf(err, errlen, "%s", why);
    } else if (legacy) {
        log_info("read the persisted partition map (version %llu) in the legacy protobuf "
                 "format; the next map applied is stored in the new one",
                 (unsigned long long)(*out)->version);
    }
out:
    buf_fini(&val);
    return rv;
}

/* ------------------------------------------------------------------------ */
/* Life cycle                                                                */
/* ------------------------------------------------------------------------ */

int maps_init(node_server *ns, char *err, size_t errlen)
{
    pthread_rwlock_init(&ns->map_lock, NULL);
    pthread_mutex_init(&ns->apply_lock, NULL);
    pthread_mutex_init(&ns->refresh_lock, NULL);
    copydrop_init(ns);
    clock_cond_init_mono(&ns->refresh_done);
    ns->refresh_in_flight = 0;
    ns->refresh_last_mono_ms = 0;

    pmap *pm = NULL;
    int rv = load(ns, &pm, err, errlen);
    if (rv != 0) {
        return rv;
    }
    note_single_moves(ns, pm);
    ns->map = map_wrap(pm);
    if (ns->map == NULL) {
        pmap_free(pm);
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    if (newcopy_open(ns, pm) != 0) {
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    size_t held = copydrop_note_held(ns, pm);
    log_info("partition map version %llu loaded (%zu tables, %zu partitions owned; %zu former "
             "copies still on disk, to drop)",
             (unsigned long long)pm->version, pm->ntables, pmap_partitions_owned(pm, ns->id), held);
    return 0;
}

void maps_fini(node_server *ns)
{
    if (ns == NULL) {
        return;
    }
    maps_release(ns->map);
    ns->map = NULL;
    copydrop_fini(ns);
    newcopy_close(ns);
    pthread_cond_destroy(&ns->refresh_done);
    pthread_mutex_destroy(&ns->refresh_lock);
    pthread_mutex_destroy(&ns->apply_lock);
    pthread_rwlock_destroy(&ns->map_lock);
}

/* ------------------------------------------------------------------------ */
/* Applying                                                                  */
/* ------------------------------------------------------------------------ */

/* Drops every table of old that is not in new; *ids gets their ids (caller
 * frees) so they can be dropped again after the drain. */
static int drop_removed(node_server *ns, const pmap *old, const pmap *new, uint32_t **ids,
                        size_t *nids, char *err, size_t errlen)
{
    *ids = NULL;
    *nids = 0;
    for (size_t i = 0; i < old->ntables; i++) {
        const table_schema *t = &old->tables[i].schema;
        if (pmap_table_find_id(new, t->id) != NULL) {
            continue;
        }
        if (*ids == NULL && (*ids = calloc(old->ntables, sizeof(**ids))) == NULL) {
            snprintf(err, errlen, "out of memory");
            return LAPSE_ENOMEM;
        }
        int rv = store_drop_table(ns->st, t->id, err, errlen);
        if (rv == 0) {
            rv = expiry_drop_table(ns->st, t->id, err, errlen);
        }
        if (rv != 0) {
            log_error("dropping table \"%s\" (id %u) failed: %s", t->name, t->id, err);
            return rv;
        }
        (*ids)[(*nids)++] = t->id;
        log_info("table \"%s\" (id %u) is gone from the map: its items were dropped (with their "
                 "TTL index)",
                 t->name, t->id);
    }
    return 0;
}

/* Whether some table of old with TTL enabled is in new with TTL disabled:
 * writes routed by old may still add index entries, so the expiry engine drops
 * the index only after the drain. */
static int ttl_disabled(const pmap *old, const pmap *new)
{
    for (size_t i = 0; i < new->ntables; i++) {
        const table_schema *t = &new->tables[i].schema;
        const pmap_table *o = pmap_table_find_id(old, t->id);
        if (!t->ttl.enabled && o != NULL && o->schema.ttl.enabled) {
            return 1;
        }
    }
    return 0;
}

/* The ids of the tables of new whose stream old has on and new off, into
 * ids (old->ntables entries at most); returns how many. Their stream
 * records are dropped after the drain: nothing reads them again. */
static size_t streams_turned_off(const pmap *old, const pmap *new, uint32_t *ids)
{
    size_t n = 0;
    for (size_t i = 0; i < new->ntables; i++) {
        const table_schema *t = &new->tables[i].schema;
        const pmap_table *o = pmap_table_find_id(old, t->id);
        if (!t->stream.enabled && o != NULL && o->schema.stream.enabled) {
            ids[n++] = t->id;
        }
    }
    return n;
}

/*
 * Waits until the caller's reference to m is the only one left: every
 * request routed by m has finished. Handlers hold a reference only while
 * they convert and call the store (never across maps_* calls), so this is
 * short; bounded by MAPS_DRAIN_TIMEOUT_MS all the same. Returns 1 when
 * drained.
 */
static int drain(node_map *m)
{
    clock_mono deadline = clock_mono_after_ms(MAPS_DRAIN_TIMEOUT_MS);
    while (atomic_load(&m->refs) > 1) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            return 0;
        }
        clock_sleep_ms(1);
    }
    return 1;
}

/*
 * After the swap to a map that drops tables (dropped), disables a TTL or
 * turns streams off (off): waits for the requests routed by the old map,
 * then drops the dropped tables again and the streams' records (a write
 * routed by old may have landed after the first drop).
 */
static void drop_after_drain(node_server *ns, node_map *old, const pmap *pm,
                             const uint32_t *dropped, size_t ndropped, const uint32_t *off,
                             size_t noff)
{
    /* A write routed by the old map may have landed after the first
     * drop (or kept a disabled table's index, or stored a record of a
     * stream turned off): wait for those requests, then drop again. */
    if (!drain(old)) {
        log_warn("requests routed by map version %llu still running after %d ms",
                 (unsigned long long)old->pm->version, MAPS_DRAIN_TIMEOUT_MS);
    }
    for (size_t i = 0; i < ndropped; i++) {
        char why[256] = "";
        if (store_drop_table(ns->st, dropped[i], why, sizeof(why)) != 0 ||
            expiry_drop_table(ns->st, dropped[i], why, sizeof(why)) != 0) {
            log_error("dropping table id %u again failed: %s", dropped[i], why);
        }
    }
    for (size_t i = 0; i < noff; i++) {
        char why[256] = "";
        const pmap_table *t = pmap_table_find_id(pm, off[i]);
        const char *name = t != NULL ? t->schema.name : "?";
        if (stream_drop(ns->st, off[i], why, sizeof(why)) != 0) {
            log_error("dropping the stream records of table \"%s\" (id %u) failed: %s", name,
                      off[i], why);
        } else {
            log_info("table \"%s\" (id %u): its stream was turned off: its records here were "
                     "dropped",
                     name, off[i]);
        }
    }
}

int maps_apply(node_server *ns, pmap *pm, int *applied, char *err, size_t errlen)
{
    int rv = 0;
    uint32_t *dropped = NULL;
    size_t ndropped = 0;
    if (applied != NULL) {
        *applied = 0;
    }
    if (!pmap_check(pm)) {
        pmap_free(pm);
        snprintf(err, errlen, "partition map fails its invariants");
        return LAPSE_EINVAL;
    }
    pthread_mutex_lock(&ns->apply_lock);
    /* apply_lock excludes the only writer of ns->map: read it directly. */
    node_map *old = ns->map;
    uint64_t old_version = old->pm->version;
    uint64_t new_version = pm->version;
    if (new_version <= old_version) {
        pthread_mutex_unlock(&ns->apply_lock);
        pmap_free(pm);
        return 0;
    }
    if ((rv = drop_removed(ns, old->pm, pm, &dropped, &ndropped, err, errlen)) != 0) {
        goto fail;
    }
    if ((rv = persist(ns, pm, err, errlen)) != 0) {
        log_error("persisting partition map version %llu failed: %s",
                  (unsigned long long)new_version, err);
        goto fail;
    }
    size_t ntables = pm->ntables;
    size_t owned = pmap_partitions_owned(pm, ns->id);
    size_t promoted = pmap_promotions(old->pm, pm, ns->id);
    node_map *nm = map_wrap(pm);
    if (nm == NULL) {
        rv = LAPSE_ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    int disabled = ttl_disabled(old->pm, pm);
    uint32_t *off = calloc(old->pm->ntables ? old->pm->ntables : 1, sizeof(*off));
    size_t noff = off != NULL ? streams_turned_off(old->pm, pm, off) : 0;
    note_single_moves(ns, pm);
    pthread_rwlock_wrlock(&ns->map_lock);
    ns->map = nm; /* the slot's reference to old is now ours */
    pthread_rwlock_unlock(&ns->map_lock);
    copydrop_note(ns, old->pm, pm);
    if (ndropped > 0 || disabled || noff > 0) {
        drop_after_drain(ns, old, nm->pm, dropped, ndropped, off, noff);
    }
    free(off);
    newcopy_note(ns, old->pm, nm->pm); /* after the swap: every batch from now on feeds them */
    /* TTL follows the new map: enables start backfills, disables drop the
     * index (after the drain above), pauses stop scanners. nm stays
     * current while we hold apply_lock. */
    if (ns->ttl != NULL) {
        expiry_engine_sync(ns->ttl, nm->pm);
    }
    pthread_mutex_unlock(&ns->apply_lock);
    maps_release(old);
    free(dropped);
    log_info("partition map version %llu applied (was %llu; %zu tables, %zu partitions owned)",
             (unsigned long long)new_version, (unsigned long long)old_version, ntables, owned);
    if (promoted > 0) {
        atomic_fetch_add(&ns->promotions, promoted);
        log_warn("promoted to primary of %zu replicated partitions by failover (map version %llu)",
                 promoted, (unsigned long long)new_version);
    }
    if (applied != NULL) {
        *applied = 1;
    }
    return 0;
fail:
    pthread_mutex_unlock(&ns->apply_lock);
    pmap_free(pm);
    free(dropped);
    return rv;
}

int maps_apply_pb(node_server *ns, const Lapse__PartitionMap *pb, int *applied, char *err,
                  size_t errlen)
{
    pmap *pm = NULL;
    if (applied != NULL) {
        *applied = 0;
    }
    if (pb == NULL) {
        snprintf(err, errlen, "partition map is missing");
        return LAPSE_EINVAL;
    }
    /* Cheap early out: most pushes and fetches carry what we already have. */
    if (pb->version <= maps_version(ns)) {
        return 0;
    }
    int rv = wire_pmap_from_pb(pb, &pm, err, errlen);
    if (rv != 0) {
        return rv;
    }
    return maps_apply(ns, pm, applied, err, errlen);
}

/* ------------------------------------------------------------------------ */
/* Refreshing from the coordinator                                           */
/* ------------------------------------------------------------------------ */

static int fetch(node_server *ns, int timeout_ms, char *err, size_t errlen)
{
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__GetPartitionMapRequest body = LAPSE__GET_PARTITION_MAP_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    req.body_case = LAPSE__REQUEST__BODY_GET_PARTITION_MAP;
    req.get_partition_map = &body;
    req.pmap_version = maps_version(ns);
    int rv = rpc_call(ns->coord, &req, timeout_ms, &resp, err, errlen);
    if (rv == 0) {
        if (resp->body_case != LAPSE__RESPONSE__BODY_GET_PARTITION_MAP ||
            resp->get_partition_map == NULL) {
            snprintf(err, errlen, "coordinator answered GetPartitionMap without a map");
            rv = LAPSE_EPROTO;
        } else {
            rv = maps_apply_pb(ns, resp->get_partition_map->map, NULL, err, errlen);
        }
    }
    rpc_response_free(resp);
    return rv;
}

int maps_refresh(node_server *ns, int64_t deadline_mono_ms, int rate_limited, char *err,
                 size_t errlen)
{
    pthread_mutex_lock(&ns->refresh_lock);
    if (ns->refresh_in_flight) {
        /* Single flight: the fetch under way serves us too. */
        struct timespec ts = clock_mono_abstime(deadline_mono_ms - clock_mono_now().ms);
        while (ns->refresh_in_flight) {
            if (pthread_cond_timedwait(&ns->refresh_done, &ns->refresh_lock, &ts) == ETIMEDOUT) {
                break;
            }
        }
        int still = ns->refresh_in_flight;
        pthread_mutex_unlock(&ns->refresh_lock);
        if (still) {
            snprintf(err, errlen, "timed out waiting for a partition map refresh");
            return LAPSE_ETIMEDOUT;
        }
        return 0;
    }
    int64_t now = clock_mono_now().ms;
    if (rate_limited && ns->refresh_last_mono_ms != 0 &&
        now - ns->refresh_last_mono_ms < MAPS_REFRESH_MIN_INTERVAL_MS) {
        pthread_mutex_unlock(&ns->refresh_lock);
        return 0;
    }
    int64_t left = deadline_mono_ms - now;
    if (left <= 0) {
        pthread_mutex_unlock(&ns->refresh_lock);
        snprintf(err, errlen, "deadline passed before the partition map could be refreshed");
        return LAPSE_ETIMEDOUT;
    }
    ns->refresh_in_flight = 1;
    pthread_mutex_unlock(&ns->refresh_lock);

    int rv =
        fetch(ns, left < MAPS_FETCH_TIMEOUT_MS ? (int)left : MAPS_FETCH_TIMEOUT_MS, err, errlen);

    pthread_mutex_lock(&ns->refresh_lock);
    ns->refresh_in_flight = 0;
    ns->refresh_last_mono_ms = clock_mono_now().ms;
    pthread_cond_broadcast(&ns->refresh_done);
    pthread_mutex_unlock(&ns->refresh_lock);
    return rv;
}
