/*
 * ddb_legacy.c: DynamoDB's legacy request parameters rewritten into
 * expressions (ddb_legacy.h). Each legacy condition becomes the expression
 * DynamoDB documents as its equivalent (EQ: a = :v, NE: a <> :v, NULL:
 * attribute_not_exists(a), NOT_CONTAINS: NOT contains(a, :v), ...), so the
 * one evaluator in expr/ gives both forms the same answers, including on a
 * missing attribute (a comparison is false, <> and NOT contains true).
 */
#include "ddb_legacy.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../expr/expr.h"

/* ---- the operations and their parameters ---- */

/* An operation's expression parameters and their legacy counterparts, each
 * list NULL-terminated in the order DynamoDB's mixing message names them. */
typedef struct op_params {
    const char *op;
    const char *expr[4];
    const char *legacy[5];
} op_params;

static const op_params op_table[] = {
    {"PutItem", {"ConditionExpression"}, {"Expected", "ConditionalOperator"}},
    {"DeleteItem", {"ConditionExpression"}, {"Expected", "ConditionalOperator"}},
    {"UpdateItem",
     {"UpdateExpression", "ConditionExpression"},
     {"AttributeUpdates", "Expected", "ConditionalOperator"}},
    {"GetItem", {"ProjectionExpression"}, {"AttributesToGet"}},
    {"BatchGetItem", {"ProjectionExpression"}, {"AttributesToGet"}}, /* per table */
    {"Query",
     {"ProjectionExpression", "FilterExpression", "KeyConditionExpression"},
     {"AttributesToGet", "QueryFilter", "ConditionalOperator", "KeyConditions"}},
    {"Scan",
     {"ProjectionExpression", "FilterExpression"},
     {"AttributesToGet", "ScanFilter", "ConditionalOperator"}},
};

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

/* ---- translation state ---- */

typedef enum cond_mode {
    EXPECTED, /* Expected: the Exists/Value form or a ComparisonOperator */
    FILTER,   /* QueryFilter, ScanFilter: a ComparisonOperator */
    KEY       /* KeyConditions: a ComparisonOperator usable on a key */
} cond_mode;

typedef struct legacy {
    ddb_ctx *x;
    json_t *names;       /* owned: the request's ExpressionAttributeNames plus ours */
    json_t *values;      /* owned: the same for ExpressionAttributeValues */
    json_t *placeholder; /* owned: attribute name -> its generated #name */
    unsigned next_name, next_value;
    int oom; /* a buf or jansson call failed */
} legacy;

