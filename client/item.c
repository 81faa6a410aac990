/*
 * item.c: the public item builder (lapse_item_*), DynamoDB JSON parsing and
 * printing through common/ddbjson.h, and the update builder (lapse_update_*).
 * A lapse_item wraps a common/item.h item.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/ddbjson.h"
#include "../common/lapse_err.h"
#include "client.h"

/* ------------------------------------------------------------------------ */
/* Items                                                                     */
/* ------------------------------------------------------------------------ */

lapse_item *lapse_item_new(void)
{
    item *it = item_new();
    if (it == NULL) {
        return NULL;
    }
    lapse_item *w = client_item_wrap(it);
    if (w == NULL) {
        item_free(it);
    }
    return w;
}

void lapse_item_free(lapse_item *it)
{
    if (it != NULL) {
        item_free(it->it);
        free(it);
    }
}

lapse_item *lapse_item_dup(const lapse_item *it)
{
    if (it == NULL) {
        return NULL;
    }
    item *copy = item_dup(it->it);
    if (copy == NULL) {
        return NULL;
    }
    lapse_item *w = client_item_wrap(copy);
    if (w == NULL) {
        item_free(copy);
    }
    return w;
}

/* Sets name to *v, which is freed whatever happens. */
static int set_value(lapse_item *it, const char *name, attr_value *v)
{
    int rv = item_set(it->it, name, v);
    if (rv != 0) {
        item_value_fini(v);
    }
    return rv;
}

static int set_bytes(lapse_item *it, const char *name, attr_type t, const void *p, size_t len)
{
    attr_value v;
    int rv;
    if (it == NULL || name == NULL || (p == NULL && len > 0)) {
        return LAPSE_EINVAL;
    }
    if ((rv = item_value_init_bytes(&v, t, p != NULL ? p : "", len)) != 0) {
        return rv;
    }
    return set_value(it, name, &v);
}

int lapse_item_set_s(lapse_item *it, const char *name, const char *value)
{
    if (value == NULL) {
        return LAPSE_EINVAL;
    }
    return set_bytes(it, name, ATTR_S, value, strlen(value));
}

int lapse_item_set_n(lapse_item *it, const char *name, const char *number_text)
{
    if (number_text == NULL) {
        return LAPSE_EINVAL;
    }
    return set_bytes(it, name, ATTR_N, number_text, strlen(number_text));
}

int lapse_item_set_n_i64(lapse_item *it, const char *name, int64_t value)
{
    char text[32];
    snprintf(text, sizeof text, "%" PRId64, value);
    return lapse_item_set_n(it, name, text);
}

int lapse_item_set_b(lapse_item *it, const char *name, const void *p, size_t len)
{
    return set_bytes(it, name, ATTR_B, p, len);
}

int lapse_item_set_bool(lapse_item *it, const char *name, int value)
{
    attr_value v;
    if (it == NULL || name == NULL) {
        return LAPSE_EINVAL;
    }
    item_value_init_bool(&v, value != 0);
    return set_value(it, name, &v);
}

int lapse_item_set_null(lapse_item *it, const char *name)
{
    attr_value v;
    if (it == NULL || name == NULL) {
        return LAPSE_EINVAL;
    }
    item_value_init_null(&v);
    return set_value(it, name, &v);
}

int lapse_item_set_json(lapse_item *it, const char *name, const char *value_json, lapse_error *err)
{
    char msg[256] = "";
    attr_value v;
    int rv;
    if (it == NULL || name == NULL || value_json == NULL) {
        return client_err(err, LAPSE_EINVAL, "lapse_item_set_json: NULL argument");
    }
    if ((rv = ddbjson_parse_value(value_json, strlen(value_json), &v, msg, sizeof msg)) != 0) {
        return client_err(err, rv, "attribute \"%s\": %s", name, msg);
    }
    if ((rv = set_value(it, name, &v)) != 0) {
        return client_err(err, rv, "attribute \"%s\": %s", name,
                          rv == LAPSE_EINVAL ? "invalid attribute name" : lapse_strerror(rv));
    }
    return client_ok(err);
}

int lapse_item_remove(lapse_item *it, const char *name)
{
    if (it == NULL || name == NULL) {
        return LAPSE_EINVAL;
    }
    item_remove(it->it, name);
    return 0;
}

