/*
 * ddb_legacy_cond.c: the legacy conditions (Expected, QueryFilter,
 * ScanFilter, KeyConditions) rewritten into condition expressions
 * (ddb_legacy.h). Each becomes the expression DynamoDB documents as its
 * equivalent (EQ: a = :v, NE: a <> :v, NULL: attribute_not_exists(a),
 * NOT_CONTAINS: NOT contains(a, :v), ...), so the one evaluator in expr/
 * gives both forms the same answers, including on a missing attribute (a
 * comparison is false, <> and NOT contains true).
 */
#include <stdio.h>
#include <string.h>

#include "ddb_legacy_int.h"

/* ---- ComparisonOperators ---- */

typedef enum cmp_form {
    INFIX,   /* a OP :v */
    FUNC0,   /* fn(a) */
    FUNC1,   /* fn(a, :v) */
    BETWEEN, /* a BETWEEN :lo AND :hi */
    IN       /* a IN (:v, ...) */
} cmp_form;

typedef struct cmp_op {
    const char *name;  /* DynamoDB's ComparisonOperator */
    int min, max;      /* how many values it takes (max -1: no limit) */
    const char *types; /* the value types it takes, space-separated; NULL: any */
    cmp_form form;
    const char *text; /* the operator or function of the expression */
    int key;          /* 1 when KeyConditions may use it */
} cmp_op;

/* DynamoDB's rules (API reference, "Condition"): EQ and NE take any type;
 * ordering, IN, BETWEEN and CONTAINS a scalar (S, N, B); BEGINS_WITH S or B. */
static const cmp_op cmp_ops[] = {
    {"EQ", 1, 1, NULL, INFIX, "=", 1},
    {"NE", 1, 1, NULL, INFIX, "<>", 0},
    {"LE", 1, 1, " S N B ", INFIX, "<=", 1},
    {"LT", 1, 1, " S N B ", INFIX, "<", 1},
    {"GE", 1, 1, " S N B ", INFIX, ">=", 1},
    {"GT", 1, 1, " S N B ", INFIX, ">", 1},
    {"NOT_NULL", 0, 0, NULL, FUNC0, "attribute_exists", 0},
    {"NULL", 0, 0, NULL, FUNC0, "attribute_not_exists", 0},
    {"CONTAINS", 1, 1, " S N B ", FUNC1, "contains", 0},
    {"NOT_CONTAINS", 1, 1, " S N B ", FUNC1, "NOT contains", 0},
    {"BEGINS_WITH", 1, 1, " S B ", FUNC1, "begins_with", 1},
    {"IN", 1, -1, " S N B ", IN, "IN", 0},
    {"BETWEEN", 2, 2, " S N B ", BETWEEN, "BETWEEN", 1},
};

#define CMP_ENUM                                                                                   \
    "[IN, NULL, BETWEEN, LT, NOT_CONTAINS, EQ, GT, NOT_NULL, NE, LE, BEGINS_WITH, GE, CONTAINS]"

/* ---- conditions: Expected, QueryFilter, ScanFilter, KeyConditions ---- */

static const cmp_op *find_op(const char *name)
{
    for (size_t i = 0; i < sizeof cmp_ops / sizeof cmp_ops[0]; i++) {
        if (strcmp(cmp_ops[i].name, name) == 0) {
            return &cmp_ops[i];
        }
    }
    return NULL;
}

/* DynamoDB's member-constraint error for the ComparisonOperator of attr in
 * param: name is not one (NULL: it is missing). Returns -1. */
static int bad_operator(legacy *l, const char *param, const char *attr, const char *name)
{
    char where[160];
    /* DynamoDB names the member path with the parameter's first letter
     * lowercased: scanFilter.a.member.comparisonOperator. */
    snprintf(where, sizeof where, "%c%s.%.100s.member.comparisonOperator", param[0] - 'A' + 'a',
             param + 1, attr);
    if (name == NULL) {
        return ddb_req_fail(l->x, 400, "ValidationException",
                            "1 validation error detected: Value null at '%s' failed to satisfy "
                            "constraint: Member must not be null",
                            where);
    }
    return ddb_req_fail(l->x, 400, "ValidationException",
                        "1 validation error detected: Value '%.40s' at '%s' failed to satisfy "
                        "constraint: Member must satisfy enum value set: " CMP_ENUM,
                        name, where);
}

