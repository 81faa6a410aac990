/*
 * pmap_codec.c: the partition map's own persistent encoding (pmap_encode,
 * pmap_decode); each replica set decoded is checked by pmap.c's
 * pmap_replicas_check, as a map off the wire is. The format is documented in
 * docs/storage-format.md ("The partition map in `meta`"); the node keeps
 * its map in it. pmap_decode treats its input as untrusted: it comes from
 * disk. Nothing here knows protobuf: a map persisted by an older node as a
 * packed lapse.PartitionMap is read by rpc/ (wire_pmap_unpack).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/errf.h"
#include "../common/lapse_err.h"
#include "pmap.h"

/* ------------------------------------------------------------------------ */
/* Encoding                                                                  */
/* ------------------------------------------------------------------------ */

/* A writer whose first error sticks, so the field lists below read as the
 * format does. */
typedef struct enc {
    buf *b;
    int rv; /* 0, or the first append's error */
} enc;

static void put_u(enc *e, uint64_t v)
{
    if (e->rv == 0) {
        e->rv = buf_append_varint(e->b, v);
    }
}

/* Signed fields as their two's complement (a negative takes 10 bytes;
 * none is expected). */
static void put_i(enc *e, int64_t v)
{
    put_u(e, (uint64_t)v);
}

static void put_str(enc *e, const char *s)
{
    size_t n = strlen(s);
    put_u(e, n);
    if (e->rv == 0) {
        e->rv = buf_append(e->b, s, n);
    }
}

static void put_key(enc *e, const key_def *k)
{
    put_str(e, k->name);
    put_u(e, (uint64_t)k->type);
}

static void put_index(enc *e, const index_def *ix)
{
    put_u(e, ix->id);
    put_str(e, ix->name);
    put_key(e, &ix->pk);
    put_key(e, &ix->sk);
    put_u(e, (uint64_t)ix->projection);
    put_u(e, ix->partitions);
}

static void put_schema(enc *e, const table_schema *t)
{
    put_u(e, t->id);
    put_str(e, t->name);
    put_key(e, &t->pk);
    put_key(e, &t->sk);
    put_u(e, t->partitions);
    put_u(e, t->ttl.enabled != 0);
    put_str(e, t->ttl.attribute);
    put_i(e, t->ttl.offset_s);
    put_i(e, t->ttl.guard_years);
    put_u(e, t->ttl.paused != 0);
    put_u(e, t->ttl.config_version);
    put_u(e, t->hide_expired != 0);
    put_u(e, t->nlsi);
    for (uint32_t i = 0; i < t->nlsi && i < SCHEMA_MAX_LSI; i++) {
        put_index(e, &t->lsi[i]);
    }
    put_u(e, t->ngsi);
    for (uint32_t i = 0; i < t->ngsi && i < SCHEMA_MAX_GSI; i++) {
        put_index(e, &t->gsi[i]);
    }
    put_u(e, t->stream.enabled != 0);
    put_u(e, (uint64_t)t->stream.view);
    put_u(e, t->stream.ttl_deletes != 0);
    put_u(e, t->stream.retention_hours);
    put_u(e, t->stream.generation);
    put_i(e, t->stream.since_ms);
    put_u(e, t->replication);
    put_i(e, t->created_ms);
}

static void put_sets(enc *e, const pmap_replicas *sets, uint32_t n)
{
    for (uint32_t p = 0; p < n; p++) {
        const pmap_replicas *r = &sets[p];
        put_u(e, r->n);
        for (uint32_t i = 0; i < r->n && i < PMAP_MAX_REPLICAS; i++) {
            put_u(e, r->ids[i]);
        }
        put_u(e, r->in_sync);
        put_u(e, r->epoch);
        put_u(e, r->changes);
        put_u(e, r->last_out);
        put_u(e, r->leaving);
        put_u(e, r->handing_since);
        put_u(e, r->handing_to);
        put_u(e, r->joining);
        put_u(e, r->joining_since);
    }
}