int lapse_item_from_json(lapse_item **out, const char *json, lapse_error *err)
{
    char msg[256] = "";
    item *it = NULL;
    int rv;
    if (out == NULL || json == NULL) {
        return client_err(err, LAPSE_EINVAL, "lapse_item_from_json: NULL argument");
    }
    *out = NULL;
    if ((rv = ddbjson_parse_item(json, strlen(json), &it, msg, sizeof msg)) != 0) {
        return client_err(err, rv, "%s", msg[0] ? msg : lapse_strerror(rv));
    }
    if ((*out = client_item_wrap(it)) == NULL) {
        item_free(it);
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    return client_ok(err);
}

char *lapse_item_to_json(const lapse_item *it)
{
    return it != NULL ? ddbjson_format_item(it->it) : NULL;
}

char *lapse_item_get_json(const lapse_item *it, const char *name)
{
    const attr_value *v = it != NULL && name != NULL ? item_get(it->it, name) : NULL;
    return v != NULL ? ddbjson_format_value(v) : NULL;
}

static const char *get_text(const lapse_item *it, const char *name, attr_type t)
{
    const attr_value *v = it != NULL && name != NULL ? item_get(it->it, name) : NULL;
    return v != NULL && v->type == t ? v->u.bytes.ptr : NULL;
}

const char *lapse_item_get_s(const lapse_item *it, const char *name)
{
    return get_text(it, name, ATTR_S);
}

const char *lapse_item_get_n(const lapse_item *it, const char *name)
{
    return get_text(it, name, ATTR_N);
}

size_t lapse_item_count(const lapse_item *it)
{
    return it != NULL ? it->it->n : 0;
}

const char *lapse_item_name(const lapse_item *it, size_t i)
{
    return it != NULL && i < it->it->n ? it->it->attrs[i].name : NULL;
}

int lapse_item_equal(const lapse_item *a, const lapse_item *b)
{
    if (a == NULL || b == NULL) {
        return a == b;
    }
    return item_eq(a->it, b->it);
}

/* ------------------------------------------------------------------------ */
/* Update builder                                                            */
/* ------------------------------------------------------------------------ */

lapse_update *lapse_update_new(void)
{
    return calloc(1, sizeof(lapse_update));
}

void lapse_update_free(lapse_update *u)
{
    if (u == NULL) {
        return;
    }
    for (size_t i = 0; i < u->n; i++) {
        free(u->v[i].name);
        item_value_fini(&u->v[i].value);
    }
    free(u->v);
    free(u);
}

/* Records an action on name, replacing an earlier one on the same name (the
 * last action on a name wins). Takes *v on success only. */
static int add_action(lapse_update *u, const char *name, int is_set, attr_value *v)
{
    for (size_t i = 0; i < u->n; i++) {
        if (strcmp(u->v[i].name, name) == 0) {
            item_value_fini(&u->v[i].value);
            u->v[i].is_set = is_set;
            u->v[i].value = *v;
            item_value_init_null(v);
            return 0;
        }
    }
    if (u->n == u->cap) {
        size_t cap = u->cap ? u->cap * 2 : 4;
        update_action *nv = realloc(u->v, cap * sizeof *nv);
        if (nv == NULL) {
            return LAPSE_ENOMEM;
        }
        u->v = nv;
        u->cap = cap;
    }
    char *copy = strdup(name);
    if (copy == NULL) {
        return LAPSE_ENOMEM;
    }
    u->v[u->n].name = copy;
    u->v[u->n].is_set = is_set;
    u->v[u->n].value = *v;
    item_value_init_null(v);
    u->n++;
    return 0;
}

static int check_name(const char *name)
{
    return name != NULL && name[0] != '\0' && strlen(name) <= ITEM_MAX_NAME_BYTES;
}

int lapse_update_set(lapse_update *u, const char *name, const char *value_json, lapse_error *err)
{
    char msg[256] = "";
    attr_value v;
    int rv;
    if (u == NULL || value_json == NULL || !check_name(name)) {
        return client_err(err, LAPSE_EINVAL, "update SET: missing or invalid attribute name");
    }
    if ((rv = ddbjson_parse_value(value_json, strlen(value_json), &v, msg, sizeof msg)) != 0) {
        return client_err(err, rv, "update SET \"%s\": %s", name, msg);
    }
    if ((rv = add_action(u, name, 1, &v)) != 0) {
        item_value_fini(&v);
        return client_err(err, rv, "out of memory");
    }
    return client_ok(err);
}

int lapse_update_remove(lapse_update *u, const char *name)
{
    attr_value v;
    if (u == NULL || !check_name(name)) {
        return LAPSE_EINVAL;
    }
    item_value_init_null(&v);
    return add_action(u, name, 0, &v);
}
