/*
 * wire_pmap.c: table schemas, table maps and partition maps <-> protobuf-c
 * messages (the wire_schema_*, wire_table_* and wire_pmap_* half of wire.h).
 * Incoming maps are validated completely before they reach placement/pmap.c;
 * the rules are listed in docs/wire-protocol.md ("Validation").
 */
#include "wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "rpc_internal.h"

/* ===================================================================== */
/* Outgoing: structs to protobuf                                          */
/* ===================================================================== */

Lapse__TtlConfig *wire_ttl_to_pb(arena *a, const table_ttl *t)
{
    Lapse__TtlConfig *pb = arena_alloc(a, sizeof *pb);
    if (pb == NULL) {
        return NULL;
    }
    lapse__ttl_config__init(pb);
    pb->enabled = t->enabled != 0;
    pb->offset_seconds = t->offset_s;
    pb->ignore_older_than_years = t->guard_years;
    pb->paused = t->paused != 0;
    pb->config_version = t->config_version;
    if ((pb->attribute = arena_strdup(a, t->attribute)) == NULL) {
        return NULL;
    }
    return pb;
}

int wire_ttl_from_pb(const Lapse__TtlConfig *pb, table_ttl *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (pb == NULL) {
        return 0; /* never configured */
    }
    const char *attr = pb->attribute != NULL ? pb->attribute : "";
    size_t len = strnlen(attr, SCHEMA_MAX_KEY_NAME + 1);
    if (len > SCHEMA_MAX_KEY_NAME) {
        set_err(err, errlen, "TTL attribute name longer than %d bytes", SCHEMA_MAX_KEY_NAME);
        return LAPSE_EINVAL;
    }
    if (pb->enabled && len == 0) {
        set_err(err, errlen, "TTL is enabled without an attribute");
        return LAPSE_EINVAL;
    }
    if (pb->offset_seconds < 0 || pb->offset_seconds > WIRE_MAX_TTL_OFFSET_S) {
        set_err(err, errlen, "TTL offset %lld s is out of range (0 to %lld)",
                (long long)pb->offset_seconds, (long long)WIRE_MAX_TTL_OFFSET_S);
        return LAPSE_EINVAL;
    }
    if (pb->ignore_older_than_years < 0 || pb->ignore_older_than_years > WIRE_MAX_TTL_GUARD_YEARS) {
        set_err(err, errlen, "TTL guard of %d years is out of range (0 to %d)",
                (int)pb->ignore_older_than_years, WIRE_MAX_TTL_GUARD_YEARS);
        return LAPSE_EINVAL;
    }
    memcpy(out->attribute, attr, len + 1);
    out->enabled = pb->enabled;
    out->offset_s = pb->offset_seconds;
    out->guard_years = pb->ignore_older_than_years;
    out->paused = pb->paused;
    out->config_version = pb->config_version;
    return 0;
}

Lapse__TableSchema *wire_schema_to_pb(arena *a, const table_schema *t)
{
    Lapse__TableSchema *pb = arena_alloc(a, sizeof *pb);
    if (pb == NULL) {
        return NULL;
    }
    lapse__table_schema__init(pb);
    pb->id = t->id;
    pb->partitions = t->partitions;
    if ((pb->name = arena_strdup(a, t->name)) == NULL ||
        (pb->partition_key = wire_key_to_pb(a, &t->pk)) == NULL) {
        return NULL;
    }
    if (t->sk.name[0] != 0 && (pb->sort_key = wire_key_to_pb(a, &t->sk)) == NULL) {
        return NULL;
    }
    /* TTL never configured: ttl stays NULL (absent on the wire). */
    if ((t->ttl.attribute[0] != 0 || t->ttl.config_version != 0) &&
        (pb->ttl = wire_ttl_to_pb(a, &t->ttl)) == NULL) {
        return NULL;
    }
    pb->hide_expired = t->hide_expired != 0;
    pb->replication = t->replication;
    pb->created_ms = t->created_ms;
    if (wire_indexes_to_pb(a, t, pb) != 0) {
        return NULL;
    }
    return pb; /* no sort key: sort_key stays NULL (absent on the wire) */
}