static void put_table(enc *e, const pmap_table *t)
{
    const table_schema *s = &t->schema;
    put_schema(e, s);
    put_sets(e, t->parts, s->partitions);
    for (uint32_t g = 0; g < s->ngsi; g++) {
        put_sets(e, t->gsi_parts[g], s->gsi[g].partitions);
    }
    if (s->stream.enabled) {
        put_sets(e, t->stream_shards, s->partitions);
    }
}

int pmap_encode(const pmap *pm, buf *out)
{
    size_t start = out->len;
    enc e = {out, 0};
    for (size_t i = 0; i < pm->ntables; i++) {
        const pmap_table *t = &pm->tables[i];
        if (t->parts == NULL || t->schema.ngsi > SCHEMA_MAX_GSI ||
            (t->schema.stream.enabled != 0) != (t->stream_shards != NULL)) {
            return LAPSE_EINVAL; /* breaks pmap.h's invariants 3-5 */
        }
        for (uint32_t g = 0; g < t->schema.ngsi; g++) {
            if (t->gsi_parts[g] == NULL) {
                return LAPSE_EINVAL;
            }
        }
    }
    if ((e.rv = buf_append_byte(out, PMAP_FORMAT_V2)) != 0) {
        return e.rv;
    }
    put_u(&e, pm->version);
    put_u(&e, pm->nnodes);
    for (size_t i = 0; i < pm->nnodes; i++) {
        const pmap_node *n = &pm->nodes[i];
        put_u(&e, n->id);
        put_str(&e, n->address);
        put_u(&e, n->state == PMAP_NODE_UP);
        put_i(&e, n->lease);
        put_u(&e, n->incarnation);
        put_u(&e, n->draining != 0);
        put_u(&e, n->removed != 0);
        put_str(&e, n->zone);
    }
    put_u(&e, pm->ntables);
    for (size_t i = 0; i < pm->ntables; i++) {
        put_table(&e, &pm->tables[i]);
    }
    if (e.rv != 0) {
        out->len = start;
        if (out->data != NULL) {
            out->data[start] = 0;
        }
    }
    return e.rv;
}

/* ------------------------------------------------------------------------ */
/* Decoding                                                                  */
/* ------------------------------------------------------------------------ */

/* A reader whose first failure sticks: every get after it returns 0, and
 * bad names the field that did not decode (or was out of range). */
typedef struct dec {
    buf_reader r;
    const char *bad; /* NULL while every field decoded */
} dec;

/* A varint of at most max. */
static uint64_t get_u(dec *d, uint64_t max, const char *what)
{
    uint64_t v = 0;
    if (d->bad == NULL && (buf_read_varint(&d->r, &v) != 0 || v > max)) {
        d->bad = what;
    }
    return d->bad == NULL ? v : 0;
}

static int64_t get_i(dec *d, const char *what)
{
    return (int64_t)get_u(d, UINT64_MAX, what);
}

/* A string of fewer than cap bytes without a NUL into dst (cap bytes). */
static void get_str(dec *d, char *dst, size_t cap, const char *what)
{
    size_t n = 0;
    const uint8_t *p = NULL;
    dst[0] = 0;
    if (d->bad != NULL) {
        return;
    }
    if (buf_read_count(&d->r, 1, &n) != 0 || n >= cap || buf_read_bytes(&d->r, n, &p) != 0 ||
        memchr(p, 0, n) != NULL) {
        d->bad = what;
        return;
    }
    memcpy(dst, p, n);
    dst[n] = 0;
}

static void get_key(dec *d, key_def *k, const char *what)
{
    get_str(d, k->name, sizeof k->name, what);
    k->type = (attr_type)get_u(d, ATTR_BS, what);
}

