/*
 * stream.c: the change stream's client side (stream.h): shards from the
 * cached map, GetStreamRecords to each shard's host (one shard, or many at
 * once on the batch engine), and records as DynamoDB Streams JSON.
 */
#include "stream.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/ddbjson.h"
#include "../common/lapse_err.h"
#include "../rpc/wire.h"
#include "batch.h"

/* ------------------------------------------------------------------------ */
/* Batches                                                                  */
/* ------------------------------------------------------------------------ */

size_t lapse_stream_batch_count(const lapse_stream_batch *b)
{
    return b != NULL ? b->n : 0;
}

const lapse_stream_record *lapse_stream_batch_record(const lapse_stream_batch *b, size_t i)
{
    return b != NULL && i < b->n ? &b->v[i].rec : NULL;
}

uint64_t lapse_stream_batch_last_sequence(const lapse_stream_batch *b)
{
    return b != NULL ? b->last_seq : 0;
}

uint64_t lapse_stream_batch_oldest_sequence(const lapse_stream_batch *b)
{
    return b != NULL ? b->oldest_seq : 0;
}

void lapse_stream_batch_free(lapse_stream_batch *b)
{
    if (b == NULL) {
        return;
    }
    for (size_t i = 0; i < b->n; i++) {
        item_free(b->v[i].keys.it);
        item_free(b->v[i].old_image.it);
        item_free(b->v[i].new_image.it);
        free(b->v[i].ttl_attr);
    }
    free(b->v);
    free(b);
}

/* Decodes an item of record i into *slot (left NULL when pb is). */
static int slot_item(const Lapse__Item *pb, struct lapse_item *slot, const char *what,
                     uint32_t shard, uint64_t seq, lapse_error *err)
{
    char msg[256] = "";
    slot->it = NULL;
    if (pb == NULL) {
        return 0;
    }
    int rv = wire_item_from_pb(pb, &slot->it, msg, sizeof msg);
    if (rv != 0) {
        return client_err(err, rv == LAPSE_EINVAL ? LAPSE_EPROTO : rv,
                          "stream shard %u record %" PRIu64 ": bad %s: %s", (unsigned)shard, seq,
                          what, msg);
    }
    return 0;
}

static const char *const view_names[] = {"NEW_AND_OLD_IMAGES", "KEYS_ONLY", "NEW_IMAGE",
                                         "OLD_IMAGE"};

const char *lapse_stream_view_name(int v)
{
    return v >= 0 && v < (int)(sizeof view_names / sizeof view_names[0]) ? view_names[v] : NULL;
}

int lapse_stream_view_parse(const char *name)
{
    for (int v = 0; name != NULL && v < (int)(sizeof view_names / sizeof view_names[0]); v++) {
        if (strcmp(view_names[v], name) == 0) {
            return v;
        }
    }
    return -1;
}

/* Whether view shows a record's old (new: its new) image (invariant 2). */
static int shows(lapse_stream_view view, int new_image)
{
    return view == LAPSE_STREAM_NEW_AND_OLD_IMAGES ||
           view == (new_image ? LAPSE_STREAM_NEW_IMAGE : LAPSE_STREAM_OLD_IMAGE);
}

