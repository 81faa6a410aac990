/*
 * ddb_items.c: PutItem, GetItem, DeleteItem and UpdateItem. GetItem is
 * eventually consistent unless ConsistentRead is true, as in DynamoDB: any
 * in-sync copy of the partition may answer (lapse_read_opts). Conditions and updates go through
 * ddb_write_run (ddb_expr.h), which says what is atomic.
 */
#include "ddb_items.h"

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

/* The table and the Key (or Item) of a request, the key checked against the
 * table's schema so a wrong key is a ValidationException, not a lookup. */
static int table_and_item(ddb_ctx *x, json_t *req, const char *member, int key_only,
                          const char **table, lapse_item **out)
{
    json_t *obj;
    lapse_error err;
    *out = NULL;
    if (ddb_req_string(x, req, "TableName", 1, table) != 0 ||
        ddb_req_object(x, req, member, 1, &obj) != 0 || ddb_req_item(x, obj, member, out) != 0) {
        return -1;
    }
    if (lapse_check_item(x->c, *table, *out, key_only, &err) != 0) {
        lapse_item_free(*out);
        *out = NULL;
        if (err.code == LAPSE_EINVAL && key_only) {
            return ddb_req_fail(x, 400, "ValidationException",
                                "The provided key element does not match the schema (%s)",
                                err.message);
        }
        return ddb_req_lapse_fail(x, &err, *table);
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

/* PutItem and DeleteItem: the same but for the item. */
static int put_or_delete(ddb_ctx *x, json_t *req, ddb_write_kind kind)
{
    static const char *const allowed[] = {"NONE", "ALL_OLD", NULL};
    const char *op = kind == DDB_PUT ? "PutItem" : "DeleteItem", *table, *rvals;
    lapse_item *it = NULL, *key = NULL;
    expr_ctx e;
    expr_node *cond;
    int rv = -1, old_on_failure;
    if (ddb_expr_init(x, req, &e) != 0 || return_values(x, req, op, allowed, &rvals) != 0 ||
        on_failure(x, req, &old_on_failure) != 0 ||
        ddb_expr_condition(x, &e, req, "ConditionExpression", &cond) != 0 ||
        ddb_expr_done(x, &e) != 0 ||
        table_and_item(x, req, kind == DDB_PUT ? "Item" : "Key", kind == DDB_DELETE, &table, &it) !=
            0) {
        goto out;
    }
    const int want_old = strcmp(rvals, "ALL_OLD") == 0;
    if (kind == DDB_PUT && (cond != NULL || want_old || old_on_failure) &&
        ddb_expr_key_of(x, table, it, &key) != 0) {
        goto out;
    }
    ddb_write w = {.kind = kind,
                   .table = table,
                   .key = kind == DDB_PUT ? key : it,
                   .item = it,
                   .cond = cond,
                   .want_old = want_old,
                   .old_on_failure = old_on_failure};
    if (ddb_write_run(x, &e, &w) == 0) {
        x->out = json_object();
        if (w.old_item != NULL) {
            json_object_set_new(x->out, "Attributes", w.old_item);
        }
        rv = 0;
    }
out:
    lapse_item_free(it);
    lapse_item_free(key);
    expr_ctx_fini(&e);
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

int ddb_items_get(ddb_ctx *x, json_t *req)
{
    const char *table;
    lapse_item *key = NULL, *it = NULL;
    lapse_error err;
    expr_ctx e;
    expr_node *proj;
    int consistent = 0, rv = -1;
    if (ddb_expr_init(x, req, &e) != 0 ||
        ddb_req_bool(x, req, "ConsistentRead", 0, &consistent) != 0 ||
        ddb_expr_projection(x, &e, req, &proj) != 0 || ddb_expr_done(x, &e) != 0 ||
        table_and_item(x, req, "Key", 1, &table, &key) != 0) {
        goto out;
    }
    lapse_read_opts ro = {.eventually_consistent = !consistent};
    if (lapse_get_opts(x->c, table, key, &ro, &it, &err) != 0) {
        ddb_req_lapse_fail(x, &err, table);
        goto out;
    }
    x->out = json_object();
    if (it != NULL) {
        json_t *doc = ddb_req_item_json(x, it);
        if (doc == NULL) {
            json_decref(x->out);
            x->out = NULL;
            goto out;
        }
        if (proj != NULL) {
            json_t *p = expr_project(proj, doc);
            json_decref(doc);
            doc = p;
        }
        json_object_set_new(x->out, "Item", doc);
    }
    rv = 0;
out:
    lapse_item_free(key);
    lapse_item_free(it);
    expr_ctx_fini(&e);
    return rv;
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
