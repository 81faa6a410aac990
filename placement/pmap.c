/*
 * pmap.c: the partition map (see pmap.h). Plain arrays: a cluster has few
 * nodes and tables, and maps are copied whole (pmap_dup) to be published.
 * Where a new table's sets go is pmap_place.c's.
 */
#include "pmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/errf.h"
#include "../common/lapse_err.h"
#include "pmap_int.h"

pmap *pmap_new(void)
{
    return calloc(1, sizeof(pmap));
}

static void table_fini(pmap_table *t)
{
    free(t->parts);
    t->parts = NULL;
    for (size_t i = 0; i < SCHEMA_MAX_GSI; i++) {
        free(t->gsi_parts[i]);
        t->gsi_parts[i] = NULL;
    }
    free(t->stream_shards);
    t->stream_shards = NULL;
}

/* A malloc'd copy of n elements of size sz, or NULL (also for n == 0). */
static void *memdup_n(const void *p, size_t n, size_t sz)
{
    if (p == NULL || n == 0) {
        return NULL;
    }
    void *d = malloc(n * sz);
    if (d != NULL) {
        memcpy(d, p, n * sz);
    }
    return d;
}

/* Fills t (zeroed) with the schema and copies of pl's arrays. Returns 0 or
 * LAPSE_ENOMEM (t half-built: table_fini frees it). REQUIRES: pl's arrays
 * have the lengths the schema says (pmap_placement). */
static int table_copy(pmap_table *t, const table_schema *schema, const pmap_placement *pl)
{
    t->schema = *schema;
    size_t np = schema->partitions;
    if ((t->parts = memdup_n(pl->parts, np, sizeof(*t->parts))) == NULL) {
        return LAPSE_ENOMEM;
    }
    for (uint32_t i = 0; i < schema->ngsi && i < SCHEMA_MAX_GSI; i++) {
        size_t ng = schema->gsi[i].partitions;
        if ((t->gsi_parts[i] = memdup_n(pl->gsi_parts[i], ng, sizeof(pmap_replicas))) == NULL) {
            return LAPSE_ENOMEM;
        }
    }
    if (schema->stream.enabled &&
        (t->stream_shards = memdup_n(pl->stream_shards, np, sizeof(pmap_replicas))) == NULL) {
        return LAPSE_ENOMEM;
    }
    return 0;
}

/* The placement arrays of an existing table, borrowed. */
static pmap_placement placement_of(const pmap_table *t)
{
    pmap_placement pl;
    memset(&pl, 0, sizeof(pl));
    pl.parts = t->parts;
    for (size_t i = 0; i < SCHEMA_MAX_GSI; i++) {
        pl.gsi_parts[i] = t->gsi_parts[i];
    }
    pl.stream_shards = t->stream_shards;
    return pl;
}

void pmap_free(pmap *pm)
{
    if (pm == NULL) {
        return;
    }
    for (size_t i = 0; i < pm->ntables; i++) {
        table_fini(&pm->tables[i]);
    }
    free(pm->tables);
    free(pm->nodes);
    free(pm);
}

