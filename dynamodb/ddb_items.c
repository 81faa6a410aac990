/*
 * ddb_items.c: PutItem, GetItem, DeleteItem and UpdateItem. GetItem is
 * eventually consistent unless ConsistentRead is true, as in DynamoDB: any
 * in-sync copy of the partition may answer (lapse_read_opts). Conditions and updates go through
 * ddb_write_run (ddb_expr.h), which says what is atomic.
 */
#include "ddb_items.h"

#include <stdlib.h>
#include <string.h>

#include "ddb_expr.h"

/* ReturnValues: *out is the value (NONE when absent); anything outside
 * allowed (a NULL-terminated list) is refused, saying why. */
static int return_values(ddb_ctx *x, json_t *req, const char *op, const char *const *allowed,
                         const char **out)
{
    static const char *const known[] = {"NONE",    "ALL_OLD",     "UPDATED_OLD",
                                        "ALL_NEW", "UPDATED_NEW", NULL};
    const char *rv;
    *out = "NONE";
    if (ddb_req_string(x, req, "ReturnValues", 0, &rv) != 0) {
        return -1;
    }
    if (rv == NULL) {
        return 0;
    }
    int ok = 0;
    for (size_t i = 0; known[i] != NULL; i++) {
        ok = ok || strcmp(known[i], rv) == 0;
    }
    if (!ok) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "1 validation error detected: Value '%.50s' at 'returnValues' failed "
                            "to satisfy constraint: Member must satisfy enum value set: [NONE, "
                            "ALL_OLD, UPDATED_OLD, ALL_NEW, UPDATED_NEW]",
                            rv);
    }
    for (size_t i = 0; allowed[i] != NULL; i++) {
        if (strcmp(allowed[i], rv) == 0) {
            *out = rv;
            return 0;
        }
    }
    return ddb_req_fail(x, 400, "ValidationException", "ReturnValues %s is not valid for %s", rv,
                        op);
}

/* The table and the Key (or Item) of a request, parsed but not yet checked
 * against the table's schema (item_check). */
static int table_and_item_parse(ddb_ctx *x, json_t *req, const char *member, const char **table,
                                lapse_item **out)
{
    json_t *obj;
    *out = NULL;
    if (ddb_req_string(x, req, "TableName", 1, table) != 0 ||
        ddb_req_object(x, req, member, 1, &obj) != 0 || ddb_req_item(x, obj, member, out) != 0) {
        return -1;
    }
    return 0;
}

/* Checks it (a key when key_only) against table's schema, so a wrong key is
 * a ValidationException, not a lookup. */
static int item_check(ddb_ctx *x, const char *table, const lapse_item *it, int key_only)
{
    lapse_error err;
    if (lapse_check_item(x->c, table, it, key_only, &err) != 0) {
        if (err.code == LAPSE_EINVAL && key_only) {
            return ddb_req_fail(x, 400, "ValidationException",
                                "The provided key element does not match the schema (%s)",
                                err.message);
        }
        return ddb_req_lapse_fail(x, &err, table);
    }
    return 0;
}

