/*
 * ddb_legacy.c: DynamoDB's legacy request parameters rewritten into
 * expressions (ddb_legacy.h): which parameters each operation has and the
 * mixing rule, AttributeUpdates and AttributesToGet. The conditions are
 * ddb_legacy_cond.c's; the placeholders and expression text both write with
 * are ddb_legacy_text.c's (ddb_legacy_int.h).
 */
#include "ddb_legacy.h"
#include "ddb_legacy_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/item.h"

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
        return ddb_legacy_invalid(
            l,
            "Only DELETE action is allowed when no attribute value is specified "
            "(%s of Attribute: %.100s)",
            act, attr);
    }
    if (value != NULL && ddb_legacy_check_value(l, attr, value) != 0) {
        return -1;
    }
    const char *t = value != NULL ? ddb_legacy_vtype(value) : "";
    attr_type type;
    const int is_set = item_type_parse(t, &type) == 0 && item_set_elem_type(type) != 0;
    if (strcmp(act, "DELETE") == 0 && value != NULL && !is_set) {
        return ddb_legacy_invalid(l,
                                  "DELETE action with value is not supported for the type %s for "
                                  "Attribute: %.100s",
                                  t, attr);
    }
    if (strcmp(act, "ADD") == 0 && !is_set && strcmp(t, "N") != 0 && strcmp(t, "L") != 0) {
        return ddb_legacy_invalid(
            l, "ADD action is not supported for the type %s for Attribute: %.100s", t, attr);
    }
    const char *a = ddb_legacy_name_ph(l, attr);
    char ph[32] = "", empty[32] = "";
    if (a == NULL) {
        return 0; /* l->oom */
    }
    if (value != NULL) {
        ddb_legacy_value_ph(l, value, ph, sizeof ph);
    }
    buf *b = strcmp(act, "PUT") == 0 || strcmp(t, "L") == 0 ? set
             : strcmp(act, "ADD") == 0                      ? add
             : value != NULL                                ? del
                                                            : remove;
    if (b->len > 0) {
        ddb_legacy_append(l, b, ", ");
    }
    if (strcmp(act, "PUT") == 0) {
        ddb_legacy_append(l, b, "%s = %s", a, ph);
    } else if (b == set) {
        /* ADD of a list appends to it (an absent attribute starts empty). */
        json_t *none = json_pack("{s:[]}", "L");
        ddb_legacy_value_ph(l, none, empty, sizeof empty);
        json_decref(none);
        ddb_legacy_append(l, b, "%s = list_append(if_not_exists(%s, %s), %s)", a, a, empty, ph);
    } else if (b == remove) {
        ddb_legacy_append(l, b, "%s", a);
    } else {
        ddb_legacy_append(l, b, "%s %s", a, ph);
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
            ddb_legacy_append(l, &text, "%s%s ", text.len > 0 ? " " : "", clause[i]);
            if (buf_append(&text, b[i].data, b[i].len) != 0) {
                l->oom = 1;
            }
        }
    }
    if (rv == 0 && text.len > 0) {
        ddb_legacy_set_text(l, out, "UpdateExpression", &text);
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
            rv = ddb_legacy_invalid(l, "Duplicate value in attribute name: %.100s",
                                    json_string_value(a));
            break;
        }
        json_object_set_new(seen, json_string_value(a), json_true());
        const char *ph = ddb_legacy_name_ph(l, json_string_value(a));
        ddb_legacy_append(l, &b, "%s%s", i > 0 ? ", " : "", ph ? ph : "");
    }
    if (rv == 0) {
        ddb_legacy_set_text(l, out, "ProjectionExpression", &b);
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
        if (ddb_legacy_present(req, p->expr[i])) {
            size_t len = strlen(exprs);
            snprintf(exprs + len, sizeof exprs - len, "%s%s", len ? ", " : "", p->expr[i]);
        }
    }
    for (size_t i = 0; p->legacy[i] != NULL; i++) {
        if (!ddb_legacy_present(req, p->legacy[i])) {
            continue;
        }
        (*legacy_n)++;
        /* DynamoDB lets KeyConditions go with a filter or projection
         * expression, not with KeyConditionExpression. */
        if (strcmp(p->legacy[i], "KeyConditions") == 0 &&
            !ddb_legacy_present(req, "KeyConditionExpression")) {
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
    if (ddb_legacy_present(req, "ExpressionAttributeNames")) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "ExpressionAttributeNames can only be specified when using "
                            "expressions");
    }
    if (ddb_legacy_present(req, "ExpressionAttributeValues")) {
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
    if ((ddb_legacy_present(req, "Expected") &&
         ddb_legacy_condition_map(&l, req, copy, "Expected", EXPECTED, join,
                                  "ConditionExpression") != 0) ||
        (ddb_legacy_present(req, "QueryFilter") &&
         ddb_legacy_condition_map(&l, req, copy, "QueryFilter", FILTER, join, "FilterExpression") !=
             0) ||
        (ddb_legacy_present(req, "ScanFilter") &&
         ddb_legacy_condition_map(&l, req, copy, "ScanFilter", FILTER, join, "FilterExpression") !=
             0) ||
        (ddb_legacy_present(req, "KeyConditions") &&
         ddb_legacy_condition_map(&l, req, copy, "KeyConditions", KEY, "AND",
                                  "KeyConditionExpression") != 0) ||
        (ddb_legacy_present(req, "AttributeUpdates") && attribute_updates(&l, req, copy) != 0) ||
        (ddb_legacy_present(req, "AttributesToGet") && attributes_to_get(&l, req, copy) != 0)) {
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
