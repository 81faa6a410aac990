/* item_codec.c: the binary encoding of items, item_encode/item_decode
 * (item.h), and item_encoded_get, which reads one top-level attribute out of
 * the encoding without building the item. The format is documented in docs/key-encoding.md ("Item
 * encoding"). item_decode treats its input as untrusted: it comes from disk. */
#include <stdlib.h>
#include <string.h>

#include "item.h"
#include "item_internal.h"
#include "lapse_err.h"
#include "number.h"

#define ITEM_FORMAT_V1 0x01

/* ------------------------------------------------------------------------
 * Binary encoding
 * ---------------------------------------------------------------------- */

static int put_name(buf *out, const char *name)
{
    size_t n = strlen(name);
    int rv;
    if ((rv = buf_append_varint(out, n)) != 0) {
        return rv;
    }
    return buf_append(out, name, n);
}

static int encode_value(buf *out, const attr_value *v)
{
    int rv;
    if ((rv = buf_append_byte(out, (uint8_t)v->type)) != 0) {
        return rv;
    }
    switch (v->type) {
    case ATTR_S:
    case ATTR_N:
    case ATTR_B:
        if ((rv = buf_append_varint(out, v->u.bytes.len)) != 0) {
            return rv;
        }
        return buf_append(out, v->u.bytes.ptr, v->u.bytes.len);
    case ATTR_BOOL:
        return buf_append_byte(out, (uint8_t)(v->u.boolean ? 1 : 0));
    case ATTR_NULL:
        return 0;
    case ATTR_L:
    case ATTR_SS: /* a set: as a list of its elements, each with its type */
    case ATTR_NS:
    case ATTR_BS:
        if ((rv = buf_append_varint(out, v->u.list.n)) != 0) {
            return rv;
        }
        for (size_t i = 0; i < v->u.list.n; i++) {
            if ((rv = encode_value(out, &v->u.list.v[i])) != 0) {
                return rv;
            }
        }
        return 0;
    case ATTR_M:
        if ((rv = buf_append_varint(out, v->u.map.n)) != 0) {
            return rv;
        }
        for (size_t i = 0; i < v->u.map.n; i++) {
            if ((rv = put_name(out, v->u.map.v[i].name)) != 0 ||
                (rv = encode_value(out, &v->u.map.v[i].value)) != 0) {
                return rv;
            }
        }
        return 0;
    }
    return LAPSE_EINTERNAL;
}

int item_encode(const item *it, buf *out)
{
    size_t start = out->len;
    int rv;
    if ((rv = buf_append_byte(out, ITEM_FORMAT_V1)) != 0 ||
        (rv = buf_append_varint(out, it->n)) != 0) {
        goto fail;
    }
    for (size_t i = 0; i < it->n; i++) {
        if ((rv = put_name(out, it->attrs[i].name)) != 0 ||
            (rv = encode_value(out, &it->attrs[i].value)) != 0) {
            goto fail;
        }
    }
    return 0;
fail:
    out->len = start;
    if (out->data != NULL) {
        out->data[start] = 0;
    }
    return rv;
}

static int get_name(buf_reader *r, char **out)
{
    size_t n;
    if (buf_read_count(r, 1, &n) != 0 || n == 0 || n > ITEM_MAX_NAME_BYTES) {
        return LAPSE_ECORRUPT;
    }
    if (memchr(r->p, 0, n) != NULL) {
        return LAPSE_ECORRUPT;
    }
    char *s = malloc(n + 1);
    if (s == NULL) {
        return LAPSE_ENOMEM;
    }
    memcpy(s, r->p, n);
    s[n] = 0;
    r->p += n;
    *out = s;
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(((const attr *)a)->name, ((const attr *)b)->name);
}

/* Returns 1 when two attributes of arr share a name. */
static int has_duplicates(const attr *arr, size_t n)
{
    if (n < 2) {
        return 0;
    }
    if (n <= 16) {
        for (size_t i = 0; i < n; i++) {
            for (size_t j = i + 1; j < n; j++) {
                if (strcmp(arr[i].name, arr[j].name) == 0) {
                    return 1;
                }
            }
        }
        return 0;
    }
    attr *tmp = malloc(n * sizeof(attr));
    if (tmp == NULL) {
        return -1;
    }
    memcpy(tmp, arr, n * sizeof(attr));
    qsort(tmp, n, sizeof(attr), name_cmp);
    int dup = 0;
    for (size_t i = 1; i < n && !dup; i++) {
        dup = strcmp(tmp[i - 1].name, tmp[i].name) == 0;
    }
    free(tmp);
    return dup;
}