/* table_and_item_parse, then item_check (*out NULL on failure). */
static int table_and_item(ddb_ctx *x, json_t *req, const char *member, int key_only,
                          const char **table, lapse_item **out)
{
    if (table_and_item_parse(x, req, member, table, out) != 0 ||
        item_check(x, *table, *out, key_only) != 0) {
        lapse_item_free(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

/* ReturnValuesOnConditionCheckFailure: *all_old is 1 for ALL_OLD (the item
 * a false condition was evaluated on goes in the error), 0 for NONE or
 * absent. */
static int on_failure(ddb_ctx *x, json_t *req, int *all_old)
{
    const char *v;
    *all_old = 0;
    if (ddb_req_string(x, req, "ReturnValuesOnConditionCheckFailure", 0, &v) != 0) {
        return -1;
    }
    if (v != NULL && strcmp(v, "NONE") != 0 && strcmp(v, "ALL_OLD") != 0) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "1 validation error detected: Value '%.20s' at "
                            "'returnValuesOnConditionCheckFailure' failed to satisfy constraint: "
                            "Member must satisfy enum value set: [ALL_OLD, NONE]",
                            v);
    }
    *all_old = v != NULL && strcmp(v, "ALL_OLD") == 0;
    return 0;
}

/* A PutItem or DeleteItem request read (not yet checked against the
 * schema). Parts borrow from the request. */
typedef struct write_plan {
    const char *table;
    lapse_item *it; /* the item (PutItem) or the key (DeleteItem) */
    expr_ctx e;
    expr_node *cond;
    const char *rvals;
    int old_on_failure;
} write_plan;

static int write_parse(ddb_ctx *x, json_t *req, ddb_write_kind kind, write_plan *p)
{
    static const char *const allowed[] = {"NONE", "ALL_OLD", NULL};
    const char *op = kind == DDB_PUT ? "PutItem" : "DeleteItem";
    memset(p, 0, sizeof *p);
    if (ddb_expr_init(x, req, &p->e) != 0 || return_values(x, req, op, allowed, &p->rvals) != 0 ||
        on_failure(x, req, &p->old_on_failure) != 0 ||
        ddb_expr_condition(x, &p->e, req, "ConditionExpression", &p->cond) != 0 ||
        ddb_expr_done(x, &p->e) != 0 ||
        table_and_item_parse(x, req, kind == DDB_PUT ? "Item" : "Key", &p->table, &p->it) != 0) {
        return -1;
    }
    return 0;
}

static void write_plan_fini(write_plan *p)
{
    lapse_item_free(p->it);
    expr_ctx_fini(&p->e);
}

/* PutItem and DeleteItem: the same but for the item. */
static int put_or_delete(ddb_ctx *x, json_t *req, ddb_write_kind kind)
{
    write_plan p;
    lapse_item *key = NULL;
    int rv = -1;
    if (write_parse(x, req, kind, &p) != 0 ||
        item_check(x, p.table, p.it, kind == DDB_DELETE) != 0) {
        goto out;
    }
    const int want_old = strcmp(p.rvals, "ALL_OLD") == 0;
    if (kind == DDB_PUT && (p.cond != NULL || want_old || p.old_on_failure) &&
        ddb_expr_key_of(x, p.table, p.it, &key) != 0) {
        goto out;
    }
    ddb_write w = {.kind = kind,
                   .table = p.table,
                   .key = kind == DDB_PUT ? key : p.it,
                   .item = p.it,
                   .cond = p.cond,
                   .want_old = want_old,
                   .old_on_failure = p.old_on_failure};
    if (ddb_write_run(x, &p.e, &w) == 0) {
        x->out = json_object();
        if (w.old_item != NULL) {
            json_object_set_new(x->out, "Attributes", w.old_item);
        }
        rv = 0;
    }
out:
    lapse_item_free(key);
    write_plan_fini(&p);
    return rv;
}

int ddb_items_put(ddb_ctx *x, json_t *req)
{
    return put_or_delete(x, req, DDB_PUT);
}

int ddb_items_delete(ddb_ctx *x, json_t *req)
{
    return put_or_delete(x, req, DDB_DELETE);
}

/* A GetItem request read (not yet checked against the schema): what the
 * call and its answer need. Parts borrow from the request. */
typedef struct get_plan {
    const char *table;
    lapse_item *key;
    expr_ctx e;
    expr_node *proj; /* NULL: the whole item */
    int consistent;
} get_plan;

static int get_parse(ddb_ctx *x, json_t *req, get_plan *g)
{
    memset(g, 0, sizeof *g);
    if (ddb_expr_init(x, req, &g->e) != 0 ||
        ddb_req_bool(x, req, "ConsistentRead", 0, &g->consistent) != 0 ||
        ddb_expr_projection(x, &g->e, req, &g->proj) != 0 || ddb_expr_done(x, &g->e) != 0 ||
        table_and_item_parse(x, req, "Key", &g->table, &g->key) != 0) {
        return -1;
    }
    return 0;
}

/* GetItem's answer for it (NULL: no item) into x->out, or into x->out_text
 * when the whole item is asked for: liblapse's DynamoDB JSON of it goes out
 * as it is, not parsed into a document to be dumped again. */
static int get_answer(ddb_ctx *x, const get_plan *g, const lapse_item *it)
{
    if (it != NULL && g->proj == NULL) {
        static const char head[] = "{\"Item\":";
        char *item = lapse_item_to_json(it);
        size_t n = item != NULL ? strlen(item) : 0;
        if (item != NULL && (x->out_text = malloc(sizeof head - 1 + n + 2)) != NULL) {
            memcpy(x->out_text, head, sizeof head - 1);
            memcpy(x->out_text + sizeof head - 1, item, n);
            memcpy(x->out_text + sizeof head - 1 + n, "}", 2);
        }
        lapse_free(item);
        return x->out_text != NULL
                   ? 0
                   : ddb_req_fail(x, 500, "InternalServerError", "cannot format the item");
    }
    x->out = json_object();
    if (it != NULL) {
        json_t *doc = ddb_req_item_json(x, it);
        if (doc == NULL) {
            json_decref(x->out);
            x->out = NULL;
            return -1;
        }
        json_t *p = expr_project(g->proj, doc);
        json_decref(doc);
        json_object_set_new(x->out, "Item", p);
    }
    return 0;
}

static void get_plan_fini(get_plan *g)
{
    lapse_item_free(g->key);
    expr_ctx_fini(&g->e);
}

int ddb_items_get(ddb_ctx *x, json_t *req)
{
    get_plan g;
    lapse_item *it = NULL;
    lapse_error err;
    int rv = -1;
    if (get_parse(x, req, &g) == 0 && item_check(x, g.table, g.key, 1) == 0) {
        lapse_read_opts ro = {.eventually_consistent = !g.consistent};
        if (lapse_get_opts(x->c, g.table, g.key, &ro, &it, &err) != 0) {
            ddb_req_lapse_fail(x, &err, g.table);
        } else {
            rv = get_answer(x, &g, it);
        }
    }
    lapse_item_free(it);
    get_plan_fini(&g);
    return rv;
}

/* ---- GetItem, PutItem and DeleteItem without blocking (ddb_items_start) ---- */

/* One started call: the request it reads from is held until done. */
typedef struct started {
    ddb_ctx *x;
    json_t *req;
    int is_write; /* PutItem or DeleteItem (w), else GetItem (g) */
    get_plan g;
    write_plan w;
    ddb_items_done done;
    void *arg;
} started;

static void started_free(started *s)
{
    if (s->is_write) {
        write_plan_fini(&s->w);
    } else {
        get_plan_fini(&s->g);
    }
    json_decref(s->req);
    free(s);
}

static void started_end(started *s, int retry)
{
    ddb_items_done done = s->done;
    void *arg = s->arg;
    ddb_ctx *x = s->x;
    started_free(s);
    done(arg, x, retry);
}

/* The outcome of the call (status, err) into s->x; 1 when the blocking
 * operation is to run instead (a failure it retries). */
static int started_outcome(started *s, int status, const lapse_error *err)
{
    if (status == 0) {
        return 0;
    }
    if (lapse_retryable(status)) {
        return 1;
    }
    ddb_req_lapse_fail(s->x, err, s->is_write ? s->w.table : s->g.table);
    return 0;
}

static void started_get_done(void *arg, int status, lapse_item *it, const lapse_error *err)
{
    started *s = arg;
    int retry = started_outcome(s, status, err);
    if (status == 0 && get_answer(s->x, &s->g, it) != 0 && !ddb_req_answered(s->x)) {
        ddb_req_fail(s->x, 500, "InternalServerError", "out of memory");
    }
    lapse_item_free(it);
    started_end(s, retry);
}

static void started_write_done(void *arg, int status, const lapse_error *err)
{
    started *s = arg;
    int retry = started_outcome(s, status, err);
    if (status == 0 && (s->x->out = json_object()) == NULL) {
        ddb_req_fail(s->x, 500, "InternalServerError", "out of memory");
    }
    started_end(s, retry);
}

/* Starts s's PutItem or DeleteItem (kind) when it is one call: no
 * condition and no old item wanted (the rest may read first). */
static int start_write(started *s, ddb_write_kind kind, json_t *req)
{
    lapse_error err;
    ddb_ctx *x = s->x;
    if (write_parse(x, req, kind, &s->w) != 0 || s->w.cond != NULL ||
        strcmp(s->w.rvals, "NONE") != 0 || s->w.old_on_failure) {
        return 0;
    }
    return (kind == DDB_PUT
                ? lapse_put_async(x->c, s->w.table, s->w.it, started_write_done, s, &err)
                : lapse_delete_async(x->c, s->w.table, s->w.it, started_write_done, s, &err)) == 0;
}

int ddb_items_start(ddb_ctx *x, const char *op, json_t *req, ddb_items_done done, void *arg)
{
    const int is_put = strcmp(op, "PutItem") == 0, is_delete = strcmp(op, "DeleteItem") == 0;
    if (!is_put && !is_delete && strcmp(op, "GetItem") != 0) {
        return 0;
    }
    started *s = calloc(1, sizeof *s);
    if (s == NULL) {
        return 0;
    }
    *s = (started){
        .x = x, .req = json_incref(req), .is_write = is_put || is_delete, .done = done, .arg = arg};
    lapse_error err;
    int sent;
    if (s->is_write) {
        sent = start_write(s, is_put ? DDB_PUT : DDB_DELETE, req);
    } else {
        sent = get_parse(x, req, &s->g) == 0 &&
               lapse_get_async(x->c, s->g.table, s->g.key,
                               &(lapse_read_opts){.eventually_consistent = !s->g.consistent},
                               started_get_done, s, &err) == 0;
    }
    if (!sent) {
        started_free(s);
    }
    return sent;
}

/* The top-level attributes of item that actions name (UPDATED_OLD and
 * UPDATED_NEW; DynamoDB returns only the nested part of a nested path):
 * removed ones too when with_removed. */
static json_t *updated_attrs(const expr_action *actions, json_t *item, int with_removed)
{
    json_t *attrs = json_object();
    for (const expr_action *a = actions; a != NULL; a = a->next) {
        json_t *v = json_object_get(item, a->path->path->name);
        if ((with_removed || a->kind != EXPR_REMOVE) && v != NULL) {
            json_object_set(attrs, a->path->path->name, v);
        }
    }
    return attrs;
}

int ddb_items_update(ddb_ctx *x, json_t *req)
{
    static const char *const allowed[] = {"NONE",    "ALL_OLD",     "UPDATED_OLD",
                                          "ALL_NEW", "UPDATED_NEW", NULL};
    const char *table, *rvals;
    lapse_item *key = NULL;
    expr_ctx e;
    expr_node *cond;
    expr_action *actions;
    int rv = -1, old_on_failure;
    if (ddb_expr_init(x, req, &e) != 0 ||
        return_values(x, req, "UpdateItem", allowed, &rvals) != 0 ||
        on_failure(x, req, &old_on_failure) != 0 || ddb_expr_update(x, &e, req, &actions) != 0 ||
        ddb_expr_condition(x, &e, req, "ConditionExpression", &cond) != 0 ||
        ddb_expr_done(x, &e) != 0 || table_and_item(x, req, "Key", 1, &table, &key) != 0) {
        goto out;
    }
    if (actions == NULL) {
        ddb_req_fail(x, 400, "ValidationException",
                     "UpdateItem: an UpdateExpression or AttributeUpdates is required by Lapse "
                     "(an update with no actions is not served)");
        goto out;
    }
    const int old = strstr(rvals, "OLD") != NULL;
    ddb_write w = {.kind = DDB_UPDATE,
                   .table = table,
                   .key = key,
                   .cond = cond,
                   .update = actions,
                   .want_new = strstr(rvals, "NEW") != NULL,
                   .want_old = old,
                   .old_on_failure = old_on_failure};
    if (ddb_write_run(x, &e, &w) != 0) {
        goto out;
    }
    x->out = json_object();
    json_t *from = old ? w.old_item : w.new_item, *attrs = NULL;
    if (from != NULL) {
        /* ALL_*: the whole item; UPDATED_*: the top-level attributes the
         * actions named (the new ones: those SET, ADD and DELETE wrote). */
        attrs =
            strncmp(rvals, "ALL_", 4) == 0 ? json_incref(from) : updated_attrs(actions, from, old);
        json_object_set_new(x->out, "Attributes", attrs);
    }
    json_decref(w.old_item);
    json_decref(w.new_item);
    rv = 0;
out:
    lapse_item_free(key);
    expr_ctx_fini(&e);
    return rv;
}
