/* ddbjson_format.c: DynamoDB JSON formatted (ddbjson.h): as a jansson
 * document (for larger documents) built in item order, or as text written
 * straight into a buffer, the same text jansson dumps of the document. */
#include "ddbjson.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "buf.h"

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
    case ATTR_M:
        inner = members_to_json(v->u.map.v, v->u.map.n);
        break;
    case ATTR_L:
    case ATTR_SS:
    case ATTR_NS:
    case ATTR_BS:
        /* a list's elements keep their type wrappers; a set's, ["a","b"], go without */
        inner = json_array();
        for (size_t i = 0; inner != NULL && i < v->u.list.n; i++) {
            const attr_value *e = &v->u.list.v[i];
            if (json_array_append_new(inner, v->type == ATTR_L ? ddbjson_value_to_json(e)
                                                               : inner_json(e)) != 0) {
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