static int decode_value(buf_reader *r, int depth, attr_value *out);

/* Decodes count (name, value) pairs into a fresh array of item_cap_for(count). */
static int decode_attrs(buf_reader *r, int depth, size_t count, attr **out_arr)
{
    /* every pair takes at least 3 bytes: name length, name, type */
    if (count > (size_t)(r->end - r->p) / 3) {
        return LAPSE_ECORRUPT;
    }
    attr *arr = NULL;
    size_t n = 0;
    int rv = 0;
    if (count > 0) {
        arr = calloc(item_cap_for(count), sizeof(attr));
        if (arr == NULL) {
            return LAPSE_ENOMEM;
        }
    }
    for (; n < count; n++) {
        if ((rv = get_name(r, &arr[n].name)) != 0) {
            goto fail;
        }
        if ((rv = decode_value(r, depth, &arr[n].value)) != 0) {
            free(arr[n].name);
            goto fail;
        }
    }
    int dup = has_duplicates(arr, n);
    if (dup != 0) {
        rv = dup < 0 ? LAPSE_ENOMEM : LAPSE_ECORRUPT;
        goto fail;
    }
    *out_arr = arr;
    return 0;
fail:
    for (size_t i = 0; i < n; i++) {
        free(arr[i].name);
        item_value_fini(&arr[i].value);
    }
    free(arr);
    return rv;
}

/* depth: the nesting level of this value, 1 for a top-level attribute. */
static int decode_value(buf_reader *r, int depth, attr_value *out)
{
    int rv;
    size_t n;
    item_value_init_null(out);
    if (depth > ITEM_MAX_DEPTH || r->p >= r->end) {
        return LAPSE_ECORRUPT;
    }
    uint8_t type = *r->p++;
    switch (type) {
    case ATTR_S:
    case ATTR_N:
    case ATTR_B:
        if (buf_read_count(r, 1, &n) != 0) {
            return LAPSE_ECORRUPT;
        }
        if ((rv = item_value_init_bytes(out, (attr_type)type, r->p, n)) != 0) {
            return rv == LAPSE_EINVAL ? LAPSE_ECORRUPT : rv;
        }
        r->p += n;
        return 0;
    case ATTR_BOOL:
        if (r->p >= r->end || *r->p > 1) {
            return LAPSE_ECORRUPT;
        }
        item_value_init_bool(out, *r->p++);
        return 0;
    case ATTR_NULL:
        return 0;
    case ATTR_L:
    case ATTR_SS:
    case ATTR_NS:
    case ATTR_BS: {
        const attr_type elem = item_set_elem_type((attr_type)type);
        if (buf_read_count(r, 1, &n) != 0 || (elem != 0 && n == 0)) {
            return LAPSE_ECORRUPT;
        }
        attr_value *arr = NULL;
        size_t i = 0;
        if (n > 0 && (arr = calloc(item_cap_for(n), sizeof(attr_value))) == NULL) {
            return LAPSE_ENOMEM;
        }
        for (; i < n; i++) {
            rv = decode_value(r, depth + 1, &arr[i]);
            if (rv == 0 && elem != 0 && arr[i].type != elem) {
                item_value_fini(&arr[i]);
                rv = LAPSE_ECORRUPT; /* a set holds its element type only */
            }
            if (rv != 0) {
                for (size_t j = 0; j < i; j++) {
                    item_value_fini(&arr[j]);
                }
                free(arr);
                return rv;
            }
        }
        out->type = (attr_type)type;
        out->u.list.v = arr;
        out->u.list.n = n;
        if (elem != 0 && (rv = item_value_set_check(out, NULL)) != 0) {
            item_value_fini(out);
            return rv == LAPSE_ENOMEM ? rv : LAPSE_ECORRUPT; /* a duplicate */
        }
        return 0;
    }
    case ATTR_M: {
        attr *arr = NULL;
        if (buf_read_count(r, 3, &n) != 0) {
            return LAPSE_ECORRUPT;
        }
        if ((rv = decode_attrs(r, depth + 1, n, &arr)) != 0) {
            return rv;
        }
        out->type = ATTR_M;
        out->u.map.v = arr;
        out->u.map.n = n;
        return 0;
    }
    default:
        return LAPSE_ECORRUPT;
    }
}

