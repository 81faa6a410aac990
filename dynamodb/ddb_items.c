/*
 * ddb_items.c: PutItem, GetItem and DeleteItem on lapse_put, lapse_get and
 * lapse_delete. Reads are always strongly consistent (the partition's owner
 * answers), so ConsistentRead is accepted either way.
 */
#include "ddb_items.h"

#include <string.h>

/* Parameters of the expression family and friends, refused until the
 * expression grammar lands (docs/dynamodb-api.md). */
static const char *const put_unsupported[] = {
    "ConditionExpression",       "Expected", "ConditionalOperator", "ExpressionAttributeNames",
    "ExpressionAttributeValues", NULL};
static const char *const get_unsupported[] = {"ProjectionExpression", "AttributesToGet",
                                              "ExpressionAttributeNames", NULL};

/* ReturnValues: NONE (or absent) is all this slice answers. */
static int return_values_none(ddb_ctx *x, json_t *req, const char *op)
{
    const char *rv;
    if (ddb_req_string(x, req, "ReturnValues", 0, &rv) != 0) {
        return -1;
    }
    if (rv != NULL && strcmp(rv, "NONE") != 0) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "%s: ReturnValues %s is not supported by Lapse's DynamoDB API yet "
                            "(only NONE)",
                            op, rv);
    }
    return 0;
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

int ddb_items_put(ddb_ctx *x, json_t *req)
{
    const char *table;
    lapse_item *it;
    lapse_error err;
    if (ddb_req_unsupported(x, req, "PutItem", put_unsupported) != 0 ||
        return_values_none(x, req, "PutItem") != 0 ||
        table_and_item(x, req, "Item", 0, &table, &it) != 0) {
        return -1;
    }
    int rv = lapse_put(x->c, table, it, NULL, &err);
    lapse_item_free(it);
    if (rv != 0) {
        return ddb_req_lapse_fail(x, &err, table);
    }
    x->out = json_object();
    return 0;
}

int ddb_items_get(ddb_ctx *x, json_t *req)
{
    const char *table;
    lapse_item *key, *it = NULL;
    lapse_error err;
    int consistent = 0;
    if (ddb_req_unsupported(x, req, "GetItem", get_unsupported) != 0 ||
        ddb_req_bool(x, req, "ConsistentRead", 0, &consistent) != 0 ||
        table_and_item(x, req, "Key", 1, &table, &key) != 0) {
        return -1;
    }
    int rv = lapse_get(x->c, table, key, &it, &err);
    lapse_item_free(key);
    if (rv != 0) {
        return ddb_req_lapse_fail(x, &err, table);
    }
    x->out = json_object();
    if (it != NULL) {
        json_t *doc = ddb_req_item_json(x, it);
        lapse_item_free(it);
        if (doc == NULL) {
            return -1;
        }
        json_object_set_new(x->out, "Item", doc);
    }
    return 0;
}

int ddb_items_delete(ddb_ctx *x, json_t *req)
{
    const char *table;
    lapse_item *key;
    lapse_error err;
    if (ddb_req_unsupported(x, req, "DeleteItem", put_unsupported) != 0 ||
        return_values_none(x, req, "DeleteItem") != 0 ||
        table_and_item(x, req, "Key", 1, &table, &key) != 0) {
        return -1;
    }
    int rv = lapse_delete(x->c, table, key, NULL, &err);
    lapse_item_free(key);
    if (rv != 0) {
        return ddb_req_lapse_fail(x, &err, table);
    }
    x->out = json_object();
    return 0;
}