static void get_index(dec *d, index_def *ix)
{
    ix->id = (uint32_t)get_u(d, UINT32_MAX, "index id");
    get_str(d, ix->name, sizeof ix->name, "index name");
    get_key(d, &ix->pk, "index partition key");
    get_key(d, &ix->sk, "index sort key");
    ix->projection = (index_projection)get_u(d, INDEX_PROJECT_KEYS, "index projection");
    ix->partitions = (uint32_t)get_u(d, SCHEMA_MAX_PARTITIONS, "index partitions");
}

static void get_schema(dec *d, table_schema *t)
{
    memset(t, 0, sizeof *t);
    t->id = (uint32_t)get_u(d, UINT32_MAX, "table id");
    get_str(d, t->name, sizeof t->name, "table name");
    get_key(d, &t->pk, "partition key");
    get_key(d, &t->sk, "sort key");
    t->partitions = (uint32_t)get_u(d, SCHEMA_MAX_PARTITIONS, "partitions");
    t->ttl.enabled = (int)get_u(d, 1, "TTL enabled");
    get_str(d, t->ttl.attribute, sizeof t->ttl.attribute, "TTL attribute");
    t->ttl.offset_s = get_i(d, "TTL offset");
    int64_t guard = get_i(d, "TTL guard");
    if (guard < INT32_MIN || guard > INT32_MAX) {
        d->bad = d->bad != NULL ? d->bad : "TTL guard";
    }
    t->ttl.guard_years = d->bad == NULL ? (int32_t)guard : 0;
    t->ttl.paused = (int)get_u(d, 1, "TTL paused");
    t->ttl.config_version = get_u(d, UINT64_MAX, "TTL config version");
    t->hide_expired = (int)get_u(d, 1, "hide_expired");
    t->nlsi = (uint32_t)get_u(d, SCHEMA_MAX_LSI, "LSI count");
    for (uint32_t i = 0; i < t->nlsi; i++) {
        get_index(d, &t->lsi[i]);
    }
    t->ngsi = (uint32_t)get_u(d, SCHEMA_MAX_GSI, "GSI count");
    for (uint32_t i = 0; i < t->ngsi; i++) {
        get_index(d, &t->gsi[i]);
    }
    t->stream.enabled = (int)get_u(d, 1, "stream enabled");
    t->stream.view = (stream_view)get_u(d, STREAM_VIEW_OLD_IMAGE, "stream view");
    t->stream.ttl_deletes = (int)get_u(d, 1, "stream TTL deletes");
    t->stream.retention_hours = (uint32_t)get_u(d, UINT32_MAX, "stream retention");
    t->stream.generation = (uint32_t)get_u(d, UINT32_MAX, "stream generation");
    t->stream.since_ms = get_i(d, "stream since_ms");
    t->replication = (uint32_t)get_u(d, UINT32_MAX, "replication");
    t->created_ms = get_i(d, "created_ms");
}

/* n replica sets into a new array *out (caller frees, also on error), each
 * checked as pmap_replicas_check. 0, LAPSE_ECORRUPT or LAPSE_ENOMEM. */
static int get_sets(dec *d, uint32_t n, pmap_replicas **out, const char *what, char *err,
                    size_t errlen)
{
    if ((*out = calloc(n > 0 ? n : 1, sizeof **out)) == NULL) {
        return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
    }
    for (uint32_t p = 0; p < n && d->bad == NULL; p++) {
        pmap_replicas *r = &(*out)[p];
        r->n = (uint32_t)get_u(d, PMAP_MAX_REPLICAS, "replica count");
        for (uint32_t i = 0; i < r->n; i++) {
            r->ids[i] = (uint32_t)get_u(d, UINT32_MAX, "replica node id");
        }
        r->in_sync = (uint32_t)get_u(d, UINT32_MAX, "in-sync set");
        r->epoch = get_u(d, UINT64_MAX, "epoch");
        r->changes = get_u(d, UINT64_MAX, "changes");
        r->last_out = (uint32_t)get_u(d, UINT32_MAX, "last_out");
        r->leaving = (uint32_t)get_u(d, UINT32_MAX, "leaving");
        r->handing_since = get_u(d, UINT64_MAX, "handing_since");
        r->handing_to = (uint32_t)get_u(d, UINT32_MAX, "handing_to");
        r->joining = (uint32_t)get_u(d, UINT32_MAX, "joining");
        r->joining_since = get_u(d, UINT64_MAX, "joining_since");
        char why[160] = "";
        if (d->bad == NULL && pmap_replicas_check(r, why, sizeof why) != 0) {
            return errf(LAPSE_ECORRUPT, err, errlen, "%s, partition %u: %s", what, (unsigned)p,
                        why);
        }
    }
    return 0;
}

