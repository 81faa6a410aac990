/*
 * expr_update.c: update actions (SET, REMOVE, ADD, DELETE, with values
 * computed from the item before the update) and projections, on items in
 * DynamoDB JSON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/base64.h"
#include "../common/number.h"
#include "expr_int.h"

/* ---- updates ---- */

/* An update operand's value computed from the old item: a new reference, or
 * NULL with x->err. */
static json_t *upvalue(expr_ctx *x, const expr_node *n, json_t *old)
{
    json_t *a, *b, *r = NULL;
    switch (n->kind) {
    case EXPR_PATH:
    case EXPR_VALUE:
        if ((r = expr_operand(x, n, old)) == NULL && !x->failed) {
            char p[256];
            expr_path_format(n->path, p, sizeof p);
            expr_fail(x,
                      "The provided expression refers to an attribute that does not exist in "
                      "the item: %s",
                      p);
        }
        return r;
    case EXPR_IF_NOT_EXISTS: {
        json_t *v = expr_get(old, n->a->path);
        return v != NULL ? json_incref(v) : upvalue(x, n->b, old);
    }
    case EXPR_PLUS:
    case EXPR_MINUS:
    case EXPR_LIST_APPEND:
        if ((a = upvalue(x, n->a, old)) == NULL) {
            return NULL;
        }
        if ((b = upvalue(x, n->b, old)) == NULL) {
            json_decref(a);
            return NULL;
        }
        if (n->kind != EXPR_LIST_APPEND) {
            if (strcmp(expr_vtype(a), "N") != 0 || strcmp(expr_vtype(b), "N") != 0) {
                expr_fail(x,
                          "Incorrect operand type for operator or function; operator: %s, "
                          "operand type: %s",
                          n->kind == EXPR_PLUS ? "+" : "-",
                          strcmp(expr_vtype(a), "N") != 0 ? expr_vtype(a) : expr_vtype(b));
            } else {
                r = expr_num_add(x, a, b, n->kind == EXPR_MINUS);
            }
        } else if (strcmp(expr_vtype(a), "L") != 0 || strcmp(expr_vtype(b), "L") != 0) {
            expr_fail(x,
                      "Incorrect operand type for operator or function; operator or function: "
                      "list_append, operand type: %s",
                      strcmp(expr_vtype(a), "L") != 0 ? expr_vtype(a) : expr_vtype(b));
        } else {
            json_t *l = json_deep_copy(expr_vbody(a));
            json_array_extend(l, expr_vbody(b));
            r = json_pack("{s:o}", "L", l);
        }
        json_decref(a);
        json_decref(b);
        return r;
    default:
        expr_fail(x, "unexpected update operand");
        return NULL;
    }
}

/* Sets (v != NULL; stolen) or removes (v == NULL) path in item. */
static int put_path(expr_ctx *x, json_t *item, const expr_elem *p, json_t *v)
{
    if (p->next == NULL) {
        if (v == NULL) {
            json_object_del(item, p->name);
            return 0;
        }
        return json_object_set_new(item, p->name, v);
    }
    /* Find the parent of the last element. */
    expr_elem parent_path[EXPR_MAX_DEPTH + 1];
    int n = 0;
    const expr_elem *last = p;
    for (const expr_elem *e = p; e->next != NULL; e = e->next) {
        parent_path[n] = *e;
        parent_path[n].next = e->next->next != NULL ? &parent_path[n + 1] : NULL;
        n++;
        last = e->next;
    }
    json_t *parent = expr_get(item, parent_path);
    const char *t = expr_vtype(parent);
    if (parent != NULL && last->name != NULL && strcmp(t, "M") == 0) {
        if (v == NULL) {
            json_object_del(expr_vbody(parent), last->name);
            return 0;
        }
        return json_object_set_new(expr_vbody(parent), last->name, v);
    }
    if (parent != NULL && last->name == NULL && strcmp(t, "L") == 0) {
        json_t *l = expr_vbody(parent);
        if (v == NULL) {
            if ((size_t)last->index < json_array_size(l)) {
                json_array_remove(l, (size_t)last->index);
            }
            return 0;
        }
        if ((size_t)last->index < json_array_size(l)) {
            return json_array_set_new(l, (size_t)last->index, v);
        }
        return json_array_append_new(l, v);
    }
    json_decref(v);
    if (v == NULL && parent == NULL) {
        return 0; /* REMOVE of a path under nothing: nothing to do */
    }
    expr_fail(x, "The document path provided in the update expression is invalid for update");
    return -1;
}