/* Appends the expression of a ComparisonOperator condition on attr: op
 * named name, its values in list (an array of typed values). */
static int compare(legacy *l, const char *param, cond_mode mode, const char *attr, const char *name,
                   json_t *list, buf *b)
{
    const cmp_op *op = find_op(name);
    size_t n = json_array_size(list), i;
    json_t *v;
    if (op == NULL) {
        return bad_operator(l, param, attr, name);
    }
    if (mode == KEY && !op->key) {
        return ddb_req_fail(l->x, 400, "ValidationException",
                            "Attempted conditional constraint is not an indexable operation: "
                            "KeyConditions takes EQ, LE, LT, GE, GT, BEGINS_WITH or BETWEEN, not "
                            "%s for Attribute: %.100s",
                            name, attr);
    }
    if ((int)n < op->min || (op->max >= 0 && (int)n > op->max)) {
        return ddb_legacy_invalid(l,
                                  "Invalid number of argument(s) for the %s ComparisonOperator for "
                                  "Attribute: %.100s (%s takes %s%d, got %zu)",
                                  name, attr, name, op->max < 0 ? "at least " : "", op->min, n);
    }
    json_array_foreach(list, i, v)
    {
        if (ddb_legacy_check_value(l, attr, v) != 0) {
            return -1;
        }
        if (strcmp(ddb_legacy_vtype(v), ddb_legacy_vtype(json_array_get(list, 0))) != 0) {
            return ddb_legacy_invalid(
                l,
                "AttributeValues inside AttributeValueList must be of same type for "
                "Attribute: %.100s",
                attr);
        }
        char pad[8];
        snprintf(pad, sizeof pad, " %s ", ddb_legacy_vtype(v));
        if (op->types != NULL && strstr(op->types, pad) == NULL) {
            return ddb_legacy_invalid(
                l,
                "ComparisonOperator %s is not valid for %s AttributeValue type for "
                "Attribute: %.100s",
                name, ddb_legacy_vtype(v), attr);
        }
    }
    const char *a = ddb_legacy_name_ph(l, attr);
    char ph[2][32] = {"", ""};
    if (a == NULL) {
        return 0; /* l->oom */
    }
    /* The first two values here (IN's others below): n <= 2 but for IN. */
    for (i = 0; i < n && i < (op->form == IN ? 1u : 2u); i++) {
        ddb_legacy_value_ph(l, json_array_get(list, i), ph[i], sizeof ph[i]);
    }
    switch (op->form) {
    case INFIX:
        ddb_legacy_append(l, b, "%s %s %s", a, op->text, ph[0]);
        break;
    case FUNC0:
        ddb_legacy_append(l, b, "%s(%s)", op->text, a);
        break;
    case FUNC1:
        ddb_legacy_append(l, b, "%s(%s, %s)", op->text, a, ph[0]);
        break;
    case BETWEEN:
        ddb_legacy_append(l, b, "%s BETWEEN %s AND %s", a, ph[0], ph[1]);
        break;
    case IN:
        ddb_legacy_append(l, b, "%s IN (%s", a, ph[0]);
        for (i = 1; i < n; i++) {
            char more[32];
            ddb_legacy_value_ph(l, json_array_get(list, i), more, sizeof more);
            ddb_legacy_append(l, b, ", %s", more);
        }
        ddb_legacy_append(l, b, ")");
        break;
    }
    return 0;
}

/* Expected's older form: {"Value": v, "Exists": true|false}. */
static int exists_form(legacy *l, const char *attr, json_t *c, buf *b)
{
    json_t *value = json_object_get(c, "Value"), *exists = json_object_get(c, "Exists");
    if (exists != NULL && !json_is_boolean(exists)) {
        return ddb_req_fail(l->x, 400, "SerializationException",
                            "Expected: Exists of %.100s must be a boolean", attr);
    }
    if (json_object_get(c, "AttributeValueList") != NULL) {
        return ddb_legacy_invalid(
            l,
            "AttributeValueList can only be used with a ComparisonOperator for "
            "Attribute: %.100s",
            attr);
    }
    if (exists == NULL || json_is_true(exists)) {
        if (value == NULL) {
            return ddb_legacy_invalid(
                l, "Value must be provided when Exists is %s for Attribute: %.100s",
                exists == NULL ? "null" : "true", attr);
        }
        if (ddb_legacy_check_value(l, attr, value) != 0) {
            return -1;
        }
        const char *a = ddb_legacy_name_ph(l, attr);
        char ph[32];
        ddb_legacy_value_ph(l, value, ph, sizeof ph);
        ddb_legacy_append(l, b, "%s = %s", a ? a : "", ph);
        return 0;
    }
    if (value != NULL) {
        return ddb_legacy_invalid(
            l, "Value cannot be used when Exists is false for Attribute: %.100s", attr);
    }
    const char *a = ddb_legacy_name_ph(l, attr);
    ddb_legacy_append(l, b, "attribute_not_exists(%s)", a ? a : "");
    return 0;
}

