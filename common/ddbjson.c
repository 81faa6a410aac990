/* ddbjson.c: DynamoDB JSON parsed on top of jansson (ddbjson.h).
 *
 * Parsing walks the jansson tree and builds the item, keeping a path such as
 * Tags[2].Color for error messages. Formatting is in ddbjson_format.c. */
#include "ddbjson.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "lapse_err.h"
#include "number.h"

/* ------------------------------------------------------------------------
 * Parsing
 * ---------------------------------------------------------------------- */

typedef struct pctx {
    char *err;
    size_t errlen;
    buf path; /* the attribute being parsed, for messages */
} pctx;

static int perr(pctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int perr(pctx *c, int code, const char *fmt, ...)
{
    if (c->err == NULL || c->errlen == 0) {
        return code;
    }
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (code == LAPSE_ENOMEM) {
        snprintf(c->err, c->errlen, "out of memory");
    } else if (c->path.len > 0) {
        snprintf(c->err, c->errlen, "attribute \"%s\": %s", (const char *)c->path.data, msg);
    } else {
        snprintf(c->err, c->errlen, "%s", msg);
    }
    return code;
}

static int check_name(pctx *c, const char *name, size_t len)
{
    if (len == 0) {
        return perr(c, LAPSE_EINVAL, "empty attribute name");
    }
    if (len > ITEM_MAX_NAME_BYTES) {
        return perr(c, LAPSE_EINVAL, "attribute name longer than %d bytes", ITEM_MAX_NAME_BYTES);
    }
    if (memchr(name, 0, len) != NULL) {
        return perr(c, LAPSE_EINVAL, "attribute name contains a NUL character");
    }
    return 0;
}

static int parse_value(pctx *c, json_t *j, int depth, attr_value *out);

/* Parses the members of a JSON object into the M value or item via set. */
static int parse_members(pctx *c, json_t *obj, int depth, attr_value *map, item *it)
{
    const char *key;
    size_t keylen;
    json_t *val;
    int rv;
    size_t base = c->path.len;
    json_object_keylen_foreach(obj, key, keylen, val)
    {
        if ((rv = check_name(c, key, keylen)) != 0) {
            return rv;
        }
        if ((base > 0 && buf_append_byte(&c->path, '.') != 0) ||
            buf_append(&c->path, key, keylen) != 0) {
            return perr(c, LAPSE_ENOMEM, "out of memory");
        }
        attr_value v;
        if ((rv = parse_value(c, val, depth, &v)) != 0) {
            return rv;
        }
        rv = map != NULL ? item_value_map_set(map, key, &v) : item_set(it, key, &v);
        if (rv != 0) {
            item_value_fini(&v);
            return perr(c, rv, "cannot set attribute");
        }
        c->path.len = base;
        c->path.data[base] = 0;
    }
    return 0;
}

static int parse_bytes(pctx *c, json_t *inner, attr_type t, attr_value *out)
{
    const char *tn = item_type_name(t);
    if (!json_is_string(inner)) {
        return perr(c, LAPSE_EINVAL, "%s value must be a JSON string", tn);
    }
    const char *s = json_string_value(inner);
    size_t n = json_string_length(inner);
    int rv;
    if (t == ATTR_B) {
        uint8_t *d;
        size_t dn;
        if ((rv = base64_decode(s, n, &d, &dn)) != 0) {
            return rv == LAPSE_ENOMEM ? perr(c, rv, "out of memory")
                                      : perr(c, rv, "B value is not valid base64");
        }
        rv = item_value_init_bytes(out, ATTR_B, d, dn);
        free(d);
        return rv == 0 ? 0 : perr(c, rv, "out of memory");
    }
    if (t == ATTR_N) {
        number num;
        char why[128];
        if (number_parse(s, n, &num, why, sizeof(why)) != 0) {
            if (strcmp(why, "not a number") == 0) {
                return perr(c, LAPSE_EINVAL, "N value \"%.64s\" is not a number", s);
            }
            return perr(c, LAPSE_EINVAL, "N value \"%.64s\": %s", s, why);
        }
    }
    rv = item_value_init_bytes(out, t, s, n);
    return rv == 0 ? 0 : perr(c, rv, "invalid %s value", tn);
}

/* An SS, NS or BS value: a JSON array of element texts (base64 for BS),
 * non-empty and without duplicates (item.h invariant 4). */
static int parse_set(pctx *c, json_t *inner, attr_type t, attr_value *out)
{
    const char *tn = item_type_name(t);
    if (!json_is_array(inner)) {
        return perr(c, LAPSE_EINVAL, "%s value must be a JSON array of strings", tn);
    }
    attr_value set;
    item_value_init_set(&set, t);
    size_t base = c->path.len, i;
    json_t *e;
    int rv;
    json_array_foreach(inner, i, e)
    {
        attr_value v;
        if (buf_printf(&c->path, "[%zu]", i) != 0) {
            rv = perr(c, LAPSE_ENOMEM, "out of memory");
            goto fail;
        }
        if ((rv = parse_bytes(c, e, item_set_elem_type(t), &v)) != 0) {
            goto fail;
        }
        if ((rv = item_value_set_add(&set, &v)) != 0) {
            item_value_fini(&v);
            rv = perr(c, rv, "out of memory");
            goto fail;
        }
        c->path.len = base;
        c->path.data[base] = 0;
    }
    const attr_value *dup = NULL;
    if ((rv = item_value_set_check(&set, &dup)) != 0) {
        if (rv == LAPSE_ENOMEM) {
            rv = perr(c, rv, "out of memory");
        } else if (dup == NULL) {
            rv = perr(c, rv, "an empty set is not allowed (%s)", tn);
        } else {
            rv = perr(c, rv, "%s value contains duplicates (\"%.64s\" twice)", tn,
                      t == ATTR_BS ? "binary" : dup->u.bytes.ptr);
        }
        goto fail;
    }
    *out = set;
    return 0;
fail:
    item_value_fini(&set);
    return rv;
}

/* depth: nesting level of this value, 1 for a top-level attribute. */
static int parse_value(pctx *c, json_t *j, int depth, attr_value *out)
{
    int rv;
    item_value_init_null(out);
    if (depth > ITEM_MAX_DEPTH) {
        return perr(c, LAPSE_EINVAL, "nesting deeper than %d levels", ITEM_MAX_DEPTH);
    }
    if (!json_is_object(j)) {
        return perr(c, LAPSE_EINVAL, "value must be an object such as {\"S\":\"text\"}");
    }
    if (json_object_size(j) != 1) {
        return perr(c, LAPSE_EINVAL, "value must have exactly one type key, has %zu",
                    json_object_size(j));
    }
    void *iter = json_object_iter(j);
    const char *tname = json_object_iter_key(iter);
    json_t *inner = json_object_iter_value(iter);
    attr_type t;
    if (item_type_parse(tname, &t) != 0) {
        return perr(c, LAPSE_EINVAL, "unknown type \"%.32s\"", tname);
    }
    switch (t) {
    case ATTR_S:
    case ATTR_N:
    case ATTR_B:
        return parse_bytes(c, inner, t, out);
    case ATTR_BOOL:
        if (!json_is_boolean(inner)) {
            return perr(c, LAPSE_EINVAL, "BOOL value must be true or false");
        }
        item_value_init_bool(out, json_is_true(inner));
        return 0;
    case ATTR_NULL:
        if (!json_is_true(inner)) {
            return perr(c, LAPSE_EINVAL, "NULL value must be true");
        }
        return 0;
    case ATTR_L: {
        if (!json_is_array(inner)) {
            return perr(c, LAPSE_EINVAL, "L value must be a JSON array");
        }
        attr_value list;
        item_value_init_list(&list);
        size_t base = c->path.len, i;
        json_t *e;
        json_array_foreach(inner, i, e)
        {
            attr_value v;
            if (buf_printf(&c->path, "[%zu]", i) != 0) {
                rv = perr(c, LAPSE_ENOMEM, "out of memory");
                goto list_fail;
            }
            if ((rv = parse_value(c, e, depth + 1, &v)) != 0) {
                goto list_fail;
            }
            if ((rv = item_value_list_append(&list, &v)) != 0) {
                item_value_fini(&v);
                rv = perr(c, rv, "out of memory");
                goto list_fail;
            }
            c->path.len = base;
            c->path.data[base] = 0;
        }
        *out = list;
        return 0;
    list_fail:
        item_value_fini(&list);
        return rv;
    }
    case ATTR_SS:
    case ATTR_NS:
    case ATTR_BS:
        return parse_set(c, inner, t, out);
    case ATTR_M: {
        if (!json_is_object(inner)) {
            return perr(c, LAPSE_EINVAL, "M value must be a JSON object");
        }
        attr_value map;
        item_value_init_map(&map);
        if ((rv = parse_members(c, inner, depth + 1, &map, NULL)) != 0) {
            item_value_fini(&map);
            return rv;
        }
        *out = map;
        return 0;
    }
    }
    return perr(c, LAPSE_EINVAL, "unknown type");
}

/* Loads text; on a jansson error writes the reason and returns NULL. */
static json_t *load(pctx *c, const char *text, size_t len)
{
    json_error_t je;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (j == NULL) {
        if (json_error_code(&je) == json_error_duplicate_key) {
            perr(c, LAPSE_EINVAL, "duplicate attribute name (%s at line %d column %d)", je.text,
                 je.line, je.column);
        } else {
            perr(c, LAPSE_EINVAL, "invalid JSON: %s at line %d column %d", je.text, je.line,
                 je.column);
        }
    }
    return j;
}

int ddbjson_parse_item(const char *text, size_t len, item **out, char *err, size_t errlen)
{
    pctx c = {err, errlen, {0}};
    int rv;
    item *it = NULL;
    json_t *j = load(&c, text, len);
    if (j == NULL) {
        return LAPSE_EINVAL;
    }
    if (!json_is_object(j)) {
        rv = perr(&c, LAPSE_EINVAL, "an item must be a JSON object");
        goto done;
    }
    if ((it = item_new()) == NULL) {
        rv = perr(&c, LAPSE_ENOMEM, "out of memory");
        goto done;
    }
    if ((rv = parse_members(&c, j, 1, NULL, it)) != 0) {
        item_free(it);
        goto done;
    }
    *out = it;
done:
    json_decref(j);
    buf_fini(&c.path);
    return rv;
}

int ddbjson_parse_value(const char *text, size_t len, attr_value *out, char *err, size_t errlen)
{
    pctx c = {err, errlen, {0}};
    json_t *j = load(&c, text, len);
    if (j == NULL) {
        item_value_init_null(out);
        return LAPSE_EINVAL;
    }
    int rv = parse_value(&c, j, 1, out);
    json_decref(j);
    buf_fini(&c.path);
    return rv;
}