pmap *pmap_dup(const pmap *pm)
{
    pmap *d = pmap_new();
    if (d == NULL) {
        return NULL;
    }
    d->version = pm->version;
    if (pm->nnodes > 0) {
        if ((d->nodes = malloc(pm->nnodes * sizeof(*d->nodes))) == NULL) {
            goto oom;
        }
        memcpy(d->nodes, pm->nodes, pm->nnodes * sizeof(*d->nodes));
        d->nnodes = pm->nnodes;
    }
    if (pm->ntables > 0) {
        if ((d->tables = calloc(pm->ntables, sizeof(*d->tables))) == NULL) {
            goto oom;
        }
        for (size_t i = 0; i < pm->ntables; i++) {
            const pmap_table *s = &pm->tables[i];
            pmap_placement pl = placement_of(s);
            d->ntables = i + 1; /* so pmap_free frees a half-copied table too */
            if (table_copy(&d->tables[i], &s->schema, &pl) != 0) {
                goto oom;
            }
        }
    }
    return d;
oom:
    pmap_free(d);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Lookups                                                                   */
/* ------------------------------------------------------------------------ */

const pmap_node *pmap_node_find(const pmap *pm, uint32_t id)
{
    for (size_t i = 0; i < pm->nnodes; i++) {
        if (pm->nodes[i].id == id) {
            return &pm->nodes[i];
        }
    }
    return NULL;
}

int pmap_node_leaving(const pmap *pm, uint32_t id)
{
    const pmap_node *n = pmap_node_find(pm, id);
    return n != NULL && (n->draining || n->removed);
}

int pmap_set_lost(const pmap *pm, const pmap_replicas *r)
{
    int members = 0;
    for (uint32_t k = 0; k < r->n; k++) {
        if (r->ids[k] == r->joining) {
            continue;
        }
        const pmap_node *n = pmap_node_find(pm, r->ids[k]);
        if (n == NULL || !n->removed) {
            return 0;
        }
        members++;
    }
    return members > 0;
}

int pmap_table_lost(const pmap *pm, const pmap_table *t)
{
    for (uint32_t p = 0; p < t->schema.partitions; p++) {
        if (pmap_set_lost(pm, &t->parts[p])) {
            return 1;
        }
    }
    return 0;
}

const pmap_table *pmap_table_find(const pmap *pm, const char *name)
{
    for (size_t i = 0; i < pm->ntables; i++) {
        if (strcmp(pm->tables[i].schema.name, name) == 0) {
            return &pm->tables[i];
        }
    }
    return NULL;
}

const pmap_table *pmap_table_find_id(const pmap *pm, uint32_t id)
{
    for (size_t i = 0; i < pm->ntables; i++) {
        if (pm->tables[i].schema.id == id) {
            return &pm->tables[i];
        }
    }
    return NULL;
}

uint32_t pmap_owner(const pmap_table *t, uint32_t part)
{
    if (t == NULL || t->parts == NULL || part >= t->schema.partitions || t->parts[part].n == 0) {
        return 0;
    }
    return t->parts[part].ids[0];
}

const pmap_replicas *pmap_part(const pmap_table *t, uint32_t part)
{
    if (t == NULL || t->parts == NULL || part >= t->schema.partitions || t->parts[part].n == 0) {
        return NULL;
    }
    return &t->parts[part];
}

int pmap_replicas_index(const pmap_replicas *r, uint32_t id)
{
    for (uint32_t i = 0; r != NULL && i < r->n && i < PMAP_MAX_REPLICAS; i++) {
        if (r->ids[i] == id) {
            return (int)i;
        }
    }
    return -1;
}

int pmap_in_sync(const pmap_replicas *r, uint32_t i)
{
    return i < r->n && (r->in_sync == 0 || (r->in_sync >> i & 1u) != 0);
}

uint32_t pmap_in_sync_count(const pmap_replicas *r)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        n += pmap_in_sync(r, i) != 0;
    }
    return n;
}

uint64_t pmap_epoch(const pmap_replicas *r)
{
    return r->epoch > 0 ? r->epoch : 1;
}

size_t pmap_follower_copies(const pmap *pm, uint32_t id)
{
    size_t n = 0;
    for (size_t i = 0; i < pm->ntables; i++) {
        const pmap_table *t = &pm->tables[i];
        for (uint32_t p = 0; p < t->schema.partitions; p++) {
            n += pmap_replicas_index(&t->parts[p], id) > 0;
        }
    }
    return n;
}

size_t pmap_partitions_owned(const pmap *pm, uint32_t id)
{
    size_t n = 0;
    for (size_t i = 0; i < pm->ntables; i++) {
        const pmap_table *t = &pm->tables[i];
        for (uint32_t p = 0; p < t->schema.partitions; p++) {
            if (t->parts[p].n > 0 && t->parts[p].ids[0] == id) {
                n++;
            }
        }
    }
    return n;
}

int pmap_gsi_find(const pmap_table *t, const char *name)
{
    if (t == NULL || name == NULL) {
        return -1;
    }
    for (uint32_t i = 0; i < t->schema.ngsi && i < SCHEMA_MAX_GSI; i++) {
        if (strcmp(t->schema.gsi[i].name, name) == 0) {
            return (int)i;
        }
    }
    return -1;
}