static int invalid(legacy *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A ValidationException with DynamoDB's prefix for parameter mistakes. */
static int invalid(legacy *l, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ddb_req_fail(l->x, 400, "ValidationException",
                        "One or more parameter values were invalid: %s", msg);
}

static int present(json_t *obj, const char *member)
{
    json_t *v = json_object_get(obj, member);
    return v != NULL && !json_is_null(v);
}

/* The #placeholder of attribute name (borrowed from l), made on first use;
 * NULL on OOM. */
static const char *name_ph(legacy *l, const char *name)
{
    json_t *have = json_object_get(l->placeholder, name);
    if (have != NULL) {
        return json_string_value(have);
    }
    char ph[32];
    do {
        snprintf(ph, sizeof ph, "#legacy%u", l->next_name++);
    } while (json_object_get(l->names, ph) != NULL);
    if (json_object_set_new(l->names, ph, json_string(name)) != 0 ||
        json_object_set_new(l->placeholder, name, json_string(ph)) != 0) {
        l->oom = 1;
        return NULL;
    }
    return json_string_value(json_object_get(l->placeholder, name));
}

/* A fresh :placeholder for value v into ph. */
static void value_ph(legacy *l, json_t *v, char *ph, size_t len)
{
    do {
        snprintf(ph, len, ":legacy%u", l->next_value++);
    } while (json_object_get(l->values, ph) != NULL);
    if (json_object_set(l->values, ph, v) != 0) {
        l->oom = 1;
    }
}

static void append(legacy *l, buf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void append(legacy *l, buf *b, const char *fmt, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    /* Placeholders are short: a piece never reaches the local buffer's end. */
    if (n < 0 || (size_t)n >= sizeof text || buf_append_str(b, text) != 0) {
        l->oom = 1;
    }
}

/* Moves b's text into obj[member] as a string. */
static void set_text(legacy *l, json_t *obj, const char *member, buf *b)
{
    char *s = buf_detach(b);
    if (s == NULL || json_object_set_new(obj, member, json_string(s)) != 0) {
        l->oom = 1;
    }
    free(s);
}

/* Checks one typed value of attribute attr: a JSON object with one known,
 * well-formed type. */
static int check_value(legacy *l, const char *attr, json_t *v)
{
    char why[200];
    if (!json_is_object(v) || json_object_size(v) != 1) {
        return invalid(
            l, "Supplied AttributeValue must have exactly one data type for Attribute: %s", attr);
    }
    if (expr_value_check(v, why, sizeof why) != 0) {
        return invalid(l, "%s for Attribute: %s", why, attr);
    }
    return 0;
}

static const char *vtype(json_t *v)
{
    const char *t = json_object_iter_key(json_object_iter(v));
    return t != NULL ? t : "";
}

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
        return invalid(l,
                       "Invalid number of argument(s) for the %s ComparisonOperator for "
                       "Attribute: %.100s (%s takes %s%d, got %zu)",
                       name, attr, name, op->max < 0 ? "at least " : "", op->min, n);
    }
    json_array_foreach(list, i, v)
    {
        if (check_value(l, attr, v) != 0) {
            return -1;
        }
        if (strcmp(vtype(v), vtype(json_array_get(list, 0))) != 0) {
            return invalid(l,
                           "AttributeValues inside AttributeValueList must be of same type for "
                           "Attribute: %.100s",
                           attr);
        }
        char pad[8];
        snprintf(pad, sizeof pad, " %s ", vtype(v));
        if (op->types != NULL && strstr(op->types, pad) == NULL) {
            return invalid(l,
                           "ComparisonOperator %s is not valid for %s AttributeValue type for "
                           "Attribute: %.100s",
                           name, vtype(v), attr);
        }
    }
    const char *a = name_ph(l, attr);
    char ph[2][32] = {"", ""};
    if (a == NULL) {
        return 0; /* l->oom */
    }
    /* The first two values here (IN's others below): n <= 2 but for IN. */
    for (i = 0; i < n && i < (op->form == IN ? 1u : 2u); i++) {
        value_ph(l, json_array_get(list, i), ph[i], sizeof ph[i]);
    }
    switch (op->form) {
    case INFIX:
        append(l, b, "%s %s %s", a, op->text, ph[0]);
        break;
    case FUNC0:
        append(l, b, "%s(%s)", op->text, a);
        break;
    case FUNC1:
        append(l, b, "%s(%s, %s)", op->text, a, ph[0]);
        break;
    case BETWEEN:
        append(l, b, "%s BETWEEN %s AND %s", a, ph[0], ph[1]);
        break;
    case IN:
        append(l, b, "%s IN (%s", a, ph[0]);
        for (i = 1; i < n; i++) {
            char more[32];
            value_ph(l, json_array_get(list, i), more, sizeof more);
            append(l, b, ", %s", more);
        }
        append(l, b, ")");
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
        return invalid(l,
                       "AttributeValueList can only be used with a ComparisonOperator for "
                       "Attribute: %.100s",
                       attr);
    }
    if (exists == NULL || json_is_true(exists)) {
        if (value == NULL) {
            return invalid(l, "Value must be provided when Exists is %s for Attribute: %.100s",
                           exists == NULL ? "null" : "true", attr);
        }
        if (check_value(l, attr, value) != 0) {
            return -1;
        }
        const char *a = name_ph(l, attr);
        char ph[32];
        value_ph(l, value, ph, sizeof ph);
        append(l, b, "%s = %s", a ? a : "", ph);
        return 0;
    }
    if (value != NULL) {
        return invalid(l, "Value cannot be used when Exists is false for Attribute: %.100s", attr);
    }
    const char *a = name_ph(l, attr);
    append(l, b, "attribute_not_exists(%s)", a ? a : "");
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
        return invalid(
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
        return invalid(l,
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
        return invalid(l,
                       "Value or AttributeValueList must be used with ComparisonOperator: %s for "
                       "Attribute: %.100s",
                       name, attr);
    }
    return compare(l, param, mode, attr, name, list, b);
}

/* The legacy condition map req[param] as one condition expression in
 * out[member]: its entries joined by join (AND, or ConditionalOperator's).
 * An empty map sets nothing. */
static int condition_map(legacy *l, json_t *req, json_t *out, const char *param, cond_mode mode,
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
            append(l, &b, " %s ", join);
        }
        if (n > 1) {
            append(l, &b, "(");
        }
        if (condition(l, param, mode, attr, c, &b) != 0) {
            buf_fini(&b);
            return -1;
        }
        if (n > 1) {
            append(l, &b, ")");
        }
    }
    if (n > 0) {
        set_text(l, out, member, &b);
    }
    buf_fini(&b);
    return 0;
}