/* n PartitionReplicas from parts (n may be 0), or NULL on OOM. */
static Lapse__PartitionReplicas **replicas_to_pb(arena *a, const pmap_replicas *parts, uint32_t n)
{
    Lapse__PartitionReplicas **out = arena_alloc(a, (n > 0 ? n : 1) * sizeof *out);
    if (out == NULL) {
        return NULL;
    }
    for (uint32_t p = 0; p < n; p++) {
        const pmap_replicas *r = &parts[p];
        uint32_t k = r->n <= PMAP_MAX_REPLICAS ? r->n : PMAP_MAX_REPLICAS;
        Lapse__PartitionReplicas *pr = arena_alloc(a, sizeof *pr);
        if (pr == NULL) {
            return NULL;
        }
        lapse__partition_replicas__init(pr);
        if ((pr->node_ids = arena_memdup(a, r->ids, (k > 0 ? k : 1) * sizeof(uint32_t))) == NULL) {
            return NULL;
        }
        pr->n_node_ids = k;
        pr->in_sync = r->in_sync;
        pr->epoch = r->epoch;
        pr->changes = r->changes;
        pr->last_out = r->last_out;
        pr->leaving = r->leaving;
        pr->handing_since = r->handing_since;
        pr->handing_to = r->handing_to;
        pr->joining = r->joining;
        pr->joining_since = r->joining_since;
        out[p] = pr;
    }
    return out;
}

/* The GSI placements and stream shards of t into pb. 0 or LAPSE_ENOMEM. */
static int placement_to_pb(arena *a, const pmap_table *t, Lapse__TableMap *pb)
{
    uint32_t ng = t->schema.ngsi <= SCHEMA_MAX_GSI ? t->schema.ngsi : SCHEMA_MAX_GSI;
    if (ng > 0) {
        if ((pb->gsi = arena_alloc(a, ng * sizeof *pb->gsi)) == NULL) {
            return LAPSE_ENOMEM;
        }
        for (uint32_t g = 0; g < ng; g++) {
            Lapse__GsiPartitions *gp = arena_alloc(a, sizeof *gp);
            if (gp == NULL) {
                return LAPSE_ENOMEM;
            }
            lapse__gsi_partitions__init(gp);
            uint32_t n = t->gsi_parts[g] != NULL ? t->schema.gsi[g].partitions : 0;
            if ((gp->partitions = replicas_to_pb(a, t->gsi_parts[g], n)) == NULL) {
                return LAPSE_ENOMEM;
            }
            gp->n_partitions = n;
            pb->gsi[g] = gp;
        }
        pb->n_gsi = ng;
    }
    uint32_t np = t->schema.partitions;
    if (t->stream_shards != NULL && np > 0) {
        if ((pb->stream_shards = replicas_to_pb(a, t->stream_shards, np)) == NULL) {
            return LAPSE_ENOMEM;
        }
        pb->n_stream_shards = np;
    }
    return 0;
}

Lapse__TableMap *wire_table_to_pb(arena *a, const pmap_table *t)
{
    Lapse__TableMap *pb = arena_alloc(a, sizeof *pb);
    uint32_t np = t->schema.partitions;
    if (pb == NULL) {
        return NULL;
    }
    lapse__table_map__init(pb);
    if ((pb->schema = wire_schema_to_pb(a, &t->schema)) == NULL ||
        (pb->partitions = replicas_to_pb(a, t->parts, np)) == NULL) {
        return NULL;
    }
    pb->n_partitions = np;
    if (placement_to_pb(a, t, pb) != 0) {
        return NULL;
    }
    return pb;
}

