/*
 * expr_value.c: DynamoDB JSON values as expressions see them: their type
 * and body, paths into items, exact number arithmetic, the checks every
 * ExpressionAttributeValues value passes, equality and order (values of
 * different types are never equal and never ordered).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/base64.h"
#include "../common/number.h"
#include "expr_int.h"

/* The type name of a typed value ({"S":"x"} -> "S"), or "" when malformed. */
const char *expr_vtype(json_t *v)
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

json_t *expr_vbody(json_t *v)
{
    return json_object_get(v, expr_vtype(v));
}

json_t *expr_get(json_t *item, const expr_elem *p)
{
    if (item == NULL || p == NULL || p->name == NULL) {
        return NULL;
    }
    json_t *v = json_object_get(item, p->name);
    for (p = p->next; v != NULL && p != NULL; p = p->next) {
        if (p->name != NULL) {
            v = strcmp(expr_vtype(v), "M") == 0 ? json_object_get(expr_vbody(v), p->name) : NULL;
        } else {
            v = strcmp(expr_vtype(v), "L") == 0 ? json_array_get(expr_vbody(v), (size_t)p->index)
                                                : NULL;
        }
    }
    return v;
}

/* ---- numbers ---- */

int expr_num_of(json_t *v, number *n)
{
    const char *s = json_string_value(expr_vbody(v));
    return s != NULL && number_parse(s, strlen(s), n, NULL, 0) == 0 ? 0 : -1;
}

enum { SUM_DIGITS = 600 }; /* digit slots of an exact sum: more than any two numbers span */

/* Spreads n's digits into d, little-endian: d[i] is the digit of
 * 10^(lo + i). */
static void spread_digits(const number *n, int lo, int *d)
{
    for (int i = 0; i < n->ndigits; i++) {
        d[(n->exp - 1 - i) - lo] = n->digits[i] - '0';
    }
}

/* Into r, the len little-endian digits of da + db, da negative when aneg
 * and db when bneg. Returns whether the sum is negative. */
static int signed_sum(const int *da, int aneg, const int *db, int bneg, int len, int *r)
{
    if (aneg == bneg) {
        int carry = 0;
        for (int i = 0; i < len; i++) {
            int s = da[i] + db[i] + carry;
            r[i] = s % 10;
            carry = s / 10;
        }
        return aneg;
    }
    int cmp = 0; /* |a| vs |b| */
    for (int i = len - 1; i >= 0 && cmp == 0; i--) {
        cmp = da[i] - db[i];
    }
    const int *big = cmp >= 0 ? da : db, *small = cmp >= 0 ? db : da;
    int borrow = 0;
    for (int i = 0; i < len; i++) {
        int s = big[i] - small[i] - borrow;
        borrow = s < 0;
        r[i] = s + (borrow ? 10 : 0);
    }
    return cmp >= 0 ? aneg : bneg;
}

/* The len little-endian digits r, the first of 10^lo (negative: neg), as a
 * new {"N":...}; NULL with x->err when they have more than 38 significant
 * digits or are out of range. */
static json_t *sum_value(expr_ctx *x, const int *r, int len, int lo, int neg)
{
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

/* a + b (or a - b with neg_b) exactly, into a new {"N":...}; NULL with
 * x->err when the result has more than 38 significant digits or is out of
 * range. */
json_t *expr_num_add(expr_ctx *x, json_t *va, json_t *vb, int neg_b)
{
    number a, b;
    if (expr_num_of(va, &a) != 0 || expr_num_of(vb, &b) != 0) {
        expr_fail(x, "An operand in the update expression has an incorrect data type");
        return NULL;
    }
    if (neg_b) {
        b.neg = !b.neg;
    }
    /* value = 0.d1..dn * 10^exp = D * 10^(exp - n): align on the smaller scale. */
    int sa = a.exp - a.ndigits, sb = b.exp - b.ndigits;
    int lo = sa < sb ? sa : sb;
    int hi = a.exp > b.exp ? a.exp : b.exp;
    if (a.ndigits == 0) {
        lo = sb, hi = b.exp;
    } else if (b.ndigits == 0) {
        lo = sa, hi = a.exp;
    }
    if (hi - lo + 2 > SUM_DIGITS) {
        expr_fail(x, "Number overflow. Attempting to store a number with magnitude larger than "
                     "supported range");
        return NULL;
    }
    int da[SUM_DIGITS] = {0}, db[SUM_DIGITS] = {0}, r[SUM_DIGITS] = {0}; /* little-endian digits */
    spread_digits(&a, lo, da);
    spread_digits(&b, lo, db);
    int len = hi - lo + 1;
    int neg = signed_sum(da, a.neg, db, b.neg, len, r);
    return sum_value(x, r, len, lo, neg);
}

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
    const char *t = expr_vtype(v);
    json_t *body = expr_vbody(v);
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
    if (expr_is_set(t)) {
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
                if (expr_scalar_equal(et[0] == 'N' ? "N" : "S", json_array_get(body, j), e)) {
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

int expr_is_set(const char *t)
{
    return strcmp(t, "SS") == 0 || strcmp(t, "NS") == 0 || strcmp(t, "BS") == 0;
}

/* Decoded bytes of a B value (caller frees), or NULL. */
uint8_t *expr_bytes_of(json_t *body, size_t *n)
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
int expr_scalar_equal(const char *t, json_t *a, json_t *b)
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
    const char *ta = expr_vtype(a), *tb = expr_vtype(b);
    if (strcmp(ta, tb) != 0 || ta[0] == '\0') {
        return 0;
    }
    json_t *ba = expr_vbody(a), *bb = expr_vbody(b);
    if (strcmp(ta, "N") == 0) {
        return expr_scalar_equal("N", ba, bb);
    }
    if (expr_is_set(ta)) {
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
                found = found || expr_scalar_equal(et, ea, eb);
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
int expr_order(json_t *a, json_t *b, int *cmp)
{
    const char *ta = expr_vtype(a), *tb = expr_vtype(b);
    if (strcmp(ta, tb) != 0) {
        return -1;
    }
    if (strcmp(ta, "N") == 0) {
        number x, y;
        if (expr_num_of(a, &x) != 0 || expr_num_of(b, &y) != 0) {
            return -1;
        }
        *cmp = number_cmp(&x, &y);
        return 0;
    }
    if (strcmp(ta, "S") == 0) {
        *cmp = strcmp(json_string_value(expr_vbody(a)), json_string_value(expr_vbody(b)));
        return 0;
    }
    if (strcmp(ta, "B") == 0) {
        size_t na, nb;
        uint8_t *pa = expr_bytes_of(expr_vbody(a), &na), *pb = expr_bytes_of(expr_vbody(b), &nb);
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
