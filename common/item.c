/* item.c: the item model (item.h). The binary encoding is in item_codec.c. */
#include "item.h"

#include <stdlib.h>
#include <string.h>

#include "item_internal.h"
#include "lapse_err.h"
#include "number.h"

/* ------------------------------------------------------------------------
 * Arrays
 *
 * L and M values carry no capacity field, so their arrays are always
 * allocated to item_cap_for(n) elements: the next power of two. Growing is then a
 * realloc exactly when n reaches a power of two.
 * ---------------------------------------------------------------------- */

size_t item_cap_for(size_t n)
{
    size_t c = 1;
    while (c < n) {
        c *= 2;
    }
    return c;
}

/* Makes room for one more element in an array of n elements of size sz. */
static int grow(void **arr, size_t n, size_t sz)
{
    if (n != 0 && item_cap_for(n) > n) {
        return 0; /* room left */
    }
    size_t want = n == 0 ? 1 : n * 2;
    if (want > SIZE_MAX / sz) {
        return LAPSE_ENOMEM;
    }
    void *p = realloc(*arr, want * sz);
    if (p == NULL) {
        return LAPSE_ENOMEM;
    }
    *arr = p;
    return 0;
}

static int name_ok(const char *name)
{
    if (name == NULL || name[0] == 0) {
        return 0;
    }
    return strnlen(name, ITEM_MAX_NAME_BYTES + 1) <= ITEM_MAX_NAME_BYTES;
}

