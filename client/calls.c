/*
 * calls.c: the item calls: put, get, delete, update, and batch write (grouped
 * per owning node, in chunks, with unprocessed writes re-routed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/arena.h"
#include "../common/ddbjson.h"
#include "../common/lapse_err.h"
#include "../rpc/wire.h"
#include "batch.h"
#include "client.h"

/* A chunk stays well under RPC_MAX_MESSAGE_BYTES even with big items. */
#define CHUNK_MAX_BYTES (16u * 1024 * 1024)

/* ------------------------------------------------------------------------ */
/* Shared helpers                                                            */
/* ------------------------------------------------------------------------ */

static int check_item(const table_schema *t, const item *it, int key_only, lapse_error *err)
{
    char msg[256] = "";
    int rv = schema_check_item(t, it, key_only, msg, sizeof msg);
    if (rv != 0) {
        return client_err(err, rv, "%s", msg[0] ? msg : lapse_strerror(rv));
    }
    return 0;
}

/* Builds the wire form of cond into *out (NULL for no condition). *keep holds
 * the parsed value of an EQUALS or ITEM_EQUALS condition (for the latter an M
 * of the item's attributes); the caller frees it with item_value_fini after
 * the call. */
static int cond_to_pb(arena *a, const lapse_condition *cond, Lapse__Condition **out,
                      attr_value *keep, lapse_error *err)
{
    char msg[256] = "";
    int rv;

    *out = NULL;
    if (cond == NULL || cond->kind == LAPSE_COND_NONE) {
        return 0;
    }
    if (cond->kind != LAPSE_COND_ITEM_EQUALS &&
        (cond->attribute == NULL || cond->attribute[0] == '\0')) {
        return client_err(err, LAPSE_EINVAL, "condition: no attribute name");
    }
    Lapse__Condition *pc = arena_alloc(a, sizeof *pc);
    if (pc == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    lapse__condition__init(pc);
    pc->attribute = cond->attribute != NULL ? (char *)cond->attribute : "";
    switch (cond->kind) {
    case LAPSE_COND_NOT_EXISTS:
        pc->kind = LAPSE__CONDITION__KIND__ATTRIBUTE_NOT_EXISTS;
        break;
    case LAPSE_COND_EXISTS:
        pc->kind = LAPSE__CONDITION__KIND__ATTRIBUTE_EXISTS;
        break;
    case LAPSE_COND_EQUALS:
        pc->kind = LAPSE__CONDITION__KIND__ATTRIBUTE_EQUALS;
        if (cond->value_json == NULL) {
            return client_err(err, LAPSE_EINVAL, "condition on \"%s\": no value", cond->attribute);
        }
        rv = ddbjson_parse_value(cond->value_json, strlen(cond->value_json), keep, msg, sizeof msg);
        if (rv != 0) {
            return client_err(err, rv, "condition on \"%s\": %s", cond->attribute, msg);
        }
        if ((pc->value = wire_value_to_pb(a, keep)) == NULL) {
            return client_err(err, LAPSE_ENOMEM, "out of memory");
        }
        break;
    case LAPSE_COND_ITEM_EQUALS: {
        item *it = NULL;
        pc->kind = LAPSE__CONDITION__KIND__ITEM_EQUALS;
        if (cond->value_json == NULL) {
            return client_err(err, LAPSE_EINVAL, "item condition: no item");
        }
        rv = ddbjson_parse_item(cond->value_json, strlen(cond->value_json), &it, msg, sizeof msg);
        if (rv != 0) {
            return client_err(err, rv, "item condition: %s", msg);
        }
        /* The item's attributes become the M value (moved, not copied). */
        item_value_init_map(keep);
        keep->u.map.v = it->attrs;
        keep->u.map.n = it->n;
        it->attrs = NULL;
        it->n = it->cap = 0;
        item_free(it);
        if ((pc->value = wire_item_value_to_pb(a, keep)) == NULL) {
            return client_err(err, LAPSE_ENOMEM, "out of memory");
        }
        break;
    }
    default:
        return client_err(err, LAPSE_EINVAL, "condition: unknown kind %d", (int)cond->kind);
    }
    *out = pc;
    return 0;
}

/* Resolves table and checks it (the whole item, or only the key), giving the
 * partition. */
/* A key attribute among u's: no update may change one. */
static int check_update_keys(const table_schema *t, const lapse_update *u, lapse_error *err)
{
    for (size_t i = 0; u != NULL && i < u->n; i++) {
        if (strcmp(u->v[i].name, t->pk.name) == 0 ||
            (t->sk.name[0] != '\0' && strcmp(u->v[i].name, t->sk.name) == 0)) {
            return client_err(err, LAPSE_EINVAL, "cannot update key attribute \"%s\"",
                              u->v[i].name);
        }
    }
    return 0;
}

/* Checks it (a key when key_only) against table's schema, and u's actions
 * when not NULL, and routes it: tg is the call's base partition. The schema
 * is read in place in the client's map (client_table_pin), not copied: a
 * single-item call is the hot path. */
static int prepare_opt(lapse_client *c, const char *table, const lapse_item *it, int key_only,
                       const lapse_update *u, int may_fetch, client_target *tg, lapse_error *err)
{
    const table_schema *t;
    client_map *pin;
    int rv;
    if (c == NULL || table == NULL || it == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    if ((rv = client_table_pin_opt(c, table, may_fetch, &t, &pin, err)) != 0) {
        return rv;
    }
    memset(tg, 0, sizeof *tg); /* a base call (CLIENT_ROUTE_BASE) */
    if ((rv = check_item(t, it->it, key_only, err)) == 0 &&
        (rv = check_update_keys(t, u, err)) == 0) {
        tg->table = table;
        tg->table_id = t->id;
        tg->key = it->it;
        rv = client_partition_of(t, it->it, &tg->part, err);
    }
    client_map_release(pin);
    return rv;
}

/* prepare_opt fetching the map when the table is not in it. */
static int prepare(lapse_client *c, const char *table, const lapse_item *it, int key_only,
                   const lapse_update *u, client_target *tg, lapse_error *err)
{
    return prepare_opt(c, table, it, key_only, u, 1, tg, err);
}

/* Moves the item of a reply into a new lapse_item (*out NULL when pb is). */
static int item_from_reply(const Lapse__Item *pb, lapse_item **out, lapse_error *err)
{
    char msg[256] = "";
    item *it = NULL;
    int rv;

    *out = NULL;
    if (pb == NULL) {
        return 0;
    }
    if ((rv = wire_item_from_pb(pb, &it, msg, sizeof msg)) != 0) {
        return client_err(err, rv == LAPSE_EINVAL ? LAPSE_EPROTO : rv, "bad item in reply: %s",
                          msg);
    }
    if ((*out = client_item_wrap(it)) == NULL) {
        item_free(it);
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Put, get, delete                                                          */
/* ------------------------------------------------------------------------ */

int lapse_check_item(lapse_client *c, const char *table, const lapse_item *item, int key_only,
                     lapse_error *err)
{
    client_target tg;
    int rv = prepare(c, table, item, key_only != 0, NULL, &tg, err);
    return rv != 0 ? rv : client_ok(err);
}

/* A write call's request: a PutItem (is_delete 0: it is the whole item) or
 * a DeleteItem (is_delete 1: it is the key) with cond, its parts in a, in
 * *w, routed by tg. Returns 0 or a lapse_status with the reason in err. */
typedef struct write_req {
    Lapse__PutItemRequest put;
    Lapse__DeleteItemRequest del;
    Lapse__Request req;
    uint8_t rid[WIRE_REQUEST_ID_BYTES];
    attr_value keep; /* a condition's value (cond_to_pb); fini'd by the caller */
} write_req;

static int write_request(lapse_client *c, const char *table, const lapse_item *it,
                         const lapse_condition *cond, int is_delete, int may_fetch, arena *a,
                         write_req *w, client_target *tg, lapse_error *err)
{
    Lapse__Item *pb_item;
    Lapse__Condition *pb_cond = NULL;
    int rv;

    w->put = (Lapse__PutItemRequest)LAPSE__PUT_ITEM_REQUEST__INIT;
    w->del = (Lapse__DeleteItemRequest)LAPSE__DELETE_ITEM_REQUEST__INIT;
    w->req = (Lapse__Request)LAPSE__REQUEST__INIT;
    item_value_init_null(&w->keep);
    if ((rv = prepare_opt(c, table, it, is_delete, NULL, may_fetch, tg, err)) != 0) {
        return rv;
    }
    if ((pb_item = wire_item_to_pb(a, it->it)) == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    if ((rv = cond_to_pb(a, cond, &pb_cond, &w->keep, err)) != 0) {
        return rv;
    }
    if (is_delete) {
        w->del.table = (char *)table;
        w->del.key = pb_item;
        w->del.condition = pb_cond;
        w->req.body_case = LAPSE__REQUEST__BODY_DELETE_ITEM;
        w->req.delete_item = &w->del;
    } else {
        w->put.table = (char *)table;
        w->put.item = pb_item;
        w->put.condition = pb_cond;
        w->req.body_case = LAPSE__REQUEST__BODY_PUT_ITEM;
        w->req.put_item = &w->put;
    }
    /* Retried after a time-out too: the request id makes it take effect once. */
    client_request_id(w->rid);
    w->req.request_id = (ProtobufCBinaryData){.len = sizeof w->rid, .data = w->rid};
    return 0;
}

/* Sends write_request's call to the partition's primary. Returns 0 or a
 * lapse_status with the reason in err. */
static int write_item(lapse_client *c, const char *table, const lapse_item *it,
                      const lapse_condition *cond, int is_delete, lapse_error *err)
{
    Lapse__Response *resp = NULL;
    client_target tg;
    write_req w;
    arena a;
    arena_init(&a);
    int rv = write_request(c, table, it, cond, is_delete, 1, &a, &w, &tg, err);
    if (rv == 0) {
        rv = client_call_part(c, &tg, &w.req, 1, &resp, err);
    }
    rpc_response_free(resp);
    arena_fini(&a);
    item_value_fini(&w.keep);
    return rv;
}

int lapse_put(lapse_client *c, const char *table, const lapse_item *item,
              const lapse_condition *cond, lapse_error *err)
{
    return write_item(c, table, item, cond, 0, err);
}

int lapse_get(lapse_client *c, const char *table, const lapse_item *key, lapse_item **out,
              lapse_error *err)
{
    return lapse_get_opts(c, table, key, NULL, out, err);
}

/* A get call's request, its parts in a, routed by tg. Returns 0 or a
 * lapse_status with the reason in err. */
typedef struct get_req {
    Lapse__GetItemRequest body;
    Lapse__Request req;
} get_req;

static int get_request(lapse_client *c, const char *table, const lapse_item *key,
                       const lapse_read_opts *opts, int may_fetch, arena *a, get_req *g,
                       client_target *tg, lapse_error *err)
{
    int rv;
    g->body = (Lapse__GetItemRequest)LAPSE__GET_ITEM_REQUEST__INIT;
    g->req = (Lapse__Request)LAPSE__REQUEST__INIT;
    if ((rv = prepare_opt(c, table, key, 1, NULL, may_fetch, tg, err)) != 0) {
        return rv;
    }
    g->body.table = (char *)table;
    g->body.hide_expired = client_hide_expired(c, opts != NULL && opts->hide_expired);
    g->body.eventually_consistent = opts != NULL && opts->eventually_consistent;
    tg->eventual = g->body.eventually_consistent;
    if ((g->body.key = wire_item_to_pb(a, key->it)) == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    g->req.body_case = LAPSE__REQUEST__BODY_GET_ITEM;
    g->req.get_item = &g->body;
    return 0;
}

/* The item of a get's reply into *out (NULL when there is none). */
static int get_reply(const Lapse__Response *resp, lapse_item **out, lapse_error *err)
{
    if (resp->body_case != LAPSE__RESPONSE__BODY_GET_ITEM || resp->get_item == NULL) {
        return client_err(err, LAPSE_EPROTO, "get: reply has no get_item body");
    }
    return item_from_reply(resp->get_item->item, out, err);
}

int lapse_get_opts(lapse_client *c, const char *table, const lapse_item *key,
                   const lapse_read_opts *opts, lapse_item **out, lapse_error *err)
{
    Lapse__Response *resp = NULL;
    client_target tg;
    get_req g;
    arena a;
    int rv;

    if (out == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    *out = NULL;
    arena_init(&a);
    if ((rv = get_request(c, table, key, opts, 1, &a, &g, &tg, err)) == 0 &&
        (rv = client_call_part(c, &tg, &g.req, 1, &resp, err)) == 0) {
        rv = get_reply(resp, out, err);
    }
    rpc_response_free(resp);
    arena_fini(&a);
    return rv;
}

int lapse_delete(lapse_client *c, const char *table, const lapse_item *key,
                 const lapse_condition *cond, lapse_error *err)
{
    return write_item(c, table, key, cond, 1, err);
}

/* ------------------------------------------------------------------------ */
/* Asynchronous get, put and delete: one attempt each                      */
/* ------------------------------------------------------------------------ */

/* One asynchronous call in flight: what its completion needs. */
typedef struct async_call {
    lapse_client *c;
    lapse_get_done get_done; /* a get's; NULL for a put */
    lapse_done put_done;     /* a put's */
    void *arg;
    client_route r; /* where it went, for messages */
    int timeout_ms;
} async_call;

/* rpc_call_async's completion: the reply as the blocking call reads it. */
static void async_call_done(void *arg, int rv, Lapse__Response *resp, const char *msg)
{
    async_call *ac = arg;
    lapse_item *it = NULL;
    lapse_error e;
    if (rv != 0) {
        client_call_part_failed(ac->c, rv);
        client_node_err(&e, rv, &ac->r, msg, ac->timeout_ms);
    } else if (ac->get_done != NULL && (rv = get_reply(resp, &it, &e)) == 0) {
        client_ok(&e);
    } else if (rv == 0) {
        client_ok(&e);
    }
    rpc_response_free(resp);
    if (ac->get_done != NULL) {
        ac->get_done(ac->arg, rv, it, &e);
    } else {
        ac->put_done(ac->arg, rv, &e);
    }
    free(ac);
}

/* Starts req routed by tg for ac (freed here when it cannot start). */
static int async_start(async_call *ac, client_target *tg, Lapse__Request *req, lapse_error *err)
{
    int rv =
        client_call_part_start(ac->c, tg, req, async_call_done, ac, &ac->r, &ac->timeout_ms, err);
    if (rv != 0) {
        free(ac);
    }
    return rv;
}

/* A new call of c into *out, with ac->get_done or ac->put_done (one of
 * them not NULL) and arg. Returns 0 or a lapse_status with err set. */
static int async_new(lapse_client *c, lapse_get_done get_done, lapse_done put_done, void *arg,
                     async_call **out, lapse_error *err)
{
    if (get_done == NULL && put_done == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    if ((*out = calloc(1, sizeof **out)) == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    **out = (async_call){.c = c, .get_done = get_done, .put_done = put_done, .arg = arg};
    return 0;
}

int lapse_get_async(lapse_client *c, const char *table, const lapse_item *key,
                    const lapse_read_opts *opts, lapse_get_done done, void *arg, lapse_error *err)
{
    async_call *ac;
    int rv = async_new(c, done, NULL, arg, &ac, err);
    if (rv != 0) {
        return rv;
    }
    client_target tg;
    get_req g;
    arena a;
    arena_init(&a);
    rv = get_request(c, table, key, opts, 0, &a, &g, &tg, err);
    rv = rv == 0 ? async_start(ac, &tg, &g.req, err) : (free(ac), rv);
    arena_fini(&a);
    return rv;
}

/* lapse_put_async (is_delete 0: it is the item) and lapse_delete_async
 * (is_delete 1: it is the key). */
static int write_async(lapse_client *c, const char *table, const lapse_item *it, int is_delete,
                       lapse_done done, void *arg, lapse_error *err)
{
    async_call *ac;
    int rv = async_new(c, NULL, done, arg, &ac, err);
    if (rv != 0) {
        return rv;
    }
    client_target tg;
    write_req w;
    arena a;
    arena_init(&a);
    rv = write_request(c, table, it, NULL, is_delete, 0, &a, &w, &tg, err);
    rv = rv == 0 ? async_start(ac, &tg, &w.req, err) : (free(ac), rv);
    arena_fini(&a);
    item_value_fini(&w.keep);
    return rv;
}

int lapse_put_async(lapse_client *c, const char *table, const lapse_item *item, lapse_done done,
                    void *arg, lapse_error *err)
{
    return write_async(c, table, item, 0, done, arg, err);
}

int lapse_delete_async(lapse_client *c, const char *table, const lapse_item *key, lapse_done done,
                       void *arg, lapse_error *err)
{
    return write_async(c, table, key, 1, done, arg, err);
}

/* ------------------------------------------------------------------------ */
/* Update                                                                    */
/* ------------------------------------------------------------------------ */

int lapse_update_item(lapse_client *c, const char *table, const lapse_item *key,
                      const lapse_update *u, const lapse_condition *cond, lapse_item **new_out,
                      lapse_error *err)
{
    Lapse__UpdateItemRequest body = LAPSE__UPDATE_ITEM_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    client_target tg;
    attr_value keep;
    arena a;
    int rv;

    if (new_out != NULL) {
        *new_out = NULL;
    }
    if (u == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    if ((rv = prepare(c, table, key, 1, u, &tg, err)) != 0) {
        return rv;
    }
    arena_init(&a);
    item_value_init_null(&keep);
    body.table = (char *)table;
    if ((body.key = wire_item_to_pb(&a, key->it)) == NULL) {
        rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    if (u->n > 0) {
        body.actions = arena_alloc(&a, u->n * sizeof *body.actions);
        if (body.actions == NULL) {
            rv = client_err(err, LAPSE_ENOMEM, "out of memory");
            goto out;
        }
    }
    for (size_t i = 0; i < u->n; i++) {
        Lapse__UpdateAction *pa = arena_alloc(&a, sizeof *pa);
        if (pa == NULL) {
            rv = client_err(err, LAPSE_ENOMEM, "out of memory");
            goto out;
        }
        lapse__update_action__init(pa);
        pa->name = u->v[i].name;
        if (u->v[i].is_set && (pa->value = wire_value_to_pb(&a, &u->v[i].value)) == NULL) {
            rv = client_err(err, LAPSE_ENOMEM, "out of memory");
            goto out;
        }
        body.actions[body.n_actions++] = pa;
    }
    if ((rv = cond_to_pb(&a, cond, &body.condition, &keep, err)) != 0) {
        goto out;
    }
    req.body_case = LAPSE__REQUEST__BODY_UPDATE_ITEM;
    req.update_item = &body;
    /* Retried after a time-out too: the request id makes it take effect
     * once, and a retry answers the item the first attempt made. */
    uint8_t rid[WIRE_REQUEST_ID_BYTES];
    client_request_id(rid);
    req.request_id = (ProtobufCBinaryData){.len = sizeof rid, .data = rid};
    if ((rv = client_call_part(c, &tg, &req, 1, &resp, err)) != 0) {
        goto out;
    }
    if (new_out != NULL && resp->body_case == LAPSE__RESPONSE__BODY_UPDATE_ITEM &&
        resp->update_item != NULL) {
        rv = item_from_reply(resp->update_item->item, new_out, err);
    }
out:
    rpc_response_free(resp);
    arena_fini(&a);
    item_value_fini(&keep);
    return rv;
}

/* ------------------------------------------------------------------------ */
/* Batch write                                                               */
/* ------------------------------------------------------------------------ */

/* ---- batch write and batch get (on the engine in batch.c) ---- */

typedef struct bw_ctx {
    const char *table;
    Lapse__WriteRequest **pb; /* per entry, in the call's arena */
    /* One for the whole call, sent with every request of every round: a
     * node applies only the writes no earlier attempt applied (request.h). */
    uint8_t rid[WIRE_REQUEST_ID_BYTES];
} bw_ctx;

static int bw_build(void *ctx, arena *a, const size_t *idx, size_t n, Lapse__Request *req,
                    lapse_error *err)
{
    bw_ctx *x = ctx;
    Lapse__BatchWriteRequest *body = arena_alloc(a, sizeof(*body));
    Lapse__WriteRequest **writes = arena_alloc(a, n * sizeof(*writes));
    if (body == NULL || writes == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    lapse__batch_write_request__init(body);
    for (size_t i = 0; i < n; i++) {
        writes[i] = x->pb[idx[i]];
    }
    body->table = (char *)x->table;
    body->writes = writes;
    body->n_writes = n;
    req->request_id = (ProtobufCBinaryData){.len = sizeof x->rid, .data = x->rid};
    req->body_case = LAPSE__REQUEST__BODY_BATCH_WRITE;
    req->batch_write = body;
    return 0;
}

static int bw_done(void *ctx, const size_t *idx, size_t n, const Lapse__Response *resp,
                   size_t *unprocessed, size_t *nun, lapse_error *err)
{
    (void)ctx;
    (void)idx;
    if (resp->body_case != LAPSE__RESPONSE__BODY_BATCH_WRITE || resp->batch_write == NULL) {
        return client_err(err, LAPSE_EPROTO, "reply has no batch_write body");
    }
    const Lapse__BatchWriteResponse *bw = resp->batch_write;
    *nun = 0;
    for (size_t i = 0; i < bw->n_unprocessed; i++) {
        if (bw->unprocessed[i] < n) {
            unprocessed[(*nun)++] = bw->unprocessed[i];
        }
    }
    return 0;
}

/* Validates one item and sets up its routing entry and wire form. */
static int batch_prepare(const table_schema *t, arena *a, const lapse_item *it, int key_only,
                         const char *what, size_t i, batch_entry *e, Lapse__Item **pb,
                         lapse_error *err)
{
    int rv;
    if (it == NULL) {
        return client_err(err, LAPSE_EINVAL, "%s %zu: NULL item", what, i);
    }
    if ((rv = check_item(t, it->it, key_only, err)) != 0 ||
        (rv = client_partition_of(t, it->it, &e->tg.part, err)) != 0) {
        char detail[sizeof err->message];
        snprintf(detail, sizeof detail, "%s", err != NULL ? err->message : "");
        return client_err(err, rv, "%s %zu: %s", what, i, detail);
    }
    e->tg.table = t->name;
    e->tg.table_id = t->id;
    e->tg.key = it->it;
    e->bytes = item_size(it->it);
    if ((*pb = wire_item_to_pb(a, it->it)) == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    return 0;
}

int lapse_batch_write(lapse_client *c, const char *table, lapse_item *const *puts, size_t nputs,
                      lapse_item *const *delete_keys, size_t ndeletes, lapse_error *err)
{
    static const batch_ops ops = {LAPSE_BATCH_MAX, CHUNK_MAX_BYTES, bw_build, bw_done, 0};
    table_schema t;
    arena a;
    int rv;

    if (c == NULL || table == NULL || (puts == NULL && nputs > 0) ||
        (delete_keys == NULL && ndeletes > 0)) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    if ((rv = client_table(c, table, &t, err)) != 0) {
        return rv;
    }
    size_t total = nputs + ndeletes;
    if (total == 0) {
        return client_ok(err);
    }
    arena_init(&a);
    bw_ctx x = {table, calloc(total, sizeof(*x.pb)), {0}};
    client_request_id(x.rid);
    batch_entry *e = calloc(total, sizeof(*e));
    if (x.pb == NULL || e == NULL) {
        rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    /* Validate everything before sending anything. */
    for (size_t i = 0; i < total; i++) {
        int is_put = i < nputs;
        const lapse_item *it = is_put ? puts[i] : delete_keys[i - nputs];
        Lapse__Item *pi = NULL;
        if ((rv = batch_prepare(&t, &a, it, !is_put, is_put ? "put" : "delete",
                                is_put ? i : i - nputs, &e[i], &pi, err)) != 0) {
            goto out;
        }
        if ((x.pb[i] = arena_alloc(&a, sizeof(*x.pb[i]))) == NULL) {
            rv = client_err(err, LAPSE_ENOMEM, "out of memory");
            goto out;
        }
        lapse__write_request__init(x.pb[i]);
        if (is_put) {
            x.pb[i]->put = pi;
        } else {
            x.pb[i]->delete_key = pi;
        }
    }
    rv = batch_run(c, e, total, &ops, &x, err);
out:
    free(x.pb);
    free(e);
    arena_fini(&a);
    return rv;
}

typedef struct bg_ctx {
    const char *table;
    Lapse__Item **keys; /* per entry, in the call's arena */
    lapse_item **out;   /* the caller's results */
    int hide_expired;   /* leave out expired items */
    int eventual;       /* any in-sync copy may answer */
} bg_ctx;

static int bg_build(void *ctx, arena *a, const size_t *idx, size_t n, Lapse__Request *req,
                    lapse_error *err)
{
    bg_ctx *x = ctx;
    Lapse__BatchGetRequest *body = arena_alloc(a, sizeof(*body));
    Lapse__Item **keys = arena_alloc(a, n * sizeof(*keys));
    if (body == NULL || keys == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    lapse__batch_get_request__init(body);
    for (size_t i = 0; i < n; i++) {
        keys[i] = x->keys[idx[i]];
    }
    body->table = (char *)x->table;
    body->keys = keys;
    body->n_keys = n;
    body->hide_expired = x->hide_expired;
    body->eventually_consistent = x->eventual;
    req->body_case = LAPSE__REQUEST__BODY_BATCH_GET;
    req->batch_get = body;
    return 0;
}

static int bg_done(void *ctx, const size_t *idx, size_t n, const Lapse__Response *resp,
                   size_t *unprocessed, size_t *nun, lapse_error *err)
{
    bg_ctx *x = ctx;
    const Lapse__BatchGetResponse *bg = resp->batch_get;
    char why[256];
    if (resp->body_case != LAPSE__RESPONSE__BODY_BATCH_GET || bg == NULL || bg->n_items != n) {
        return client_err(err, LAPSE_EPROTO, "reply has no batch_get body for %zu keys", n);
    }
    char *skip = calloc(n ? n : 1, 1);
    if (skip == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    *nun = 0;
    for (size_t i = 0; i < bg->n_unprocessed; i++) {
        if (bg->unprocessed[i] < n && !skip[bg->unprocessed[i]]) {
            skip[bg->unprocessed[i]] = 1;
            unprocessed[(*nun)++] = bg->unprocessed[i];
        }
    }
    int rv = 0;
    for (size_t i = 0; i < n && rv == 0; i++) {
        item *it = NULL;
        if (skip[i] || bg->items[i] == NULL || bg->items[i]->n_attrs == 0) {
            continue;
        }
        if ((rv = wire_item_from_pb(bg->items[i], &it, why, sizeof why)) != 0) {
            rv = client_err(err, LAPSE_EPROTO, "item %zu of the reply: %s", i, why);
        } else if ((x->out[idx[i]] = client_item_wrap(it)) == NULL) {
            item_free(it);
            rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        }
    }
    free(skip);
    return rv;
}

int lapse_batch_get(lapse_client *c, const char *table, lapse_item *const *keys, size_t n,
                    lapse_item **out, lapse_error *err)
{
    return lapse_batch_get_opts(c, table, keys, n, NULL, out, err);
}

int lapse_batch_get_opts(lapse_client *c, const char *table, lapse_item *const *keys, size_t n,
                         const lapse_read_opts *opts, lapse_item **out, lapse_error *err)
{
    /* A get entry's bytes: its key; the byte cap is for writes only. */
    static const batch_ops ops = {LAPSE_BATCH_GET_MAX, CHUNK_MAX_BYTES, bg_build, bg_done, 0};
    table_schema t;
    arena a;
    int rv;

    if (c == NULL || table == NULL || ((keys == NULL || out == NULL) && n > 0)) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    for (size_t i = 0; i < n; i++) {
        out[i] = NULL;
    }
    if ((rv = client_table(c, table, &t, err)) != 0) {
        return rv;
    }
    if (n == 0) {
        return client_ok(err);
    }
    arena_init(&a);
    int eventual = opts != NULL && opts->eventually_consistent;
    bg_ctx x = {table, calloc(n, sizeof(*x.keys)), out,
                client_hide_expired(c, opts != NULL && opts->hide_expired), eventual};
    batch_entry *e = calloc(n, sizeof(*e));
    if (x.keys == NULL || e == NULL) {
        rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if ((rv = batch_prepare(&t, &a, keys[i], 1, "key", i, &e[i], &x.keys[i], err)) != 0) {
            goto out;
        }
        e[i].tg.eventual = eventual;
    }
    rv = batch_run(c, e, n, &ops, &x, err);
out:
    if (rv != 0) {
        for (size_t i = 0; i < n; i++) {
            lapse_item_free(out[i]);
            out[i] = NULL;
        }
    }
    free(x.keys);
    free(e);
    arena_fini(&a);
    return rv;
}
