/*
 * ddb_req.c: request reading and DynamoDB's error mapping for the gateway.
 */
#include "ddb_req.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int ddb_req_fail(ddb_ctx *x, int status, const char *type, const char *fmt, ...)
{
    va_list ap;
    json_decref(x->out);
    x->out = NULL;
    json_decref(x->err_item);
    x->err_item = NULL;
    x->status = status;
    snprintf(x->type, sizeof x->type, "%s", type);
    va_start(ap, fmt);
    vsnprintf(x->message, sizeof x->message, fmt, ap);
    va_end(ap);
    return -1;
}

int ddb_req_lapse_fail(ddb_ctx *x, const lapse_error *err, const char *table)
{
    const char *msg = err->message[0] ? err->message : lapse_strerror(err->code);
    switch (err->code) {
    case LAPSE_ENOTFOUND:
        return ddb_req_fail(x, 400, "ResourceNotFoundException",
                            "Requested resource not found: Table: %s not found (%s)",
                            table ? table : "", msg);
    case LAPSE_EEXISTS:
        return ddb_req_fail(x, 400, "ResourceInUseException", "Table already exists: %s (%s)",
                            table ? table : "", msg);
    case LAPSE_ECONDITION:
        return ddb_req_fail(x, 400, "ConditionalCheckFailedException",
                            "The conditional request failed");
    case LAPSE_EINVAL:
    case LAPSE_ETOOBIG:
    case LAPSE_ESTATE:
        return ddb_req_fail(x, 400, "ValidationException", "%s", msg);
    case LAPSE_EPERM:
        return ddb_req_fail(x, 400, "AccessDeniedException", "%s", msg);
    default:
        return ddb_req_fail(x, 500, "InternalServerError", "%s: %s", lapse_strerror(err->code),
                            msg);
    }
}

static int wrong_type(ddb_ctx *x, const char *name, const char *want)
{
    return ddb_req_fail(x, 400, "SerializationException", "%s: expected a %s", name, want);
}

static json_t *member(ddb_ctx *x, json_t *req, const char *name, int required, int *rv)
{
    json_t *v = json_object_get(req, name);
    *rv = 0;
    if ((v == NULL || json_is_null(v)) && required) {
        *rv = ddb_req_fail(x, 400, "ValidationException",
                           "1 validation error detected: Value null at '%s' failed to satisfy "
                           "constraint: Member must not be null",
                           name);
    }
    return json_is_null(v) ? NULL : v;
}

int ddb_req_string(ddb_ctx *x, json_t *req, const char *name, int required, const char **out)
{
    int rv;
    json_t *v = member(x, req, name, required, &rv);
    *out = NULL;
    if (rv != 0 || v == NULL) {
        return rv;
    }
    if (!json_is_string(v)) {
        return wrong_type(x, name, "string");
    }
    *out = json_string_value(v);
    return 0;
}

int ddb_req_object(ddb_ctx *x, json_t *req, const char *name, int required, json_t **out)
{
    int rv;
    json_t *v = member(x, req, name, required, &rv);
    *out = NULL;
    if (rv != 0 || v == NULL) {
        return rv;
    }
    if (!json_is_object(v)) {
        return wrong_type(x, name, "structure (JSON object)");
    }
    *out = v;
    return 0;
}

int ddb_req_array(ddb_ctx *x, json_t *req, const char *name, int required, json_t **out)
{
    int rv;
    json_t *v = member(x, req, name, required, &rv);
    *out = NULL;
    if (rv != 0 || v == NULL) {
        return rv;
    }
    if (!json_is_array(v)) {
        return wrong_type(x, name, "list (JSON array)");
    }
    *out = v;
    return 0;
}

int ddb_req_bool(ddb_ctx *x, json_t *req, const char *name, int required, int *out)
{
    int rv;
    json_t *v = member(x, req, name, required, &rv);
    if (rv != 0 || v == NULL) {
        return rv;
    }
    if (!json_is_boolean(v)) {
        return wrong_type(x, name, "boolean");
    }
    *out = json_is_true(v);
    return 0;
}

