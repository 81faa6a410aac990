/*
 * expr_eval.c: evaluation of parsed expressions on items in DynamoDB JSON:
 * conditions (DynamoDB's comparison rules: values of different types are
 * never equal and never ordered, a missing attribute makes a comparison
 * false), update actions (values computed from the item before the update)
 * and projections.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/base64.h"
#include "../common/number.h"
#include "expr_int.h"

/* The type name of a typed value ({"S":"x"} -> "S"), or "" when malformed. */
static const char *vtype(json_t *v)
{
    const char *k = "";
    json_t *unused;
    if (json_is_object(v) && json_object_size(v) == 1) {
        json_object_foreach(v, k, unused)
        {
            (void)unused;
            return k;
        }
    }
    return "";
}

static json_t *vbody(json_t *v)
{
    return json_object_get(v, vtype(v));
}

json_t *expr_get(json_t *item, const expr_elem *p)
{
    if (item == NULL || p == NULL || p->name == NULL) {
        return NULL;
    }
    json_t *v = json_object_get(item, p->name);
    for (p = p->next; v != NULL && p != NULL; p = p->next) {
        if (p->name != NULL) {
            v = strcmp(vtype(v), "M") == 0 ? json_object_get(vbody(v), p->name) : NULL;
        } else {
            v = strcmp(vtype(v), "L") == 0 ? json_array_get(vbody(v), (size_t)p->index) : NULL;
        }
    }
    return v;
}

/* ---- numbers ---- */

static int num_of(json_t *v, number *n)
{
    const char *s = json_string_value(vbody(v));
    return s != NULL && number_parse(s, strlen(s), n, NULL, 0) == 0 ? 0 : -1;
}

/* a + b (or a - b with neg_b) exactly, into a new {"N":...}; NULL with
 * x->err when the result has more than 38 significant digits or is out of
 * range. */
static json_t *num_add(expr_ctx *x, json_t *va, json_t *vb, int neg_b)
{
    number a, b;
    if (num_of(va, &a) != 0 || num_of(vb, &b) != 0) {
        expr_fail(x, "An operand in the update expression has an incorrect data type");
        return NULL;
    }
    if (neg_b) {
        b.neg = !b.neg;
    }
    /* value = 0.d1..dn * 10^exp = D * 10^(exp - n): align on the smaller scale. */
    enum { W = 600 };
    int sa = a.exp - a.ndigits, sb = b.exp - b.ndigits;
    int lo = sa < sb ? sa : sb;
    int hi = a.exp > b.exp ? a.exp : b.exp;
    if (a.ndigits == 0) {
        lo = sb, hi = b.exp;
    } else if (b.ndigits == 0) {
        lo = sa, hi = a.exp;
    }
    if (hi - lo + 2 > W) {
        expr_fail(x, "Number overflow. Attempting to store a number with magnitude larger than "
                     "supported range");
        return NULL;
    }
    int da[W] = {0}, db[W] = {0}, r[W] = {0}; /* little-endian digits */
    for (int i = 0; i < a.ndigits; i++) {
        da[(a.exp - 1 - i) - lo] = a.digits[i] - '0';
    }
    for (int i = 0; i < b.ndigits; i++) {
        db[(b.exp - 1 - i) - lo] = b.digits[i] - '0';
    }
    int len = hi - lo + 1, neg;
    if (a.neg == b.neg) {
        int carry = 0;
        for (int i = 0; i < len; i++) {
            int s = da[i] + db[i] + carry;
            r[i] = s % 10;
            carry = s / 10;
        }
        neg = a.neg;
    } else {
        int cmp = 0; /* |a| vs |b| */
        for (int i = len - 1; i >= 0 && cmp == 0; i--) {
            cmp = da[i] - db[i];
        }
        int *big = cmp >= 0 ? da : db, *small = cmp >= 0 ? db : da, borrow = 0;
        for (int i = 0; i < len; i++) {
            int s = big[i] - small[i] - borrow;
            borrow = s < 0;
            r[i] = s + (borrow ? 10 : 0);
        }
        neg = cmp >= 0 ? a.neg : b.neg;
    }
    int top = len - 1, bottom = 0;
    while (top >= 0 && r[top] == 0) {
        top--;
    }
    if (top < 0) {
        return json_pack("{s:s}", "N", "0");
    }
    while (r[bottom] == 0) {
        bottom++;
    }
    if (top - bottom + 1 > NUMBER_MAX_DIGITS) {
        expr_fail(x,
                  "Number overflow. Attempting to store a number with more than %d "
                  "significant digits",
                  NUMBER_MAX_DIGITS);
        return NULL;
    }
    char text[128];
    int n = 0;
    if (neg) {
        text[n++] = '-';
    }
    for (int i = top; i >= bottom; i--) {
        text[n++] = (char)('0' + r[i]);
    }
    snprintf(text + n, sizeof text - (size_t)n, "E%d", bottom + lo);
    number out;
    char err[128];
    if (number_parse(text, strlen(text), &out, err, sizeof err) != 0) {
        expr_fail(x, "Number overflow. Attempting to store a number with magnitude larger than "
                     "supported range");
        return NULL;
    }
    char fmt[64];
    number_format(&out, fmt, sizeof fmt);
    return json_pack("{s:s}", "N", fmt);
}

