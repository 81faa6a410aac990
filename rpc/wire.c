/*
 * wire.c: Lapse structs <-> protobuf-c messages (wire.h). Everything coming
 * from the network is checked here before any other module sees it; the rules
 * are listed in docs/wire-protocol.md ("Validation").
 */
#include "wire.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/number.h"

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ===================================================================== */
/* Nesting check                                                          */
/* ===================================================================== */

static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (*p >= end) {
            return -1;
        }
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* Walks one message's fields; recursion is bounded by depth_left. */
static int scan(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end,
                int depth_left)
{
    while (p < end) {
        uint64_t key;
        uint64_t v;
        if (read_varint(&p, end, &key) != 0) {
            return -1;
        }
        switch (key & 7) {
        case 0: /* varint */
            if (read_varint(&p, end, &v) != 0) {
                return -1;
            }
            break;
        case 1: /* 64-bit */
            if (end - p < 8) {
                return -1;
            }
            p += 8;
            break;
        case 5: /* 32-bit */
            if (end - p < 4) {
                return -1;
            }
            p += 4;
            break;
        case 2: { /* length-delimited: bytes, string, packed or a submessage */
            if (read_varint(&p, end, &v) != 0 || v > (uint64_t)(end - p)) {
                return -1;
            }
            uint64_t num = key >> 3;
            const ProtobufCFieldDescriptor *f =
                (d != NULL && num <= UINT32_MAX)
                    ? protobuf_c_message_descriptor_get_field(d, (unsigned)num)
                    : NULL;
            if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (depth_left <= 0 || scan(f->descriptor, p, p + v, depth_left - 1) != 0) {
                    return -1;
                }
            }
            p += v;
            break;
        }
        default: /* groups (3, 4) are not proto3; 6, 7 do not exist */
            return -1;
        }
    }
    return 0;
}

int wire_check_nesting(const ProtobufCMessageDescriptor *desc, const void *data, size_t len,
                       int max_depth)
{
    if (max_depth < 1 || (data == NULL && len > 0)) {
        return LAPSE_EPROTO;
    }
    const uint8_t *p = data;
    return scan(desc, p, p + len, max_depth - 1) == 0 ? 0 : LAPSE_EPROTO;
}

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
    case ATTR_L: {
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
        pb->value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_L;
        pb->l = l;
        return pb;
    }
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

static Lapse__KeyType key_type_to_pb(attr_type t)
{
    switch (t) {
    case ATTR_S:
        return LAPSE__KEY_TYPE__KEY_S;
    case ATTR_N:
        return LAPSE__KEY_TYPE__KEY_N;
    case ATTR_B:
        return LAPSE__KEY_TYPE__KEY_B;
    default:
        return LAPSE__KEY_TYPE__KEY_NONE;
    }
}

static Lapse__KeyDef *key_to_pb(arena *a, const key_def *k)
{
    Lapse__KeyDef *pb = arena_alloc(a, sizeof *pb);
    if (pb == NULL) {
        return NULL;
    }
    lapse__key_def__init(pb);
    if ((pb->name = arena_strdup(a, k->name)) == NULL) {
        return NULL;
    }
    pb->type = key_type_to_pb(k->type);
    return pb;
}

Lapse__TableSchema *wire_schema_to_pb(arena *a, const table_schema *t)
{
    Lapse__TableSchema *pb = arena_alloc(a, sizeof *pb);
    if (pb == NULL) {
        return NULL;
    }
    lapse__table_schema__init(pb);
    pb->id = t->id;
    pb->partitions = t->partitions;
    if ((pb->name = arena_strdup(a, t->name)) == NULL ||
        (pb->partition_key = key_to_pb(a, &t->pk)) == NULL) {
        return NULL;
    }
    if (t->sk.name[0] != 0 && (pb->sort_key = key_to_pb(a, &t->sk)) == NULL) {
        return NULL;
    }
    return pb; /* no sort key: sort_key stays NULL (absent on the wire) */
}