const pmap_replicas *pmap_gsi_part(const pmap_table *t, uint32_t gsi, uint32_t part)
{
    if (t == NULL || gsi >= t->schema.ngsi || gsi >= SCHEMA_MAX_GSI || t->gsi_parts[gsi] == NULL ||
        part >= t->schema.gsi[gsi].partitions) {
        return NULL;
    }
    return &t->gsi_parts[gsi][part];
}

uint32_t pmap_gsi_owner(const pmap_table *t, uint32_t gsi, uint32_t part)
{
    const pmap_replicas *r = pmap_gsi_part(t, gsi, part);
    return r != NULL && r->n > 0 ? r->ids[0] : 0;
}

const pmap_replicas *pmap_stream_shard(const pmap_table *t, uint32_t part)
{
    if (t == NULL || t->stream_shards == NULL || part >= t->schema.partitions) {
        return NULL;
    }
    return &t->stream_shards[part];
}

uint32_t pmap_stream_host(const pmap_table *t, uint32_t part)
{
    const pmap_replicas *r = pmap_stream_shard(t, part);
    return r != NULL && r->n > 0 ? r->ids[0] : 0;
}

size_t pmap_gsi_partitions_owned(const pmap *pm, uint32_t id)
{
    size_t n = 0;
    for (size_t i = 0; i < pm->ntables; i++) {
        const pmap_table *t = &pm->tables[i];
        for (uint32_t g = 0; g < t->schema.ngsi && g < SCHEMA_MAX_GSI; g++) {
            for (uint32_t p = 0; p < t->schema.gsi[g].partitions; p++) {
                n += pmap_gsi_owner(t, g, p) == id;
            }
        }
    }
    return n;
}

size_t pmap_stream_shards_hosted(const pmap *pm, uint32_t id)
{
    size_t n = 0;
    for (size_t i = 0; i < pm->ntables; i++) {
        const pmap_table *t = &pm->tables[i];
        for (uint32_t p = 0; t->stream_shards != NULL && p < t->schema.partitions; p++) {
            n += pmap_stream_host(t, p) == id;
        }
    }
    return n;
}

size_t pmap_derived_copies(const pmap *pm, uint32_t id)
{
    size_t n = 0;
    for (size_t i = 0; i < pm->ntables; i++) {
        const pmap_table *t = &pm->tables[i];
        for (uint32_t g = 0; g < t->schema.ngsi && g < SCHEMA_MAX_GSI; g++) {
            for (uint32_t p = 0; p < t->schema.gsi[g].partitions; p++) {
                n += pmap_replicas_index(pmap_gsi_part(t, g, p), id) > 0;
            }
        }
        for (uint32_t p = 0; t->stream_shards != NULL && p < t->schema.partitions; p++) {
            n += pmap_replicas_index(&t->stream_shards[p], id) > 0;
        }
    }
    return n;
}

/* Adds id to the ascending set ids[0..*n) of capacity cap (full: dropped). */
static void set_add(uint32_t *ids, size_t cap, size_t *n, uint32_t id)
{
    size_t k = 0;
    while (k < *n && ids[k] < id) {
        k++;
    }
    if ((k < *n && ids[k] == id) || *n == cap) {
        return;
    }
    memmove(&ids[k + 1], &ids[k], (*n - k) * sizeof(*ids));
    ids[k] = id;
    (*n)++;
}

size_t pmap_outbox_destinations(const pmap_table *t, uint32_t part, uint32_t *ids, size_t cap)
{
    if (t == NULL || part >= t->schema.partitions || !schema_has_outbox(&t->schema)) {
        return 0;
    }
    uint32_t set[PMAP_MAX_DESTINATIONS];
    size_t n = 0;
    for (uint32_t g = 0; g < t->schema.ngsi && g < SCHEMA_MAX_GSI; g++) {
        for (uint32_t p = 0; p < t->schema.gsi[g].partitions; p++) {
            const pmap_replicas *r = pmap_gsi_part(t, g, p);
            for (uint32_t i = 0; r != NULL && i < r->n; i++) {
                set_add(set, PMAP_MAX_DESTINATIONS, &n, r->ids[i]);
            }
        }
    }
    const pmap_replicas *shard = pmap_stream_shard(t, part);
    for (uint32_t i = 0; shard != NULL && i < shard->n; i++) {
        set_add(set, PMAP_MAX_DESTINATIONS, &n, shard->ids[i]);
    }
    if (ids != NULL && cap > 0) {
        memcpy(ids, set, (n < cap ? n : cap) * sizeof(*ids));
    }
    return n;
}