/* The decoded arrays of one table's placement. */
typedef struct sets_buf {
    pmap_replicas *parts;
    pmap_replicas *gsi[SCHEMA_MAX_GSI];
    pmap_replicas *shards;
} sets_buf;

static int get_table(dec *d, pmap *pm, char *err, size_t errlen)
{
    table_schema t;
    sets_buf b;
    pmap_placement pl;
    char why[200] = "";
    char what[SCHEMA_MAX_NAME + 96];
    int rv;

    memset(&b, 0, sizeof b);
    memset(&pl, 0, sizeof pl);
    get_schema(d, &t);
    if (d->bad != NULL) {
        return 0; /* the caller names the field */
    }
    if (schema_validate(&t, why, sizeof why) != 0 || t.id == 0) {
        return errf(LAPSE_ECORRUPT, err, errlen, "table \"%.64s\": %s", t.name,
                    t.id == 0 ? "no id" : why);
    }
    snprintf(what, sizeof what, "table \"%.64s\"", t.name);
    if ((rv = get_sets(d, t.partitions, &b.parts, what, err, errlen)) != 0) {
        goto out;
    }
    for (uint32_t g = 0; g < t.ngsi; g++) {
        snprintf(what, sizeof what, "table \"%.64s\" GSI \"%.64s\"", t.name, t.gsi[g].name);
        if ((rv = get_sets(d, t.gsi[g].partitions, &b.gsi[g], what, err, errlen)) != 0) {
            goto out;
        }
        pl.gsi_parts[g] = b.gsi[g];
    }
    if (t.stream.enabled) {
        snprintf(what, sizeof what, "table \"%.64s\" stream", t.name);
        if ((rv = get_sets(d, t.partitions, &b.shards, what, err, errlen)) != 0) {
            goto out;
        }
    }
    if (d->bad != NULL) {
        goto out;
    }
    pl.parts = b.parts;
    pl.stream_shards = b.shards;
    if ((rv = pmap_add_table_placed(pm, &t, &pl)) == LAPSE_ENOMEM) {
        rv = errf(rv, err, errlen, "out of memory");
    } else if (rv != 0) {
        rv = errf(LAPSE_ECORRUPT, err, errlen, "table \"%.64s\" (id %u): %s", t.name,
                  (unsigned)t.id, rv == LAPSE_EEXISTS ? "appears twice" : lapse_strerror(rv));
    }
out:
    free(b.parts);
    for (uint32_t g = 0; g < SCHEMA_MAX_GSI; g++) {
        free(b.gsi[g]);
    }
    free(b.shards);
    return rv;
}

