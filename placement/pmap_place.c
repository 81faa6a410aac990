/*
 * pmap_place.c: where a new table's sets go (pmap_add_table) and where a
 * stream turned on puts its shards (pmap_set_stream): each kind of set
 * spread evenly over the UP nodes, copies of a set on distinct nodes
 * (docs/replication.md, "Placement").
 */
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "pmap.h"
#include "pmap_int.h"

/* The UP nodes and their loads, for one pmap_add_table. Each kind of set
 * the table gets (its base partitions, each GSI's, its stream shards) is
 * spread evenly over the nodes first (first[], copies_of[]: counted from 0
 * for each kind), and the whole map's load only breaks ties: a node that
 * joins empty takes its even share of a new table, not all of it (moving
 * older tables' sets onto it is a rebalancer's work, issue 13). */
typedef struct up_nodes {
    const pmap *pm; /* the map placed on: the nodes' zones */
    size_t n;
    uint32_t *ids;
    size_t *load;      /* base and GSI partitions owned */
    size_t *shards;    /* stream shards hosted */
    size_t *copies;    /* follower copies of base partitions held */
    size_t *first;     /* this kind's sets whose first copy it holds */
    size_t *copies_of; /* this kind's copies it holds, first ones included */
} up_nodes;

static void up_fini(up_nodes *u)
{
    free(u->ids);
    free(u->load);
    free(u->shards);
    free(u->copies);
    free(u->first);
    free(u->copies_of);
}

/* 0, LAPSE_EUNAVAILABLE (no UP node) or LAPSE_ENOMEM (u freed). */
static int up_init(up_nodes *u, const pmap *pm)
{
    memset(u, 0, sizeof(*u));
    u->pm = pm;
    for (size_t i = 0; i < pm->nnodes; i++) {
        u->n += pm->nodes[i].state == PMAP_NODE_UP && !pm->nodes[i].draining;
    }
    if (u->n == 0) {
        return LAPSE_EUNAVAILABLE;
    }
    u->ids = calloc(u->n, sizeof(*u->ids));
    u->load = calloc(u->n, sizeof(*u->load));
    u->shards = calloc(u->n, sizeof(*u->shards));
    u->copies = calloc(u->n, sizeof(*u->copies));
    u->first = calloc(u->n, sizeof(*u->first));
    u->copies_of = calloc(u->n, sizeof(*u->copies_of));
    if (u->ids == NULL || u->load == NULL || u->shards == NULL || u->copies == NULL ||
        u->first == NULL || u->copies_of == NULL) {
        up_fini(u);
        return LAPSE_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < pm->nnodes; i++) {
        if (pm->nodes[i].state == PMAP_NODE_UP && !pm->nodes[i].draining) {
            uint32_t id = pm->nodes[i].id;
            u->ids[k] = id;
            u->load[k] = pmap_partitions_owned(pm, id) + pmap_gsi_partitions_owned(pm, id);
            u->shards[k] = pmap_stream_shards_hosted(pm, id);
            u->copies[k] = pmap_follower_copies(pm, id) + pmap_derived_copies(pm, id);
            k++;
        }
    }
    return 0;
}

/* Starts counting a new kind of set (up_nodes). */
static void up_new_kind(up_nodes *u)
{
    memset(u->first, 0, u->n * sizeof(*u->first));
    memset(u->copies_of, 0, u->n * sizeof(*u->copies_of));
}

/* Whether node j comes before node k by count[] and then tie[], ties to the
 * lowest id. */
static int before(const up_nodes *u, const size_t *count, const size_t *tie, size_t j, size_t k)
{
    if (count[j] != count[k]) {
        return count[j] < count[k];
    }
    if (tie[j] != tie[k]) {
        return tie[j] < tie[k];
    }
    return u->ids[j] < u->ids[k];
}

/* The position in u of the UP node that holds the first copy of the fewest
 * sets of this kind, then of the fewest by tie[] (the map's load), among
 * those other than except (0: none excluded, or the only one left). */
static size_t least(const up_nodes *u, const size_t *tie, uint32_t except)
{
    size_t best = u->n;
    for (size_t j = 0; j < u->n; j++) {
        if (u->ids[j] == except && u->n > 1) {
            continue;
        }
        if (best == u->n || before(u, u->first, tie, j, best)) {
            best = j;
        }
    }
    return best;
}

/* Takes node j as the first copy of a set. */
static void take_first(up_nodes *u, pmap_replicas *r, size_t j, size_t *tie)
{
    r->n = 1;
    r->ids[0] = u->ids[j];
    tie[j]++;
    u->first[j]++;
    u->copies_of[j]++;
}

/* Fills r, whose first copy is set, up to rf copies: each to the UP node
 * not yet in its list in a zone none of its copies is in, if there is one
 * (docs/replication.md, "Zones"), holding the fewest copies of this kind,
 * then the fewest other copies in the map. Every set starts at epoch 1
 * with all members in sync. */
