/*
 * ddb_expr.c: expressions in requests, and the conditional write engine
 * (ddb_expr.h). Lapse's node checks one Condition per write under the
 * partition lock: attribute_exists(a), attribute_not_exists(a) or a = v on
 * a top-level attribute. A DynamoDB condition of exactly that shape, with an
 * update that needs nothing from the item, is sent as is. Anything else is
 * read, evaluated here, and written with a guard the node checks: the one
 * attribute the evaluation depended on still has the value read (or the
 * item is still absent). When the evaluation depended on more than that,
 * no guard can make it atomic and the request is refused.
 */
#include "ddb_expr.h"

#include <stdlib.h>
#include <string.h>

int ddb_expr_init(ddb_ctx *x, json_t *req, expr_ctx *e)
{
    json_t *names = NULL, *values = NULL;
    const char *k;
    json_t *v;
    expr_ctx_init(e, NULL, NULL);
    if (ddb_req_object(x, req, "ExpressionAttributeNames", 0, &names) != 0 ||
        ddb_req_object(x, req, "ExpressionAttributeValues", 0, &values) != 0) {
        return -1;
    }
    json_object_foreach(names, k, v)
    {
        if (!json_is_string(v)) {
            return ddb_req_fail(x, 400, "SerializationException",
                                "ExpressionAttributeNames: %.100s must map to a string", k);
        }
        if (k[0] != '#') {
            return ddb_req_fail(x, 400, "ValidationException",
                                "ExpressionAttributeNames contains invalid key: Syntax error; "
                                "key: \"%.100s\"",
                                k);
        }
    }
    json_object_foreach(values, k, v)
    {
        if (!json_is_object(v) || json_object_size(v) != 1) {
            return ddb_req_fail(x, 400, "ValidationException",
                                "ExpressionAttributeValues contains invalid value: Supplied "
                                "AttributeValue must have exactly one data type for key %.100s",
                                k);
        }
        char why[200];
        if (expr_value_check(v, why, sizeof why) != 0) {
            return ddb_req_fail(x, 400, "ValidationException",
                                "ExpressionAttributeValues contains invalid value: %s for key "
                                "%.100s",
                                why, k);
        }
        if (k[0] != ':') {
            return ddb_req_fail(x, 400, "ValidationException",
                                "ExpressionAttributeValues contains invalid key: Syntax error; "
                                "key: \"%.100s\"",
                                k);
        }
    }
    e->names = names;
    e->values = values;
    return 0;
}

static int parsed(ddb_ctx *x, expr_ctx *e, int rv)
{
    return rv == 0 ? 0 : ddb_req_fail(x, 400, "ValidationException", "%s", e->err);
}

int ddb_expr_condition(ddb_ctx *x, expr_ctx *e, json_t *req, const char *member, expr_node **out)
{
    const char *text;
    *out = NULL;
    if (ddb_req_string(x, req, member, 0, &text) != 0) {
        return -1;
    }
    if (text == NULL) {
        return 0;
    }
    json_t *s = json_object_get(req, member);
    return parsed(x, e, expr_parse_condition(e, member, text, json_string_length(s), out));
}

int ddb_expr_update(ddb_ctx *x, expr_ctx *e, json_t *req, expr_action **out)
{
    const char *text;
    *out = NULL;
    if (ddb_req_string(x, req, "UpdateExpression", 0, &text) != 0) {
        return -1;
    }
    if (text == NULL) {
        return 0;
    }
    json_t *s = json_object_get(req, "UpdateExpression");
    return parsed(x, e, expr_parse_update(e, text, json_string_length(s), out));
}

int ddb_expr_projection(ddb_ctx *x, expr_ctx *e, json_t *req, expr_node **out)
{
    const char *text;
    *out = NULL;
    if (ddb_req_string(x, req, "ProjectionExpression", 0, &text) != 0) {
        return -1;
    }
    if (text == NULL) {
        return 0;
    }
    json_t *s = json_object_get(req, "ProjectionExpression");
    return parsed(x, e, expr_parse_projection(e, text, json_string_length(s), out));
}

int ddb_expr_done(ddb_ctx *x, expr_ctx *e)
{
    return parsed(x, e, expr_check_unused(e));
}