int stream_batch_from_pb(const Lapse__GetStreamRecordsResponse *r, uint32_t shard,
                         uint64_t after_seq, lapse_stream_view view, lapse_stream_batch **out,
                         lapse_error *err)
{
    int rv = 0;
    *out = NULL;
    lapse_stream_batch *b = calloc(1, sizeof *b);
    if (b == NULL || (r->n_records > 0 && (b->v = calloc(r->n_records, sizeof *b->v)) == NULL)) {
        free(b);
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    b->last_seq = r->last_sequence;
    b->oldest_seq = r->oldest_sequence;
    uint64_t prev = after_seq;
    for (size_t i = 0; i < r->n_records; i++) {
        const Lapse__StreamRecord *pr = r->records[i];
        stream_slot *s = &b->v[b->n++];
        lapse_stream_record *rec = &s->rec;
        if (pr == NULL || pr->keys == NULL) {
            rv = client_err(err, LAPSE_EPROTO, "stream shard %u: a record without keys",
                            (unsigned)shard);
            goto fail;
        }
        if (pr->sequence_number <= prev) {
            rv = client_err(err, LAPSE_EPROTO,
                            "stream shard %u: record %" PRIu64 " after %" PRIu64
                            " (records must come in increasing order after %" PRIu64 ")",
                            (unsigned)shard, pr->sequence_number, prev, after_seq);
            goto fail;
        }
        prev = pr->sequence_number;
        if ((rv = slot_item(pr->keys, &s->keys, "keys", shard, prev, err)) != 0 ||
            (rv = slot_item(shows(view, 0) ? pr->old_image : NULL, &s->old_image, "old image",
                            shard, prev, err)) != 0 ||
            (rv = slot_item(shows(view, 1) ? pr->new_image : NULL, &s->new_image, "new image",
                            shard, prev, err)) != 0) {
            goto fail;
        }
        if (pr->ttl_delete && (s->ttl_attr = strdup(pr->ttl_attribute)) == NULL) {
            rv = client_err(err, LAPSE_ENOMEM, "out of memory");
            goto fail;
        }
        switch (pr->event_name) {
        case LAPSE__STREAM_RECORD__EVENT_NAME__INSERT:
            rec->event = LAPSE_STREAM_INSERT;
            break;
        case LAPSE__STREAM_RECORD__EVENT_NAME__MODIFY:
            rec->event = LAPSE_STREAM_MODIFY;
            break;
        case LAPSE__STREAM_RECORD__EVENT_NAME__REMOVE:
            rec->event = LAPSE_STREAM_REMOVE;
            break;
        default:
            rv = client_err(err, LAPSE_EPROTO, "stream shard %u record %" PRIu64 ": event %d",
                            (unsigned)shard, prev, (int)pr->event_name);
            goto fail;
        }
        rec->shard = shard;
        rec->sequence_number = pr->sequence_number;
        rec->approximate_creation_ms = pr->approximate_creation_ms;
        rec->keys = &s->keys;
        rec->old_image = s->old_image.it != NULL ? &s->old_image : NULL;
        rec->new_image = s->new_image.it != NULL ? &s->new_image : NULL;
        rec->size_bytes = pr->size_bytes;
        rec->ttl_delete = pr->ttl_delete != 0;
        rec->ttl_attribute = s->ttl_attr != NULL ? s->ttl_attr : "";
        rec->ttl_expires_at_ms = pr->ttl_delete ? pr->ttl_expires_at_ms : 0;
        rec->ttl_deleted_at_ms = pr->ttl_delete ? pr->ttl_deleted_at_ms : 0;
        rec->view = view;
    }
    *out = b;
    return 0;
fail:
    lapse_stream_batch_free(b);
    return rv;
}

/* ------------------------------------------------------------------------ */
/* JSON                                                                     */
/* ------------------------------------------------------------------------ */

static const char *const event_names[] = {"INSERT", "MODIFY", "REMOVE"};

/* Sets key to v (a new reference, NULL on OOM) in o; -1 on OOM. */
static int put(json_t *o, const char *key, json_t *v)
{
    return v != NULL ? json_object_set_new(o, key, v) : -1;
}

static int put_image(json_t *o, const char *key, const lapse_item *im)
{
    return im == NULL ? 0 : put(o, key, ddbjson_item_to_json(im->it));
}

/* Whole seconds, rounding down also before 1970. */
static json_int_t floor_seconds(int64_t ms)
{
    return (json_int_t)(ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000));
}