/* ADD and DELETE on a set body: union or difference, into a new array. */
static json_t *set_op(json_t *have, json_t *with, const char *et, int add)
{
    json_t *out = json_array();
    size_t i, j;
    json_t *e, *f;
    json_array_foreach(have, i, e)
    {
        int in_with = 0;
        json_array_foreach(with, j, f)
        {
            in_with = in_with || expr_scalar_equal(et, e, f);
        }
        if (add || !in_with) {
            json_array_append(out, e);
        }
    }
    if (add) {
        json_array_foreach(with, j, f)
        {
            int in_have = 0;
            json_array_foreach(have, i, e)
            {
                in_have = in_have || expr_scalar_equal(et, e, f);
            }
            if (!in_have) {
                json_array_append(out, f);
            }
        }
    }
    return out;
}

static int add_delete(expr_ctx *x, const expr_action *a, json_t *old, json_t *item)
{
    const char *op = a->kind == EXPR_ADD ? "ADD" : "DELETE";
    json_t *v = a->value->value, *have = expr_get(old, a->path->path);
    const char *t = expr_vtype(v);
    if (!(expr_is_set(t) || (a->kind == EXPR_ADD && strcmp(t, "N") == 0))) {
        expr_fail(x,
                  "Incorrect operand type for operator or function; operator: %s, operand "
                  "type: %s",
                  op, t);
        return -1;
    }
    if (have != NULL && strcmp(expr_vtype(have), t) != 0) {
        expr_fail(x, "An operand in the update expression has an incorrect data type");
        return -1;
    }
    json_t *r;
    if (strcmp(t, "N") == 0) {
        r = have != NULL ? expr_num_add(x, have, v, 0) : json_incref(v);
        if (r == NULL) {
            return -1;
        }
    } else if (have == NULL) {
        if (a->kind == EXPR_DELETE) {
            return 0;
        }
        r = json_incref(v);
    } else {
        json_t *body = set_op(expr_vbody(have), expr_vbody(v), t[0] == 'N' ? "N" : "S", a->kind == EXPR_ADD);
        if (json_array_size(body) == 0) {
            json_decref(body);
            return put_path(x, item, a->path->path, NULL);
        }
        r = json_pack("{s:o}", t, body);
    }
    return put_path(x, item, a->path->path, r);
}

int expr_apply_update(expr_ctx *x, const expr_action *actions, json_t *item)
{
    json_t *old = json_deep_copy(item);
    int rv = 0;
    for (const expr_action *a = actions; a != NULL && rv == 0; a = a->next) {
        if (a->kind == EXPR_SET) {
            json_t *v = upvalue(x, a->value, old);
            rv = v != NULL ? put_path(x, item, a->path->path, v) : -1;
        } else if (a->kind == EXPR_REMOVE) {
            rv = put_path(x, item, a->path->path, NULL);
        } else {
            rv = add_delete(x, a, old, item);
        }
    }
    json_decref(old);
    return rv != 0 || x->failed ? -1 : 0;
}

/* ---- projection ---- */

/* Copies the value at p (under src) into dst (a map body or an item),
 * keeping the enclosing maps and lists. */
static void project_one(json_t *dst, json_t *src, const expr_elem *p)
{
    json_t *v = json_object_get(src, p->name);
    if (v == NULL) {
        return;
    }
    if (p->next == NULL) {
        json_object_set(dst, p->name, v);
        return;
    }
    const char *t = expr_vtype(v);
    json_t *have = json_object_get(dst, p->name);
    if (p->next->name != NULL && strcmp(t, "M") == 0) {
        if (have == NULL) {
            have = json_pack("{s:{}}", "M");
            json_object_set_new(dst, p->name, have);
        }
        project_one(expr_vbody(have), expr_vbody(v), p->next);
    } else if (p->next->name == NULL && strcmp(t, "L") == 0) {
        json_t *e = json_array_get(expr_vbody(v), (size_t)p->next->index);
        if (e == NULL) {
            return;
        }
        if (have == NULL) {
            have = json_pack("{s:[]}", "L");
            json_object_set_new(dst, p->name, have);
        }
        /* Wrap the element so the same walk continues below it. */
        json_t *wrap_src = json_pack("{s:O}", "x", e), *wrap_dst = json_object();
        if (p->next->next == NULL) {
            json_array_append(expr_vbody(have), e);
        } else {
            expr_elem rest = {.name = "x", .next = p->next->next};
            project_one(wrap_dst, wrap_src, &rest);
            json_t *got = json_object_get(wrap_dst, "x");
            if (got != NULL) {
                json_array_append(expr_vbody(have), got);
            }
        }
        json_decref(wrap_src);
        json_decref(wrap_dst);
    }
}

json_t *expr_project(const expr_node *paths, json_t *item)
{
    json_t *out = json_object();
    for (const expr_node *p = paths; p != NULL && out != NULL; p = p->next) {
        project_one(out, item, p->path);
    }
    return out;
}

