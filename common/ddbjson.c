/* ddbjson.c: DynamoDB JSON on top of jansson (ddbjson.h).
 *
 * Parsing walks the jansson tree and builds the item, keeping a path such as
 * Tags[2].Color for error messages. Formatting to a jansson tree (for larger
 * documents) builds it in item order; formatting to text writes the same
 * text straight into a buffer. */
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

/* ------------------------------------------------------------------------
 * Formatting
 * ---------------------------------------------------------------------- */

/* The length of the valid UTF-8 sequence at s (n > 0 bytes left), 0 when
 * there is none: jansson's rule (no overlong forms, no surrogates, nothing
 * past U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0], lo = 0x80, hi = 0xBF;
    size_t len;
    if (c < 0x80) {
        return 1;
    }
    if (c < 0xC2) {
        return 0;
    }
    if (c < 0xE0) {
        len = 2;
    } else if (c < 0xF0) {
        len = 3;
        lo = c == 0xE0 ? 0xA0 : lo;
        hi = c == 0xED ? 0x9F : hi;
    } else if (c < 0xF5) {
        len = 4;
        lo = c == 0xF0 ? 0x90 : lo;
        hi = c == 0xF4 ? 0x8F : hi;
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi) {
        return 0;
    }
    for (size_t k = 2; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) {
            return 0;
        }
    }
    return len;
}

/* A JSON string for bytes that should be UTF-8. Invalid sequences (the C API
 * does not check S values) become U+FFFD so output is always valid JSON. */
static json_t *utf8_string(const char *s, size_t n)
{
    json_t *j = json_stringn(s, n);
    if (j != NULL) {
        return j;
    }
    buf b;
    buf_init(&b);
    for (size_t i = 0; i < n;) {
        size_t step = utf8_seq((const unsigned char *)s + i, n - i);
        int rv = step > 0 ? buf_append(&b, s + i, step) : buf_append(&b, "\xEF\xBF\xBD", 3);
        if (rv != 0) {
            buf_fini(&b);
            return NULL;
        }
        i += step > 0 ? step : 1;
    }
    j = json_stringn((const char *)b.data, b.len);
    buf_fini(&b);
    return j;
}

/* Steals v into obj under key; returns 0 or -1 (v released). */
static int put(json_t *obj, const char *key, json_t *v)
{
    if (v == NULL) {
        return -1;
    }
    return json_object_set_new(obj, key, v);
}

static json_t *members_to_json(const attr *v, size_t n)
{
    json_t *obj = json_object();
    if (obj == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (put(obj, v[i].name, ddbjson_value_to_json(&v[i].value)) != 0) {
            json_decref(obj);
            return NULL;
        }
    }
    return obj;
}

/* v's value without its type wrapper ("text", [..], {..}): a new
 * reference, NULL on OOM. */
static json_t *inner_json(const attr_value *v)
{
    json_t *inner = NULL;
    switch (v->type) {
    case ATTR_S:
    case ATTR_N:
        inner = utf8_string(v->u.bytes.ptr, v->u.bytes.len);
        break;
    case ATTR_B: {
        char *s = base64_encode((const uint8_t *)v->u.bytes.ptr, v->u.bytes.len);
        if (s != NULL) {
            inner = json_string_nocheck(s);
            free(s);
        }
        break;
    }
    case ATTR_BOOL:
        inner = json_boolean(v->u.boolean);
        break;
    case ATTR_NULL:
        inner = json_true();
        break;
    case ATTR_L:
        inner = json_array();
        for (size_t i = 0; inner != NULL && i < v->u.list.n; i++) {
            if (json_array_append_new(inner, ddbjson_value_to_json(&v->u.list.v[i])) != 0) {
                json_decref(inner);
                inner = NULL;
            }
        }
        break;
    case ATTR_M:
        inner = members_to_json(v->u.map.v, v->u.map.n);
        break;
    case ATTR_SS:
    case ATTR_NS:
    case ATTR_BS:
        /* ["a","b"]: the elements without their type wrappers */
        inner = json_array();
        for (size_t i = 0; inner != NULL && i < v->u.list.n; i++) {
            if (json_array_append_new(inner, inner_json(&v->u.list.v[i])) != 0) {
                json_decref(inner);
                inner = NULL;
            }
        }
        break;
    }
    return inner;
}