/* ------------------------------------------------------------------------ */
/* Changes                                                                   */
/* ------------------------------------------------------------------------ */

int pmap_set_node(pmap *pm, uint32_t id, const char *address, pmap_node_state state)
{
    if (id == 0 || address == NULL || strlen(address) >= PMAP_MAX_ADDR) {
        return LAPSE_EINVAL;
    }
    pmap_node *n = (pmap_node *)pmap_node_find(pm, id);
    if (n == NULL) {
        pmap_node *nodes = realloc(pm->nodes, (pm->nnodes + 1) * sizeof(*nodes));
        if (nodes == NULL) {
            return LAPSE_ENOMEM;
        }
        pm->nodes = nodes;
        n = &pm->nodes[pm->nnodes++];
        memset(n, 0, sizeof(*n));
        n->id = id;
    }
    snprintf(n->address, sizeof(n->address), "%s", address);
    n->state = state;
    return 0;
}

int pmap_set_node_lease(pmap *pm, uint32_t id, int64_t lease)
{
    pmap_node *n = (pmap_node *)pmap_node_find(pm, id);
    if (n == NULL) {
        return LAPSE_ENOTFOUND;
    }
    n->lease = lease;
    return 0;
}

int pmap_set_node_incarnation(pmap *pm, uint32_t id, uint64_t incarnation)
{
    pmap_node *n = (pmap_node *)pmap_node_find(pm, id);
    if (n == NULL) {
        return LAPSE_ENOTFOUND;
    }
    n->incarnation = incarnation;
    return 0;
}

int pmap_set_node_draining(pmap *pm, uint32_t id, int draining)
{
    pmap_node *n = (pmap_node *)pmap_node_find(pm, id);
    if (n == NULL) {
        return LAPSE_ENOTFOUND;
    }
    n->draining = draining != 0;
    return 0;
}

int pmap_zone_valid(const char *zone)
{
    size_t n = 0;
    for (; zone[n] != '\0'; n++) {
        char c = zone[n];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-')) {
            return 0;
        }
    }
    return n >= 1 && n < PMAP_MAX_ZONE;
}

int pmap_set_node_zone(pmap *pm, uint32_t id, const char *zone)
{
    pmap_node *n = (pmap_node *)pmap_node_find(pm, id);
    if (n == NULL) {
        return LAPSE_ENOTFOUND;
    }
    if (zone != NULL && zone[0] != '\0' && !pmap_zone_valid(zone)) {
        return LAPSE_EINVAL;
    }
    snprintf(n->zone, sizeof(n->zone), "%s", zone != NULL ? zone : "");
    return 0;
}

/* Node id's zone; "" for none or an unknown node. */
static const char *zone_of(const pmap *pm, uint32_t id)
{
    const pmap_node *n = pmap_node_find(pm, id);
    return n != NULL ? n->zone : "";
}

int pmap_zone_held(const pmap *pm, const pmap_replicas *r, uint32_t id, uint32_t without)
{
    const char *z = zone_of(pm, id);
    for (uint32_t k = 0; k < r->n; k++) {
        if (r->ids[k] != without && r->ids[k] != id && strcmp(zone_of(pm, r->ids[k]), z) == 0) {
            return 1;
        }
    }
    return 0;
}

uint32_t pmap_zones_of(const pmap *pm, const pmap_replicas *r, uint32_t without, uint32_t with)
{
    uint32_t ids[PMAP_MAX_REPLICAS + 1], n = 0, zones = 0;
    for (uint32_t k = 0; k < r->n; k++) {
        if (r->ids[k] != without) {
            ids[n++] = r->ids[k];
        }
    }
    if (with != 0 && pmap_replicas_index(r, with) < 0) {
        ids[n++] = with;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = 0;
        while (j < i && strcmp(zone_of(pm, ids[j]), zone_of(pm, ids[i])) != 0) {
            j++;
        }
        zones += j == i; /* the first member in its zone */
    }
    return zones;
}

