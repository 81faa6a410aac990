/*
 * writes.c: PutItem, DeleteItem, UpdateItem and BatchWrite (request.h
 * pipeline). The store serializes writes per partition and makes each one a
 * single WriteBatch (with the item's expiry index entry when the table's TTL
 * is enabled, its LSI entries and its outbox record); this file only
 * validates, routes and converts (with the call's request id, so that a
 * retried call takes effect once), counts TTL values the enabled rule
 * ignores (expiry_engine_note_write), and wakes the outbox shipper after a write
 * to a table with an outbox (shipper_notify_table), so the change ships
 * within milliseconds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../partition/request.h"
#include "../partition/store_commit.h"
#include "../rpc/rpc.h"
#include "../rpc/wire.h"
#include "writes.h"
#include "shipper.h"

_Static_assert(WIRE_REQUEST_ID_BYTES == REQUEST_ID_BYTES, "the wire carries the store's ids");

/* The call's request id (request.h): *rid NULL when it has none. A reply
 * of EINVAL and -1 for one of the wrong length. */
static int request_id_of(request_ctx *c, const uint8_t **rid)
{
    const ProtobufCBinaryData *id = &c->req->request_id;
    *rid = NULL;
    if (id->len == 0) {
        return 0;
    }
    if (id->len != REQUEST_ID_BYTES) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "request_id of %zu bytes: it must be %d",
                      id->len, REQUEST_ID_BYTES);
        return -1;
    }
    *rid = id->data;
    return 0;
}

static void *body_alloc(request_ctx *c, size_t n)
{
    void *p = arena_alloc(c->a, n);
    if (p == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
    }
    return p;
}

/* One PutItem or DeleteItem on its way: what it converted, and its
 * write's pending wait for the replicas (writes_many). */
typedef struct write_call {
    request_ctx *c;
    int is_delete;
    item *it;
    attr_value cval;
    store_cond cond;
    uint32_t part;
    store_pending pend;
    int rv; /* the store's outcome; -1: refused before the store, reply set */
    char err[512];
} write_call;

/* Validates, routes and converts w's call, then writes it: with defer, the
 * wait for the replicas is left in w->pend (store_*_begin). */
static void write_begin(write_call *w, const char *table, const Lapse__Item *pb,
                        const Lapse__Condition *pb_cond, int defer)
{
    request_ctx *c = w->c;
    const uint8_t *rid;
    item_value_init_null(&w->cval);
    memset(&w->pend, 0, sizeof(w->pend));
    w->rv = -1;
    w->err[0] = '\0';
    if (request_id_of(c, &rid) != 0 || request_find_table(c, table) != 0 ||
        request_item_from_pb(c, pb, w->is_delete, w->is_delete ? "key" : "item", &w->it) != 0 ||
        request_route(c, w->it, &w->part) != 0 ||
        request_cond_from_pb(c, pb_cond, &w->cond, &w->cval) != 0) {
        return;
    }
    const table_schema *t = &c->table->schema;
    store *st = c->ns->st;
    if (defer) {
        w->rv =
            w->is_delete
                ? store_delete_begin(st, t, w->it, &w->cond, rid, &w->pend, w->err, sizeof(w->err))
                : store_put_begin(st, t, w->it, &w->cond, rid, &w->pend, w->err, sizeof(w->err));
    } else {
        w->rv = w->is_delete
                    ? store_delete_once(st, t, w->it, &w->cond, rid, w->err, sizeof(w->err))
                    : store_put_once(st, t, w->it, &w->cond, rid, w->err, sizeof(w->err));
    }
}

/* Sets w's reply from its outcome (w->rv, the wait's included): an empty
 * PutItem/DeleteItem body, or an error; frees what it converted. */
static void write_end(write_call *w)
{
    request_ctx *c = w->c;
    if (w->rv > 0) {
        request_store_error(c, w->rv, w->err);
    } else if (w->rv == 0) {
        shipper_notify_table(c->ns->shipper, &c->table->schema, w->part);
        if (!w->is_delete) {
            expiry_engine_note_write(c->ns->ttl, &c->table->schema, w->it);
        }
        if (w->is_delete) {
            Lapse__DeleteItemResponse *out = body_alloc(c, sizeof(*out));
            if (out != NULL) {
                lapse__delete_item_response__init(out);
                c->resp->body_case = LAPSE__RESPONSE__BODY_DELETE_ITEM;
                c->resp->delete_item = out;
            }
        } else {
            Lapse__PutItemResponse *out = body_alloc(c, sizeof(*out));
            if (out != NULL) {
                lapse__put_item_response__init(out);
                c->resp->body_case = LAPSE__RESPONSE__BODY_PUT_ITEM;
                c->resp->put_item = out;
            }
        }
    }
    item_value_fini(&w->cval);
    item_free(w->it);
    w->it = NULL;
}