int item_decode(const void *data, size_t len, item **out)
{
    buf_reader r = {data, (const uint8_t *)data + len};
    size_t n;
    attr *arr = NULL;
    int rv;
    if (len == 0 || *r.p++ != ITEM_FORMAT_V1 || buf_read_count(&r, 3, &n) != 0) {
        return LAPSE_ECORRUPT;
    }
    if ((rv = decode_attrs(&r, 1, n, &arr)) != 0) {
        return rv;
    }
    item *it = calloc(1, sizeof(item));
    if (it == NULL) {
        rv = LAPSE_ENOMEM;
    } else if (r.p != r.end) {
        rv = LAPSE_ECORRUPT; /* trailing bytes */
    }
    if (rv != 0) {
        for (size_t i = 0; i < n; i++) {
            free(arr[i].name);
            item_value_fini(&arr[i].value);
        }
        free(arr);
        free(it);
        return rv;
    }
    it->attrs = arr;
    it->n = n;
    it->cap = n == 0 ? 0 : item_cap_for(n);
    *out = it;
    return 0;
}

/* ------------------------------------------------------------------------
 * Partial decoding: one top-level attribute, without building the item
 * ---------------------------------------------------------------------- */

/* A name inside the encoded bytes (borrowed, not NUL-terminated). */
typedef struct name_ref {
    const uint8_t *p;
    size_t n;
} name_ref;

/* Names in a map up to this count are checked for duplicates on the stack,
 * pairwise (as has_duplicates does up to 16); larger maps sort a heap copy. */
#define SKIM_STACK_NAMES 16

static int name_ref_cmp(const void *a, const void *b)
{
    const name_ref *x = a, *y = b;
    if (x->n != y->n) {
        return x->n < y->n ? -1 : 1;
    }
    return memcmp(x->p, y->p, x->n);
}

/* Like get_name, but borrows the bytes. */
static int skim_name(buf_reader *r, name_ref *out)
{
    size_t n;
    if (buf_read_count(r, 1, &n) != 0 || n == 0 || n > ITEM_MAX_NAME_BYTES) {
        return LAPSE_ECORRUPT;
    }
    if (memchr(r->p, 0, n) != NULL) {
        return LAPSE_ECORRUPT;
    }
    out->p = r->p;
    out->n = n;
    r->p += n;
    return 0;
}

static int skim_value(buf_reader *r, int depth, attr_type *type, const uint8_t **val, size_t *vlen);

/* Checks names[0..n) for a repeat: 0, LAPSE_ECORRUPT or LAPSE_ENOMEM. */
static int skim_duplicates(name_ref *names, size_t n)
{
    if (n <= SKIM_STACK_NAMES) {
        for (size_t i = 0; i < n; i++) {
            for (size_t j = i + 1; j < n; j++) {
                if (names[i].n == names[j].n && memcmp(names[i].p, names[j].p, names[i].n) == 0) {
                    return LAPSE_ECORRUPT;
                }
            }
        }
        return 0;
    }
    qsort(names, n, sizeof(*names), name_ref_cmp);
    for (size_t i = 1; i < n; i++) {
        if (name_ref_cmp(&names[i - 1], &names[i]) == 0) {
            return LAPSE_ECORRUPT;
        }
    }
    return 0;
}

/* Walks count (name, value) pairs as decode_attrs does, accepting exactly
 * what it accepts. When want is non-NULL, the value of the pair named want
 * is reported through *found and the out parameters (S, N, B: its bytes). */
