/* derived.c: moving GSI partition and stream shard copies (derived.h). */
#include "derived.h"

#include "../common/lapse_err.h"

pmap_replicas *pmap_derived_list(pmap_table *t, int gsi, uint32_t part)
{
    if (t == NULL) {
        return NULL;
    }
    if (gsi < 0) {
        return t->stream_shards != NULL && part < t->schema.partitions ? &t->stream_shards[part]
                                                                       : NULL;
    }
    if ((uint32_t)gsi >= t->schema.ngsi || (uint32_t)gsi >= SCHEMA_MAX_GSI ||
        t->gsi_parts[gsi] == NULL || part >= t->schema.gsi[gsi].partitions) {
        return NULL;
    }
    return &t->gsi_parts[gsi][part];
}

/* Every member counts in sync: a derived list has no in-sync set of its
 * own, and the wire form wants its first copy in it. */
static void members_changed(pmap_replicas *r)
{
    r->in_sync = r->n >= 32 ? ~0u : (1u << r->n) - 1;
    r->changes++;
}

int pmap_derived_add(pmap_replicas *r, uint32_t id, uint64_t since)
{
    if (pmap_replicas_index(r, id) >= 0) {
        return LAPSE_EEXISTS;
    }
    if (r->joining != 0) {
        return LAPSE_ESTATE;
    }
    if (r->n >= PMAP_MAX_REPLICAS) {
        return LAPSE_EUNAVAILABLE;
    }
    r->ids[r->n++] = id;
    r->joining = id;
    r->joining_since = since;
    members_changed(r);
    return 0;
}

/* Takes member k out of r. REQUIRES: k < r->n. */
static void take_out(pmap_replicas *r, uint32_t k)
{
    uint32_t id = r->ids[k];
    for (; k + 1 < r->n; k++) {
        r->ids[k] = r->ids[k + 1];
    }
    r->ids[--r->n] = 0;
    if (r->joining == id) {
        r->joining = 0;
        r->joining_since = 0;
    }
    r->leaving = r->leaving == id ? 0 : r->leaving;
    members_changed(r);
}

int pmap_derived_settle(pmap_replicas *r, uint32_t leave)
{
    if (r->joining == 0) {
        return LAPSE_ESTATE;
    }
    int k = pmap_replicas_index(r, leave);
    if (k < 0 || leave == r->joining) {
        return LAPSE_EINVAL;
    }
    r->joining = 0;
    r->joining_since = 0;
    take_out(r, (uint32_t)k); /* the joining copy stays: never the last */
    return 0;
}

int pmap_derived_drop(pmap_replicas *r, uint32_t id)
{
    int k = pmap_replicas_index(r, id);
    if (k < 0) {
        return LAPSE_EINVAL;
    }
    if (r->n <= 1) {
        return LAPSE_ESTATE;
    }
    take_out(r, (uint32_t)k);
    return 0;
}

/* Notes in *joining and *oldest whether list r has node id joining, and
 * from which version. */
static void note_joining(const pmap_replicas *r, uint32_t id, int *joining, uint64_t *oldest)
{
    if (r->joining == id) {
        *joining = 1;
        *oldest = r->joining_since < *oldest ? r->joining_since : *oldest;
    }
}

int pmap_derived_joining(const pmap_table *t, uint32_t id, uint64_t *since)
{
    int joining = 0;
    uint64_t oldest = UINT64_MAX;
    for (uint32_t g = 0; g < t->schema.ngsi; g++) {
        for (uint32_t q = 0; q < t->schema.gsi[g].partitions; q++) {
            note_joining(pmap_gsi_part(t, g, q), id, &joining, &oldest);
        }
    }
    for (uint32_t p = 0; t->stream_shards != NULL && p < t->schema.partitions; p++) {
        note_joining(&t->stream_shards[p], id, &joining, &oldest);
    }
    if (joining && since != NULL) {
        *since = oldest;
    }
    return joining;
}