static int is_set(const char *t);
static int scalar_equal(const char *t, json_t *a, json_t *b);

/* ---- value checks ---- */

static int bad(char *err, size_t errlen, const char *why, const char *type)
{
    snprintf(err, errlen, "%s%s%s", why, type ? ": " : "", type ? type : "");
    return -1;
}

static int scalar_ok(const char *t, json_t *body, char *err, size_t errlen)
{
    const char *s = json_string_value(body);
    if (s == NULL) {
        return bad(err, errlen, "the value of a scalar type must be a string", t);
    }
    if (t[0] == 'N' && number_validate(s, strlen(s)) != 0) {
        return bad(err, errlen, "not a valid number in an N value", NULL);
    }
    if (t[0] == 'B') {
        uint8_t *p = NULL;
        size_t n;
        if (base64_decode(s, strlen(s), &p, &n) != 0) {
            return bad(err, errlen, "not valid base64 in a B value", NULL);
        }
        free(p);
    }
    return 0;
}

static int check(json_t *v, int depth, char *err, size_t errlen)
{
    const char *t = vtype(v);
    json_t *body = vbody(v);
    if (depth > EXPR_MAX_DEPTH) {
        return bad(err, errlen, "the value is nested too deeply", NULL);
    }
    if (t[0] == '\0') {
        return bad(err, errlen, "Supplied AttributeValue must have exactly one data type", NULL);
    }
    if (!strcmp(t, "S") || !strcmp(t, "N") || !strcmp(t, "B")) {
        return scalar_ok(t, body, err, errlen);
    }
    if (!strcmp(t, "BOOL")) {
        return json_is_boolean(body) ? 0 : bad(err, errlen, "BOOL must be true or false", NULL);
    }
    if (!strcmp(t, "NULL")) {
        return json_is_true(body) ? 0 : bad(err, errlen, "NULL must be true", NULL);
    }
    if (is_set(t)) {
        size_t i;
        json_t *e;
        char et[2] = {t[0] == 'S' ? 'S' : t[0], '\0'};
        if (!json_is_array(body) || json_array_size(body) == 0) {
            return bad(err, errlen, "a set must be a non-empty list", t);
        }
        json_array_foreach(body, i, e)
        {
            if (scalar_ok(et, e, err, errlen) != 0) {
                return -1;
            }
            for (size_t j = 0; j < i; j++) {
                if (scalar_equal(et[0] == 'N' ? "N" : "S", json_array_get(body, j), e)) {
                    return bad(err, errlen, "Input collection contains duplicates", t);
                }
            }
        }
        return 0;
    }
    if (!strcmp(t, "L")) {
        size_t i;
        json_t *e;
        if (!json_is_array(body)) {
            return bad(err, errlen, "L must be a list", NULL);
        }
        json_array_foreach(body, i, e)
        {
            if (check(e, depth + 1, err, errlen) != 0) {
                return -1;
            }
        }
        return 0;
    }
    if (!strcmp(t, "M")) {
        const char *k;
        json_t *e;
        if (!json_is_object(body)) {
            return bad(err, errlen, "M must be an object", NULL);
        }
        json_object_foreach(body, k, e)
        {
            if (check(e, depth + 1, err, errlen) != 0) {
                return -1;
            }
        }
        return 0;
    }
    return bad(err, errlen, "unknown data type", t);
}