Lapse__PartitionMap *wire_pmap_to_pb(arena *a, const pmap *pm)
{
    Lapse__PartitionMap *pb = arena_alloc(a, sizeof *pb);
    if (pb == NULL) {
        return NULL;
    }
    lapse__partition_map__init(pb);
    pb->version = pm->version;
    if ((pb->nodes = arena_alloc(a, (pm->nnodes > 0 ? pm->nnodes : 1) * sizeof *pb->nodes)) ==
            NULL ||
        (pb->tables = arena_alloc(a, (pm->ntables > 0 ? pm->ntables : 1) * sizeof *pb->tables)) ==
            NULL) {
        return NULL;
    }
    for (size_t i = 0; i < pm->nnodes; i++) {
        Lapse__NodeInfo *ni = arena_alloc(a, sizeof *ni);
        if (ni == NULL) {
            return NULL;
        }
        lapse__node_info__init(ni);
        ni->id = pm->nodes[i].id;
        ni->lease = pm->nodes[i].lease;
        ni->incarnation = pm->nodes[i].incarnation;
        ni->draining = pm->nodes[i].draining != 0;
        ni->removed = pm->nodes[i].removed != 0;
        ni->state = pm->nodes[i].state == PMAP_NODE_UP ? LAPSE__NODE_STATE__NODE_UP
                                                       : LAPSE__NODE_STATE__NODE_DOWN;
        if ((ni->address = arena_strdup(a, pm->nodes[i].address)) == NULL ||
            (ni->zone = arena_strdup(a, pm->nodes[i].zone)) == NULL) {
            return NULL;
        }
        pb->nodes[i] = ni;
    }
    pb->n_nodes = pm->nnodes;
    for (size_t i = 0; i < pm->ntables; i++) {
        if ((pb->tables[i] = wire_table_to_pb(a, &pm->tables[i])) == NULL) {
            return NULL;
        }
    }
    pb->n_tables = pm->ntables;
    return pb;
}

/* ===================================================================== */
/* Incoming: protobuf to structs, validated                               */
/* ===================================================================== */

int wire_schema_from_pb(const Lapse__TableSchema *pb, table_schema *out, char *err, size_t errlen)
{
    int rv;
    memset(out, 0, sizeof *out);
    if (pb == NULL) {
        set_err(err, errlen, "missing table schema");
        return LAPSE_EINVAL;
    }
    const char *name = pb->name != NULL ? pb->name : "";
    size_t len = strnlen(name, SCHEMA_MAX_NAME + 1);
    if (len == 0 || len > SCHEMA_MAX_NAME) {
        set_err(err, errlen, "table name must be 1 to %d bytes", SCHEMA_MAX_NAME);
        return LAPSE_EINVAL;
    }
    memcpy(out->name, name, len + 1);
    out->id = pb->id;
    out->partitions = pb->partitions;
    if (pb->partition_key == NULL) {
        set_err(err, errlen, "table \"%.64s\" has no partition key", name);
        return LAPSE_EINVAL;
    }
    if ((rv = wire_key_from_pb(pb->partition_key, &out->pk, "partition key", err, errlen)) != 0) {
        return rv;
    }
    const Lapse__KeyDef *sk = pb->sort_key;
    if (sk != NULL && sk->type == LAPSE__KEY_TYPE__KEY_NONE) {
        if (sk->name != NULL && sk->name[0] != 0) {
            set_err(err, errlen, "sort key \"%.64s\" has no type", sk->name);
            return LAPSE_EINVAL;
        }
        sk = NULL;
    }
    if (sk != NULL) {
        if ((rv = wire_key_from_pb(sk, &out->sk, "sort key", err, errlen)) != 0) {
            return rv;
        }
        if (strcmp(out->sk.name, out->pk.name) == 0) {
            set_err(err, errlen, "sort key and partition key are both \"%.64s\"", out->pk.name);
            return LAPSE_EINVAL;
        }
    }
    if ((rv = wire_ttl_from_pb(pb->ttl, &out->ttl, err, errlen)) != 0) {
        return rv;
    }
    out->hide_expired = pb->hide_expired;
    out->replication = pb->replication;
    out->created_ms = pb->created_ms;
    return wire_indexes_from_pb(pb, out, err, errlen);
}