/* ---- AttributeUpdates ---- */

/* One AttributeUpdates entry appended to its clause's text (set, remove,
 * add or del). */
static int attribute_update(legacy *l, const char *attr, json_t *u, buf *set, buf *remove, buf *add,
                            buf *del)
{
    if (!json_is_object(u)) {
        return ddb_req_fail(l->x, 400, "SerializationException",
                            "AttributeUpdates: the update of %.100s must be a structure (JSON "
                            "object)",
                            attr);
    }
    json_t *action = json_object_get(u, "Action"), *value = json_object_get(u, "Value");
    if (action != NULL && !json_is_string(action)) {
        return ddb_req_fail(l->x, 400, "SerializationException",
                            "AttributeUpdates: Action of %.100s must be a string", attr);
    }
    const char *act = action != NULL ? json_string_value(action) : "PUT";
    if (strcmp(act, "PUT") != 0 && strcmp(act, "DELETE") != 0 && strcmp(act, "ADD") != 0) {
        return ddb_req_fail(l->x, 400, "ValidationException",
                            "1 validation error detected: Value '%.40s' at "
                            "'attributeUpdates.%.100s.member.action' failed to satisfy "
                            "constraint: Member must satisfy enum value set: [ADD, PUT, DELETE]",
                            act, attr);
    }
    if (value == NULL && strcmp(act, "DELETE") != 0) {
        return invalid(l,
                       "Only DELETE action is allowed when no attribute value is specified "
                       "(%s of Attribute: %.100s)",
                       act, attr);
    }
    if (value != NULL && check_value(l, attr, value) != 0) {
        return -1;
    }
    const char *t = value != NULL ? vtype(value) : "";
    int is_set = strcmp(t, "SS") == 0 || strcmp(t, "NS") == 0 || strcmp(t, "BS") == 0;
    if (strcmp(act, "DELETE") == 0 && value != NULL && !is_set) {
        return invalid(l,
                       "DELETE action with value is not supported for the type %s for "
                       "Attribute: %.100s",
                       t, attr);
    }
    if (strcmp(act, "ADD") == 0 && !is_set && strcmp(t, "N") != 0 && strcmp(t, "L") != 0) {
        return invalid(l, "ADD action is not supported for the type %s for Attribute: %.100s", t,
                       attr);
    }
    const char *a = name_ph(l, attr);
    char ph[32] = "", empty[32] = "";
    if (a == NULL) {
        return 0; /* l->oom */
    }
    if (value != NULL) {
        value_ph(l, value, ph, sizeof ph);
    }
    buf *b = strcmp(act, "PUT") == 0 || strcmp(t, "L") == 0 ? set
             : strcmp(act, "ADD") == 0                      ? add
             : value != NULL                                ? del
                                                            : remove;
    if (b->len > 0) {
        append(l, b, ", ");
    }
    if (strcmp(act, "PUT") == 0) {
        append(l, b, "%s = %s", a, ph);
    } else if (b == set) {
        /* ADD of a list appends to it (an absent attribute starts empty). */
        json_t *none = json_pack("{s:[]}", "L");
        value_ph(l, none, empty, sizeof empty);
        json_decref(none);
        append(l, b, "%s = list_append(if_not_exists(%s, %s), %s)", a, a, empty, ph);
    } else if (b == remove) {
        append(l, b, "%s", a);
    } else {
        append(l, b, "%s %s", a, ph);
    }
    return 0;
}