/* The body of a PutItem or DeleteItem call, c's or one of writes_many's:
 * 0 and *table, *pb, *cond set, or -1 with the reply set. */
static int write_body(request_ctx *c, int *is_delete, const char **table, const Lapse__Item **pb,
                      const Lapse__Condition **cond)
{
    *is_delete = c->req->body_case == LAPSE__REQUEST__BODY_DELETE_ITEM;
    if (*is_delete) {
        const Lapse__DeleteItemRequest *r = c->req->delete_item;
        if (request_need_body(c, r) != 0) {
            return -1;
        }
        *table = r->table, *pb = r->key, *cond = r->condition;
    } else {
        const Lapse__PutItemRequest *r = c->req->put_item;
        if (request_need_body(c, r) != 0) {
            return -1;
        }
        *table = r->table, *pb = r->item, *cond = r->condition;
    }
    return 0;
}

/* One PutItem or DeleteItem, its wait for the replicas its own. */
static void write_single(request_ctx *c)
{
    write_call w = {.c = c};
    const char *table;
    const Lapse__Item *pb;
    const Lapse__Condition *cond;
    if (write_body(c, &w.is_delete, &table, &pb, &cond) == 0) {
        write_begin(&w, table, pb, cond, 0);
        write_end(&w);
    }
}

void writes_put(request_ctx *c)
{
    write_single(c);
}

void writes_delete(request_ctx *c)
{
    write_single(c);
}

void writes_many(request_ctx *cs, size_t n)
{
    /* The calls of one coalesced frame, so at most RPC_MAX_COALESCED: no
     * allocation per frame on this path, which every coalesced write of a
     * replicated table takes (about 45 KB of stack at the most). */
    write_call ws[RPC_MAX_COALESCED];
    store_pending pends[RPC_MAX_COALESCED];
    int rvs[RPC_MAX_COALESCED];
    if (n > RPC_MAX_COALESCED) {
        for (size_t i = 0; i < n; i++) {
            write_single(&cs[i]); /* one at a time, then */
        }
        return;
    }
    memset(ws, 0, n * sizeof(*ws));
    memset(rvs, 0, n * sizeof(*rvs));
    /* Every call's write first, so that their records queue together and
     * go to the replicas in one round; then one wait for them all. */
    for (size_t i = 0; i < n; i++) {
        const char *table;
        const Lapse__Item *pb;
        const Lapse__Condition *cond;
        ws[i].c = &cs[i];
        ws[i].rv = -1;
        item_value_init_null(&ws[i].cval);
        if (write_body(&cs[i], &ws[i].is_delete, &table, &pb, &cond) == 0) {
            write_begin(&ws[i], table, pb, cond, 1);
        }
        pends[i] = ws[i].pend;
    }
    char err[512] = "";
    (void)store_commit_finish_many(cs[0].ns->st, pends, n, rvs, err, sizeof(err));
    for (size_t i = 0; i < n; i++) {
        if (ws[i].rv == 0 && rvs[i] != 0) {
            ws[i].rv = rvs[i];
            snprintf(ws[i].err, sizeof(ws[i].err), "%s", err[0] ? err : lapse_strerror(rvs[i]));
        }
        write_end(&ws[i]);
    }
}

