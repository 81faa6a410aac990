/*
 * wire_index.c: a table schema's secondary indexes and stream config <->
 * protobuf-c (TableSchema.lsi, .gsi and .stream), for wire_pmap.c's schema
 * conversions. Incoming definitions get the structural checks of
 * wire_schema_from_pb (wire.h); the rules that need the whole schema (limits
 * on partitions, names, uniqueness) are schema_validate's.
 */
#include <stdint.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "rpc_internal.h"
#include "wire.h"

/* ===================================================================== */
/* Outgoing                                                               */
/* ===================================================================== */

static Lapse__IndexDef *index_to_pb(arena *a, const index_def *ix)
{
    Lapse__IndexDef *pb = arena_alloc(a, sizeof *pb);
    if (pb == NULL) {
        return NULL;
    }
    lapse__index_def__init(pb);
    pb->id = ix->id;
    pb->partitions = ix->partitions;
    pb->projection = ix->projection == INDEX_PROJECT_KEYS ? LAPSE__INDEX_PROJECTION__PROJECTION_KEYS
                                                          : LAPSE__INDEX_PROJECTION__PROJECTION_ALL;
    if ((pb->name = arena_strdup(a, ix->name)) == NULL) {
        return NULL;
    }
    if (ix->pk.name[0] != 0 && (pb->partition_key = wire_key_to_pb(a, &ix->pk)) == NULL) {
        return NULL;
    }
    if (ix->sk.name[0] != 0 && (pb->sort_key = wire_key_to_pb(a, &ix->sk)) == NULL) {
        return NULL;
    }
    return pb;
}

static int indexes_to_pb(arena *a, const index_def *v, uint32_t n, Lapse__IndexDef ***out,
                         size_t *nout)
{
    *out = NULL;
    *nout = 0;
    if (n == 0) {
        return 0;
    }
    Lapse__IndexDef **arr = arena_alloc(a, n * sizeof *arr);
    if (arr == NULL) {
        return LAPSE_ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
        if ((arr[i] = index_to_pb(a, &v[i])) == NULL) {
            return LAPSE_ENOMEM;
        }
    }
    *out = arr;
    *nout = n;
    return 0;
}

int wire_indexes_to_pb(arena *a, const table_schema *t, Lapse__TableSchema *pb)
{
    uint32_t nl = t->nlsi <= SCHEMA_MAX_LSI ? t->nlsi : SCHEMA_MAX_LSI;
    uint32_t ng = t->ngsi <= SCHEMA_MAX_GSI ? t->ngsi : SCHEMA_MAX_GSI;
    if (indexes_to_pb(a, t->lsi, nl, &pb->lsi, &pb->n_lsi) != 0 ||
        indexes_to_pb(a, t->gsi, ng, &pb->gsi, &pb->n_gsi) != 0) {
        return LAPSE_ENOMEM;
    }
    if (!t->stream.enabled && t->stream.generation == 0 && t->stream.since_ms == 0) {
        /* Never a stream: stream stays NULL (absent on the wire). One turned
         * off keeps its generation and since_ms (CreateTable's: the table's
         * creation, streamcalls.c), so DescribeTable can say it was. */
        return 0;
    }
    Lapse__StreamConfig *s = arena_alloc(a, sizeof *s);
    if (s == NULL) {
        return LAPSE_ENOMEM;
    }
    lapse__stream_config__init(s);
    s->generation = t->stream.generation;
    s->since_ms = t->stream.since_ms;
    pb->stream = s;
    if (!t->stream.enabled) {
        return 0; /* turned off: only what the next one must follow */
    }
    s->enabled = 1;
    s->exclude_ttl_deletes = !t->stream.ttl_deletes;
    s->retention_hours = t->stream.retention_hours;
    s->view = (Lapse__StreamView)t->stream.view;
    pb->stream = s;
    return 0;
}

/* ===================================================================== */
/* Incoming                                                               */
/* ===================================================================== */

/* An optional key: absent, or KEY_NONE without a name, leaves out zeroed. */
static int opt_key_from_pb(const Lapse__KeyDef *pb, key_def *out, const char *what, char *err,
                           size_t errlen)
{
    if (pb == NULL) {
        return 0;
    }
    if (pb->type == LAPSE__KEY_TYPE__KEY_NONE && (pb->name == NULL || pb->name[0] == 0)) {
        return 0;
    }
    return wire_key_from_pb(pb, out, what, err, errlen);
}