int wire_replicas_from_pb(const Lapse__PartitionReplicas *pb, pmap_replicas *out, char *err,
                          size_t errlen)
{
    size_t k = pb != NULL ? pb->n_node_ids : 0;
    if (k < 1 || k > PMAP_MAX_REPLICAS || pb->node_ids == NULL) {
        set_err(err, errlen, "%zu replicas (want 1 to %d)", k, PMAP_MAX_REPLICAS);
        return LAPSE_EINVAL;
    }
    memset(out, 0, sizeof *out);
    memcpy(out->ids, pb->node_ids, k * sizeof(uint32_t));
    out->n = (uint32_t)k;
    out->in_sync = pb->in_sync;
    out->epoch = pb->epoch;
    out->changes = pb->changes;
    out->last_out = pb->last_out;
    out->leaving = pb->leaving;
    out->handing_since = pb->handing_since;
    out->handing_to = pb->handing_to;
    out->joining = pb->joining;
    out->joining_since = pb->joining_since;
    return pmap_replicas_check(out, err, errlen); /* the same rules as a persisted map's */
}

/* Decodes want replica lists of prs[0..n) into out (want entries), each as
 * wire_replicas_from_pb with ids of nodes in pm; what names the table or
 * index in messages. 0 or LAPSE_EINVAL. */
static int replicas_from_pb(Lapse__PartitionReplicas *const *prs, size_t n, uint32_t want,
                            const pmap *pm, pmap_replicas *out, const char *what, char *err,
                            size_t errlen)
{
    if (n != want || (want > 0 && prs == NULL)) {
        set_err(err, errlen, "%s: %zu replica lists for %u partitions", what, n, (unsigned)want);
        return LAPSE_EINVAL;
    }
    for (uint32_t p = 0; p < want; p++) {
        char why[160] = "";
        if (wire_replicas_from_pb(prs[p], &out[p], why, sizeof(why)) != 0) {
            set_err(err, errlen, "%s partition %u: %s", what, (unsigned)p, why);
            return LAPSE_EINVAL;
        }
        for (uint32_t i = 0; i < out[p].n; i++) {
            if (pmap_node_find(pm, out[p].ids[i]) == NULL) {
                set_err(err, errlen, "%s partition %u: unknown node %u", what, (unsigned)p,
                        (unsigned)out[p].ids[i]);
                return LAPSE_EINVAL;
            }
        }
    }
    return 0;
}

/* The decoded arrays of one table's placement (wire_table_from_pb). */
typedef struct placement_buf {
    pmap_replicas *parts;
    pmap_replicas *gsi[SCHEMA_MAX_GSI];
    pmap_replicas *shards;
} placement_buf;

static void placement_buf_fini(placement_buf *b)
{
    free(b->parts);
    for (size_t g = 0; g < SCHEMA_MAX_GSI; g++) {
        free(b->gsi[g]);
    }
    free(b->shards);
}

/* Decodes and checks pb's placements of table t into b (caller finis b
 * also on error). 0, LAPSE_EINVAL or LAPSE_ENOMEM with a reason in err. */
