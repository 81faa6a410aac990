/*
 * expr_eval.c: evaluation of parsed conditions on items in DynamoDB JSON
 * (DynamoDB's comparison rules: a missing attribute makes a comparison
 * false; functions attribute_exists, attribute_type, begins_with, contains,
 * size). Values and their order: expr_value.c; updates and projections:
 * expr_update.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/base64.h"
#include "../common/number.h"
#include "expr_int.h"

/* An operand's value: a new reference, or NULL when absent (or on error,
 * with x->failed). */
json_t *expr_operand(expr_ctx *x, const expr_node *n, json_t *item)
{
    switch (n->kind) {
    case EXPR_PATH: {
        json_t *v = expr_get(item, n->path);
        return v ? json_incref(v) : NULL;
    }
    case EXPR_VALUE:
        return json_incref(n->value);
    case EXPR_SIZE: {
        json_t *v = expr_get(item, n->a->path);
        const char *t = expr_vtype(v);
        json_t *body = expr_vbody(v);
        size_t size;
        if (v == NULL) {
            return NULL;
        }
        if (strcmp(t, "S") == 0) {
            size = json_string_length(body);
        } else if (strcmp(t, "B") == 0) {
            uint8_t *p = expr_bytes_of(body, &size);
            if (p == NULL) {
                return NULL;
            }
            free(p);
        } else if (expr_is_set(t) || strcmp(t, "L") == 0) {
            size = json_array_size(body);
        } else if (strcmp(t, "M") == 0) {
            size = json_object_size(body);
        } else {
            return NULL; /* size of N, BOOL, NULL: DynamoDB treats as false */
        }
        char text[32];
        snprintf(text, sizeof text, "%zu", size);
        return json_pack("{s:s}", "N", text);
    }
    default:
        expr_fail(x, "unexpected operand");
        return NULL;
    }
}

static int contains(json_t *hay, json_t *needle)
{
    const char *th = expr_vtype(hay), *tn = expr_vtype(needle);
    json_t *bh = expr_vbody(hay), *bn = expr_vbody(needle);
    if (strcmp(th, "S") == 0 && strcmp(tn, "S") == 0) {
        return strstr(json_string_value(bh), json_string_value(bn)) != NULL;
    }
    if (expr_is_set(th) && th[0] == tn[0] && tn[1] == '\0') {
        size_t i;
        json_t *e;
        json_array_foreach(bh, i, e)
        {
            if (expr_scalar_equal(tn, e, bn)) {
                return 1;
            }
        }
        return 0;
    }
    if (strcmp(th, "L") == 0) {
        size_t i;
        json_t *e;
        json_array_foreach(bh, i, e)
        {
            if (expr_value_equal(e, needle)) {
                return 1;
            }
        }
    }
    return 0;
}

static int begins_with(json_t *v, json_t *prefix)
{
    const char *t = expr_vtype(v);
    if (strcmp(t, expr_vtype(prefix)) != 0) {
        return 0;
    }
    if (strcmp(t, "S") == 0) {
        const char *s = json_string_value(expr_vbody(v)), *p = json_string_value(expr_vbody(prefix));
        return strncmp(s, p, strlen(p)) == 0;
    }
    if (strcmp(t, "B") == 0) {
        size_t nv, np;
        uint8_t *bv = expr_bytes_of(expr_vbody(v), &nv), *bp = expr_bytes_of(expr_vbody(prefix), &np);
        int rv = bv && bp && np <= nv && memcmp(bv, bp, np) == 0;
        free(bv);
        free(bp);
        return rv;
    }
    return 0;
}

static int func(expr_ctx *x, const expr_node *n, json_t *item)
{
    json_t *v = expr_get(item, n->a->path), *arg = NULL;
    int rv = 0;
    switch (n->op) {
    case EXPR_FN_ATTRIBUTE_EXISTS:
        return v != NULL;
    case EXPR_FN_ATTRIBUTE_NOT_EXISTS:
        return v == NULL;
    case EXPR_FN_ATTRIBUTE_TYPE: {
        static const char *const types[] = {"S",  "SS",   "N",    "NS", "B",
                                            "BS", "BOOL", "NULL", "L",  "M"};
        arg = expr_operand(x, n->b, item);
        const char *want = strcmp(expr_vtype(arg), "S") == 0 ? json_string_value(expr_vbody(arg)) : NULL;
        int known = 0;
        for (size_t i = 0; want && i < sizeof types / sizeof types[0]; i++) {
            known = known || strcmp(types[i], want) == 0;
        }
        if (!known) {
            expr_fail(x,
                      "Invalid attribute type name found in type condition: %.20s; valid "
                      "types: S, SS, N, NS, B, BS, BOOL, NULL, L, M",
                      want ? want : "(not a string)");
            rv = -1;
        } else {
            rv = v != NULL && strcmp(expr_vtype(v), want) == 0;
        }
        break;
    }
    case EXPR_FN_BEGINS_WITH:
        arg = expr_operand(x, n->b, item);
        rv = v != NULL && arg != NULL && begins_with(v, arg);
        break;
    case EXPR_FN_CONTAINS:
        arg = expr_operand(x, n->b, item);
        rv = v != NULL && arg != NULL && contains(v, arg);
        break;
    default:
        rv = -1;
    }
    json_decref(arg);
    return x->failed ? -1 : rv;
}

int expr_eval(expr_ctx *x, const expr_node *c, json_t *item)
{
    int l, r;
    json_t *a = NULL, *b = NULL, *hi = NULL;
    int rv = 0, cmp, cmp2;
    switch (c->kind) {
    case EXPR_OR:
    case EXPR_AND:
        if ((l = expr_eval(x, c->a, item)) < 0) {
            return -1;
        }
        if (c->kind == EXPR_OR ? l : !l) {
            return l;
        }
        r = expr_eval(x, c->b, item);
        return r;
    case EXPR_NOT:
        l = expr_eval(x, c->a, item);
        return l < 0 ? -1 : !l;
    case EXPR_FUNC:
        return func(x, c, item);
    case EXPR_CMP:
        a = expr_operand(x, c->a, item);
        b = expr_operand(x, c->b, item);
        if (a != NULL && b != NULL) {
            if (c->op == EXPR_EQ) {
                rv = expr_value_equal(a, b);
            } else if (c->op == EXPR_NE) {
                rv = !expr_value_equal(a, b);
            } else if (expr_order(a, b, &cmp) == 0) {
                rv = c->op == EXPR_LT   ? cmp < 0
                     : c->op == EXPR_LE ? cmp <= 0
                     : c->op == EXPR_GT ? cmp > 0
                                        : cmp >= 0;
            }
        } else if (c->op == EXPR_NE) {
            rv = !(a == NULL && b == NULL); /* a missing attribute is <> any value */
        }
        break;
    case EXPR_BETWEEN:
        a = expr_operand(x, c->a, item);
        b = expr_operand(x, c->b, item);
        hi = expr_operand(x, c->c, item);
        rv = a && b && hi && expr_order(a, b, &cmp) == 0 && expr_order(a, hi, &cmp2) == 0 && cmp >= 0 &&
             cmp2 <= 0;
        break;
    case EXPR_IN:
        a = expr_operand(x, c->a, item);
        for (const expr_node *e = c->b; a != NULL && e != NULL && !rv; e = e->next) {
            json_t *v = expr_operand(x, e, item);
            rv = v != NULL && expr_value_equal(a, v);
            json_decref(v);
        }
        break;
    default:
        expr_fail(x, "unexpected condition node");
        return -1;
    }
    json_decref(a);
    json_decref(b);
    json_decref(hi);
    return x->failed ? -1 : rv;
}