int pmap_move_keeps_zones(const pmap *pm, const pmap_replicas *r, uint32_t from, uint32_t to)
{
    return pmap_zones_of(pm, r, from, to) >= pmap_zones_of(pm, r, 0, 0);
}

int pmap_set_node_removed(pmap *pm, uint32_t id)
{
    pmap_node *n = (pmap_node *)pmap_node_find(pm, id);
    if (n == NULL) {
        return LAPSE_ENOTFOUND;
    }
    n->removed = 1;
    return 0;
}

int pmap_append_table(pmap *pm, const table_schema *schema, const pmap_placement *pl)
{
    pmap_table t;
    memset(&t, 0, sizeof(t));
    if (table_copy(&t, schema, pl) != 0) {
        table_fini(&t);
        return LAPSE_ENOMEM;
    }
    pmap_table *tables = realloc(pm->tables, (pm->ntables + 1) * sizeof(*tables));
    if (tables == NULL) {
        table_fini(&t);
        return LAPSE_ENOMEM;
    }
    pm->tables = tables;
    pm->tables[pm->ntables++] = t;
    return 0;
}

int pmap_table_exists(const pmap *pm, const table_schema *schema)
{
    return pmap_table_find(pm, schema->name) != NULL || pmap_table_find_id(pm, schema->id) != NULL;
}

int pmap_replicas_check(const pmap_replicas *r, char *err, size_t errlen)
{
    if (r->n < 1 || r->n > PMAP_MAX_REPLICAS) {
        return errf(LAPSE_EINVAL, err, errlen, "%u replicas (want 1 to %d)", (unsigned)r->n,
                    PMAP_MAX_REPLICAS);
    }
    for (uint32_t i = 0; i < r->n; i++) {
        if (r->ids[i] == 0) {
            return errf(LAPSE_EINVAL, err, errlen, "node id 0");
        }
        for (uint32_t j = 0; j < i; j++) {
            if (r->ids[j] == r->ids[i]) {
                return errf(LAPSE_EINVAL, err, errlen, "node %u listed twice", (unsigned)r->ids[i]);
            }
        }
    }
    if (r->in_sync >> r->n != 0 || (r->in_sync != 0 && (r->in_sync & 1u) == 0)) {
        return errf(LAPSE_EINVAL, err, errlen,
                    "in-sync set 0x%x names members past its %u or leaves out its primary",
                    (unsigned)r->in_sync, (unsigned)r->n);
    }
    if (r->joining != 0 && pmap_replicas_index(r, r->joining) < 0) {
        return errf(LAPSE_EINVAL, err, errlen, "joining node %u is not a member",
                    (unsigned)r->joining);
    }
    if (r->handing_to != 0 && pmap_replicas_index(r, r->handing_to) <= 0) {
        return errf(LAPSE_EINVAL, err, errlen, "handover target %u is not a follower",
                    (unsigned)r->handing_to);
    }
    if (r->leaving != 0 && pmap_replicas_index(r, r->leaving) < 0) {
        return errf(LAPSE_EINVAL, err, errlen, "leaving node %u is not a member",
                    (unsigned)r->leaving);
    }
    return 0;
}

/* Whether parts[0..n) are n sets of 1..PMAP_MAX_REPLICAS non-zero ids with
 * in-sync bits only of members and with the primary's: the shape of
 * pmap_replicas_check, without its membership rules (pmap_add_table_placed's
 * contract; its decoders check each set with pmap_replicas_check first). */
static int replicas_ok(const pmap_replicas *parts, uint32_t n)
{
    if (parts == NULL) {
        return 0;
    }
    for (uint32_t p = 0; p < n; p++) {
        if (parts[p].n < 1 || parts[p].n > PMAP_MAX_REPLICAS ||
            parts[p].in_sync >> parts[p].n != 0 ||
            (parts[p].in_sync != 0 && (parts[p].in_sync & 1u) == 0)) {
            return 0; /* in-sync bits past the list, or a primary out of sync */
        }
        for (uint32_t r = 0; r < parts[p].n; r++) {
            if (parts[p].ids[r] == 0) {
                return 0;
            }
        }
    }
    return 1;
}