static void add_copies(up_nodes *u, pmap_replicas *r, uint32_t rf)
{
    r->epoch = 1;
    while (r->n < rf) {
        size_t f = u->n;
        int f_held = 0;
        for (size_t j = 0; j < u->n; j++) {
            if (pmap_replicas_index(r, u->ids[j]) >= 0) {
                continue;
            }
            int held = pmap_zone_held(u->pm, r, u->ids[j], 0);
            if (f == u->n || held < f_held ||
                (held == f_held && before(u, u->copies_of, u->copies, j, f))) {
                f = j;
                f_held = held;
            }
        }
        r->ids[r->n++] = u->ids[f];
        u->copies[f]++;
        u->copies_of[f]++;
    }
    r->in_sync = (1u << r->n) - 1;
}

/* Greedy: each partition to the UP node first in least(), then its rf - 1
 * other copies (add_copies). Nodes and partitions are few, so
 * O(partitions * nodes * rf).
 * REQUIRES: 1 <= rf <= min(u->n, PMAP_MAX_REPLICAS). */
static void place(up_nodes *u, pmap_replicas *parts, uint32_t n, uint32_t rf)
{
    up_new_kind(u);
    for (uint32_t p = 0; p < n; p++) {
        take_first(u, &parts[p], least(u, u->load, 0), u->load);
        add_copies(u, &parts[p], rf);
    }
}

/* Frees the arrays of a placement built by pmap_add_table. */
static void placement_free(pmap_placement *pl)
{
    free((void *)pl->parts);
    for (size_t i = 0; i < SCHEMA_MAX_GSI; i++) {
        free((void *)pl->gsi_parts[i]);
    }
    free((void *)pl->stream_shards);
}

int pmap_add_table(pmap *pm, const table_schema *schema)
{
    if (schema->partitions == 0 || schema->ngsi > SCHEMA_MAX_GSI) {
        return LAPSE_EINVAL;
    }
    for (uint32_t g = 0; g < schema->ngsi; g++) {
        if (schema->gsi[g].partitions == 0) {
            return LAPSE_EINVAL;
        }
    }
    if (pmap_table_exists(pm, schema)) {
        return LAPSE_EEXISTS;
    }
    up_nodes u;
    int rv = up_init(&u, pm);
    if (rv != 0) {
        return rv;
    }
    pmap_placement pl;
    memset(&pl, 0, sizeof(pl));
    const uint32_t rf = schema_replication(schema);
    if (rf > u.n || rf > PMAP_MAX_REPLICAS) {
        up_fini(&u);
        return LAPSE_EUNAVAILABLE;
    }
    pmap_replicas *parts = calloc(schema->partitions, sizeof(*parts));
    pl.parts = parts;
    if (parts == NULL) {
        goto oom;
    }
    place(&u, parts, schema->partitions, rf);
    for (uint32_t g = 0; g < schema->ngsi; g++) {
        pmap_replicas *gp = calloc(schema->gsi[g].partitions, sizeof(*gp));
        pl.gsi_parts[g] = gp;
        if (gp == NULL) {
            goto oom;
        }
        place(&u, gp, schema->gsi[g].partitions, rf);
    }
    if (schema->stream.enabled) {
        pmap_replicas *shards = calloc(schema->partitions, sizeof(*shards));
        pl.stream_shards = shards;
        if (shards == NULL) {
            goto oom;
        }
        up_new_kind(&u);
        for (uint32_t p = 0; p < schema->partitions; p++) {
            take_first(&u, &shards[p], least(&u, u.shards, parts[p].ids[0]), u.shards);
            add_copies(&u, &shards[p], rf);
        }
    }
    rv = pmap_append_table(pm, schema, &pl);
    placement_free(&pl);
    up_fini(&u);
    return rv;
oom:
    placement_free(&pl);
    up_fini(&u);
    return LAPSE_ENOMEM;
}

int pmap_set_stream(pmap *pm, const char *name, const table_stream *st)
{
    pmap_table *t = NULL;
    for (size_t i = 0; i < pm->ntables; i++) {
        if (strcmp(pm->tables[i].schema.name, name) == 0) {
            t = &pm->tables[i];
        }
    }
    if (t == NULL) {
        return LAPSE_ENOTFOUND;
    }
    pmap_replicas *shards = NULL;
    if (st->enabled) {
        up_nodes u;
        int rv = up_init(&u, pm);
        if (rv != 0) {
            return rv;
        }
        const uint32_t rf = schema_replication(&t->schema);
        if (rf > u.n || rf > PMAP_MAX_REPLICAS) {
            up_fini(&u);
            return LAPSE_EUNAVAILABLE;
        }
        if ((shards = calloc(t->schema.partitions, sizeof(*shards))) == NULL) {
            up_fini(&u);
            return LAPSE_ENOMEM;
        }
        up_new_kind(&u);
        for (uint32_t p = 0; p < t->schema.partitions; p++) {
            take_first(&u, &shards[p], least(&u, u.shards, t->parts[p].ids[0]), u.shards);
            add_copies(&u, &shards[p], rf);
        }
        up_fini(&u);
    }
    free(t->stream_shards);
    t->stream_shards = shards;
    t->schema.stream = *st;
    return 0;
}