static int skim_attrs(buf_reader *r, int depth, size_t count, const char *want, size_t want_len,
                      int *found, attr_type *type, const uint8_t **val, size_t *vlen)
{
    if (count > (size_t)(r->end - r->p) / 3) {
        return LAPSE_ECORRUPT;
    }
    name_ref stack[SKIM_STACK_NAMES];
    name_ref *names = stack;
    if (count > SKIM_STACK_NAMES && (names = malloc(count * sizeof(*names))) == NULL) {
        return LAPSE_ENOMEM;
    }
    int rv = 0;
    for (size_t i = 0; i < count; i++) {
        attr_type t;
        const uint8_t *v = NULL;
        size_t vl = 0;
        if ((rv = skim_name(r, &names[i])) != 0 || (rv = skim_value(r, depth, &t, &v, &vl)) != 0) {
            goto out;
        }
        if (want != NULL && names[i].n == want_len && memcmp(names[i].p, want, want_len) == 0) {
            *found = 1;
            *type = t;
            *val = v;
            *vlen = vl;
        }
    }
    rv = skim_duplicates(names, count);
out:
    if (names != stack) {
        free(names);
    }
    return rv;
}

/* Walks one value as decode_value does (same checks, same limits), with no
 * allocation except for maps of more than SKIM_STACK_NAMES entries. */
static int skim_value(buf_reader *r, int depth, attr_type *type, const uint8_t **val, size_t *vlen)
{
    size_t n;
    *val = NULL;
    *vlen = 0;
    if (depth > ITEM_MAX_DEPTH || r->p >= r->end) {
        return LAPSE_ECORRUPT;
    }
    uint8_t t = *r->p++;
    *type = (attr_type)t;
    switch (t) {
    case ATTR_S:
    case ATTR_N:
    case ATTR_B:
        if (buf_read_count(r, 1, &n) != 0) {
            return LAPSE_ECORRUPT;
        }
        if (t == ATTR_N && number_validate((const char *)r->p, n) != 0) {
            return LAPSE_ECORRUPT;
        }
        *val = r->p;
        *vlen = n;
        r->p += n;
        return 0;
    case ATTR_BOOL:
        if (r->p >= r->end || *r->p > 1) {
            return LAPSE_ECORRUPT;
        }
        r->p++;
        return 0;
    case ATTR_NULL:
        return 0;
    case ATTR_L:
    case ATTR_SS: /* elements of the set's type; duplicates only decode finds */
    case ATTR_NS:
    case ATTR_BS: {
        const attr_type elem = item_set_elem_type((attr_type)t);
        if (buf_read_count(r, 1, &n) != 0 || (elem != 0 && n == 0)) {
            return LAPSE_ECORRUPT;
        }
        for (size_t i = 0; i < n; i++) {
            attr_type et;
            const uint8_t *ev;
            size_t el;
            int rv = skim_value(r, depth + 1, &et, &ev, &el);
            if (rv != 0) {
                return rv;
            }
            if (elem != 0 && et != elem) {
                return LAPSE_ECORRUPT;
            }
        }
        return 0;
    }
    case ATTR_M:
        if (buf_read_count(r, 3, &n) != 0) {
            return LAPSE_ECORRUPT;
        }
        return skim_attrs(r, depth + 1, n, NULL, 0, NULL, NULL, NULL, NULL);
    default:
        return LAPSE_ECORRUPT;
    }
}

int item_encoded_get(const void *data, size_t len, const char *name, attr_type *type,
                     const char **val, size_t *vlen)
{
    buf_reader r = {data, (const uint8_t *)data + len};
    size_t n;
    int found = 0;
    attr_type t = ATTR_NULL;
    const uint8_t *v = NULL;
    size_t vl = 0;
    if (len == 0 || *r.p++ != ITEM_FORMAT_V1 || buf_read_count(&r, 3, &n) != 0) {
        return LAPSE_ECORRUPT;
    }
    int rv = skim_attrs(&r, 1, n, name, strlen(name), &found, &t, &v, &vl);
    if (rv != 0) {
        return rv;
    }
    if (r.p != r.end) {
        return LAPSE_ECORRUPT; /* trailing bytes */
    }
    if (!found) {
        return LAPSE_ENOTFOUND;
    }
    *type = t;
    *val = (const char *)v;
    *vlen = vl;
    return 0;
}