/* One node; format V1 has no zone. */
static int get_node(dec *d, pmap *pm, uint8_t format, char *err, size_t errlen)
{
    char addr[PMAP_MAX_ADDR], zone[PMAP_MAX_ZONE] = "";
    uint32_t id = (uint32_t)get_u(d, UINT32_MAX, "node id");
    get_str(d, addr, sizeof addr, "node address");
    pmap_node_state st = get_u(d, 1, "node state") ? PMAP_NODE_UP : PMAP_NODE_DOWN;
    int64_t lease = get_i(d, "node lease");
    uint64_t incarnation = get_u(d, UINT64_MAX, "node incarnation");
    int draining = (int)get_u(d, 1, "node draining");
    int removed = (int)get_u(d, 1, "node removed");
    if (format >= PMAP_FORMAT_V2) {
        get_str(d, zone, sizeof zone, "node zone");
    }
    if (d->bad != NULL) {
        return 0;
    }
    if (id == 0 || pmap_node_find(pm, id) != NULL) {
        return errf(LAPSE_ECORRUPT, err, errlen, "node id %u is 0 or listed twice", (unsigned)id);
    }
    int rv;
    if ((rv = pmap_set_node(pm, id, addr, st)) != 0 ||
        (rv = pmap_set_node_lease(pm, id, lease)) != 0 ||
        (rv = pmap_set_node_incarnation(pm, id, incarnation)) != 0 ||
        (rv = pmap_set_node_draining(pm, id, draining)) != 0 ||
        (rv = pmap_set_node_zone(pm, id, zone)) != 0 ||
        (removed && (rv = pmap_set_node_removed(pm, id)) != 0)) {
        return errf(rv == LAPSE_ENOMEM ? rv : LAPSE_ECORRUPT, err, errlen, "node %u: %s",
                    (unsigned)id, lapse_strerror(rv));
    }
    return 0;
}

/* The least bytes a node and a table take, bounding their counts by what
 * is left of the input. */
#define NODE_MIN_BYTES 7
#define TABLE_MIN_BYTES 39

int pmap_decode(const void *data, size_t len, pmap **out, char *err, size_t errlen)
{
    dec d;
    size_t n = 0;
    uint8_t format = 0;
    int rv = 0;

    *out = NULL;
    memset(&d, 0, sizeof d);
    buf_reader_init(&d.r, data, len);
    if (buf_read_byte(&d.r, &format) != 0 ||
        (format != PMAP_FORMAT_V1 && format != PMAP_FORMAT_V2)) {
        if (len == 0) {
            return errf(LAPSE_ECORRUPT, err, errlen, "empty partition map encoding");
        }
        return errf(LAPSE_ECORRUPT, err, errlen,
                    "unknown partition map format 0x%02x (this version reads 0x%02x and "
                    "0x%02x)",
                    (unsigned)format, PMAP_FORMAT_V1, PMAP_FORMAT_V2);
    }
    pmap *pm = pmap_new();
    if (pm == NULL) {
        return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
    }
    pm->version = get_u(&d, UINT64_MAX, "version");
    if (d.bad == NULL && buf_read_count(&d.r, NODE_MIN_BYTES, &n) != 0) {
        d.bad = "node count";
    }
    for (size_t i = 0; i < n && d.bad == NULL && rv == 0; i++) {
        rv = get_node(&d, pm, format, err, errlen);
    }
    n = 0;
    if (d.bad == NULL && rv == 0 && buf_read_count(&d.r, TABLE_MIN_BYTES, &n) != 0) {
        d.bad = "table count";
    }
    for (size_t i = 0; i < n && d.bad == NULL && rv == 0; i++) {
        rv = get_table(&d, pm, err, errlen);
    }
    if (rv == 0 && d.bad == NULL && d.r.p != d.r.end) {
        d.bad = "end (trailing bytes)";
    }
    if (rv == 0 && d.bad != NULL) {
        rv = errf(LAPSE_ECORRUPT, err, errlen,
                  "partition map encoding is truncated or garbled at its %s (byte %zu of %zu)",
                  d.bad, (size_t)(d.r.p - (const uint8_t *)data), len);
    }
    if (rv == 0 && !pmap_check(pm)) {
        rv = errf(LAPSE_ECORRUPT, err, errlen,
                  "decoded partition map breaks its invariants (a set names an unknown node)");
    }
    if (rv != 0) {
        pmap_free(pm);
        return rv;
    }
    *out = pm;
    return 0;
}
