/*
 * wire.c: attribute values and items <-> protobuf-c messages, and status
 * codes (wire.h). Everything coming from the network is checked here before
 * any other module sees it; the rules are listed in docs/wire-protocol.md
 * ("Validation"). Schemas and partition maps are in wire_pmap.c, the raw
 * nesting check in wire_nesting.c.
 */
#include "wire.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/number.h"
#include "rpc_internal.h"

/* ===================================================================== */
/* Outgoing: structs to protobuf                                          */
/* ===================================================================== */

static Lapse__AttributeValue *value_to_pb(arena *a, const attr_value *v, int depth);

static Lapse__Attribute **attrs_to_pb(arena *a, const attr *attrs, size_t n, int depth)
{
    Lapse__Attribute **arr = arena_alloc(a, (n > 0 ? n : 1) * sizeof *arr);
    if (arr == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        Lapse__Attribute *pa = arena_alloc(a, sizeof *pa);
        if (pa == NULL) {
            return NULL;
        }
        lapse__attribute__init(pa);
        if ((pa->name = arena_strdup(a, attrs[i].name)) == NULL ||
            (pa->value = value_to_pb(a, &attrs[i].value, depth)) == NULL) {
            return NULL;
        }
        arr[i] = pa;
    }
    return arr;
}

/* A list or set v into pb (value_to_pb). */
static Lapse__AttributeValue *list_to_pb(arena *a, const attr_value *v, int depth,
                                         Lapse__AttributeValue *pb)
{
    Lapse__ListValue *l = arena_alloc(a, sizeof *l);
    size_t n = v->u.list.n;
    if (l == NULL) {
        return NULL;
    }
    lapse__list_value__init(l);
    if ((l->values = arena_alloc(a, (n > 0 ? n : 1) * sizeof *l->values)) == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if ((l->values[i] = value_to_pb(a, &v->u.list.v[i], depth + 1)) == NULL) {
            return NULL;
        }
    }
    l->n_values = n;
    switch (v->type) {
    case ATTR_SS:
        pb->value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_SS;
        pb->ss = l;
        break;
    case ATTR_NS:
        pb->value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_NS;
        pb->ns = l;
        break;
    case ATTR_BS:
        pb->value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_BS;
        pb->bs = l;
        break;
    default:
        pb->value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_L;
        pb->l = l;
    }
    return pb;
}

/* depth: as in item.c, 1 for a top-level value. Deeper trees than
 * ITEM_MAX_DEPTH cannot be built through item.h's checks on input, but a
 * guard keeps the recursion bounded whatever the caller built. */
static Lapse__AttributeValue *value_to_pb(arena *a, const attr_value *v, int depth)
{
    if (depth > ITEM_MAX_DEPTH) {
        return NULL;
    }
    Lapse__AttributeValue *pb = arena_alloc(a, sizeof *pb);
    if (pb == NULL) {
        return NULL;
    }
    lapse__attribute_value__init(pb);
    switch (v->type) {
    case ATTR_S:
    case ATTR_B: {
        ProtobufCBinaryData bd = {v->u.bytes.len, NULL};
        if ((bd.data = arena_memdup(a, v->u.bytes.ptr != NULL ? v->u.bytes.ptr : "",
                                    v->u.bytes.len)) == NULL) {
            return NULL;
        }
        if (v->type == ATTR_S) {
            pb->value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_S;
            pb->s = bd;
        } else {
            pb->value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_B;
            pb->b = bd;
        }
        return pb;
    }
    case ATTR_N:
        pb->value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_N;
        pb->n = arena_strndup(a, v->u.bytes.ptr != NULL ? v->u.bytes.ptr : "", v->u.bytes.len);
        return pb->n != NULL ? pb : NULL;
    case ATTR_BOOL:
        pb->value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_BOOL;
        pb->bool_ = v->u.boolean != 0;
        return pb;
    case ATTR_NULL:
        pb->value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_NULL;
        pb->null = 1;
        return pb;
    case ATTR_L:
    case ATTR_SS:
    case ATTR_NS:
    case ATTR_BS:
        return list_to_pb(a, v, depth, pb);
    case ATTR_M: {
        Lapse__MapValue *m = arena_alloc(a, sizeof *m);
        if (m == NULL) {
            return NULL;
        }
        lapse__map_value__init(m);
        if ((m->attrs = attrs_to_pb(a, v->u.map.v, v->u.map.n, depth + 1)) == NULL) {
            return NULL;
        }
        m->n_attrs = v->u.map.n;
        pb->value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_M;
        pb->m = m;
        return pb;
    }
    }
    return NULL; /* unknown type: not a valid attr_value */
}