static int placement_from_pb(const Lapse__TableMap *pb, const table_schema *t, const pmap *pm,
                             placement_buf *b, char *err, size_t errlen)
{
    char what[SCHEMA_MAX_NAME + 96];
    int rv;
    snprintf(what, sizeof what, "table \"%.64s\"", t->name);
    if ((b->parts = calloc(t->partitions, sizeof *b->parts)) == NULL) {
        set_err(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    if ((rv = replicas_from_pb(pb->partitions, pb->n_partitions, t->partitions, pm, b->parts, what,
                               err, errlen)) != 0) {
        return rv;
    }
    if (pb->n_gsi != t->ngsi || (t->ngsi > 0 && pb->gsi == NULL)) {
        set_err(err, errlen, "%s: placements for %zu GSIs, the schema has %u", what, pb->n_gsi,
                (unsigned)t->ngsi);
        return LAPSE_EINVAL;
    }
    for (uint32_t g = 0; g < t->ngsi; g++) {
        const Lapse__GsiPartitions *gp = pb->gsi[g];
        snprintf(what, sizeof what, "table \"%.64s\" GSI \"%.64s\"", t->name, t->gsi[g].name);
        if ((b->gsi[g] = calloc(t->gsi[g].partitions, sizeof *b->gsi[g])) == NULL) {
            set_err(err, errlen, "out of memory");
            return LAPSE_ENOMEM;
        }
        if ((rv = replicas_from_pb(gp != NULL ? gp->partitions : NULL,
                                   gp != NULL ? gp->n_partitions : 0, t->gsi[g].partitions, pm,
                                   b->gsi[g], what, err, errlen)) != 0) {
            return rv;
        }
    }
    size_t want = t->stream.enabled ? t->partitions : 0;
    if (pb->n_stream_shards != want || (want > 0 && pb->stream_shards == NULL)) {
        set_err(err, errlen, "table \"%.64s\": placements for %zu stream shards, it has %zu",
                t->name, pb->n_stream_shards, want);
        return LAPSE_EINVAL;
    }
    if (want == 0) {
        return 0;
    }
    if ((b->shards = calloc(want, sizeof *b->shards)) == NULL) {
        set_err(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    snprintf(what, sizeof what, "table \"%.64s\" stream", t->name);
    return replicas_from_pb(pb->stream_shards, pb->n_stream_shards, t->partitions, pm, b->shards,
                            what, err, errlen);
}

int wire_table_from_pb(const Lapse__TableMap *pb, pmap *pm, char *err, size_t errlen)
{
    int rv;
    table_schema t;
    char why[200] = "";

    if (pb == NULL) {
        set_err(err, errlen, "missing table map");
        return LAPSE_EINVAL;
    }
    if ((rv = wire_schema_from_pb(pb->schema, &t, err, errlen)) != 0) {
        return rv;
    }
    if (schema_validate(&t, why, sizeof why) != 0) {
        set_err(err, errlen, "table \"%.64s\": %s", t.name, why);
        return LAPSE_EINVAL;
    }
    if (t.id == 0) {
        set_err(err, errlen, "table \"%.64s\" has no id", t.name);
        return LAPSE_EINVAL;
    }
    if (pmap_table_find(pm, t.name) != NULL || pmap_table_find_id(pm, t.id) != NULL) {
        set_err(err, errlen, "table \"%.64s\" (id %u) appears twice", t.name, (unsigned)t.id);
        return LAPSE_EINVAL;
    }
    placement_buf b;
    memset(&b, 0, sizeof b);
    if ((rv = placement_from_pb(pb, &t, pm, &b, err, errlen)) != 0) {
        goto fail;
    }
    pmap_placement pl;
    memset(&pl, 0, sizeof pl);
    pl.parts = b.parts;
    for (uint32_t g = 0; g < t.ngsi; g++) {
        pl.gsi_parts[g] = b.gsi[g];
    }
    pl.stream_shards = b.shards;
    rv = pmap_add_table_placed(pm, &t, &pl);
    if (rv == LAPSE_ENOMEM) {
        set_err(err, errlen, "out of memory");
    } else if (rv != 0) {
        set_err(err, errlen, "table \"%.64s\" rejected by the partition map: %s", t.name,
                lapse_strerror(rv));
        rv = LAPSE_EINVAL;
    }
fail:
    placement_buf_fini(&b);
    return rv;
}

int wire_pmap_from_pb(const Lapse__PartitionMap *pb, pmap **out, char *err, size_t errlen)
{
    int rv;
    *out = NULL;
    if (pb == NULL) {
        set_err(err, errlen, "missing partition map");
        return LAPSE_EINVAL;
    }
    if (pb->n_nodes > WIRE_MAX_NODES || pb->n_tables > WIRE_MAX_TABLES) {
        set_err(err, errlen, "partition map with %zu nodes and %zu tables (limits %d and %d)",
                pb->n_nodes, pb->n_tables, WIRE_MAX_NODES, WIRE_MAX_TABLES);
        return LAPSE_EINVAL;
    }
    if ((pb->n_nodes > 0 && pb->nodes == NULL) || (pb->n_tables > 0 && pb->tables == NULL)) {
        set_err(err, errlen, "bad partition map");
        return LAPSE_EINVAL;
    }
    pmap *pm = pmap_new();
    if (pm == NULL) {
        set_err(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    pm->version = pb->version;
    for (size_t i = 0; i < pb->n_nodes; i++) {
        const Lapse__NodeInfo *ni = pb->nodes[i];
        rv = LAPSE_EINVAL;
        if (ni == NULL || ni->id == 0) {
            set_err(err, errlen, "node entry %zu has no id", i);
            goto fail;
        }
        const char *addr = ni->address != NULL ? ni->address : "";
        if (strnlen(addr, PMAP_MAX_ADDR) >= PMAP_MAX_ADDR) {
            set_err(err, errlen, "node %u: address longer than %d bytes", (unsigned)ni->id,
                    PMAP_MAX_ADDR - 1);
            goto fail;
        }
        if (ni->state != LAPSE__NODE_STATE__NODE_UP && ni->state != LAPSE__NODE_STATE__NODE_DOWN) {
            set_err(err, errlen, "node %u: bad state %d", (unsigned)ni->id, (int)ni->state);
            goto fail;
        }
        if (pmap_node_find(pm, ni->id) != NULL) {
            set_err(err, errlen, "node %u listed twice", (unsigned)ni->id);
            goto fail;
        }
        pmap_node_state st =
            ni->state == LAPSE__NODE_STATE__NODE_UP ? PMAP_NODE_UP : PMAP_NODE_DOWN;
        if ((rv = pmap_set_node(pm, ni->id, addr, st)) != 0 ||
            (rv = pmap_set_node_lease(pm, ni->id, ni->lease)) != 0 ||
            (rv = pmap_set_node_incarnation(pm, ni->id, ni->incarnation)) != 0 ||
            (rv = pmap_set_node_draining(pm, ni->id, ni->draining)) != 0 ||
            (rv = pmap_set_node_zone(pm, ni->id, ni->zone)) != 0 ||
            (ni->removed && (rv = pmap_set_node_removed(pm, ni->id)) != 0)) {
            set_err(err, errlen, "node %u: %s", (unsigned)ni->id, lapse_strerror(rv));
            goto fail;
        }
    }
    for (size_t i = 0; i < pb->n_tables; i++) {
        if ((rv = wire_table_from_pb(pb->tables[i], pm, err, errlen)) != 0) {
            goto fail;
        }
    }
    *out = pm;
    return 0;
fail:
    pmap_free(pm);
    return rv;
}

int wire_pmap_unpack(const void *data, size_t len, pmap **out, char *err, size_t errlen)
{
    *out = NULL;
    Lapse__PartitionMap *pb = lapse__partition_map__unpack(NULL, len, data);
    if (pb == NULL) {
        set_err(err, errlen, "%zu bytes that do not unpack as a lapse.PartitionMap", len);
        return LAPSE_EINVAL;
    }
    int rv = wire_pmap_from_pb(pb, out, err, errlen);
    lapse__partition_map__free_unpacked(pb, NULL);
    return rv;
}
