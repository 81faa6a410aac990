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
 * the parsed value of an EQUALS condition; the caller frees it with
 * item_value_fini after the call. */
static int cond_to_pb(arena *a, const lapse_condition *cond, Lapse__Condition **out,
                      attr_value *keep, lapse_error *err)
{
    char msg[256] = "";
    int rv;

    *out = NULL;
    if (cond == NULL || cond->kind == LAPSE_COND_NONE) {
        return 0;
    }
    if (cond->attribute == NULL || cond->attribute[0] == '\0') {
        return client_err(err, LAPSE_EINVAL, "condition: no attribute name");
    }
    Lapse__Condition *pc = arena_alloc(a, sizeof *pc);
    if (pc == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    lapse__condition__init(pc);
    pc->attribute = (char *)cond->attribute;
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
    default:
        return client_err(err, LAPSE_EINVAL, "condition: unknown kind %d", (int)cond->kind);
    }
    *out = pc;
    return 0;
}

static int unconditional(const lapse_condition *cond)
{
    return cond == NULL || cond->kind == LAPSE_COND_NONE;
}

/* Resolves table and checks it (the whole item, or only the key), giving the
 * partition. */
static int prepare(lapse_client *c, const char *table, const lapse_item *it, int key_only,
                   table_schema *t, client_target *tg, lapse_error *err)
{
    int rv;
    if (c == NULL || table == NULL || it == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    if ((rv = client_table(c, table, t, err)) != 0) {
        return rv;
    }
    if ((rv = check_item(t, it->it, key_only, err)) != 0) {
        return rv;
    }
    tg->table = table;
    tg->table_id = t->id;
    tg->key = it->it;
    return client_partition_of(t, it->it, &tg->part, err);
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
    table_schema t;
    client_target tg;
    int rv = prepare(c, table, item, key_only != 0, &t, &tg, err);
    return rv != 0 ? rv : client_ok(err);
}

int lapse_put(lapse_client *c, const char *table, const lapse_item *item,
              const lapse_condition *cond, lapse_error *err)
{
    Lapse__PutItemRequest body = LAPSE__PUT_ITEM_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    table_schema t;
    client_target tg;
    attr_value keep;
    arena a;
    int rv;

    if ((rv = prepare(c, table, item, 0, &t, &tg, err)) != 0) {
        return rv;
    }
    arena_init(&a);
    item_value_init_null(&keep);
    body.table = (char *)table;
    if ((body.item = wire_item_to_pb(&a, item->it)) == NULL) {
        rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    if ((rv = cond_to_pb(&a, cond, &body.condition, &keep, err)) != 0) {
        goto out;
    }
    req.body_case = LAPSE__REQUEST__BODY_PUT_ITEM;
    req.put_item = &body;
    rv = client_call_part(c, &tg, &req, unconditional(cond), &resp, err);
out:
    rpc_response_free(resp);
    arena_fini(&a);
    item_value_fini(&keep);
    return rv;
}

int lapse_get(lapse_client *c, const char *table, const lapse_item *key, lapse_item **out,
              lapse_error *err)
{
    Lapse__GetItemRequest body = LAPSE__GET_ITEM_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    table_schema t;
    client_target tg;
    arena a;
    int rv;

    if (out == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    *out = NULL;
    if ((rv = prepare(c, table, key, 1, &t, &tg, err)) != 0) {
        return rv;
    }
    arena_init(&a);
    body.table = (char *)table;
    if ((body.key = wire_item_to_pb(&a, key->it)) == NULL) {
        rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    req.body_case = LAPSE__REQUEST__BODY_GET_ITEM;
    req.get_item = &body;
    if ((rv = client_call_part(c, &tg, &req, 1, &resp, err)) != 0) {
        goto out;
    }
    if (resp->body_case != LAPSE__RESPONSE__BODY_GET_ITEM || resp->get_item == NULL) {
        rv = client_err(err, LAPSE_EPROTO, "get: reply has no get_item body");
        goto out;
    }
    rv = item_from_reply(resp->get_item->item, out, err);
out:
    rpc_response_free(resp);
    arena_fini(&a);
    return rv;
}

int lapse_delete(lapse_client *c, const char *table, const lapse_item *key,
                 const lapse_condition *cond, lapse_error *err)
{
    Lapse__DeleteItemRequest body = LAPSE__DELETE_ITEM_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    table_schema t;
    client_target tg;
    attr_value keep;
    arena a;
    int rv;

    if ((rv = prepare(c, table, key, 1, &t, &tg, err)) != 0) {
        return rv;
    }
    arena_init(&a);
    item_value_init_null(&keep);
    body.table = (char *)table;
    if ((body.key = wire_item_to_pb(&a, key->it)) == NULL) {
        rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    if ((rv = cond_to_pb(&a, cond, &body.condition, &keep, err)) != 0) {
        goto out;
    }
    req.body_case = LAPSE__REQUEST__BODY_DELETE_ITEM;
    req.delete_item = &body;
    rv = client_call_part(c, &tg, &req, unconditional(cond), &resp, err);
out:
    rpc_response_free(resp);
    arena_fini(&a);
    item_value_fini(&keep);
    return rv;
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
    table_schema t;
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
    if ((rv = prepare(c, table, key, 1, &t, &tg, err)) != 0) {
        return rv;
    }
    for (size_t i = 0; i < u->n; i++) {
        if (strcmp(u->v[i].name, t.pk.name) == 0 ||
            (t.sk.name[0] != '\0' && strcmp(u->v[i].name, t.sk.name) == 0)) {
            return client_err(err, LAPSE_EINVAL, "cannot update key attribute \"%s\"",
                              u->v[i].name);
        }
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
    /* Never retried after a timeout: an update may have been applied. */
    if ((rv = client_call_part(c, &tg, &req, 0, &resp, err)) != 0) {
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

typedef struct bw_entry {
    client_target tg;
    size_t bytes;            /* item_size, for chunking */
    Lapse__WriteRequest *pb; /* in the call's arena */
} bw_entry;

typedef struct bw_state {
    lapse_client *c;
    const char *table;
    bw_entry *e;
    size_t *pending, npending; /* entries still to send this round */
    size_t *next, nnext;       /* entries to re-send next round */
    int progressed;            /* some chunk applied something this round */
    lapse_error last;          /* the last retryable failure, for the final error */
} bw_state;

/* Sends one chunk (entries idx[0..n)) to node r. Retryable failures put the
 * chunk back into next; other errors are returned. */
static int bw_send(bw_state *s, const client_route *r, const size_t *idx, size_t n,
                   Lapse__WriteRequest **writes, lapse_error *err)
{
    Lapse__BatchWriteRequest body = LAPSE__BATCH_WRITE_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    rpc_client *rc;
    char msg[256] = "";
    int timeout = client_timeout_ms(s->c);
    int rv;

    if ((rv = client_conn(s->c, r->addr, &rc, err)) != 0) {
        return rv;
    }
    for (size_t i = 0; i < n; i++) {
        writes[i] = s->e[idx[i]].pb;
    }
    body.table = (char *)s->table;
    body.writes = writes;
    body.n_writes = n;
    req.body_case = LAPSE__REQUEST__BODY_BATCH_WRITE;
    req.batch_write = &body;
    req.pmap_version = r->pmap_version;
    rv = rpc_call(rc, &req, timeout, &resp, msg, sizeof msg);
    if (rv == 0) {
        if (resp->body_case != LAPSE__RESPONSE__BODY_BATCH_WRITE || resp->batch_write == NULL) {
            rpc_response_free(resp);
            return client_err(err, LAPSE_EPROTO, "node %u (%s): reply has no batch_write body",
                              (unsigned)r->node_id, r->addr);
        }
        const Lapse__BatchWriteResponse *bw = resp->batch_write;
        for (size_t i = 0; i < bw->n_unprocessed; i++) {
            if (bw->unprocessed[i] < n) {
                s->next[s->nnext++] = idx[bw->unprocessed[i]];
            }
        }
        if (bw->n_unprocessed < n) {
            s->progressed = 1;
        } else {
            client_err(&s->last, LAPSE_EWRONGNODE, "node %u (%s): %zu writes unprocessed",
                       (unsigned)r->node_id, r->addr, n);
        }
        rpc_response_free(resp);
        return 0;
    }
    rpc_response_free(resp);
    if (rv == LAPSE_EWRONGNODE || rv == LAPSE_ETIMEDOUT || rv == LAPSE_EUNAVAILABLE) {
        client_node_err(&s->last, rv, r, msg, timeout);
        memcpy(s->next + s->nnext, idx, n * sizeof *idx);
        s->nnext += n;
        return 0;
    }
    return client_node_err(err, rv, r, msg, timeout);
}

/* One round: routes every pending entry with the current map and sends them
 * grouped by owner node, in chunks of LAPSE_BATCH_MAX / CHUNK_MAX_BYTES. */
static int bw_round(bw_state *s, lapse_error *err)
{
    client_route *routes = malloc(s->npending * sizeof *routes);
    size_t *chunk = malloc(s->npending * sizeof *chunk);
    Lapse__WriteRequest **writes = malloc(s->npending * sizeof *writes);
    char *done = calloc(s->npending, 1);
    int rv = 0;

    if (routes == NULL || chunk == NULL || writes == NULL || done == NULL) {
        rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < s->npending; i++) {
        rv = client_route_of(s->c, &s->e[s->pending[i]].tg, &routes[i], err);
        if (rv != 0) {
            goto out;
        }
    }
    /* Each outer step takes the first unsent entry's node and sends every
     * entry of that node; few nodes, so the quadratic walk is short. */
    for (size_t first = 0; first < s->npending; first++) {
        if (done[first]) {
            continue;
        }
        uint32_t node = routes[first].node_id;
        size_t n = 0, bytes = 0;
        for (size_t i = first; i < s->npending; i++) {
            if (done[i] || routes[i].node_id != node) {
                continue;
            }
            size_t b = s->e[s->pending[i]].bytes;
            if (n > 0 && (n == LAPSE_BATCH_MAX || bytes + b > CHUNK_MAX_BYTES)) {
                if ((rv = bw_send(s, &routes[first], chunk, n, writes, err)) != 0) {
                    goto out;
                }
                n = 0;
                bytes = 0;
            }
            chunk[n++] = s->pending[i];
            bytes += b;
            done[i] = 1;
        }
        if ((rv = bw_send(s, &routes[first], chunk, n, writes, err)) != 0) {
            goto out;
        }
    }
out:
    free(routes);
    free(chunk);
    free(writes);
    free(done);
    return rv;
}

/* Validates and converts one write. */
static int bw_prepare(const table_schema *t, arena *a, const lapse_item *it, int is_put,
                      size_t i, bw_entry *e, lapse_error *err)
{
    const char *what = is_put ? "put" : "delete";
    int rv;
    if (it == NULL) {
        return client_err(err, LAPSE_EINVAL, "%s %zu: NULL item", what, i);
    }
    if ((rv = check_item(t, it->it, !is_put, err)) != 0 ||
        (rv = client_partition_of(t, it->it, &e->tg.part, err)) != 0) {
        char detail[sizeof err->message];
        snprintf(detail, sizeof detail, "%s", err != NULL ? err->message : "");
        return client_err(err, rv, "%s %zu: %s", what, i, detail);
    }
    e->tg.table = t->name;
    e->tg.table_id = t->id;
    e->tg.key = it->it;
    e->bytes = item_size(it->it);
    e->pb = arena_alloc(a, sizeof *e->pb);
    Lapse__Item *pi = wire_item_to_pb(a, it->it);
    if (e->pb == NULL || pi == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    lapse__write_request__init(e->pb);
    if (is_put) {
        e->pb->put = pi;
    } else {
        e->pb->delete_key = pi;
    }
    return 0;
}

int lapse_batch_write(lapse_client *c, const char *table, lapse_item *const *puts, size_t nputs,
                      lapse_item *const *delete_keys, size_t ndeletes, lapse_error *err)
{
    table_schema t;
    bw_state s;
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
    memset(&s, 0, sizeof s);
    s.c = c;
    s.table = table;
    arena_init(&a);
    s.e = calloc(total, sizeof *s.e);
    s.pending = malloc(total * sizeof *s.pending);
    s.next = malloc(total * sizeof *s.next);
    if (s.e == NULL || s.pending == NULL || s.next == NULL) {
        rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    /* Validate everything before sending anything. */
    for (size_t i = 0; i < total; i++) {
        int is_put = i < nputs;
        const lapse_item *it = is_put ? puts[i] : delete_keys[i - nputs];
        if ((rv = bw_prepare(&t, &a, it, is_put, is_put ? i : i - nputs, &s.e[i], err)) != 0) {
            goto out;
        }
        s.pending[i] = i;
    }
    s.npending = total;

    int timeout = client_timeout_ms(c);
    clock_mono deadline = clock_mono_after_ms(timeout);
    int64_t backoff = CLIENT_BACKOFF_MIN_MS;
    for (;;) {
        s.nnext = 0;
        s.progressed = 0;
        if ((rv = bw_round(&s, err)) != 0) {
            goto out;
        }
        if (s.nnext == 0) {
            break;
        }
        if (s.progressed) {
            /* The deadline bounds a stall, not a long batch. */
            deadline = clock_mono_after_ms(timeout);
        }
        if (clock_mono_remaining_ms(deadline) <= 0) {
            rv = client_err(err, s.last.code ? s.last.code : LAPSE_ETIMEDOUT,
                            "%zu of %zu writes not applied: %s", s.nnext, total, s.last.message);
            goto out;
        }
        client_backoff(&backoff, deadline);
        client_refresh(c, timeout, NULL);
        size_t *tmp = s.pending;
        s.pending = s.next;
        s.next = tmp;
        s.npending = s.nnext;
    }
    rv = client_ok(err);
out:
    free(s.e);
    free(s.pending);
    free(s.next);
    arena_fini(&a);
    return rv;
}
