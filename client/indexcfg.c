/*
 * indexcfg.c: secondary indexes and streams from the client (indexcfg.h):
 * CreateTable's index and stream declarations, and their JSON in
 * describe-table.
 */
#include "indexcfg.h"

#include <stdio.h>
#include <string.h>

#include "../common/lapse_err.h"

/* ------------------------------------------------------------------------ */
/* CreateTable                                                               */
/* ------------------------------------------------------------------------ */

Lapse__KeyType indexcfg_key_type(char t)
{
    switch (t) {
    case 'S':
        return LAPSE__KEY_TYPE__KEY_S;
    case 'N':
        return LAPSE__KEY_TYPE__KEY_N;
    case 'B':
        return LAPSE__KEY_TYPE__KEY_B;
    default:
        return LAPSE__KEY_TYPE__KEY_NONE;
    }
}

/* A KeyDef for an index key (what: e.g. "GSI \"ByEmail\" partition key"). */
static int key_pb(arena *a, const char *what, const char *name, char type, Lapse__KeyDef **out,
                  lapse_error *err)
{
    if (name == NULL || name[0] == '\0') {
        return client_err(err, LAPSE_EINVAL, "%s: no attribute name", what);
    }
    if (indexcfg_key_type(type) == LAPSE__KEY_TYPE__KEY_NONE) {
        return client_err(err, LAPSE_EINVAL, "%s \"%s\": type must be S, N or B", what, name);
    }
    Lapse__KeyDef *k = arena_alloc(a, sizeof *k);
    if (k == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    lapse__key_def__init(k);
    k->name = (char *)name; /* borrowed until the request is sent */
    k->type = indexcfg_key_type(type);
    *out = k;
    return 0;
}

static int index_pb(arena *a, const lapse_index_def *d, size_t i, int lsi, Lapse__IndexDef **out,
                    lapse_error *err)
{
    const char *kind = lsi ? "LSI" : "GSI";
    char what[320];
    int rv;
    if (d->name == NULL || d->name[0] == '\0') {
        return client_err(err, LAPSE_EINVAL, "%s %zu: no index name", kind, i + 1);
    }
    if (d->projection != LAPSE_PROJECT_ALL && d->projection != LAPSE_PROJECT_KEYS) {
        return client_err(err, LAPSE_EINVAL, "%s \"%.255s\": unknown projection %d", kind, d->name,
                          (int)d->projection);
    }
    Lapse__IndexDef *pb = arena_alloc(a, sizeof *pb);
    if (pb == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    lapse__index_def__init(pb);
    pb->name = (char *)d->name;
    pb->projection = d->projection == LAPSE_PROJECT_KEYS ? LAPSE__INDEX_PROJECTION__PROJECTION_KEYS
                                                         : LAPSE__INDEX_PROJECTION__PROJECTION_ALL;
    pb->partitions = d->partitions;
    if (!lsi && d->partition_key == NULL) {
        return client_err(err, LAPSE_EINVAL, "GSI \"%.255s\": no partition key", d->name);
    }
    if (lsi && d->sort_key == NULL) {
        return client_err(err, LAPSE_EINVAL, "LSI \"%.255s\": no sort key", d->name);
    }
    /* An LSI's partition key is the table's: one given goes along and the
     * coordinator refuses it unless it is the table's. */
    if (d->partition_key != NULL) {
        snprintf(what, sizeof what, "%s \"%.255s\" partition key", kind, d->name);
        if ((rv = key_pb(a, what, d->partition_key, d->partition_key_type, &pb->partition_key,
                         err)) != 0) {
            return rv;
        }
    }
    if (d->sort_key != NULL) {
        snprintf(what, sizeof what, "%s \"%.255s\" sort key", kind, d->name);
        if ((rv = key_pb(a, what, d->sort_key, d->sort_key_type, &pb->sort_key, err)) != 0) {
            return rv;
        }
    }
    *out = pb;
    return 0;
}

static int indexes_pb(arena *a, const lapse_index_def *v, size_t n, int lsi, Lapse__IndexDef ***out,
                      size_t *nout, lapse_error *err)
{
    size_t max = lsi ? SCHEMA_MAX_LSI : SCHEMA_MAX_GSI;
    const char *kind = lsi ? "LSI" : "GSI";
    int rv;
    if (n == 0) {
        return 0;
    }
    if (v == NULL) {
        return client_err(err, LAPSE_EINVAL, "%zu %ss declared but none given", n, kind);
    }
    if (n > max) {
        return client_err(err, LAPSE_EINVAL, "%zu %ss; a table has at most %zu", n, kind, max);
    }
    Lapse__IndexDef **arr = arena_alloc(a, n * sizeof *arr);
    if (arr == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        if ((rv = index_pb(a, &v[i], i, lsi, &arr[i], err)) != 0) {
            return rv;
        }
    }
    *out = arr;
    *nout = n;
    return 0;
}

int indexcfg_to_pb(arena *a, const lapse_table_def *def, Lapse__TableSchema *s, lapse_error *err)
{
    int rv;
    if ((rv = indexes_pb(a, def->lsi, def->nlsi, 1, &s->lsi, &s->n_lsi, err)) != 0 ||
        (rv = indexes_pb(a, def->gsi, def->ngsi, 0, &s->gsi, &s->n_gsi, err)) != 0) {
        return rv;
    }
    if (!def->stream) {
        if (def->stream_retention_hours != 0 || def->stream_exclude_ttl_deletes ||
            def->stream_view != 0) {
            return client_err(err, LAPSE_EINVAL,
                              "stream retention, view and TTL-delete settings need a stream");
        }
        return 0;
    }
    if (lapse_stream_view_name(def->stream_view) == NULL) {
        return client_err(err, LAPSE_EINVAL, "stream view %d is none of lapse_stream_view's",
                          def->stream_view);
    }
    Lapse__StreamConfig *sc = arena_alloc(a, sizeof *sc);
    if (sc == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    lapse__stream_config__init(sc);
    sc->enabled = 1;
    sc->exclude_ttl_deletes = def->stream_exclude_ttl_deletes != 0;
    sc->retention_hours = def->stream_retention_hours;
    sc->view = (Lapse__StreamView)def->stream_view;
    s->stream = sc;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* describe-table                                                            */
/* ------------------------------------------------------------------------ */

/* Sets key to v on o, dropping v; 0 or -1 (v NULL or OOM). */
static int put(json_t *o, const char *key, json_t *v)
{
    return v != NULL ? json_object_set_new(o, key, v) : -1;
}

/* Appends v to arr, dropping v; 0 or -1. */
static int add(json_t *arr, json_t *v)
{
    return v != NULL ? json_array_append_new(arr, v) : -1;
}

const char *indexcfg_key_type_name(Lapse__KeyType t)
{
    switch (t) {
    case LAPSE__KEY_TYPE__KEY_S:
        return "S";
    case LAPSE__KEY_TYPE__KEY_N:
        return "N";
    case LAPSE__KEY_TYPE__KEY_B:
        return "B";
    default:
        return "?";
    }
}

static int has_key(const Lapse__KeyDef *k)
{
    return k != NULL && k->name != NULL && k->name[0] != '\0';
}

/* Appends k to AttributeDefinitions defs unless an entry names it already. */
static int define(json_t *defs, const Lapse__KeyDef *k)
{
    size_t i;
    json_t *d;
    json_array_foreach(defs, i, d)
    {
        const char *n = json_string_value(json_object_get(d, "AttributeName"));
        if (n != NULL && strcmp(n, k->name) == 0) {
            return 0;
        }
    }
    return add(defs, json_pack("{s:s,s:s}", "AttributeName", k->name, "AttributeType",
                               indexcfg_key_type_name(k->type)));
}

/* [{"AttributeName":pk,"KeyType":"HASH"},{sk,"RANGE"}?] */
static json_t *key_schema(const Lapse__KeyDef *pk, const Lapse__KeyDef *sk)
{
    json_t *ks = json_array();
    if (ks == NULL ||
        (has_key(pk) &&
         add(ks, json_pack("{s:s,s:s}", "AttributeName", pk->name, "KeyType", "HASH")) != 0) ||
        (has_key(sk) &&
         add(ks, json_pack("{s:s,s:s}", "AttributeName", sk->name, "KeyType", "RANGE")) != 0)) {
        json_decref(ks);
        return NULL;
    }
    return ks;
}

/* {"1":n,...}: how many of the partitions each node owns. */
static json_t *per_node(Lapse__PartitionReplicas *const *parts, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; o != NULL && i < n; i++) {
        if (parts[i] == NULL || parts[i]->n_node_ids == 0) {
            continue;
        }
        char id[16];
        snprintf(id, sizeof id, "%u", (unsigned)parts[i]->node_ids[0]);
        json_t *c = json_object_get(o, id);
        if (put(o, id, json_integer(c != NULL ? json_integer_value(c) + 1 : 1)) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static json_t *index_json(const Lapse__IndexDef *d, const Lapse__KeyDef *table_pk, int lsi,
                          const Lapse__GsiPartitions *placed)
{
    json_t *o = json_object();
    if (o == NULL) {
        return NULL;
    }
    int keys = d->projection == LAPSE__INDEX_PROJECTION__PROJECTION_KEYS;
    int bad =
        put(o, "IndexName", json_string(d->name != NULL ? d->name : "")) |
        put(o, "IndexId", json_integer(d->id)) |
        put(o, "KeySchema", key_schema(lsi ? table_pk : d->partition_key, d->sort_key)) |
        put(o, "Projection", json_pack("{s:s}", "ProjectionType", keys ? "KEYS_ONLY" : "ALL"));
    if (!lsi) {
        bad |= put(o, "Partitions", json_integer(d->partitions)) |
               put(o, "PartitionsPerNode",
                   placed != NULL ? per_node(placed->partitions, placed->n_partitions)
                                  : json_object());
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int indexes_json(json_t *t, const Lapse__TableMap *tm, int lsi)
{
    const Lapse__TableSchema *s = tm->schema;
    Lapse__IndexDef *const *v = lsi ? s->lsi : s->gsi;
    size_t n = lsi ? s->n_lsi : s->n_gsi;
    json_t *defs = json_object_get(t, "AttributeDefinitions");
    if (n == 0) {
        return 0;
    }
    json_t *arr = json_array();
    if (arr == NULL || put(t, lsi ? "LocalSecondaryIndexes" : "GlobalSecondaryIndexes", arr) != 0) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const Lapse__IndexDef *d = v[i];
        if (d == NULL) {
            continue;
        }
        const Lapse__GsiPartitions *placed = !lsi && i < tm->n_gsi ? tm->gsi[i] : NULL;
        if (add(arr, index_json(d, s->partition_key, lsi, placed)) != 0) {
            return -1;
        }
        if (defs != NULL && ((has_key(d->partition_key) && define(defs, d->partition_key) != 0) ||
                             (has_key(d->sort_key) && define(defs, d->sort_key) != 0))) {
            return -1;
        }
    }
    return 0;
}

static int stream_json(json_t *t, const Lapse__TableMap *tm)
{
    const Lapse__StreamConfig *sc = tm->schema->stream;
    json_t *spec = json_object();
    if (spec == NULL || put(t, "StreamSpecification", spec) != 0) {
        return -1;
    }
    int on = sc != NULL && sc->enabled;
    if (put(spec, "StreamEnabled", json_boolean(on)) != 0) {
        return -1;
    }
    if (!on) {
        /* One turned off: which it was (absent for a table that never had
         * one; DynamoDB's DescribeTable keeps StreamEnabled false then). */
        if (sc != NULL &&
            ((sc->generation > 0 && put(spec, "Generation", json_integer(sc->generation)) != 0) ||
             (sc->since_ms > 0 && put(spec, "SinceMs", json_integer(sc->since_ms)) != 0))) {
            return -1;
        }
        return 0;
    }
    uint32_t hours =
        sc->retention_hours ? sc->retention_hours : SCHEMA_DEFAULT_STREAM_RETENTION_HOURS;
    json_t *shards = json_array();
    const char *view = lapse_stream_view_name((int)sc->view);
    if (put(spec, "StreamViewType", json_string(view != NULL ? view : "NEW_AND_OLD_IMAGES")) != 0 ||
        put(spec, "TtlDeletes", json_boolean(!sc->exclude_ttl_deletes)) != 0 ||
        put(spec, "RetentionHours", json_integer(hours)) != 0 ||
        (sc->generation > 0 && put(spec, "Generation", json_integer(sc->generation)) != 0) ||
        (sc->since_ms > 0 && put(spec, "SinceMs", json_integer(sc->since_ms)) != 0) ||
        shards == NULL || put(t, "StreamShards", shards) != 0) {
        return -1;
    }
    for (size_t p = 0; p < tm->n_stream_shards; p++) {
        const Lapse__PartitionReplicas *r = tm->stream_shards[p];
        json_t *ids = json_array();
        for (size_t i = 0; r != NULL && ids != NULL && i < r->n_node_ids; i++) {
            if (add(ids, json_integer(r->node_ids[i])) != 0) {
                json_decref(ids);
                return -1;
            }
        }
        if (r == NULL || r->n_node_ids == 0 || ids == NULL ||
            add(shards, json_pack("{s:I,s:I,s:o}", "Partition", (json_int_t)p, "NodeId",
                                  (json_int_t)r->node_ids[0], "NodeIds", ids)) != 0) {
            return -1;
        }
    }
    return 0;
}

int indexcfg_describe(json_t *t, const Lapse__TableMap *tm)
{
    if (tm == NULL || tm->schema == NULL) {
        return -1;
    }
    if (indexes_json(t, tm, 1) != 0 || indexes_json(t, tm, 0) != 0 || stream_json(t, tm) != 0) {
        return -1;
    }
    return 0;
}