/* req's AttributeUpdates as out's UpdateExpression (an empty map sets
 * nothing). */
static int attribute_updates(legacy *l, json_t *req, json_t *out)
{
    static const char *const clause[] = {"SET", "REMOVE", "ADD", "DELETE"};
    json_t *map, *u;
    const char *attr;
    buf b[4], text;
    int rv = 0;
    if (ddb_req_object(l->x, req, "AttributeUpdates", 0, &map) != 0) {
        return -1;
    }
    for (int i = 0; i < 4; i++) {
        buf_init(&b[i]);
    }
    buf_init(&text);
    json_object_foreach(map, attr, u)
    {
        if ((rv = attribute_update(l, attr, u, &b[0], &b[1], &b[2], &b[3])) != 0) {
            break;
        }
    }
    for (int i = 0; i < 4 && rv == 0; i++) {
        if (b[i].len > 0) {
            append(l, &text, "%s%s ", text.len > 0 ? " " : "", clause[i]);
            if (buf_append(&text, b[i].data, b[i].len) != 0) {
                l->oom = 1;
            }
        }
    }
    if (rv == 0 && text.len > 0) {
        set_text(l, out, "UpdateExpression", &text);
    }
    for (int i = 0; i < 4; i++) {
        buf_fini(&b[i]);
    }
    buf_fini(&text);
    return rv;
}

/* ---- AttributesToGet ---- */

static int attributes_to_get(legacy *l, json_t *req, json_t *out)
{
    json_t *list, *a, *seen;
    size_t i;
    buf b;
    int rv = 0;
    if (ddb_req_array(l->x, req, "AttributesToGet", 0, &list) != 0) {
        return -1;
    }
    if (json_array_size(list) == 0) {
        return ddb_req_fail(l->x, 400, "ValidationException",
                            "1 validation error detected: Value '[]' at 'attributesToGet' failed "
                            "to satisfy constraint: Member must have length greater than or "
                            "equal to 1");
    }
    const char *select = json_string_value(json_object_get(req, "Select"));
    if (select != NULL && strcmp(select, "SPECIFIC_ATTRIBUTES") != 0) {
        return ddb_req_fail(l->x, 400, "ValidationException",
                            "Cannot specify the AttributesToGet when choosing to get %.40s",
                            select);
    }
    if ((seen = json_object()) == NULL) {
        return ddb_req_fail(l->x, 500, "InternalServerError", "out of memory");
    }
    buf_init(&b);
    json_array_foreach(list, i, a)
    {
        if (!json_is_string(a)) {
            rv = ddb_req_fail(l->x, 400, "SerializationException",
                              "AttributesToGet: each attribute name must be a string");
            break;
        }
        if (json_object_get(seen, json_string_value(a)) != NULL) {
            rv = invalid(l, "Duplicate value in attribute name: %.100s", json_string_value(a));
            break;
        }
        json_object_set_new(seen, json_string_value(a), json_true());
        const char *ph = name_ph(l, json_string_value(a));
        append(l, &b, "%s%s", i > 0 ? ", " : "", ph ? ph : "");
    }
    if (rv == 0) {
        set_text(l, out, "ProjectionExpression", &b);
    }
    buf_fini(&b);
    json_decref(seen);
    return rv;
}