/* One entry of a legacy condition map as expression text appended to b. */
static int condition(legacy *l, const char *param, cond_mode mode, const char *attr, json_t *c,
                     buf *b)
{
    if (!json_is_object(c)) {
        return ddb_req_fail(l->x, 400, "SerializationException",
                            "%s: the condition of %.100s must be a structure (JSON object)", param,
                            attr);
    }
    json_t *opname = json_object_get(c, "ComparisonOperator");
    json_t *list = json_object_get(c, "AttributeValueList");
    json_t *value = json_object_get(c, "Value");
    if (opname != NULL && !json_is_string(opname)) {
        return ddb_req_fail(l->x, 400, "SerializationException",
                            "%s: ComparisonOperator of %.100s must be a string", param, attr);
    }
    if (list != NULL && !json_is_array(list)) {
        return ddb_req_fail(l->x, 400, "SerializationException",
                            "%s: AttributeValueList of %.100s must be a list (JSON array)", param,
                            attr);
    }
    if (mode == EXPECTED && list != NULL && value != NULL) {
        return ddb_legacy_invalid(
            l, "Value and AttributeValueList cannot be used together for Attribute: %.100s", attr);
    }
    if (mode == EXPECTED && opname == NULL) {
        return exists_form(l, attr, c, b);
    }
    if (opname == NULL) {
        return bad_operator(l, param, attr, NULL);
    }
    const char *name = json_string_value(opname);
    if (mode == EXPECTED && json_object_get(c, "Exists") != NULL) {
        return ddb_legacy_invalid(
            l,
            "Exists and ComparisonOperator cannot be used together for Attribute: "
            "%.100s",
            attr);
    }
    if (mode == EXPECTED && list == NULL && value != NULL) {
        /* Expected takes a lone Value in place of a one-element list. */
        json_t *one = json_pack("[O]", value);
        int rv = one != NULL ? compare(l, param, mode, attr, name, one, b) : (l->oom = 1, 0);
        json_decref(one);
        return rv;
    }
    if (mode == EXPECTED && list == NULL && strcmp(name, "NULL") != 0 &&
        strcmp(name, "NOT_NULL") != 0 && find_op(name) != NULL) {
        return ddb_legacy_invalid(
            l,
            "Value or AttributeValueList must be used with ComparisonOperator: %s for "
            "Attribute: %.100s",
            name, attr);
    }
    return compare(l, param, mode, attr, name, list, b);
}

/* The legacy condition map req[param] as one condition expression in
 * out[member]: its entries joined by join (AND, or ConditionalOperator's).
 * An empty map sets nothing. */
int ddb_legacy_condition_map(legacy *l, json_t *req, json_t *out, const char *param, cond_mode mode,
                             const char *join, const char *member)
{
    json_t *map, *c;
    const char *attr;
    buf b;
    if (ddb_req_object(l->x, req, param, 0, &map) != 0) {
        return -1;
    }
    size_t n = json_object_size(map);
    if (mode == KEY && n != 1 && n != 2) {
        return ddb_req_fail(l->x, 400, "ValidationException",
                            "Conditions can be of length 1 or 2 only (KeyConditions has %zu)", n);
    }
    buf_init(&b);
    json_object_foreach(map, attr, c)
    {
        if (b.len > 0) {
            ddb_legacy_append(l, &b, " %s ", join);
        }
        if (n > 1) {
            ddb_legacy_append(l, &b, "(");
        }
        if (condition(l, param, mode, attr, c, &b) != 0) {
            buf_fini(&b);
            return -1;
        }
        if (n > 1) {
            ddb_legacy_append(l, &b, ")");
        }
    }
    if (n > 0) {
        ddb_legacy_set_text(l, out, member, &b);
    }
    buf_fini(&b);
    return 0;
}