int pmap_add_table_placed(pmap *pm, const table_schema *schema, const pmap_placement *pl)
{
    if (schema->partitions == 0 || pl == NULL || !replicas_ok(pl->parts, schema->partitions) ||
        schema->ngsi > SCHEMA_MAX_GSI) {
        return LAPSE_EINVAL;
    }
    for (uint32_t g = 0; g < SCHEMA_MAX_GSI; g++) {
        if (g >= schema->ngsi ? pl->gsi_parts[g] != NULL
                              : schema->gsi[g].partitions == 0 ||
                                    !replicas_ok(pl->gsi_parts[g], schema->gsi[g].partitions)) {
            return LAPSE_EINVAL;
        }
    }
    if ((pl->stream_shards != NULL) != (schema->stream.enabled != 0) ||
        (pl->stream_shards != NULL && !replicas_ok(pl->stream_shards, schema->partitions))) {
        return LAPSE_EINVAL;
    }
    if (pmap_table_exists(pm, schema)) {
        return LAPSE_EEXISTS;
    }
    return pmap_append_table(pm, schema, pl);
}

int pmap_add_table_assigned(pmap *pm, const table_schema *schema, const pmap_replicas *parts)
{
    pmap_placement pl;
    memset(&pl, 0, sizeof(pl));
    pl.parts = parts;
    return pmap_add_table_placed(pm, schema, &pl);
}

int pmap_remove_table(pmap *pm, const char *name)
{
    for (size_t i = 0; i < pm->ntables; i++) {
        if (strcmp(pm->tables[i].schema.name, name) == 0) {
            table_fini(&pm->tables[i]);
            memmove(&pm->tables[i], &pm->tables[i + 1],
                    (pm->ntables - i - 1) * sizeof(*pm->tables));
            pm->ntables--;
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Invariants                                                                */
/* ------------------------------------------------------------------------ */

/* 1 when parts[0..n) each have 1..PMAP_MAX_REPLICAS ids of known nodes. */
static int replicas_known(const pmap *pm, const pmap_replicas *parts, uint32_t n)
{
    if (parts == NULL) {
        return 0;
    }
    for (uint32_t p = 0; p < n; p++) {
        const pmap_replicas *r = &parts[p];
        if (r->n < 1 || r->n > PMAP_MAX_REPLICAS) {
            return 0;
        }
        for (uint32_t k = 0; k < r->n; k++) {
            if (pmap_node_find(pm, r->ids[k]) == NULL) {
                return 0;
            }
        }
    }
    return 1;
}

/* Invariants 4 and 5 for one table. */
static int placements_ok(const pmap *pm, const pmap_table *t)
{
    if (t->schema.ngsi > SCHEMA_MAX_GSI) {
        return 0;
    }
    for (uint32_t g = 0; g < SCHEMA_MAX_GSI; g++) {
        if (g >= t->schema.ngsi) {
            if (t->gsi_parts[g] != NULL) {
                return 0;
            }
            continue;
        }
        uint32_t ng = t->schema.gsi[g].partitions;
        if (ng == 0 || (ng & (ng - 1)) != 0 || !replicas_known(pm, t->gsi_parts[g], ng)) {
            return 0;
        }
    }
    if ((t->stream_shards != NULL) != (t->schema.stream.enabled != 0)) {
        return 0;
    }
    return t->stream_shards == NULL || replicas_known(pm, t->stream_shards, t->schema.partitions);
}

int pmap_check(const pmap *pm)
{
    if (pm == NULL) {
        return 0;
    }
    for (size_t i = 0; i < pm->nnodes; i++) {
        if (pm->nodes[i].id == 0 || memchr(pm->nodes[i].address, 0, PMAP_MAX_ADDR) == NULL) {
            return 0;
        }
        for (size_t j = 0; j < i; j++) {
            if (pm->nodes[i].id == pm->nodes[j].id) {
                return 0;
            }
        }
    }
    for (size_t i = 0; i < pm->ntables; i++) {
        const pmap_table *t = &pm->tables[i];
        uint32_t np = t->schema.partitions;
        if (np == 0 || (np & (np - 1)) != 0 || !replicas_known(pm, t->parts, np) ||
            !placements_ok(pm, t)) {
            return 0;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(t->schema.name, pm->tables[j].schema.name) == 0 ||
                t->schema.id == pm->tables[j].schema.id) {
                return 0;
            }
        }
    }
    return 1;
}