int ddb_expr_key_of(ddb_ctx *x, const char *table, const lapse_item *item, lapse_item **out)
{
    char pk[LAPSE_KEY_NAME_MAX + 1], sk[LAPSE_KEY_NAME_MAX + 1];
    lapse_error err;
    *out = NULL;
    if (lapse_key_schema(x->c, table, NULL, pk, sk, NULL, &err) != 0) {
        return ddb_req_lapse_fail(x, &err, table);
    }
    lapse_item *key = lapse_item_new();
    const char *names[2] = {pk, sk};
    for (int i = 0; key != NULL && i < 2; i++) {
        char *v = names[i][0] ? lapse_item_get_json(item, names[i]) : NULL;
        if (v != NULL && lapse_item_set_json(key, names[i], v, &err) != 0) {
            lapse_free(v);
            lapse_item_free(key);
            return ddb_req_lapse_fail(x, &err, table);
        }
        lapse_free(v);
    }
    if (key == NULL) {
        return ddb_req_fail(x, 500, "InternalServerError", "out of memory");
    }
    *out = key;
    return 0;
}

/* ---- what an expression reads ---- */

/* Adds the top-level attribute of every path under n to reads. */
static void node_reads(const expr_node *n, json_t *reads)
{
    /* next links argument and IN lists; walking a sibling twice is harmless. */
    for (; n != NULL; n = n->next) {
        if (n->kind == EXPR_PATH) {
            json_object_set_new(reads, n->path->name, json_true());
        }
        node_reads(n->a, reads);
        node_reads(n->b, reads);
        node_reads(n->c, reads);
    }
}

void ddb_expr_reads(const expr_node *c, json_t *reads)
{
    if (c != NULL) {
        /* A condition tree has no next links at its root. */
        expr_node copy = *c;
        copy.next = NULL;
        node_reads(&copy, reads);
    }
}

/* What an update reads from the item: the values on the right of SET, the
 * targets of ADD and DELETE, and the top-level attribute around a nested
 * path (rewritten whole). */
static void update_reads(const expr_action *a, json_t *reads)
{
    for (; a != NULL; a = a->next) {
        if (a->kind == EXPR_SET) {
            expr_node v = *a->value;
            v.next = NULL;
            node_reads(&v, reads);
        }
        if (a->path->path->next != NULL || a->kind == EXPR_ADD || a->kind == EXPR_DELETE) {
            json_object_set_new(reads, a->path->path->name, json_true());
        }
    }
}

/* Maps c onto Lapse's one Condition when it has exactly that shape. */
static int simple_condition(const expr_node *c, lapse_condition *lc, char **value_json)
{
    *value_json = NULL;
    if (c->kind == EXPR_FUNC && c->a->kind == EXPR_PATH && c->a->path->next == NULL &&
        (c->op == EXPR_FN_ATTRIBUTE_EXISTS || c->op == EXPR_FN_ATTRIBUTE_NOT_EXISTS)) {
        lc->kind = c->op == EXPR_FN_ATTRIBUTE_EXISTS ? LAPSE_COND_EXISTS : LAPSE_COND_NOT_EXISTS;
        lc->attribute = c->a->path->name;
        lc->value_json = NULL;
        return 1;
    }
    if (c->kind == EXPR_CMP && c->op == EXPR_EQ) {
        const expr_node *p = c->a->kind == EXPR_PATH ? c->a : c->b;
        const expr_node *v = c->a->kind == EXPR_PATH ? c->b : c->a;
        if (p->kind == EXPR_PATH && p->path->next == NULL && v->kind == EXPR_VALUE) {
            const char *t = json_object_iter_key(json_object_iter(v->value));
            if (t == NULL || (strcmp(t, "S") && strcmp(t, "N") && strcmp(t, "B"))) {
                return 0; /* the node compares scalars; others go the general way */
            }
            *value_json = json_dumps(v->value, JSON_COMPACT);
            lc->kind = LAPSE_COND_EQUALS;
            lc->attribute = p->path->name;
            lc->value_json = *value_json;
            return *value_json != NULL;
        }
    }
    return 0;
}

/* ---- the write ---- */