Lapse__TableMap *wire_table_to_pb(arena *a, const pmap_table *t)
{
    Lapse__TableMap *pb = arena_alloc(a, sizeof *pb);
    uint32_t np = t->schema.partitions;
    if (pb == NULL) {
        return NULL;
    }
    lapse__table_map__init(pb);
    if ((pb->schema = wire_schema_to_pb(a, &t->schema)) == NULL ||
        (pb->partitions = arena_alloc(a, (np > 0 ? np : 1) * sizeof *pb->partitions)) == NULL) {
        return NULL;
    }
    for (uint32_t p = 0; p < np; p++) {
        const pmap_replicas *r = &t->parts[p];
        uint32_t n = r->n <= PMAP_MAX_REPLICAS ? r->n : PMAP_MAX_REPLICAS;
        Lapse__PartitionReplicas *pr = arena_alloc(a, sizeof *pr);
        if (pr == NULL) {
            return NULL;
        }
        lapse__partition_replicas__init(pr);
        if ((pr->node_ids = arena_memdup(a, r->ids, (n > 0 ? n : 1) * sizeof(uint32_t))) == NULL) {
            return NULL;
        }
        pr->n_node_ids = n;
        pb->partitions[p] = pr;
    }
    pb->n_partitions = np;
    return pb;
}