/* ---- one request ---- */

/* DynamoDB's rule on mixing: returns -1 with its ValidationException when
 * req has a legacy parameter and an expression one of p, else 0 with
 * *legacy_n the number of legacy parameters present. */
static int check_mixing(ddb_ctx *x, const op_params *p, json_t *req, int *legacy_n)
{
    char exprs[160] = "", olds[160] = "";
    int n = 0;
    *legacy_n = 0;
    for (size_t i = 0; p->expr[i] != NULL; i++) {
        if (present(req, p->expr[i])) {
            size_t len = strlen(exprs);
            snprintf(exprs + len, sizeof exprs - len, "%s%s", len ? ", " : "", p->expr[i]);
        }
    }
    for (size_t i = 0; p->legacy[i] != NULL; i++) {
        if (!present(req, p->legacy[i])) {
            continue;
        }
        (*legacy_n)++;
        /* DynamoDB lets KeyConditions go with a filter or projection
         * expression, not with KeyConditionExpression. */
        if (strcmp(p->legacy[i], "KeyConditions") == 0 && !present(req, "KeyConditionExpression")) {
            continue;
        }
        size_t len = strlen(olds);
        snprintf(olds + len, sizeof olds - len, "%s%s", len ? ", " : "", p->legacy[i]);
        n++;
    }
    if (n > 0 && exprs[0] != '\0') {
        return ddb_req_fail(x, 400, "ValidationException",
                            "Can not use both expression and non-expression parameters in the "
                            "same request: Non-expression parameters: {%s} Expression "
                            "parameters: {%s}",
                            olds, exprs);
    }
    if (*legacy_n == 0 || exprs[0] != '\0') {
        return 0;
    }
    /* Only legacy parameters: the request's own names and values would be
     * used by no expression. */
    if (present(req, "ExpressionAttributeNames")) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "ExpressionAttributeNames can only be specified when using "
                            "expressions");
    }
    if (present(req, "ExpressionAttributeValues")) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "ExpressionAttributeValues can only be specified when using "
                            "expressions (the request uses the legacy parameters only)");
    }
    return 0;
}

/* Starts l on req's names and values (copies: req is not modified). */
static int legacy_init(legacy *l, ddb_ctx *x, json_t *req)
{
    json_t *names, *values;
    memset(l, 0, sizeof *l);
    l->x = x;
    if (ddb_req_object(x, req, "ExpressionAttributeNames", 0, &names) != 0 ||
        ddb_req_object(x, req, "ExpressionAttributeValues", 0, &values) != 0) {
        return -1;
    }
    l->names = names != NULL ? json_copy(names) : json_object();
    l->values = values != NULL ? json_copy(values) : json_object();
    l->placeholder = json_object();
    if (l->names == NULL || l->values == NULL || l->placeholder == NULL) {
        return ddb_req_fail(x, 500, "InternalServerError", "out of memory");
    }
    return 0;
}

static void legacy_fini(legacy *l)
{
    json_decref(l->names);
    json_decref(l->values);
    json_decref(l->placeholder);
}

/* Translates one request object (a whole request, or one table of
 * BatchGetItem) under p into *out (a new reference). */