void writes_update(request_ctx *c)
{
    const Lapse__UpdateItemRequest *r = c->req->update_item;
    item *key = NULL;
    item *updated = NULL;
    attr_value cval;
    attr_value *values = NULL;
    store_update_action *actions = NULL;
    size_t n = 0;
    store_cond cond;
    uint32_t part;
    const uint8_t *rid;
    char err[512] = "";
    item_value_init_null(&cval);

    if (request_need_body(c, r) != 0 || request_id_of(c, &rid) != 0 ||
        request_find_table(c, r->table) != 0 ||
        request_item_from_pb(c, r->key, 1, "key", &key) != 0 || request_route(c, key, &part) != 0 ||
        request_cond_from_pb(c, r->condition, &cond, &cval) != 0) {
        goto out;
    }
    n = r->n_actions;
    if (n > 0) {
        values = calloc(n, sizeof(*values));
        actions = calloc(n, sizeof(*actions));
        if (values == NULL || actions == NULL) {
            rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
            n = 0;
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        item_value_init_null(&values[i]);
    }
    for (size_t i = 0; i < n; i++) {
        const Lapse__UpdateAction *pa = r->actions[i];
        if (pa == NULL || pa->name == NULL || pa->name[0] == 0) {
            rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "action %zu: attribute name is required", i);
            goto out;
        }
        actions[i].name = pa->name;
        if (pa->value != NULL) {
            int rv = wire_value_from_pb(pa->value, &values[i], err, sizeof(err));
            if (rv != 0) {
                rpc_set_error(c->resp, c->a, rv, "action %zu (\"%s\"): %s", i, pa->name, err);
                goto out;
            }
            actions[i].value = &values[i];
        }
    }
    int rv = store_update_once(c->ns->st, &c->table->schema, key, actions, n, &cond, rid, &updated,
                               err, sizeof(err));
    if (rv != 0) {
        request_store_error(c, rv, err);
        goto out;
    }
    shipper_notify_table(c->ns->shipper, &c->table->schema, part);
    expiry_engine_note_write(c->ns->ttl, &c->table->schema, updated);
    Lapse__UpdateItemResponse *out = body_alloc(c, sizeof(*out));
    if (out == NULL) {
        goto out;
    }
    lapse__update_item_response__init(out);
    if (updated != NULL && (out->item = wire_item_to_pb(c->a, updated)) == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    c->resp->body_case = LAPSE__RESPONSE__BODY_UPDATE_ITEM;
    c->resp->update_item = out;
out:
    for (size_t i = 0; i < n; i++) {
        item_value_fini(&values[i]);
    }
    free(values);
    free(actions);
    item_value_fini(&cval);
    item_free(key);
    item_free(updated);
}

/*
 * BatchWrite: every write is converted and checked first (one bad write
 * fails the whole call, nothing applied); writes for partitions another node
 * owns are answered in `unprocessed` for the client to re-route; the rest go
 * to store_batch_write_once, atomic per partition, which with the call's
 * request id applies only the writes no earlier attempt applied.
 */
void writes_batch(request_ctx *c)
{
    const Lapse__BatchWriteRequest *r = c->req->batch_write;
    item **items = NULL;
    store_write *writes = NULL;
    uint32_t *parts = NULL; /* parts[k]: the partition of writes[k] */
    uint32_t *unprocessed = NULL;
    size_t n = 0, nwrites = 0, nun = 0;
    char err[512] = "";

    const uint8_t *rid;
    if (request_need_body(c, r) != 0 || request_id_of(c, &rid) != 0 ||
        request_find_table(c, r->table) != 0) {
        goto out;
    }
    if (r->n_writes > REQUEST_BATCH_MAX) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "batch of %zu writes: at most %d allowed",
                      r->n_writes, REQUEST_BATCH_MAX);
        goto out;
    }
    n = r->n_writes;
    if (n > 0) {
        items = calloc(n, sizeof(*items));
        writes = calloc(n, sizeof(*writes));
        parts = calloc(n, sizeof(*parts));
        unprocessed = arena_alloc(c->a, n * sizeof(*unprocessed));
        if (items == NULL || writes == NULL || parts == NULL || unprocessed == NULL) {
            rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const Lapse__WriteRequest *w = r->writes[i];
        char what[48];
        uint32_t part;
        if (w == NULL || (w->put == NULL) == (w->delete_key == NULL)) {
            rpc_set_error(c->resp, c->a, LAPSE_EINVAL,
                          "write %zu: exactly one of put and delete_key must be set", i);
            goto out;
        }
        int is_put = w->put != NULL;
        snprintf(what, sizeof(what), "write %zu (%s)", i, is_put ? "put" : "delete");
        if (request_item_from_pb(c, is_put ? w->put : w->delete_key, !is_put, what, &items[i]) !=
                0 ||
            request_partition_of(c, items[i], &part) != 0) {
            goto out;
        }
        if (!request_owns(c, part)) {
            unprocessed[nun++] = (uint32_t)i;
            continue;
        }
        parts[nwrites] = part;
        writes[nwrites].put = is_put ? items[i] : NULL;
        writes[nwrites].delete_key = is_put ? NULL : items[i];
        nwrites++;
    }
    if (nwrites > 0) {
        int rv = store_batch_write_once(c->ns->st, &c->table->schema, writes, nwrites, rid, err,
                                        sizeof(err));
        if (rv != 0) {
            request_store_error(c, rv, err);
            goto out;
        }
        for (size_t i = 0; i < nwrites; i++) {
            expiry_engine_note_write(c->ns->ttl, &c->table->schema, writes[i].put);
            if (i == 0 || parts[i] != parts[i - 1]) {
                shipper_notify_table(c->ns->shipper, &c->table->schema, parts[i]);
            }
        }
    }
    Lapse__BatchWriteResponse *out = body_alloc(c, sizeof(*out));
    if (out == NULL) {
        goto out;
    }
    lapse__batch_write_response__init(out);
    out->n_unprocessed = nun;
    out->unprocessed = nun > 0 ? unprocessed : NULL;
    c->resp->body_case = LAPSE__RESPONSE__BODY_BATCH_WRITE;
    c->resp->batch_write = out;
out:
    for (size_t i = 0; i < n && items != NULL; i++) {
        item_free(items[i]);
    }
    free(items);
    free(writes);
    free(parts);
}