Lapse__PartitionMap *wire_pmap_to_pb(arena *a, const pmap *pm)
{
    Lapse__PartitionMap *pb = arena_alloc(a, sizeof *pb);
    if (pb == NULL) {
        return NULL;
    }
    lapse__partition_map__init(pb);
    pb->version = pm->version;
    if ((pb->nodes = arena_alloc(a, (pm->nnodes > 0 ? pm->nnodes : 1) * sizeof *pb->nodes)) ==
            NULL ||
        (pb->tables = arena_alloc(a, (pm->ntables > 0 ? pm->ntables : 1) * sizeof *pb->tables)) ==
            NULL) {
        return NULL;
    }
    for (size_t i = 0; i < pm->nnodes; i++) {
        Lapse__NodeInfo *ni = arena_alloc(a, sizeof *ni);
        if (ni == NULL) {
            return NULL;
        }
        lapse__node_info__init(ni);
        ni->id = pm->nodes[i].id;
        ni->state = pm->nodes[i].state == PMAP_NODE_UP ? LAPSE__NODE_STATE__NODE_UP
                                                       : LAPSE__NODE_STATE__NODE_DOWN;
        if ((ni->address = arena_strdup(a, pm->nodes[i].address)) == NULL) {
            return NULL;
        }
        pb->nodes[i] = ni;
    }
    pb->n_nodes = pm->nnodes;
    for (size_t i = 0; i < pm->ntables; i++) {
        if ((pb->tables[i] = wire_table_to_pb(a, &pm->tables[i])) == NULL) {
            return NULL;
        }
    }
    pb->n_tables = pm->ntables;
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
    case LAPSE__ATTRIBUTE_VALUE__VALUE_L: {
        size_t n = pb->l != NULL ? pb->l->n_values : 0;
        attr_value *arr = NULL;
        if (n > 0) {
            if (pb->l->values == NULL || n > SIZE_MAX / sizeof(attr_value) / 2) {
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
            if (pb->l->values[i] == NULL) {
                set_err(err, errlen, "null list element");
            } else {
                rv = value_from_pb(pb->l->values[i], &arr[i], depth + 1, err, errlen);
            }
            if (rv != 0) {
                for (size_t j = 0; j < i; j++) {
                    item_value_fini(&arr[j]);
                }
                free(arr);
                return rv;
            }
        }
        out->type = ATTR_L;
        out->u.list.v = arr;
        out->u.list.n = n;
        return 0;
    }
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
        set_err(err, errlen, "value has no type (exactly one of S, N, B, BOOL, NULL, L, M)");
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

static int key_from_pb(const Lapse__KeyDef *pb, key_def *out, const char *what, char *err,
                       size_t errlen)
{
    const char *name = pb->name != NULL ? pb->name : "";
    size_t len = strnlen(name, SCHEMA_MAX_KEY_NAME + 1);
    if (len == 0) {
        set_err(err, errlen, "%s has no name", what);
        return LAPSE_EINVAL;
    }
    if (len > SCHEMA_MAX_KEY_NAME) {
        set_err(err, errlen, "%s name longer than %d bytes", what, SCHEMA_MAX_KEY_NAME);
        return LAPSE_EINVAL;
    }
    switch (pb->type) {
    case LAPSE__KEY_TYPE__KEY_S:
        out->type = ATTR_S;
        break;
    case LAPSE__KEY_TYPE__KEY_N:
        out->type = ATTR_N;
        break;
    case LAPSE__KEY_TYPE__KEY_B:
        out->type = ATTR_B;
        break;
    default:
        set_err(err, errlen, "%s \"%.64s\" has type %d; want S, N or B", what, name, (int)pb->type);
        return LAPSE_EINVAL;
    }
    memcpy(out->name, name, len + 1);
    return 0;
}

int wire_schema_from_pb(const Lapse__TableSchema *pb, table_schema *out, char *err, size_t errlen)
{
    int rv;
    memset(out, 0, sizeof *out);
    if (pb == NULL) {
        set_err(err, errlen, "missing table schema");
        return LAPSE_EINVAL;
    }
    const char *name = pb->name != NULL ? pb->name : "";
    size_t len = strnlen(name, SCHEMA_MAX_NAME + 1);
    if (len == 0 || len > SCHEMA_MAX_NAME) {
        set_err(err, errlen, "table name must be 1 to %d bytes", SCHEMA_MAX_NAME);
        return LAPSE_EINVAL;
    }
    memcpy(out->name, name, len + 1);
    out->id = pb->id;
    out->partitions = pb->partitions;
    if (pb->partition_key == NULL) {
        set_err(err, errlen, "table \"%.64s\" has no partition key", name);
        return LAPSE_EINVAL;
    }
    if ((rv = key_from_pb(pb->partition_key, &out->pk, "partition key", err, errlen)) != 0) {
        return rv;
    }
    const Lapse__KeyDef *sk = pb->sort_key;
    if (sk != NULL && sk->type == LAPSE__KEY_TYPE__KEY_NONE) {
        if (sk->name != NULL && sk->name[0] != 0) {
            set_err(err, errlen, "sort key \"%.64s\" has no type", sk->name);
            return LAPSE_EINVAL;
        }
        sk = NULL;
    }
    if (sk != NULL) {
        if ((rv = key_from_pb(sk, &out->sk, "sort key", err, errlen)) != 0) {
            return rv;
        }
        if (strcmp(out->sk.name, out->pk.name) == 0) {
            set_err(err, errlen, "sort key and partition key are both \"%.64s\"", out->pk.name);
            return LAPSE_EINVAL;
        }
    }
    return 0;
}

int wire_table_from_pb(const Lapse__TableMap *pb, pmap *pm, char *err, size_t errlen)
{
    int rv;
    table_schema t;
    char why[200] = "";

    if (pb == NULL) {
        set_err(err, errlen, "missing table map");
        return LAPSE_EINVAL;
    }
    if ((rv = wire_schema_from_pb(pb->schema, &t, err, errlen)) != 0) {
        return rv;
    }
    if (schema_validate(&t, why, sizeof why) != 0) {
        set_err(err, errlen, "table \"%.64s\": %s", t.name, why);
        return LAPSE_EINVAL;
    }
    if (t.id == 0) {
        set_err(err, errlen, "table \"%.64s\" has no id", t.name);
        return LAPSE_EINVAL;
    }
    if (pmap_table_find(pm, t.name) != NULL || pmap_table_find_id(pm, t.id) != NULL) {
        set_err(err, errlen, "table \"%.64s\" (id %u) appears twice", t.name, (unsigned)t.id);
        return LAPSE_EINVAL;
    }
    if (pb->n_partitions != t.partitions || (t.partitions > 0 && pb->partitions == NULL)) {
        set_err(err, errlen, "table \"%.64s\": %zu replica lists for %u partitions", t.name,
                pb->n_partitions, (unsigned)t.partitions);
        return LAPSE_EINVAL;
    }
    pmap_replicas *parts = calloc(t.partitions, sizeof *parts);
    if (parts == NULL) {
        set_err(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    for (uint32_t p = 0; p < t.partitions; p++) {
        const Lapse__PartitionReplicas *pr = pb->partitions[p];
        size_t n = pr != NULL ? pr->n_node_ids : 0;
        if (n < 1 || n > PMAP_MAX_REPLICAS || pr->node_ids == NULL) {
            set_err(err, errlen, "table \"%.64s\" partition %u: %zu replicas (want 1 to %d)",
                    t.name, (unsigned)p, n, PMAP_MAX_REPLICAS);
            rv = LAPSE_EINVAL;
            goto fail;
        }
        for (size_t k = 0; k < n; k++) {
            uint32_t id = pr->node_ids[k];
            if (id == 0 || pmap_node_find(pm, id) == NULL) {
                set_err(err, errlen, "table \"%.64s\" partition %u: unknown node %u", t.name,
                        (unsigned)p, (unsigned)id);
                rv = LAPSE_EINVAL;
                goto fail;
            }
            for (size_t j = 0; j < k; j++) {
                if (pr->node_ids[j] == id) {
                    set_err(err, errlen, "table \"%.64s\" partition %u: node %u listed twice",
                            t.name, (unsigned)p, (unsigned)id);
                    rv = LAPSE_EINVAL;
                    goto fail;
                }
            }
            parts[p].ids[k] = id;
        }
        parts[p].n = (uint32_t)n;
    }
    rv = pmap_add_table_assigned(pm, &t, parts);
    if (rv == LAPSE_ENOMEM) {
        set_err(err, errlen, "out of memory");
    } else if (rv != 0) {
        set_err(err, errlen, "table \"%.64s\" rejected by the partition map: %s", t.name,
                lapse_strerror(rv));
        rv = LAPSE_EINVAL;
    }
fail:
    free(parts);
    return rv;
}

int wire_pmap_from_pb(const Lapse__PartitionMap *pb, pmap **out, char *err, size_t errlen)
{
    int rv;
    *out = NULL;
    if (pb == NULL) {
        set_err(err, errlen, "missing partition map");
        return LAPSE_EINVAL;
    }
    if (pb->n_nodes > WIRE_MAX_NODES || pb->n_tables > WIRE_MAX_TABLES) {
        set_err(err, errlen, "partition map with %zu nodes and %zu tables (limits %d and %d)",
                pb->n_nodes, pb->n_tables, WIRE_MAX_NODES, WIRE_MAX_TABLES);
        return LAPSE_EINVAL;
    }
    if ((pb->n_nodes > 0 && pb->nodes == NULL) || (pb->n_tables > 0 && pb->tables == NULL)) {
        set_err(err, errlen, "bad partition map");
        return LAPSE_EINVAL;
    }
    pmap *pm = pmap_new();
    if (pm == NULL) {
        set_err(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    pm->version = pb->version;
    for (size_t i = 0; i < pb->n_nodes; i++) {
        const Lapse__NodeInfo *ni = pb->nodes[i];
        rv = LAPSE_EINVAL;
        if (ni == NULL || ni->id == 0) {
            set_err(err, errlen, "node entry %zu has no id", i);
            goto fail;
        }
        const char *addr = ni->address != NULL ? ni->address : "";
        if (strnlen(addr, PMAP_MAX_ADDR) >= PMAP_MAX_ADDR) {
            set_err(err, errlen, "node %u: address longer than %d bytes", (unsigned)ni->id,
                    PMAP_MAX_ADDR - 1);
            goto fail;
        }
        if (ni->state != LAPSE__NODE_STATE__NODE_UP && ni->state != LAPSE__NODE_STATE__NODE_DOWN) {
            set_err(err, errlen, "node %u: bad state %d", (unsigned)ni->id, (int)ni->state);
            goto fail;
        }
        if (pmap_node_find(pm, ni->id) != NULL) {
            set_err(err, errlen, "node %u listed twice", (unsigned)ni->id);
            goto fail;
        }
        pmap_node_state st =
            ni->state == LAPSE__NODE_STATE__NODE_UP ? PMAP_NODE_UP : PMAP_NODE_DOWN;
        if ((rv = pmap_set_node(pm, ni->id, addr, st)) != 0) {
            set_err(err, errlen, "node %u: %s", (unsigned)ni->id, lapse_strerror(rv));
            goto fail;
        }
    }
    for (size_t i = 0; i < pb->n_tables; i++) {
        if ((rv = wire_table_from_pb(pb->tables[i], pm, err, errlen)) != 0) {
            goto fail;
        }
    }
    *out = pm;
    return 0;
fail:
    pmap_free(pm);
    return rv;
}

int wire_status_from_pb(int pb_status)
{
    if (pb_status < 0 || pb_status >= LAPSE_STATUS_COUNT) {
        return LAPSE_EPROTO;
    }
    return pb_status;
}
