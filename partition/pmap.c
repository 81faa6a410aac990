/*
 * pmap.c: the partition map (see pmap.h). Plain arrays: a cluster has few
 * nodes and tables, and maps are copied whole (pmap_dup) to be published.
 */
#include "pmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"

pmap *pmap_new(void)
{
    return calloc(1, sizeof(pmap));
}

static void table_fini(pmap_table *t)
{
    free(t->parts);
    t->parts = NULL;
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
            pmap_table *t = &d->tables[i];
            t->schema = s->schema;
            size_t np = s->schema.partitions;
            if (np > 0) {
                if ((t->parts = malloc(np * sizeof(*t->parts))) == NULL) {
                    goto oom;
                }
                memcpy(t->parts, s->parts, np * sizeof(*t->parts));
            }
            d->ntables = i + 1;
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

/* Appends a table taking ownership of parts on success only. */
static int append_table(pmap *pm, const table_schema *schema, pmap_replicas *parts)
{
    pmap_table *tables = realloc(pm->tables, (pm->ntables + 1) * sizeof(*tables));
    if (tables == NULL) {
        return LAPSE_ENOMEM;
    }
    pm->tables = tables;
    pm->tables[pm->ntables].schema = *schema;
    pm->tables[pm->ntables].parts = parts;
    pm->ntables++;
    return 0;
}

static int table_exists(const pmap *pm, const table_schema *schema)
{
    return pmap_table_find(pm, schema->name) != NULL || pmap_table_find_id(pm, schema->id) != NULL;
}

int pmap_add_table(pmap *pm, const table_schema *schema)
{
    if (schema->partitions == 0) {
        return LAPSE_EINVAL;
    }
    if (table_exists(pm, schema)) {
        return LAPSE_EEXISTS;
    }
    /* Current load of every UP node, over all tables. */
    size_t nup = 0;
    for (size_t i = 0; i < pm->nnodes; i++) {
        nup += pm->nodes[i].state == PMAP_NODE_UP;
    }
    if (nup == 0) {
        return LAPSE_EUNAVAILABLE;
    }
    uint32_t *ids = calloc(nup, sizeof(*ids));
    size_t *load = calloc(nup, sizeof(*load));
    pmap_replicas *parts = calloc(schema->partitions, sizeof(*parts));
    if (ids == NULL || load == NULL || parts == NULL) {
        free(ids);
        free(load);
        free(parts);
        return LAPSE_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < pm->nnodes; i++) {
        if (pm->nodes[i].state == PMAP_NODE_UP) {
            ids[k] = pm->nodes[i].id;
            load[k] = pmap_partitions_owned(pm, ids[k]);
            k++;
        }
    }
    /* Greedy: each partition to the least-loaded UP node, ties to the
     * lowest id. Nodes and partitions are few, so O(partitions * nodes). */
    for (uint32_t p = 0; p < schema->partitions; p++) {
        size_t best = 0;
        for (size_t j = 1; j < nup; j++) {
            if (load[j] < load[best] || (load[j] == load[best] && ids[j] < ids[best])) {
                best = j;
            }
        }
        parts[p].n = 1;
        parts[p].ids[0] = ids[best];
        load[best]++;
    }
    free(ids);
    free(load);
    int rv = append_table(pm, schema, parts);
    if (rv != 0) {
        free(parts);
    }
    return rv;
}

int pmap_add_table_assigned(pmap *pm, const table_schema *schema, const pmap_replicas *parts)
{
    if (schema->partitions == 0 || parts == NULL) {
        return LAPSE_EINVAL;
    }
    if (table_exists(pm, schema)) {
        return LAPSE_EEXISTS;
    }
    for (uint32_t p = 0; p < schema->partitions; p++) {
        if (parts[p].n < 1 || parts[p].n > PMAP_MAX_REPLICAS) {
            return LAPSE_EINVAL;
        }
        for (uint32_t r = 0; r < parts[p].n; r++) {
            if (parts[p].ids[r] == 0) {
                return LAPSE_EINVAL;
            }
        }
    }
    pmap_replicas *copy = malloc(schema->partitions * sizeof(*copy));
    if (copy == NULL) {
        return LAPSE_ENOMEM;
    }
    memcpy(copy, parts, schema->partitions * sizeof(*copy));
    int rv = append_table(pm, schema, copy);
    if (rv != 0) {
        free(copy);
    }
    return rv;
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
        if (np == 0 || (np & (np - 1)) != 0 || t->parts == NULL) {
            return 0;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(t->schema.name, pm->tables[j].schema.name) == 0 ||
                t->schema.id == pm->tables[j].schema.id) {
                return 0;
            }
        }
        for (uint32_t p = 0; p < np; p++) {
            const pmap_replicas *r = &t->parts[p];
            if (r->n < 1 || r->n > PMAP_MAX_REPLICAS) {
                return 0;
            }
            for (uint32_t k = 0; k < r->n; k++) {
                if (pmap_node_find(pm, r->ids[k]) == NULL) {
                    return 0;
                }
            }
        }
    }
    return 1;
}
