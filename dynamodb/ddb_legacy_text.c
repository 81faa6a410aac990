/*
 * ddb_legacy_text.c: what both halves of the legacy translation write with
 * (ddb_legacy_int.h): the generated #name and :value placeholders, the
 * expression text, value checks and DynamoDB's parameter error.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../expr/expr.h"
#include "ddb_legacy_int.h"

/* A ValidationException with DynamoDB's prefix for parameter mistakes. */
int ddb_legacy_invalid(legacy *l, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ddb_req_fail(l->x, 400, "ValidationException",
                        "One or more parameter values were invalid: %s", msg);
}

int ddb_legacy_present(json_t *obj, const char *member)
{
    json_t *v = json_object_get(obj, member);
    return v != NULL && !json_is_null(v);
}

/* The #placeholder of attribute name (borrowed from l), made on first use;
 * NULL on OOM. */
const char *ddb_legacy_name_ph(legacy *l, const char *name)
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
void ddb_legacy_value_ph(legacy *l, json_t *v, char *ph, size_t len)
{
    do {
        snprintf(ph, len, ":legacy%u", l->next_value++);
    } while (json_object_get(l->values, ph) != NULL);
    if (json_object_set(l->values, ph, v) != 0) {
        l->oom = 1;
    }
}

void ddb_legacy_append(legacy *l, buf *b, const char *fmt, ...)
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
void ddb_legacy_set_text(legacy *l, json_t *obj, const char *member, buf *b)
{
    char *s = buf_detach(b);
    if (s == NULL || json_object_set_new(obj, member, json_string(s)) != 0) {
        l->oom = 1;
    }
    free(s);
}

/* Checks one typed value of attribute attr: a JSON object with one known,
 * well-formed type. */
int ddb_legacy_check_value(legacy *l, const char *attr, json_t *v)
{
    char why[200];
    if (!json_is_object(v) || json_object_size(v) != 1) {
        return ddb_legacy_invalid(
            l, "Supplied AttributeValue must have exactly one data type for Attribute: %s", attr);
    }
    if (expr_value_check(v, why, sizeof why) != 0) {
        return ddb_legacy_invalid(l, "%s for Attribute: %s", why, attr);
    }
    return 0;
}

const char *ddb_legacy_vtype(json_t *v)
{
    const char *t = json_object_iter_key(json_object_iter(v));
    return t != NULL ? t : "";
}