int expr_value_check(json_t *v, char *err, size_t errlen)
{
    return check(v, 0, err, errlen);
}

/* ---- comparison ---- */

static int is_set(const char *t)
{
    return strcmp(t, "SS") == 0 || strcmp(t, "NS") == 0 || strcmp(t, "BS") == 0;
}

/* Decoded bytes of a B value (caller frees), or NULL. */
static uint8_t *bytes_of(json_t *body, size_t *n)
{
    const char *s = json_string_value(body);
    uint8_t *out = NULL;
    if (s == NULL || base64_decode(s, strlen(s), &out, n) != 0) {
        return NULL;
    }
    return out;
}

/* Element of a set body (a JSON array of strings) as a typed value of
 * the element type: compares with scalar rules. */
static int scalar_equal(const char *t, json_t *a, json_t *b)
{
    if (strcmp(t, "N") == 0) {
        number x, y;
        const char *sa = json_string_value(a), *sb = json_string_value(b);
        return sa && sb && number_parse(sa, strlen(sa), &x, NULL, 0) == 0 &&
               number_parse(sb, strlen(sb), &y, NULL, 0) == 0 && number_cmp(&x, &y) == 0;
    }
    return json_equal(a, b);
}

int expr_value_equal(json_t *a, json_t *b)
{
    const char *ta = vtype(a), *tb = vtype(b);
    if (strcmp(ta, tb) != 0 || ta[0] == '\0') {
        return 0;
    }
    json_t *ba = vbody(a), *bb = vbody(b);
    if (strcmp(ta, "N") == 0) {
        return scalar_equal("N", ba, bb);
    }
    if (is_set(ta)) {
        const char *et = ta[0] == 'N' ? "N" : "S";
        if (json_array_size(ba) != json_array_size(bb)) {
            return 0;
        }
        size_t i, j;
        json_t *ea, *eb;
        json_array_foreach(ba, i, ea)
        {
            int found = 0;
            json_array_foreach(bb, j, eb)
            {
                found = found || scalar_equal(et, ea, eb);
            }
            if (!found) {
                return 0;
            }
        }
        return 1;
    }
    if (strcmp(ta, "L") == 0) {
        if (json_array_size(ba) != json_array_size(bb)) {
            return 0;
        }
        for (size_t i = 0; i < json_array_size(ba); i++) {
            if (!expr_value_equal(json_array_get(ba, i), json_array_get(bb, i))) {
                return 0;
            }
        }
        return 1;
    }
    if (strcmp(ta, "M") == 0) {
        const char *k;
        json_t *v;
        if (json_object_size(ba) != json_object_size(bb)) {
            return 0;
        }
        json_object_foreach(ba, k, v)
        {
            json_t *w = json_object_get(bb, k);
            if (w == NULL || !expr_value_equal(v, w)) {
                return 0;
            }
        }
        return 1;
    }
    return json_equal(ba, bb);
}

/* Orders two values of one of the ordered types N, S, B: sets *cmp and
 * returns 0, or -1 when they are not comparable (DynamoDB: false). */