Lapse__AttributeValue *wire_value_to_pb(arena *a, const attr_value *v)
{
    return value_to_pb(a, v, 1);
}

Lapse__AttributeValue *wire_item_value_to_pb(arena *a, const attr_value *m)
{
    return m->type == ATTR_M ? value_to_pb(a, m, 0) : NULL;
}

Lapse__Item *wire_item_to_pb(arena *a, const item *it)
{
    Lapse__Item *pb = arena_alloc(a, sizeof *pb);
    if (pb == NULL) {
        return NULL;
    }
    lapse__item__init(pb);
    if ((pb->attrs = attrs_to_pb(a, it->attrs, it->n, 1)) == NULL) {
        return NULL;
    }
    pb->n_attrs = it->n;
    return pb;
}

/* ===================================================================== */
/* Incoming: protobuf to structs, validated                               */
/* ===================================================================== */

/* The capacity item.c gives an L or M array of n elements (the next power of
 * two; see "Arrays" in common/item.c), so later appends grow it correctly. */
static size_t array_cap(size_t n)
{
    size_t c = 1;
    while (c < n) {
        c *= 2;
    }
    return c;
}

static int name_cmp(const void *x, const void *y)
{
    return strcmp(((const attr *)x)->name, ((const attr *)y)->name);
}

/* Returns the first duplicated name in arr (n entries), or NULL. Sorting a
 * copy keeps this O(n log n) for hostile maps with many attributes. */
static const char *find_duplicate(const attr *arr, size_t n, int *oom)
{
    *oom = 0;
    if (n < 2) {
        return NULL;
    }
    attr *tmp = malloc(n * sizeof *tmp);
    if (tmp == NULL) {
        *oom = 1;
        return NULL;
    }
    memcpy(tmp, arr, n * sizeof *tmp);
    qsort(tmp, n, sizeof *tmp, name_cmp);
    const char *dup = NULL;
    for (size_t i = 1; i < n && dup == NULL; i++) {
        if (strcmp(tmp[i - 1].name, tmp[i].name) == 0) {
            dup = tmp[i].name; /* points into arr's strings, not tmp */
        }
    }
    free(tmp);
    return dup;
}

static int name_check(const char *name, char *err, size_t errlen)
{
    if (name == NULL || name[0] == 0) {
        set_err(err, errlen, "empty attribute name");
        return LAPSE_EINVAL;
    }
    /* protobuf-c NUL-terminates strings, so a name can hold no NUL here: at
     * worst a name sent with one is truncated at it. */
    if (strnlen(name, ITEM_MAX_NAME_BYTES + 1) > ITEM_MAX_NAME_BYTES) {
        set_err(err, errlen, "attribute name longer than %d bytes", ITEM_MAX_NAME_BYTES);
        return LAPSE_EINVAL;
    }
    return 0;
}

static void attrs_free(attr *arr, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(arr[i].name);
        item_value_fini(&arr[i].value);
    }
    free(arr);
}

static int value_from_pb(const Lapse__AttributeValue *pb, attr_value *out, int depth, char *err,
                         size_t errlen);

/* Converts n pb attributes into a new array (capacity array_cap(n)) with
 * unique, valid names. On success the caller owns *out_arr. */