int ddb_req_int(ddb_ctx *x, json_t *req, const char *name, long lo, long hi, long *out)
{
    int rv;
    json_t *v = member(x, req, name, 0, &rv);
    if (v == NULL) {
        return 0;
    }
    if (!json_is_integer(v)) {
        return wrong_type(x, name, "integer");
    }
    json_int_t n = json_integer_value(v);
    if (n < lo || n > hi) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "1 validation error detected: Value '%lld' at '%s' failed to satisfy "
                            "constraint: Member must be between %ld and %ld",
                            (long long)n, name, lo, hi);
    }
    *out = (long)n;
    return 0;
}

int ddb_req_unsupported(ddb_ctx *x, json_t *req, const char *op, const char *const *names)
{
    for (size_t i = 0; names[i] != NULL; i++) {
        json_t *v = json_object_get(req, names[i]);
        if (v != NULL && !json_is_null(v)) {
            return ddb_req_fail(x, 400, "ValidationException",
                                "%s: %s is not supported by Lapse's DynamoDB API yet "
                                "(docs/dynamodb-api.md)",
                                op, names[i]);
        }
    }
    return 0;
}

/* The item of obj when every attribute is a plain S or N value (a GetItem's
 * Key, most PutItems), set straight from the parsed request; NULL for
 * anything else, or for what the item model refuses (a bad name or number:
 * item_set and item_value_init_bytes check them as ddbjson does), which then
 * takes the whole DynamoDB JSON parser instead, its checks and its messages.
 * A NUL in a value sends it there too (jansson refuses one in a name). */
static lapse_item *plain_item(json_t *obj)
{
    const char *name;
    json_t *v;
    lapse_item *it = lapse_item_new();
    if (it == NULL || !json_is_object(obj)) {
        goto slow;
    }
    json_object_foreach(obj, name, v)
    {
        if (json_object_size(v) != 1) {
            goto slow;
        }
        json_t *s = json_object_get(v, "S"), *n = s == NULL ? json_object_get(v, "N") : NULL;
        json_t *text = s != NULL ? s : n;
        if (!json_is_string(text) || strlen(json_string_value(text)) != json_string_length(text)) {
            goto slow;
        }
        if ((s != NULL ? lapse_item_set_s(it, name, json_string_value(s))
                       : lapse_item_set_n(it, name, json_string_value(n))) != 0) {
            goto slow;
        }
    }
    return it;
slow:
    lapse_item_free(it);
    return NULL;
}

int ddb_req_item(ddb_ctx *x, json_t *obj, const char *what, lapse_item **out)
{
    lapse_error err;
    if ((*out = plain_item(obj)) != NULL) {
        return 0;
    }
    char *text = json_dumps(obj, JSON_COMPACT);
    if (text == NULL) {
        return ddb_req_fail(x, 500, "InternalServerError", "out of memory");
    }
    int rv = lapse_item_from_json(out, text, &err);
    free(text);
    if (rv != 0) {
        return ddb_req_fail(x, 400, "ValidationException", "%s: %s", what,
                            err.message[0] ? err.message : lapse_strerror(rv));
    }
    return 0;
}

json_t *ddb_req_item_json(ddb_ctx *x, const lapse_item *it)
{
    char *text = lapse_item_to_json(it);
    json_t *v = text ? json_loads(text, 0, NULL) : NULL;
    lapse_free(text);
    if (v == NULL) {
        ddb_req_fail(x, 500, "InternalServerError", "cannot format the item");
    }
    return v;
}

int ddb_req_answered(const ddb_ctx *x)
{
    return x->out != NULL || x->out_text != NULL;
}

void ddb_req_clear(ddb_ctx *x)
{
    json_decref(x->out);
    json_decref(x->err_item);
    free(x->out_text);
    x->out = x->err_item = NULL;
    x->out_text = NULL;
}

void ddb_req_stream_arn(const ddb_ctx *x, const char *table, int64_t created_ms, char *arn,
                        size_t arnlen, char *label, size_t labellen)
{
    time_t s = (time_t)(created_ms / 1000);
    struct tm tm;
    char when[32] = "1970-01-01T00:00:00";
    if (gmtime_r(&s, &tm) != NULL) {
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    }
    snprintf(label, labellen, "%s.%03d", when, (int)(created_ms % 1000));
    snprintf(arn, arnlen, "arn:aws:dynamodb:%s:000000000000:table/%s/stream/%s", x->region, table,
             label);
}