static int order(json_t *a, json_t *b, int *cmp)
{
    const char *ta = vtype(a), *tb = vtype(b);
    if (strcmp(ta, tb) != 0) {
        return -1;
    }
    if (strcmp(ta, "N") == 0) {
        number x, y;
        if (num_of(a, &x) != 0 || num_of(b, &y) != 0) {
            return -1;
        }
        *cmp = number_cmp(&x, &y);
        return 0;
    }
    if (strcmp(ta, "S") == 0) {
        *cmp = strcmp(json_string_value(vbody(a)), json_string_value(vbody(b)));
        return 0;
    }
    if (strcmp(ta, "B") == 0) {
        size_t na, nb;
        uint8_t *pa = bytes_of(vbody(a), &na), *pb = bytes_of(vbody(b), &nb);
        int rv = -1;
        if (pa != NULL && pb != NULL) {
            int c = memcmp(pa, pb, na < nb ? na : nb);
            *cmp = c != 0 ? c : (na > nb) - (na < nb);
            rv = 0;
        }
        free(pa);
        free(pb);
        return rv;
    }
    return -1;
}

/* An operand's value: a new reference, or NULL when absent (or on error,
 * with x->failed). */
static json_t *operand(expr_ctx *x, const expr_node *n, json_t *item)
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
        const char *t = vtype(v);
        json_t *body = vbody(v);
        size_t size;
        if (v == NULL) {
            return NULL;
        }
        if (strcmp(t, "S") == 0) {
            size = json_string_length(body);
        } else if (strcmp(t, "B") == 0) {
            uint8_t *p = bytes_of(body, &size);
            if (p == NULL) {
                return NULL;
            }
            free(p);
        } else if (is_set(t) || strcmp(t, "L") == 0) {
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
    const char *th = vtype(hay), *tn = vtype(needle);
    json_t *bh = vbody(hay), *bn = vbody(needle);
    if (strcmp(th, "S") == 0 && strcmp(tn, "S") == 0) {
        return strstr(json_string_value(bh), json_string_value(bn)) != NULL;
    }
    if (is_set(th) && th[0] == tn[0] && tn[1] == '\0') {
        size_t i;
        json_t *e;
        json_array_foreach(bh, i, e)
        {
            if (scalar_equal(tn, e, bn)) {
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
    const char *t = vtype(v);
    if (strcmp(t, vtype(prefix)) != 0) {
        return 0;
    }
    if (strcmp(t, "S") == 0) {
        const char *s = json_string_value(vbody(v)), *p = json_string_value(vbody(prefix));
        return strncmp(s, p, strlen(p)) == 0;
    }
    if (strcmp(t, "B") == 0) {
        size_t nv, np;
        uint8_t *bv = bytes_of(vbody(v), &nv), *bp = bytes_of(vbody(prefix), &np);
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
        arg = operand(x, n->b, item);
        const char *want = strcmp(vtype(arg), "S") == 0 ? json_string_value(vbody(arg)) : NULL;
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
            rv = v != NULL && strcmp(vtype(v), want) == 0;
        }
        break;
    }
    case EXPR_FN_BEGINS_WITH:
        arg = operand(x, n->b, item);
        rv = v != NULL && arg != NULL && begins_with(v, arg);
        break;
    case EXPR_FN_CONTAINS:
        arg = operand(x, n->b, item);
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
        a = operand(x, c->a, item);
        b = operand(x, c->b, item);
        if (a != NULL && b != NULL) {
            if (c->op == EXPR_EQ) {
                rv = expr_value_equal(a, b);
            } else if (c->op == EXPR_NE) {
                rv = !expr_value_equal(a, b);
            } else if (order(a, b, &cmp) == 0) {
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
        a = operand(x, c->a, item);
        b = operand(x, c->b, item);
        hi = operand(x, c->c, item);
        rv = a && b && hi && order(a, b, &cmp) == 0 && order(a, hi, &cmp2) == 0 && cmp >= 0 &&
             cmp2 <= 0;
        break;
    case EXPR_IN:
        a = operand(x, c->a, item);
        for (const expr_node *e = c->b; a != NULL && e != NULL && !rv; e = e->next) {
            json_t *v = operand(x, e, item);
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

/* ---- updates ---- */

/* An update operand's value computed from the old item: a new reference, or
 * NULL with x->err. */
static json_t *upvalue(expr_ctx *x, const expr_node *n, json_t *old)
{
    json_t *a, *b, *r = NULL;
    switch (n->kind) {
    case EXPR_PATH:
    case EXPR_VALUE:
        if ((r = operand(x, n, old)) == NULL && !x->failed) {
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
            if (strcmp(vtype(a), "N") != 0 || strcmp(vtype(b), "N") != 0) {
                expr_fail(x,
                          "Incorrect operand type for operator or function; operator: %s, "
                          "operand type: %s",
                          n->kind == EXPR_PLUS ? "+" : "-",
                          strcmp(vtype(a), "N") != 0 ? vtype(a) : vtype(b));
            } else {
                r = num_add(x, a, b, n->kind == EXPR_MINUS);
            }
        } else if (strcmp(vtype(a), "L") != 0 || strcmp(vtype(b), "L") != 0) {
            expr_fail(x,
                      "Incorrect operand type for operator or function; operator or function: "
                      "list_append, operand type: %s",
                      strcmp(vtype(a), "L") != 0 ? vtype(a) : vtype(b));
        } else {
            json_t *l = json_deep_copy(vbody(a));
            json_array_extend(l, vbody(b));
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
    const char *t = vtype(parent);
    if (parent != NULL && last->name != NULL && strcmp(t, "M") == 0) {
        if (v == NULL) {
            json_object_del(vbody(parent), last->name);
            return 0;
        }
        return json_object_set_new(vbody(parent), last->name, v);
    }
    if (parent != NULL && last->name == NULL && strcmp(t, "L") == 0) {
        json_t *l = vbody(parent);
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
            in_with = in_with || scalar_equal(et, e, f);
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
                in_have = in_have || scalar_equal(et, e, f);
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
    const char *t = vtype(v);
    if (!(is_set(t) || (a->kind == EXPR_ADD && strcmp(t, "N") == 0))) {
        expr_fail(x,
                  "Incorrect operand type for operator or function; operator: %s, operand "
                  "type: %s",
                  op, t);
        return -1;
    }
    if (have != NULL && strcmp(vtype(have), t) != 0) {
        expr_fail(x, "An operand in the update expression has an incorrect data type");
        return -1;
    }
    json_t *r;
    if (strcmp(t, "N") == 0) {
        r = have != NULL ? num_add(x, have, v, 0) : json_incref(v);
        if (r == NULL) {
            return -1;
        }
    } else if (have == NULL) {
        if (a->kind == EXPR_DELETE) {
            return 0;
        }
        r = json_incref(v);
    } else {
        json_t *body = set_op(vbody(have), vbody(v), t[0] == 'N' ? "N" : "S", a->kind == EXPR_ADD);
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
    const char *t = vtype(v);
    json_t *have = json_object_get(dst, p->name);
    if (p->next->name != NULL && strcmp(t, "M") == 0) {
        if (have == NULL) {
            have = json_pack("{s:{}}", "M");
            json_object_set_new(dst, p->name, have);
        }
        project_one(vbody(have), vbody(v), p->next);
    } else if (p->next->name == NULL && strcmp(t, "L") == 0) {
        json_t *e = json_array_get(vbody(v), (size_t)p->next->index);
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
            json_array_append(vbody(have), e);
        } else {
            expr_elem rest = {.name = "x", .next = p->next->next};
            project_one(wrap_dst, wrap_src, &rest);
            json_t *got = json_object_get(wrap_dst, "x");
            if (got != NULL) {
                json_array_append(vbody(have), got);
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