static attr *find(attr *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(v[i].name, name) == 0) {
            return &v[i];
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------------
 * Values
 * ---------------------------------------------------------------------- */

const char *item_type_name(attr_type t)
{
    switch (t) {
    case ATTR_S:
        return "S";
    case ATTR_N:
        return "N";
    case ATTR_B:
        return "B";
    case ATTR_BOOL:
        return "BOOL";
    case ATTR_NULL:
        return "NULL";
    case ATTR_L:
        return "L";
    case ATTR_M:
        return "M";
    case ATTR_SS:
        return "SS";
    case ATTR_NS:
        return "NS";
    case ATTR_BS:
        return "BS";
    }
    return "?";
}

int item_type_parse(const char *s, attr_type *out)
{
    for (int t = ATTR_S; t <= ATTR_BS; t++) {
        if (s != NULL && strcmp(s, item_type_name((attr_type)t)) == 0) {
            *out = (attr_type)t;
            return 0;
        }
    }
    return LAPSE_EINVAL;
}

int item_value_init_bytes(attr_value *v, attr_type t, const void *p, size_t len)
{
    item_value_init_null(v);
    if (t != ATTR_S && t != ATTR_N && t != ATTR_B) {
        return LAPSE_EINVAL;
    }
    if (t == ATTR_N && number_validate(p, len) != 0) {
        return LAPSE_EINVAL;
    }
    if (len == SIZE_MAX) {
        return LAPSE_ENOMEM;
    }
    char *q = malloc(len + 1);
    if (q == NULL) {
        return LAPSE_ENOMEM;
    }
    if (len > 0) {
        memcpy(q, p, len);
    }
    q[len] = 0;
    v->type = t;
    v->u.bytes.ptr = q;
    v->u.bytes.len = len;
    return 0;
}

void item_value_init_bool(attr_value *v, int b)
{
    memset(v, 0, sizeof(*v));
    v->type = ATTR_BOOL;
    v->u.boolean = b ? 1 : 0;
}

void item_value_init_null(attr_value *v)
{
    memset(v, 0, sizeof(*v));
    v->type = ATTR_NULL;
}

void item_value_init_list(attr_value *v)
{
    memset(v, 0, sizeof(*v));
    v->type = ATTR_L;
}

void item_value_init_map(attr_value *v)
{
    memset(v, 0, sizeof(*v));
    v->type = ATTR_M;
}

attr_type item_set_elem_type(attr_type t)
{
    return t == ATTR_SS ? ATTR_S : t == ATTR_NS ? ATTR_N : t == ATTR_BS ? ATTR_B : (attr_type)0;
}

void item_value_init_set(attr_value *v, attr_type t)
{
    memset(v, 0, sizeof(*v));
    v->type = t;
}

int item_value_set_add(attr_value *set, attr_value *elem)
{
    if (item_set_elem_type(set->type) == 0 || elem->type != item_set_elem_type(set->type)) {
        return LAPSE_EINVAL;
    }
    return item_value_list_append(set, elem);
}

/* Orders set elements (pointers to attr_value of one type) by their bytes:
 * length, then content. */
static int bytes_cmp(const void *pa, const void *pb)
{
    const attr_value *a = *(const attr_value *const *)pa, *b = *(const attr_value *const *)pb;
    if (a->u.bytes.len != b->u.bytes.len) {
        return a->u.bytes.len < b->u.bytes.len ? -1 : 1;
    }
    return memcmp(a->u.bytes.ptr, b->u.bytes.ptr, a->u.bytes.len);
}

/* As bytes_cmp, but numbers by value: DynamoDB's element identity. */
static int elem_cmp(const void *pa, const void *pb)
{
    const attr_value *a = *(const attr_value *const *)pa, *b = *(const attr_value *const *)pb;
    if (a->type == ATTR_N) {
        number x, y;
        if (number_parse(a->u.bytes.ptr, a->u.bytes.len, &x, NULL, 0) == 0 &&
            number_parse(b->u.bytes.ptr, b->u.bytes.len, &y, NULL, 0) == 0) {
            return number_cmp(&x, &y);
        }
    }
    return bytes_cmp(pa, pb);
}

static int value_eq(const attr_value *a, const attr_value *b, int exact);

/* set's elements as an array of pointers sorted by cmp (caller frees), or
 * NULL on OOM or for an empty set. */
static const attr_value **sorted_elems(const attr_value *set,
                                       int (*cmp)(const void *, const void *))
{
    size_t n = set->u.list.n;
    const attr_value **p = n > 0 ? malloc(n * sizeof(*p)) : NULL;
    if (p == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        p[i] = &set->u.list.v[i];
    }
    qsort(p, n, sizeof(*p), cmp);
    return p;
}

int item_value_set_check(const attr_value *set, const attr_value **dup)
{
    const attr_value *ignored;
    dup = dup != NULL ? dup : &ignored;
    *dup = NULL;
    if (set->u.list.n == 0) {
        return LAPSE_EINVAL;
    }
    const attr_value **p = sorted_elems(set, elem_cmp);
    if (p == NULL) {
        return LAPSE_ENOMEM;
    }
    int rv = 0;
    for (size_t i = 1; i < set->u.list.n && rv == 0; i++) {
        if (elem_cmp(&p[i - 1], &p[i]) == 0) {
            *dup = p[i];
            rv = LAPSE_EINVAL;
        }
    }
    free(p);
    return rv;
}

int item_value_set_has(const attr_value *set, const attr_value *v)
{
    for (size_t i = 0; i < set->u.list.n; i++) {
        if (item_value_eq(&set->u.list.v[i], v)) {
            return 1;
        }
    }
    return 0;
}

/* Whether sets a and b (one type, each without duplicates) hold the same
 * elements (exact: the same bytes, numbers as written). */
static int sets_eq(const attr_value *a, const attr_value *b, int exact)
{
    size_t n = a->u.list.n;
    if (n != b->u.list.n) {
        return 0;
    }
    int (*cmp)(const void *, const void *) = exact ? bytes_cmp : elem_cmp;
    const attr_value **x = sorted_elems(a, cmp), **y = sorted_elems(b, cmp);
    int eq = 1;
    if (x != NULL && y != NULL) {
        for (size_t i = 0; i < n && eq; i++) {
            eq = cmp(&x[i], &y[i]) == 0;
        }
    } else { /* out of memory (or empty): the quadratic way */
        for (size_t i = 0; i < n && eq; i++) {
            int found = 0;
            for (size_t j = 0; j < n && !found; j++) {
                found = value_eq(&a->u.list.v[i], &b->u.list.v[j], exact);
            }
            eq = found;
        }
    }
    free(x);
    free(y);
    return eq;
}

int item_value_list_append(attr_value *list, attr_value *elem)
{
    int rv;
    void *arr = list->u.list.v;
    if ((rv = grow(&arr, list->u.list.n, sizeof(attr_value))) != 0) {
        return rv;
    }
    list->u.list.v = arr;
    list->u.list.v[list->u.list.n++] = *elem;
    item_value_init_null(elem);
    return 0;
}

/* If (arr, n) has an attribute name, replaces its value with *val (taking
 * it: *val is left NULL) and returns 1; otherwise returns 0 and changes
 * nothing. */
static int replace(attr *arr, size_t n, const char *name, attr_value *val)
{
    attr *a = find(arr, n, name);
    if (a == NULL) {
        return 0;
    }
    item_value_fini(&a->value);
    a->value = *val;
    item_value_init_null(val);
    return 1;
}

/* Sets name in the array (*arr, *n), growing it with grow(). */
static int map_set(attr **arr, size_t *n, const char *name, attr_value *val)
{
    if (!name_ok(name)) {
        return LAPSE_EINVAL;
    }
    if (replace(*arr, *n, name, val)) {
        return 0;
    }
    char *copy = strdup(name);
    if (copy == NULL) {
        return LAPSE_ENOMEM;
    }
    void *p = *arr;
    if (grow(&p, *n, sizeof(attr)) != 0) {
        free(copy);
        return LAPSE_ENOMEM;
    }
    *arr = p;
    (*arr)[*n].name = copy;
    (*arr)[*n].value = *val;
    (*n)++;
    item_value_init_null(val);
    return 0;
}

int item_value_map_set(attr_value *map, const char *name, attr_value *val)
{
    return map_set(&map->u.map.v, &map->u.map.n, name, val);
}

void item_value_fini(attr_value *v)
{
    if (v == NULL) {
        return;
    }
    switch (v->type) {
    case ATTR_S:
    case ATTR_N:
    case ATTR_B:
        free(v->u.bytes.ptr);
        break;
    case ATTR_L:
    case ATTR_SS:
    case ATTR_NS:
    case ATTR_BS:
        for (size_t i = 0; i < v->u.list.n; i++) {
            item_value_fini(&v->u.list.v[i]);
        }
        free(v->u.list.v);
        break;
    case ATTR_M:
        for (size_t i = 0; i < v->u.map.n; i++) {
            free(v->u.map.v[i].name);
            item_value_fini(&v->u.map.v[i].value);
        }
        free(v->u.map.v);
        break;
    default:
        break;
    }
    item_value_init_null(v);
}

int item_value_dup(attr_value *dst, const attr_value *src)
{
    int rv = 0;
    attr_value tmp;
    switch (src->type) {
    case ATTR_S:
    case ATTR_N:
    case ATTR_B:
        /* no re-validation: src passed it when it was set */
        item_value_init_null(dst);
        char *q = malloc(src->u.bytes.len + 1);
        if (q == NULL) {
            return LAPSE_ENOMEM;
        }
        memcpy(q, src->u.bytes.ptr, src->u.bytes.len + 1);
        dst->type = src->type;
        dst->u.bytes.ptr = q;
        dst->u.bytes.len = src->u.bytes.len;
        return 0;
    case ATTR_BOOL:
        item_value_init_bool(dst, src->u.boolean);
        return 0;
    case ATTR_L:
    case ATTR_SS:
    case ATTR_NS:
    case ATTR_BS:
        item_value_init_list(&tmp);
        tmp.type = src->type;
        for (size_t i = 0; i < src->u.list.n; i++) {
            attr_value e;
            if ((rv = item_value_dup(&e, &src->u.list.v[i])) != 0) {
                goto fail;
            }
            if ((rv = item_value_list_append(&tmp, &e)) != 0) {
                item_value_fini(&e);
                goto fail;
            }
        }
        *dst = tmp;
        return 0;
    case ATTR_M:
        item_value_init_map(&tmp);
        for (size_t i = 0; i < src->u.map.n; i++) {
            attr_value e;
            if ((rv = item_value_dup(&e, &src->u.map.v[i].value)) != 0) {
                goto fail;
            }
            if ((rv = item_value_map_set(&tmp, src->u.map.v[i].name, &e)) != 0) {
                item_value_fini(&e);
                goto fail;
            }
        }
        *dst = tmp;
        return 0;
    default:
        item_value_init_null(dst);
        return 0;
    }
fail:
    item_value_fini(&tmp);
    item_value_init_null(dst);
    return rv;
}

static int maps_eq(const attr *a, size_t an, const attr *b, size_t bn, int exact)
{
    if (an != bn) {
        return 0;
    }
    for (size_t i = 0; i < an; i++) {
        const attr *o = find((attr *)b, bn, a[i].name);
        if (o == NULL || !value_eq(&a[i].value, &o->value, exact)) {
            return 0;
        }
    }
    return 1;
}

/* exact: N values compare as written ("1.0" is not "1"), as stored bytes
 * do; else by value, as DynamoDB compares them. */
static int value_eq(const attr_value *a, const attr_value *b, int exact)
{
    if (a->type != b->type) {
        return 0;
    }
    switch (a->type) {
    case ATTR_N:
        if (!exact) {
            number x, y;
            return number_parse(a->u.bytes.ptr, a->u.bytes.len, &x, NULL, 0) == 0 &&
                   number_parse(b->u.bytes.ptr, b->u.bytes.len, &y, NULL, 0) == 0 &&
                   number_cmp(&x, &y) == 0;
        }
        /* fall through */
    case ATTR_S:
    case ATTR_B:
        return a->u.bytes.len == b->u.bytes.len &&
               memcmp(a->u.bytes.ptr, b->u.bytes.ptr, a->u.bytes.len) == 0;
    case ATTR_BOOL:
        return a->u.boolean == b->u.boolean;
    case ATTR_NULL:
        return 1;
    case ATTR_L:
        if (a->u.list.n != b->u.list.n) {
            return 0;
        }
        for (size_t i = 0; i < a->u.list.n; i++) {
            if (!value_eq(&a->u.list.v[i], &b->u.list.v[i], exact)) {
                return 0;
            }
        }
        return 1;
    case ATTR_M:
        return maps_eq(a->u.map.v, a->u.map.n, b->u.map.v, b->u.map.n, exact);
    case ATTR_SS:
    case ATTR_NS:
    case ATTR_BS:
        return sets_eq(a, b, exact);
    }
    return 0;
}

int item_value_eq(const attr_value *a, const attr_value *b)
{
    return value_eq(a, b, 0);
}

size_t item_value_size(const attr_value *v)
{
    size_t sz = 0;
    switch (v->type) {
    case ATTR_S:
    case ATTR_B:
        return v->u.bytes.len;
    case ATTR_N: {
        number x;
        if (number_parse(v->u.bytes.ptr, v->u.bytes.len, &x, NULL, 0) != 0) {
            return v->u.bytes.len;
        }
        return (size_t)(x.ndigits + 1) / 2 + 1;
    }
    case ATTR_BOOL:
    case ATTR_NULL:
        return 1;
    case ATTR_L:
        /* DynamoDB: 3 bytes per list or map plus 1 byte per element */
        sz = 3;
        for (size_t i = 0; i < v->u.list.n; i++) {
            sz += 1 + item_value_size(&v->u.list.v[i]);
        }
        return sz;
    case ATTR_M:
        sz = 3;
        for (size_t i = 0; i < v->u.map.n; i++) {
            sz += 1 + strlen(v->u.map.v[i].name) + item_value_size(&v->u.map.v[i].value);
        }
        return sz;
    case ATTR_SS:
    case ATTR_NS:
    case ATTR_BS:
        /* DynamoDB: the sum of the elements' sizes */
        for (size_t i = 0; i < v->u.list.n; i++) {
            sz += item_value_size(&v->u.list.v[i]);
        }
        return sz;
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Items
 * ---------------------------------------------------------------------- */

item *item_new(void)
{
    return calloc(1, sizeof(item));
}

void item_free(item *it)
{
    if (it == NULL) {
        return;
    }
    for (size_t i = 0; i < it->n; i++) {
        free(it->attrs[i].name);
        item_value_fini(&it->attrs[i].value);
    }
    free(it->attrs);
    free(it);
}

item *item_dup(const item *it)
{
    item *d = item_new();
    if (d == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < it->n; i++) {
        if (item_set_copy(d, it->attrs[i].name, &it->attrs[i].value) != 0) {
            item_free(d);
            return NULL;
        }
    }
    return d;
}

int item_set(item *it, const char *name, attr_value *val)
{
    if (!name_ok(name)) {
        return LAPSE_EINVAL;
    }
    if (replace(it->attrs, it->n, name, val)) {
        return 0;
    }
    char *copy = strdup(name);
    if (copy == NULL) {
        return LAPSE_ENOMEM;
    }
    if (it->n == it->cap) {
        size_t cap = it->cap == 0 ? 8 : it->cap * 2;
        attr *p = cap > SIZE_MAX / sizeof(attr) ? NULL : realloc(it->attrs, cap * sizeof(attr));
        if (p == NULL) {
            free(copy);
            return LAPSE_ENOMEM;
        }
        it->attrs = p;
        it->cap = cap;
    }
    it->attrs[it->n].name = copy;
    it->attrs[it->n].value = *val;
    it->n++;
    item_value_init_null(val);
    return 0;
}

int item_set_copy(item *it, const char *name, const attr_value *val)
{
    attr_value v;
    int rv;
    if (!name_ok(name)) {
        return LAPSE_EINVAL;
    }
    if ((rv = item_value_dup(&v, val)) != 0) {
        return rv;
    }
    if ((rv = item_set(it, name, &v)) != 0) {
        item_value_fini(&v);
    }
    return rv;
}

const attr_value *item_get(const item *it, const char *name)
{
    attr *a = find(it->attrs, it->n, name);
    return a == NULL ? NULL : &a->value;
}

int item_remove(item *it, const char *name)
{
    attr *a = find(it->attrs, it->n, name);
    if (a == NULL) {
        return 0;
    }
    size_t i = (size_t)(a - it->attrs);
    free(a->name);
    item_value_fini(&a->value);
    /* keep the remaining attributes in order: JSON output follows it */
    memmove(&it->attrs[i], &it->attrs[i + 1], (it->n - i - 1) * sizeof(attr));
    it->n--;
    return 1;
}

int item_eq(const item *a, const item *b)
{
    return maps_eq(a->attrs, a->n, b->attrs, b->n, 0);
}

int item_eq_exact(const item *a, const item *b)
{
    return maps_eq(a->attrs, a->n, b->attrs, b->n, 1);
}

int item_eq_map(const item *it, const attr_value *m)
{
    return m != NULL && m->type == ATTR_M && maps_eq(it->attrs, it->n, m->u.map.v, m->u.map.n, 0);
}

size_t item_size(const item *it)
{
    size_t sz = 0;
    for (size_t i = 0; i < it->n; i++) {
        sz += strlen(it->attrs[i].name) + item_value_size(&it->attrs[i].value);
    }
    return sz;
}