static int translate_one(ddb_ctx *x, const op_params *p, json_t *req, json_t **out)
{
    legacy l;
    int n, rv = -1;
    *out = NULL;
    if (check_mixing(x, p, req, &n) != 0) {
        return -1;
    }
    if (n == 0) {
        *out = json_incref(req);
        return 0;
    }
    const char *join = "AND", *cop;
    if (ddb_req_string(x, req, "ConditionalOperator", 0, &cop) != 0) {
        return -1;
    }
    if (cop != NULL && strcmp(cop, "AND") != 0 && strcmp(cop, "OR") != 0) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "1 validation error detected: Value '%.20s' at 'conditionalOperator' "
                            "failed to satisfy constraint: Member must satisfy enum value set: "
                            "[OR, AND]",
                            cop);
    }
    join = cop != NULL ? cop : join;
    json_t *copy = json_copy(req);
    if (legacy_init(&l, x, req) != 0) {
        goto out;
    }
    if (copy == NULL) {
        ddb_req_fail(x, 500, "InternalServerError", "out of memory");
        goto out;
    }
    if ((present(req, "Expected") &&
         condition_map(&l, req, copy, "Expected", EXPECTED, join, "ConditionExpression") != 0) ||
        (present(req, "QueryFilter") &&
         condition_map(&l, req, copy, "QueryFilter", FILTER, join, "FilterExpression") != 0) ||
        (present(req, "ScanFilter") &&
         condition_map(&l, req, copy, "ScanFilter", FILTER, join, "FilterExpression") != 0) ||
        (present(req, "KeyConditions") && condition_map(&l, req, copy, "KeyConditions", KEY, "AND",
                                                        "KeyConditionExpression") != 0) ||
        (present(req, "AttributeUpdates") && attribute_updates(&l, req, copy) != 0) ||
        (present(req, "AttributesToGet") && attributes_to_get(&l, req, copy) != 0)) {
        goto out;
    }
    for (size_t i = 0; p->legacy[i] != NULL; i++) {
        json_object_del(copy, p->legacy[i]);
    }
    if (json_object_size(l.names) > 0 &&
        json_object_set(copy, "ExpressionAttributeNames", l.names) != 0) {
        l.oom = 1;
    }
    if (json_object_size(l.values) > 0 &&
        json_object_set(copy, "ExpressionAttributeValues", l.values) != 0) {
        l.oom = 1;
    }
    if (l.oom) {
        ddb_req_fail(x, 500, "InternalServerError", "out of memory");
        goto out;
    }
    *out = copy;
    copy = NULL;
    rv = 0;
out:
    json_decref(copy);
    legacy_fini(&l);
    return rv;
}

/* BatchGetItem: each table of RequestItems on its own. */
static int translate_batch_get(ddb_ctx *x, const op_params *p, json_t *req, json_t **out)
{
    json_t *items = json_object_get(req, "RequestItems"), *spec;
    const char *table;
    *out = NULL;
    if (!json_is_object(items)) {
        *out = json_incref(req); /* the operation refuses it in its words */
        return 0;
    }
    json_t *copy = json_copy(req), *new_items = json_object();
    if (copy == NULL || new_items == NULL ||
        json_object_set(copy, "RequestItems", new_items) != 0) {
        json_decref(copy);
        json_decref(new_items);
        return ddb_req_fail(x, 500, "InternalServerError", "out of memory");
    }
    json_decref(new_items); /* copy holds it */
    json_object_foreach(items, table, spec)
    {
        json_t *t = NULL;
        if (json_is_object(spec) && translate_one(x, p, spec, &t) != 0) {
            json_decref(copy);
            return -1;
        }
        if (json_object_set_new(new_items, table, t != NULL ? t : json_incref(spec)) != 0) {
            json_decref(copy);
            return ddb_req_fail(x, 500, "InternalServerError", "out of memory");
        }
    }
    *out = copy;
    return 0;
}

int ddb_legacy_translate(ddb_ctx *x, const char *op, json_t *req, json_t **out)
{
    for (size_t i = 0; i < sizeof op_table / sizeof op_table[0]; i++) {
        if (strcmp(op_table[i].op, op) == 0) {
            return strcmp(op, "BatchGetItem") == 0 ? translate_batch_get(x, &op_table[i], req, out)
                                                   : translate_one(x, &op_table[i], req, out);
        }
    }
    *out = json_incref(req);
    return 0;
}