json_t *ddbjson_value_to_json(const attr_value *v)
{
    json_t *inner = inner_json(v);
    if (inner == NULL) {
        return NULL;
    }
    json_t *obj = json_object();
    if (obj == NULL || put(obj, item_type_name(v->type), inner) != 0) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

json_t *ddbjson_item_to_json(const item *it)
{
    return members_to_json(it->attrs, it->n);
}

/* ------------------------------------------------------------------------
 * Formatting to text: written straight into a buffer, the same text as
 * json_dumps(JSON_COMPACT) of the document above (ddbjson_test compares
 * them) without building the document: GetItem's answer and every item
 * liblapse hands out as text go this way.
 * ---------------------------------------------------------------------- */

/* Appends n bytes as a JSON string as jansson writes one: ", \\ and
 * control characters escaped, the rest as it is. Invalid UTF-8 becomes
 * U+FFFD, or fails the whole text (-1) when strict (a name: jansson refuses
 * one in an object). */
static int text_string(buf *b, const char *s, size_t n, int strict)
{
    const unsigned char *u = (const unsigned char *)s;
    int rv = buf_append_byte(b, '"');
    size_t run = 0; /* bytes from u + run on that go out as they are */
    for (size_t i = 0; rv == 0 && i < n;) {
        size_t step = utf8_seq(u + i, n - i);
        const char *esc = NULL;
        char seq[8];
        if (step == 0 && strict) {
            return -1;
        }
        if (step == 1 && (u[i] < 0x20 || u[i] == '"' || u[i] == '\\')) {
            static const char *const shortcut[0x20] = {
                ['\b'] = "\\b", ['\f'] = "\\f", ['\n'] = "\\n", ['\r'] = "\\r", ['\t'] = "\\t"};
            if (u[i] == '"') {
                esc = "\\\"";
            } else if (u[i] == '\\') {
                esc = "\\\\";
            } else if ((esc = shortcut[u[i]]) == NULL) {
                snprintf(seq, sizeof seq, "\\u%04X", u[i]);
                esc = seq;
            }
        } else if (step == 0) {
            esc = "\xEF\xBF\xBD";
        }
        if (esc == NULL) {
            i += step;
            continue;
        }
        rv = buf_append(b, u + run, i - run);
        rv = rv == 0 ? buf_append_str(b, esc) : rv;
        i += step > 0 ? step : 1;
        run = i;
    }
    rv = rv == 0 ? buf_append(b, u + run, n - run) : rv;
    return rv == 0 ? buf_append_byte(b, '"') : rv;
}

static int text_value(buf *b, const attr_value *v);

/* {"name":value,...} of n members. */
static int text_members(buf *b, const attr *v, size_t n)
{
    int rv = buf_append_byte(b, '{');
    for (size_t i = 0; rv == 0 && i < n; i++) {
        if ((i > 0 && buf_append_byte(b, ',') != 0) ||
            text_string(b, v[i].name, strlen(v[i].name), 1) != 0 || buf_append_byte(b, ':') != 0) {
            return -1;
        }
        rv = text_value(b, &v[i].value);
    }
    return rv == 0 ? buf_append_byte(b, '}') : rv;
}

/* v's value without its type wrapper, as inner_json makes it. */
static int text_inner(buf *b, const attr_value *v)
{
    int rv = 0;
    switch (v->type) {
    case ATTR_S:
    case ATTR_N:
        return text_string(b, v->u.bytes.ptr, v->u.bytes.len, 0);
    case ATTR_B: {
        char *s = base64_encode((const uint8_t *)v->u.bytes.ptr, v->u.bytes.len);
        rv = s != NULL ? text_string(b, s, strlen(s), 1) : -1;
        free(s);
        return rv;
    }
    case ATTR_BOOL:
        return buf_append_str(b, v->u.boolean ? "true" : "false");
    case ATTR_NULL:
        return buf_append_str(b, "true");
    case ATTR_M:
        return text_members(b, v->u.map.v, v->u.map.n);
    case ATTR_L:
    case ATTR_SS:
    case ATTR_NS:
    case ATTR_BS:
        /* a list's elements keep their wrappers; a set's go without */
        rv = buf_append_byte(b, '[');
        for (size_t i = 0; rv == 0 && i < v->u.list.n; i++) {
            rv = i > 0 ? buf_append_byte(b, ',') : 0;
            rv = rv == 0 ? (v->type == ATTR_L ? text_value(b, &v->u.list.v[i])
                                              : text_inner(b, &v->u.list.v[i]))
                         : rv;
        }
        return rv == 0 ? buf_append_byte(b, ']') : rv;
    }
    return -1;
}

/* {"T":inner}. */
static int text_value(buf *b, const attr_value *v)
{
    if (buf_append_str(b, "{\"") != 0 || buf_append_str(b, item_type_name(v->type)) != 0 ||
        buf_append_str(b, "\":") != 0 || text_inner(b, v) != 0) {
        return -1;
    }
    return buf_append_byte(b, '}');
}

/* b's text as a malloc'd string, or NULL (b released) when rv failed. */
static char *text_done(buf *b, int rv)
{
    if (rv != 0) {
        buf_fini(b);
        return NULL;
    }
    return buf_detach(b);
}

char *ddbjson_format_item(const item *it)
{
    buf b;
    buf_init(&b);
    return text_done(&b, text_members(&b, it->attrs, it->n));
}

char *ddbjson_format_value(const attr_value *v)
{
    buf b;
    buf_init(&b);
    return text_done(&b, text_value(&b, v));
}