static int index_from_pb(const Lapse__IndexDef *pb, const table_schema *t, int lsi, index_def *out,
                         char *err, size_t errlen)
{
    const char *kind = lsi ? "LSI" : "GSI";
    int rv;
    memset(out, 0, sizeof *out);
    if (pb == NULL) {
        set_err(err, errlen, "table \"%.64s\": empty %s entry", t->name, kind);
        return LAPSE_EINVAL;
    }
    const char *name = pb->name != NULL ? pb->name : "";
    size_t len = strnlen(name, SCHEMA_MAX_NAME + 1);
    if (len > SCHEMA_MAX_NAME) {
        set_err(err, errlen, "%s name \"%.64s...\" is longer than %d bytes", kind, name,
                SCHEMA_MAX_NAME);
        return LAPSE_EINVAL;
    }
    memcpy(out->name, name, len + 1);
    out->id = pb->id;
    out->partitions = pb->partitions;
    switch (pb->projection) {
    case LAPSE__INDEX_PROJECTION__PROJECTION_ALL:
        out->projection = INDEX_PROJECT_ALL;
        break;
    case LAPSE__INDEX_PROJECTION__PROJECTION_KEYS:
        out->projection = INDEX_PROJECT_KEYS;
        break;
    default:
        set_err(err, errlen, "%s \"%.64s\": unknown projection %d", kind, name,
                (int)pb->projection);
        return LAPSE_EINVAL;
    }
    char what[SCHEMA_MAX_NAME + 32];
    snprintf(what, sizeof what, "%s \"%.64s\" partition key", kind, name);
    if ((rv = opt_key_from_pb(pb->partition_key, &out->pk, what, err, errlen)) != 0) {
        return rv;
    }
    snprintf(what, sizeof what, "%s \"%.64s\" sort key", kind, name);
    if ((rv = opt_key_from_pb(pb->sort_key, &out->sk, what, err, errlen)) != 0) {
        return rv;
    }
    if (lsi && out->pk.name[0] != 0) {
        /* DynamoDB lists the table's key in an LSI's key schema: accept that
         * and keep the invariant that an LSI's own pk is unset. */
        if (strcmp(out->pk.name, t->pk.name) != 0 || out->pk.type != t->pk.type) {
            set_err(err, errlen,
                    "LSI \"%.64s\" has partition key \"%.64s\"; an LSI has the table's (\"%.64s\")",
                    name, out->pk.name, t->pk.name);
            return LAPSE_EINVAL;
        }
        memset(&out->pk, 0, sizeof out->pk);
    }
    return 0;
}

static int indexes_from_pb(Lapse__IndexDef *const *v, size_t n, const table_schema *t, int lsi,
                           index_def *out, uint32_t *nout, char *err, size_t errlen)
{
    size_t max = lsi ? SCHEMA_MAX_LSI : SCHEMA_MAX_GSI;
    int rv;
    if (n > max) {
        set_err(err, errlen, "table \"%.64s\": %zu %ss; a table has at most %zu", t->name, n,
                lsi ? "LSI" : "GSI", max);
        return LAPSE_EINVAL;
    }
    if (n > 0 && v == NULL) {
        set_err(err, errlen, "table \"%.64s\": bad index list", t->name);
        return LAPSE_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if ((rv = index_from_pb(v[i], t, lsi, &out[i], err, errlen)) != 0) {
            return rv;
        }
    }
    *nout = (uint32_t)n;
    return 0;
}

int wire_indexes_from_pb(const Lapse__TableSchema *pb, table_schema *out, char *err, size_t errlen)
{
    int rv;
    if ((rv = indexes_from_pb(pb->lsi, pb->n_lsi, out, 1, out->lsi, &out->nlsi, err, errlen)) !=
            0 ||
        (rv = indexes_from_pb(pb->gsi, pb->n_gsi, out, 0, out->gsi, &out->ngsi, err, errlen)) !=
            0) {
        return rv;
    }
    memset(&out->stream, 0, sizeof out->stream);
    if (pb->stream != NULL) {
        /* A stream turned off keeps its generation: the next one is new. */
        out->stream.generation = pb->stream->generation;
        out->stream.since_ms = pb->stream->since_ms;
    }
    if (pb->stream != NULL && pb->stream->enabled) {
        out->stream.enabled = 1;
        out->stream.ttl_deletes = !pb->stream->exclude_ttl_deletes;
        out->stream.retention_hours = pb->stream->retention_hours;
        if ((unsigned)pb->stream->view > STREAM_VIEW_OLD_IMAGE) {
            set_err(err, errlen, "table \"%.64s\": unknown stream view %d", out->name,
                    (int)pb->stream->view);
            return LAPSE_EINVAL;
        }
        out->stream.view = (stream_view)pb->stream->view;
    }
    return 0;
}