static int attrs_from_pb(Lapse__Attribute *const *pbs, size_t n, int depth, attr **out_arr,
                         char *err, size_t errlen)
{
    int rv = 0;
    size_t i = 0;
    attr *arr = NULL;

    *out_arr = NULL;
    if (n == 0) {
        return 0;
    }
    if (pbs == NULL || n > SIZE_MAX / sizeof(attr) / 2) {
        set_err(err, errlen, "bad attribute list");
        return LAPSE_EINVAL;
    }
    if ((arr = calloc(array_cap(n), sizeof *arr)) == NULL) {
        set_err(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    for (; i < n; i++) {
        const Lapse__Attribute *pa = pbs[i];
        if (pa == NULL) {
            set_err(err, errlen, "null attribute");
            rv = LAPSE_EINVAL;
            goto fail;
        }
        if ((rv = name_check(pa->name, err, errlen)) != 0) {
            goto fail;
        }
        if (pa->value == NULL) {
            set_err(err, errlen, "attribute \"%.64s\" has no value", pa->name);
            rv = LAPSE_EINVAL;
            goto fail;
        }
        if ((rv = value_from_pb(pa->value, &arr[i].value, depth, err, errlen)) != 0) {
            /* Name the top-level attribute only, so the reason itself is
             * not pushed out of err by a long path. */
            if (rv == LAPSE_EINVAL && depth == 1 && err != NULL && errlen > 0) {
                char inner[200];
                snprintf(inner, sizeof inner, "%s", err);
                set_err(err, errlen, "attribute \"%.64s\": %s", pa->name, inner);
            }
            goto fail;
        }
        if ((arr[i].name = strdup(pa->name)) == NULL) {
            item_value_fini(&arr[i].value);
            set_err(err, errlen, "out of memory");
            rv = LAPSE_ENOMEM;
            goto fail;
        }
    }
    int oom;
    const char *dup = find_duplicate(arr, n, &oom);
    if (oom) {
        set_err(err, errlen, "out of memory");
        rv = LAPSE_ENOMEM;
        goto fail;
    }
    if (dup != NULL) {
        set_err(err, errlen, "duplicate attribute name \"%.64s\"", dup);
        rv = LAPSE_EINVAL;
        goto fail;
    }
    *out_arr = arr;
    return 0;
fail:
    attrs_free(arr, i);
    return rv;
}

/* The list of an L, SS, NS or BS value, its type into *t. */
static const Lapse__ListValue *list_of(const Lapse__AttributeValue *pb, attr_type *t)
{
    switch (pb->value_case) {
    case LAPSE__ATTRIBUTE_VALUE__VALUE_SS:
        *t = ATTR_SS;
        return pb->ss;
    case LAPSE__ATTRIBUTE_VALUE__VALUE_NS:
        *t = ATTR_NS;
        return pb->ns;
    case LAPSE__ATTRIBUTE_VALUE__VALUE_BS:
        *t = ATTR_BS;
        return pb->bs;
    default:
        *t = ATTR_L;
        return pb->l;
    }
}

/* A list or set (value_from_pb): its elements, of the set's type, and a
 * set without duplicates. */
static int list_from_pb(const Lapse__AttributeValue *pb, attr_value *out, int depth, char *err,
                        size_t errlen)
{
    int rv;
    attr_type t;
    const Lapse__ListValue *l = list_of(pb, &t);
    const attr_type elem = item_set_elem_type(t);
    size_t n = l != NULL ? l->n_values : 0;
    attr_value *arr = NULL;
    if (n > 0) {
        if (l->values == NULL || n > SIZE_MAX / sizeof(attr_value) / 2) {
            set_err(err, errlen, "bad list");
            return LAPSE_EINVAL;
        }
        if ((arr = calloc(array_cap(n), sizeof *arr)) == NULL) {
            set_err(err, errlen, "out of memory");
            return LAPSE_ENOMEM;
        }
    }
    for (size_t i = 0; i < n; i++) {
        rv = LAPSE_EINVAL;
        if (l->values[i] == NULL) {
            set_err(err, errlen, "null list element");
        } else if ((rv = value_from_pb(l->values[i], &arr[i], depth + 1, err, errlen)) == 0 &&
                   elem != 0 && arr[i].type != elem) {
            set_err(err, errlen, "a %s element of type %s", item_type_name(t),
                    item_type_name(arr[i].type));
            item_value_fini(&arr[i]);
            rv = LAPSE_EINVAL;
        }
        if (rv != 0) {
            for (size_t j = 0; j < i; j++) {
                item_value_fini(&arr[j]);
            }
            free(arr);
            return rv;
        }
    }
    out->type = t;
    out->u.list.v = arr;
    out->u.list.n = n;
    if (elem != 0 && (rv = item_value_set_check(out, NULL)) != 0) {
        item_value_fini(out);
        set_err(err, errlen,
                rv == LAPSE_ENOMEM ? "out of memory"
                : n == 0           ? "an empty %s"
                                   : "a %s with duplicates",
                item_type_name(t));
        return rv;
    }
    return 0;
}

/* depth: the nesting level of this value, 1 for a top-level attribute (the
 * same count as item.c and the JSON parser). */
static int value_from_pb(const Lapse__AttributeValue *pb, attr_value *out, int depth, char *err,
                         size_t errlen)
{
    int rv;
    item_value_init_null(out);
    if (depth > ITEM_MAX_DEPTH) {
        set_err(err, errlen, "value nested deeper than %d levels", ITEM_MAX_DEPTH);
        return LAPSE_EINVAL;
    }
    switch (pb->value_case) {
    case LAPSE__ATTRIBUTE_VALUE__VALUE_S:
    case LAPSE__ATTRIBUTE_VALUE__VALUE_B: {
        const ProtobufCBinaryData *bd =
            pb->value_case == LAPSE__ATTRIBUTE_VALUE__VALUE_S ? &pb->s : &pb->b;
        attr_type t = pb->value_case == LAPSE__ATTRIBUTE_VALUE__VALUE_S ? ATTR_S : ATTR_B;
        if (bd->len > 0 && bd->data == NULL) {
            set_err(err, errlen, "bad bytes value");
            return LAPSE_EINVAL;
        }
        if ((rv = item_value_init_bytes(out, t, bd->len > 0 ? (const void *)bd->data : "",
                                        bd->len)) != 0) {
            set_err(err, errlen, "out of memory");
        }
        return rv;
    }
    case LAPSE__ATTRIBUTE_VALUE__VALUE_N: {
        number num;
        char why[128] = "";
        const char *s = pb->n != NULL ? pb->n : "";
        size_t len = strlen(s);
        if (number_parse(s, len, &num, why, sizeof why) != 0) {
            set_err(err, errlen, "invalid number \"%.48s\": %s", s, why);
            return LAPSE_EINVAL;
        }
        if ((rv = item_value_init_bytes(out, ATTR_N, s, len)) != 0) {
            set_err(err, errlen, rv == LAPSE_EINVAL ? "invalid number" : "out of memory");
        }
        return rv;
    }
    case LAPSE__ATTRIBUTE_VALUE__VALUE_BOOL:
        item_value_init_bool(out, pb->bool_ != 0);
        return 0;
    case LAPSE__ATTRIBUTE_VALUE__VALUE_NULL:
        item_value_init_null(out);
        return 0;
    case LAPSE__ATTRIBUTE_VALUE__VALUE_L:
    case LAPSE__ATTRIBUTE_VALUE__VALUE_SS:
    case LAPSE__ATTRIBUTE_VALUE__VALUE_NS:
    case LAPSE__ATTRIBUTE_VALUE__VALUE_BS:
        return list_from_pb(pb, out, depth, err, errlen);
    case LAPSE__ATTRIBUTE_VALUE__VALUE_M: {
        attr *arr = NULL;
        size_t n = pb->m != NULL ? pb->m->n_attrs : 0;
        if (n > 0 && (rv = attrs_from_pb(pb->m->attrs, n, depth + 1, &arr, err, errlen)) != 0) {
            return rv;
        }
        out->type = ATTR_M;
        out->u.map.v = arr;
        out->u.map.n = n;
        return 0;
    }
    case LAPSE__ATTRIBUTE_VALUE__VALUE__NOT_SET:
    default:
        set_err(err, errlen,
                "value has no type (exactly one of S, N, B, BOOL, NULL, L, M, SS, NS, BS)");
        return LAPSE_EINVAL;
    }
}

int wire_value_from_pb(const Lapse__AttributeValue *pb, attr_value *out, char *err, size_t errlen)
{
    if (pb == NULL) {
        item_value_init_null(out);
        set_err(err, errlen, "missing value");
        return LAPSE_EINVAL;
    }
    return value_from_pb(pb, out, 1, err, errlen);
}

int wire_item_value_from_pb(const Lapse__AttributeValue *pb, attr_value *out, char *err,
                            size_t errlen)
{
    if (pb == NULL || pb->value_case != LAPSE__ATTRIBUTE_VALUE__VALUE_M) {
        item_value_init_null(out);
        set_err(err, errlen, "an item as a value must be an M value");
        return LAPSE_EINVAL;
    }
    return value_from_pb(pb, out, 0, err, errlen);
}

int wire_item_from_pb(const Lapse__Item *pb, item **out, char *err, size_t errlen)
{
    int rv;
    attr *arr = NULL;

    *out = NULL;
    if (pb == NULL) {
        set_err(err, errlen, "missing item");
        return LAPSE_EINVAL;
    }
    if ((rv = attrs_from_pb(pb->attrs, pb->n_attrs, 1, &arr, err, errlen)) != 0) {
        return rv;
    }
    item *it = item_new();
    if (it == NULL) {
        attrs_free(arr, pb->n_attrs);
        set_err(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    free(it->attrs); /* empty; replaced by the decoded array */
    it->attrs = arr;
    it->n = pb->n_attrs;
    it->cap = pb->n_attrs > 0 ? array_cap(pb->n_attrs) : 0;
    *out = it;
    return 0;
}

int wire_status_from_pb(int pb_status)
{
    if (pb_status < 0 || pb_status >= LAPSE_STATUS_COUNT) {
        return LAPSE_EPROTO;
    }
    return pb_status;
}