json_t *stream_record_json(const lapse_stream_record *r)
{
    char text[48];
    int bad = 0;
    json_t *doc = json_object(), *ddb = json_object();
    if (doc == NULL || ddb == NULL) {
        json_decref(doc);
        json_decref(ddb);
        return NULL;
    }
    unsigned ev = (unsigned)r->event <= LAPSE_STREAM_REMOVE ? (unsigned)r->event : 0;
    snprintf(text, sizeof text, "%u-%" PRIu64, (unsigned)r->shard, r->sequence_number);
    bad |= put(doc, "eventID", json_string(text));
    bad |= put(doc, "eventName", json_string(event_names[ev]));
    bad |= put(doc, "eventSource", json_string("lapse"));
    bad |= put_image(ddb, "Keys", r->keys);
    bad |= put_image(ddb, "OldImage", r->old_image);
    bad |= put_image(ddb, "NewImage", r->new_image);
    snprintf(text, sizeof text, "%" PRIu64, r->sequence_number);
    bad |= put(ddb, "SequenceNumber", json_string(text));
    bad |= put(ddb, "ApproximateCreationDateTime",
               json_integer(floor_seconds(r->approximate_creation_ms)));
    bad |= put(ddb, "SizeBytes", json_integer((json_int_t)r->size_bytes));
    const char *view = lapse_stream_view_name((int)r->view);
    bad |= put(ddb, "StreamViewType", json_string(view != NULL ? view : view_names[0]));
    bad |= json_object_set_new(doc, "dynamodb", ddb);
    if (r->ttl_delete) {
        json_t *who = json_object(), *ttl = json_object();
        bad |= put(who, "type", json_string("Service"));
        bad |= who != NULL ? put(who, "principalId", json_string("lapse.ttl")) : -1;
        bad |= put(doc, "userIdentity", who);
        bad |= put(ttl, "attribute", json_string(r->ttl_attribute != NULL ? r->ttl_attribute : ""));
        bad |= ttl != NULL ? put(ttl, "expiresAt", json_integer(r->ttl_expires_at_ms)) : -1;
        bad |= ttl != NULL ? put(ttl, "deletedAt", json_integer(r->ttl_deleted_at_ms)) : -1;
        bad |= put(doc, "ttl", ttl);
    }
    snprintf(text, sizeof text, "%u", (unsigned)r->shard);
    bad |= put(doc, "shard", json_string(text));
    if (bad) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

char *lapse_stream_record_to_json(const lapse_stream_record *r)
{
    if (r == NULL) {
        return NULL;
    }
    json_t *doc = stream_record_json(r);
    char *s = doc != NULL ? json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(doc);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Shards                                                                   */
/* ------------------------------------------------------------------------ */

/* Copies table's shards out of the cached map. Returns 0, SHARDS_STALE when
 * the table or a host is missing from the map (the caller refreshes), or a
 * LAPSE_E* error (positive, so never SHARDS_STALE). */
#define SHARDS_STALE (-1)
static int shards_of(lapse_client *c, const char *table, lapse_stream_shard **out, size_t *n,
                     lapse_error *err)
{
    int rv = 0;
    pthread_mutex_lock(&c->mu);
    const pmap_table *t = c->map != NULL ? pmap_table_find(c->map, table) : NULL;
    if (t == NULL) {
        rv = SHARDS_STALE;
        goto out;
    }
    if (!t->schema.stream.enabled || t->stream_shards == NULL) {
        rv = client_err(err, LAPSE_EINVAL, "table \"%s\" has no stream", table);
        goto out;
    }
    uint32_t parts = t->schema.partitions;
    lapse_stream_shard *v = calloc(parts ? parts : 1, sizeof *v);
    if (v == NULL) {
        rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    for (uint32_t p = 0; p < parts; p++) {
        const pmap_node *node = pmap_node_find(c->map, pmap_stream_host(t, p));
        if (node == NULL) {
            free(v);
            rv = SHARDS_STALE;
            goto out;
        }
        v[p].shard = p;
        v[p].node_id = node->id;
        snprintf(v[p].address, sizeof v[p].address, "%s", node->address);
    }
    *out = v;
    *n = parts;
out:
    pthread_mutex_unlock(&c->mu);
    return rv;
}

int lapse_stream_info_get(lapse_client *c, const char *table, lapse_stream_info *out,
                          lapse_error *err)
{
    table_schema t;
    int rv;
    if (c == NULL || table == NULL || out == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    if ((rv = client_table(c, table, &t, err)) != 0) {
        return rv;
    }
    if (!t.stream.enabled) {
        return client_err(err, LAPSE_EINVAL, "table \"%s\" has no stream", table);
    }
    out->table_id = t.id;
    out->created_ms = t.created_ms;
    out->view = (lapse_stream_view)t.stream.view;
    out->shards = t.partitions;
    out->retention_hours =
        t.stream.retention_hours ? t.stream.retention_hours : SCHEMA_DEFAULT_STREAM_RETENTION_HOURS;
    out->generation = t.stream.generation;
    out->first_sequence = t.stream.generation > 0 ? schema_stream_base(&t.stream) : 1;
    out->since_ms = t.stream.since_ms > 0 ? t.stream.since_ms : t.created_ms;
    return client_ok(err);
}

int lapse_update_stream(lapse_client *c, const char *table, int enable, lapse_stream_view view,
                        lapse_error *err)
{
    Lapse__UpdateStreamRequest body = LAPSE__UPDATE_STREAM_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    int rv;
    if (c == NULL || table == NULL) {
        return client_err(err, LAPSE_EINVAL, "update stream: NULL argument");
    }
    if (enable && lapse_stream_view_name((int)view) == NULL) {
        return client_err(err, LAPSE_EINVAL, "update stream: unknown view %d", (int)view);
    }
    body.table = (char *)table;
    body.enabled = enable != 0;
    body.view =
        enable ? (Lapse__StreamView)view : LAPSE__STREAM_VIEW__STREAM_VIEW_NEW_AND_OLD_IMAGES;
    req.body_case = LAPSE__REQUEST__BODY_UPDATE_STREAM;
    req.update_stream = &body;
    /* Not idempotent: a retried change that had been applied would fail as
     * "already enabled". */
    if ((rv = client_call_coord(c, &req, 0, &resp, err)) != 0) {
        return rv;
    }
    rpc_response_free(resp);
    /* The config travels in the map: shards and reads routed from now see it. */
    client_refresh(c, client_timeout_ms(c), NULL);
    return client_ok(err);
}

int lapse_stream_shards(lapse_client *c, const char *table, lapse_stream_shard **out, size_t *n,
                        lapse_error *err)
{
    if (out == NULL || n == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    *out = NULL;
    *n = 0;
    if (c == NULL || table == NULL || table[0] == '\0') {
        return client_err(err, LAPSE_EINVAL, "no table name given");
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        int rv = shards_of(c, table, out, n, err);
        if (rv != SHARDS_STALE) {
            return rv != 0 ? rv : client_ok(err);
        }
        if (attempt == 0 && (rv = client_refresh(c, client_timeout_ms(c), err)) != 0) {
            return rv;
        }
    }
    table_schema t;
    int rv = client_table(c, table, &t, err);
    return rv != 0 ? rv
                   : client_err(err, LAPSE_EUNAVAILABLE,
                                "table \"%s\": a stream shard has no known host", table);
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                  */
/* ------------------------------------------------------------------------ */

/* A stream read: one shard per request (max_entries 1 on the batch engine),
 * every shard's request in flight at once. */
typedef struct read_ctx {
    const char *table;
    lapse_stream_view view;
    const lapse_stream_request *reqs;
    lapse_stream_batch **out;
} read_ctx;

static int read_build(void *ctx, arena *a, const size_t *idx, size_t n, Lapse__Request *req,
                      lapse_error *err)
{
    read_ctx *x = ctx;
    (void)n;
    const lapse_stream_request *q = &x->reqs[idx[0]];
    Lapse__GetStreamRecordsRequest *body = arena_alloc(a, sizeof *body);
    if (body == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    lapse__get_stream_records_request__init(body);
    body->table = (char *)x->table;
    body->shard = q->shard;
    body->after_sequence = q->after_seq;
    body->limit = q->limit;
    body->wait_ms = q->wait_ms;
    body->pin_generation = q->pin_generation != 0;
    body->generation = q->generation;
    req->body_case = LAPSE__REQUEST__BODY_GET_STREAM_RECORDS;
    req->get_stream_records = body;
    return 0;
}

static int read_done(void *ctx, const size_t *idx, size_t n, const Lapse__Response *resp,
                     size_t *unprocessed, size_t *nun, lapse_error *err)
{
    read_ctx *x = ctx;
    (void)n;
    (void)unprocessed;
    *nun = 0;
    const lapse_stream_request *q = &x->reqs[idx[0]];
    if (resp->body_case != LAPSE__RESPONSE__BODY_GET_STREAM_RECORDS ||
        resp->get_stream_records == NULL) {
        return client_err(err, LAPSE_EPROTO, "stream shard %u: reply has no records body",
                          (unsigned)q->shard);
    }
    lapse_stream_batch_free(x->out[idx[0]]); /* a resend after a lost reply */
    x->out[idx[0]] = NULL;
    return stream_batch_from_pb(resp->get_stream_records, q->shard, q->after_seq, x->view,
                                &x->out[idx[0]], err);
}

int lapse_stream_read_many(lapse_client *c, const char *table, const lapse_stream_request *reqs,
                           size_t n, lapse_stream_batch **out, lapse_error *err)
{
    batch_ops ops = {1, SIZE_MAX, read_build, read_done, 0};
    table_schema t;
    int rv;

    if (c == NULL || table == NULL || (n > 0 && (reqs == NULL || out == NULL))) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    for (size_t i = 0; i < n; i++) {
        out[i] = NULL;
    }
    if ((rv = client_table(c, table, &t, err)) != 0) {
        return rv;
    }
    if (!t.stream.enabled) {
        return client_err(err, LAPSE_EINVAL, "table \"%s\" has no stream", table);
    }
    if (n == 0) {
        return client_ok(err);
    }
    batch_entry *e = calloc(n, sizeof *e);
    if (e == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        if (reqs[i].shard >= t.partitions) {
            free(e);
            return client_err(err, LAPSE_EINVAL, "table \"%s\" has shards 0 to %u, not %u", table,
                              (unsigned)t.partitions - 1, (unsigned)reqs[i].shard);
        }
        if (reqs[i].wait_ms > ops.wait_ms) {
            ops.wait_ms = reqs[i].wait_ms;
        }
        e[i].tg = (client_target){
            .table = table, .table_id = t.id, .part = reqs[i].shard, .kind = CLIENT_ROUTE_STREAM};
        e[i].bytes = 1;
    }
    read_ctx x = {table, (lapse_stream_view)t.stream.view, reqs, out};
    rv = batch_run(c, e, n, &ops, &x, err);
    free(e);
    if (rv != 0) {
        for (size_t i = 0; i < n; i++) {
            lapse_stream_batch_free(out[i]);
            out[i] = NULL;
        }
    }
    return rv;
}

int lapse_stream_read(lapse_client *c, const char *table, const lapse_stream_request *req,
                      lapse_stream_batch **out, lapse_error *err)
{
    if (out == NULL || req == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    return lapse_stream_read_many(c, table, req, 1, out, err);
}