static int key_has(const lapse_item *key, const char *name)
{
    for (size_t i = 0; i < lapse_item_count(key); i++) {
        if (strcmp(lapse_item_name(key, i), name) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Fills err for an allocation that failed here, not in liblapse (whose
 * calls fill it themselves). Returns LAPSE_ENOMEM. */
static int out_of_memory(lapse_error *err)
{
    err->code = LAPSE_ENOMEM;
    snprintf(err->message, sizeof err->message, "out of memory");
    return LAPSE_ENOMEM;
}

/* Sends the update that turns old into new (top-level differences).
 * Returns 0 or a Lapse code with err filled, as liblapse's calls do (the
 * caller answers from err). */
static int send_update(ddb_ctx *x, ddb_write *w, json_t *old, json_t *new_item,
                       const lapse_condition *guard, lapse_error *err)
{
    lapse_update *u = lapse_update_new();
    const char *k;
    json_t *v;
    size_t n = 0;
    int rv = 0;
    if (u == NULL) {
        return out_of_memory(err);
    }
    json_object_foreach(new_item, k, v)
    {
        if (key_has(w->key, k) || (old != NULL && json_equal(json_object_get(old, k), v))) {
            continue;
        }
        char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        rv = text != NULL ? lapse_update_set(u, k, text, err) : out_of_memory(err);
        free(text);
        n++;
        if (rv != 0) {
            lapse_update_free(u);
            return rv;
        }
    }
    json_object_foreach(old, k, v)
    {
        if (json_object_get(new_item, k) == NULL) {
            if ((rv = lapse_update_remove(u, k)) != 0) {
                lapse_update_free(u);
                err->code = rv;
                snprintf(err->message, sizeof err->message, "cannot remove attribute \"%s\"", k);
                return rv;
            }
            n++;
        }
    }
    lapse_item *after = NULL;
    if (n == 0 && old == NULL) {
        /* Only removals on an absent item: DynamoDB still creates it. */
        rv = lapse_put(x->c, w->table, w->key, guard, err);
    } else if (n > 0) {
        rv = lapse_update_item(x->c, w->table, w->key, u, guard, w->want_new ? &after : NULL, err);
    }
    lapse_update_free(u);
    if (rv == 0 && w->want_new) {
        w->new_item = after != NULL ? ddb_req_item_json(x, after) : json_deep_copy(new_item);
        lapse_item_free(after);
    }
    return rv;
}

/* The direct path: no read, the node checks the (simple) condition. */
static int direct(ddb_ctx *x, ddb_write *w, const lapse_condition *lc, lapse_error *err)
{
    if (w->kind == DDB_PUT) {
        return lapse_put(x->c, w->table, w->item, lc, err);
    }
    if (w->kind == DDB_DELETE) {
        return lapse_delete(x->c, w->table, w->key, lc, err);
    }
    lapse_update *u = lapse_update_new();
    int rv = u == NULL ? LAPSE_ENOMEM : 0;
    for (const expr_action *a = w->update; a != NULL && rv == 0; a = a->next) {
        if (a->kind == EXPR_REMOVE) {
            rv = lapse_update_remove(u, a->path->path->name);
        } else {
            char *text = json_dumps(a->value->value, JSON_COMPACT);
            rv = text != NULL ? lapse_update_set(u, a->path->path->name, text, err) : LAPSE_ENOMEM;
            free(text);
        }
    }
    lapse_item *after = NULL;
    if (rv == 0) {
        rv = lapse_update_item(x->c, w->table, w->key, u, lc, w->want_new ? &after : NULL, err);
    }
    if (rv == LAPSE_ENOMEM) {
        err->code = LAPSE_ENOMEM;
        snprintf(err->message, sizeof err->message, "out of memory");
    }
    lapse_update_free(u);
    if (rv == 0 && w->want_new && after != NULL) {
        w->new_item = ddb_req_item_json(x, after);
    }
    lapse_item_free(after);
    return rv;
}

/* Chooses the guard for a write evaluated on old (NULL: absent): the
 * narrowest that still makes it atomic (a guard on one attribute fails only
 * when that attribute changes; the whole item's, on any change). whole: the
 * whole item's in any case (the caller returns it as the old item). Returns
 * 0, or -1 with the error set. */
static int choose_guard(ddb_ctx *x, ddb_write *w, json_t *reads, json_t *old, int whole,
                        lapse_condition *g, char **value_json)
{
    const char *k0 = lapse_item_name(w->key, 0), *k, *one = NULL, *two = NULL;
    json_t *v;
    int haskey = 0;
    *value_json = NULL;
    json_object_foreach(reads, k, v)
    {
        if (key_has(w->key, k)) {
            haskey = 1;
        } else if (one == NULL) {
            one = k;
        } else if (two == NULL) {
            two = k;
        }
    }
    memset(g, 0, sizeof *g);
    if (old == NULL) {
        g->kind = LAPSE_COND_NOT_EXISTS; /* still absent: nothing it read has changed */
        g->attribute = k0;
        return 0;
    }
    if (one == NULL && !whole) {
        g->kind = LAPSE_COND_EXISTS;
        g->attribute = k0;
        return 0;
    }
    json_t *have = one != NULL ? json_object_get(old, one) : NULL;
    if (whole || two != NULL || (have == NULL && haskey)) {
        /* Several attributes read, or one absent and the item's existence:
         * the item as read, whole. */
        *value_json = json_dumps(old, JSON_COMPACT);
        g->kind = LAPSE_COND_ITEM_EQUALS;
        g->value_json = *value_json;
        return *value_json != NULL ? 0 : ddb_req_fail(x, 500, "InternalServerError", "oom");
    }
    if (have != NULL) {
        *value_json = json_dumps(have, JSON_COMPACT);
        g->kind = LAPSE_COND_EQUALS;
        g->attribute = one;
        g->value_json = *value_json;
        return *value_json != NULL ? 0 : ddb_req_fail(x, 500, "InternalServerError", "oom");
    }
    g->kind = LAPSE_COND_NOT_EXISTS; /* the one attribute read is still absent */
    g->attribute = one;
    return 0;
}

/* Refuses an update that sets or removes a key attribute. Returns 0, or -1
 * with the error set. */
static int reject_key_updates(ddb_ctx *x, const ddb_write *w)
{
    for (const expr_action *a = w->update; a != NULL; a = a->next) {
        if (key_has(w->key, a->path->path->name)) {
            return ddb_req_fail(x, 400, "ValidationException",
                                "One or more parameter values were invalid: Cannot update "
                                "attribute %s. This attribute is part of the key",
                                a->path->path->name);
        }
    }
    return 0;
}

/* Reads w's item into *old as JSON (NULL: absent; caller decrefs). Returns 0,
 * or -1 with the error set. */
static int read_old(ddb_ctx *x, const ddb_write *w, json_t **old)
{
    lapse_error err;
    lapse_item *got = NULL;
    *old = NULL;
    if (lapse_get(x->c, w->table, w->key, &got, &err) != 0) {
        return ddb_req_lapse_fail(x, &err, w->table);
    }
    if (got != NULL && (*old = ddb_req_item_json(x, got)) == NULL) {
        lapse_item_free(got);
        return -1;
    }
    lapse_item_free(got);
    return 0;
}

/* Evaluates w's condition (if any) on old (NULL: absent). Returns 0 when it
 * holds, or -1 with the error set (and, when w asks, the item it was false
 * on). */
static int check_condition(ddb_ctx *x, expr_ctx *e, const ddb_write *w, json_t *old)
{
    int ok;
    if (w->cond == NULL || (ok = expr_eval(e, w->cond, old)) > 0) {
        return 0;
    }
    if (ok < 0) {
        return ddb_req_fail(x, 400, "ValidationException", "%s", e->err);
    }
    ddb_req_fail(x, 400, "ConditionalCheckFailedException", "The conditional request failed");
    if (w->old_on_failure && old != NULL) {
        x->err_item = json_incref(old); /* the item the condition was false on */
    }
    return -1;
}

/* The item as w's update leaves old (NULL: absent, then the key alone).
 * Returns it (caller decrefs), or NULL with the error set. */
static json_t *updated_item(ddb_ctx *x, expr_ctx *e, const ddb_write *w, json_t *old)
{
    json_t *new_item = old != NULL ? json_deep_copy(old) : ddb_req_item_json(x, w->key);
    if (new_item == NULL) {
        return NULL;
    }
    if (expr_apply_update(e, w->update, new_item) != 0) {
        ddb_req_fail(x, 400, "ValidationException", "%s", e->err);
        json_decref(new_item);
        return NULL;
    }
    return new_item;
}

/* Sends w under guard; old is the item read (NULL: absent), new_item what an
 * update makes of it. Returns 0 or a LAPSE_E* code (err set). */
static int send_guarded(ddb_ctx *x, ddb_write *w, json_t *old, json_t *new_item,
                        const lapse_condition *guard, lapse_error *err)
{
    if (w->kind == DDB_PUT) {
        return lapse_put(x->c, w->table, w->item, guard, err);
    }
    if (w->kind == DDB_DELETE) {
        return old != NULL ? lapse_delete(x->c, w->table, w->key, guard, err) : 0;
    }
    return send_update(x, w, old, new_item, guard, err);
}

/* One read-evaluate-write round: reads the item, checks the condition and
 * sends the write guarded on what it read. Returns 0 when written,
 * LAPSE_ECONDITION when the guard failed (the item changed after the read:
 * read again), or -1 with the error set. */
static int attempt_write(ddb_ctx *x, expr_ctx *e, ddb_write *w, json_t *reads)
{
    lapse_error err = {.code = 0};
    json_t *old = NULL, *new_item = NULL;
    lapse_condition guard;
    char *guard_value = NULL;
    int rv = -1;
    if (read_old(x, w, &old) != 0) {
        return -1;
    }
    if (check_condition(x, e, w, old) != 0 ||
        choose_guard(x, w, reads, old, w->want_old, &guard, &guard_value) != 0) {
        goto out;
    }
    if (w->kind == DDB_UPDATE && (new_item = updated_item(x, e, w, old)) == NULL) {
        goto out;
    }
    int wrv = send_guarded(x, w, old, new_item, &guard, &err);
    if (wrv == 0 && w->want_old) {
        w->old_item = old; /* exactly what was replaced: the guard held */
        old = NULL;
    }
    if (wrv == 0 || wrv == LAPSE_ECONDITION) {
        rv = wrv;
    } else {
        ddb_req_lapse_fail(x, &err, w->table);
    }
out:
    json_decref(new_item);
    free(guard_value);
    json_decref(old);
    return rv;
}

/* Reads, evaluates and writes with a guard until the guard holds, at most
 * DDB_WRITE_ATTEMPTS times. Returns 0, or -1 with the error set. */
static int write_guarded(ddb_ctx *x, expr_ctx *e, ddb_write *w, json_t *reads)
{
    for (int attempt = 0; attempt < DDB_WRITE_ATTEMPTS; attempt++) {
        int rv = attempt_write(x, e, w, reads);
        if (rv != LAPSE_ECONDITION) {
            return rv;
        }
    }
    return ddb_req_fail(x, 500, "InternalServerError",
                        "the item changed under %d attempts to apply a conditional write; retry",
                        DDB_WRITE_ATTEMPTS);
}

int ddb_write_run(ddb_ctx *x, expr_ctx *e, ddb_write *w)
{
    lapse_error err;
    lapse_condition lc;
    char *lc_value = NULL;
    json_t *reads = json_object();
    int rv = -1;
    if (reads == NULL) {
        return ddb_req_fail(x, 500, "InternalServerError", "out of memory");
    }
    if (reject_key_updates(x, w) != 0) {
        json_decref(reads);
        return -1;
    }
    update_reads(w->update, reads);
    int simple = w->cond == NULL || simple_condition(w->cond, &lc, &lc_value);
    if (json_object_size(reads) == 0 && simple && !w->want_old && !w->old_on_failure) {
        if (direct(x, w, w->cond != NULL ? &lc : NULL, &err) != 0) {
            ddb_req_lapse_fail(x, &err, w->table);
        } else {
            rv = 0;
        }
        goto out;
    }
    ddb_expr_reads(w->cond, reads);
    rv = write_guarded(x, e, w, reads);
out:
    free(lc_value);
    json_decref(reads);
    return rv;
}
