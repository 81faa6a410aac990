/*
 * item.h: the item model. An item is a top-level map of named, typed values,
 * exactly DynamoDB's: S (string), N (number kept as its decimal text), B
 * (bytes), BOOL, NULL, L (list), M (map) and the sets SS, NS and BS (an
 * unordered collection of distinct S, N or B values, never empty).
 *
 * An item owns all its memory: names, strings and nested values are copied in.
 * item_encode/item_decode give the compact binary form stored on disk; the
 * format is documented in docs/key-encoding.md. item_encoded_get reads one
 * top-level attribute of that form without decoding the rest.
 *
 * Not thread-safe: one item belongs to one thread at a time (concurrent reads
 * of an item nobody modifies are fine).
 *
 * Invariants:
 *  1. Attribute names within one map (the item, or an M value) are unique,
 *     non-empty, at most ITEM_MAX_NAME_BYTES bytes and contain no NUL byte.
 *  2. Every N value passed number_validate() when it was set.
 *  3. S and N values are NUL-terminated in memory (not counted in len), so
 *     they may be used as C strings when they contain no NUL; B values too.
 *  4. A set (SS, NS, BS) keeps its elements in u.list, each of the set's
 *     element type (S, N, B). Parsers and item_decode accept one only when
 *     item_value_set_check does (at least one element, no two equal: NS
 *     elements compare as numbers, so "1" and "1.0" are the same element);
 *     code that builds a set checks it before handing it on.
 */
#ifndef LAPSE_ITEM_H
#define LAPSE_ITEM_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define ITEM_MAX_BYTES (400 * 1024) /* DynamoDB's item size limit */
#define ITEM_MAX_NAME_BYTES 65535   /* DynamoDB's attribute name limit */
#define ITEM_MAX_DEPTH 32           /* DynamoDB's nesting limit */

typedef enum attr_type {
    ATTR_S = 1,
    ATTR_N = 2,
    ATTR_B = 3,
    ATTR_BOOL = 4,
    ATTR_NULL = 5,
    ATTR_L = 6,
    ATTR_M = 7,
    ATTR_SS = 8,
    ATTR_NS = 9,
    ATTR_BS = 10
} attr_type;

typedef struct attr_value attr_value;
typedef struct attr attr;

struct attr_value {
    attr_type type;
    union {
        struct {
            char *ptr;  /* owned; NUL-terminated */
            size_t len; /* bytes, excluding the terminator */
        } bytes;        /* S, N, B */
        int boolean;    /* BOOL: 0 or 1 */
        struct {
            attr_value *v; /* owned array */
            size_t n;
        } list; /* L, and the elements of SS, NS, BS */
        struct {
            attr *v; /* owned array */
            size_t n;
        } map; /* M */
    } u;
};

struct attr {
    char *name; /* owned, NUL-terminated */
    attr_value value;
};

typedef struct item {
    attr *attrs; /* owned array of n used slots out of cap */
    size_t n;
    size_t cap;
} item;

/* ---- values ---- */

/* Short names for types: "S", "N", ... Returns "?" for an unknown type. */
const char *item_type_name(attr_type t);
/* Parses "S", "N", ... into *out. Returns 0 or LAPSE_EINVAL. */
int item_type_parse(const char *s, attr_type *out);

/* Initializes v as a copy of the bytes. For ATTR_N the text is validated with
 * number_validate and LAPSE_EINVAL is returned when it is not a number.
 * Returns 0, LAPSE_EINVAL or LAPSE_ENOMEM; on error v is left as ATTR_NULL
 * and owns nothing. REQUIRES: t is ATTR_S, ATTR_N or ATTR_B. */
int item_value_init_bytes(attr_value *v, attr_type t, const void *p, size_t len);
void item_value_init_bool(attr_value *v, int b);
void item_value_init_null(attr_value *v);
/* Empty L / M values, to be filled with item_value_list_append and
 * item_value_map_set. */
void item_value_init_list(attr_value *v);
void item_value_init_map(attr_value *v);
/* Appends *elem, taking ownership on success only. 0 or LAPSE_ENOMEM. */
int item_value_list_append(attr_value *list, attr_value *elem);
/* The element type of set type t (ATTR_S for ATTR_SS, ...), or 0 when t is
 * not a set type. */
attr_type item_set_elem_type(attr_type t);
/* An empty set of type t (ATTR_SS, ATTR_NS or ATTR_BS), to be filled with
 * item_value_set_add and checked with item_value_set_check. */
void item_value_init_set(attr_value *v, attr_type t);
/* Appends *elem to set, taking ownership on success only. 0, LAPSE_EINVAL
 * (elem is not of the set's element type) or LAPSE_ENOMEM. Duplicates are
 * found by item_value_set_check. */
int item_value_set_add(attr_value *set, attr_value *elem);
/* 0 when set holds at least one element and no two equal ones (invariant 4);
 * LAPSE_EINVAL (empty: *dup NULL; a duplicate: *dup points at one copy) or
 * LAPSE_ENOMEM. O(n log n). */
int item_value_set_check(const attr_value *set, const attr_value **dup);
/* Whether set holds a value equal to v (NS: numerically). */
int item_value_set_has(const attr_value *set, const attr_value *v);
/* Sets name in an M value, taking ownership of *val on success only (an
 * existing entry is replaced and freed). 0, LAPSE_EINVAL (bad name) or
 * LAPSE_ENOMEM. */
int item_value_map_set(attr_value *map, const char *name, attr_value *val);
/* Frees everything v owns and leaves it as ATTR_NULL. Accepts NULL. */
void item_value_fini(attr_value *v);
/* Deep copy into *dst. 0 or LAPSE_ENOMEM (dst left ATTR_NULL). */
int item_value_dup(attr_value *dst, const attr_value *src);
/* Deep equality; N values compare numerically ("1.0" equals "1"); sets
 * are equal when they hold the same elements, in any order. */
int item_value_eq(const attr_value *a, const attr_value *b);
/* DynamoDB's size accounting of one value, in bytes. */
size_t item_value_size(const attr_value *v);

/* ---- items ---- */

/* Returns a new empty item, or NULL on OOM. Caller frees with item_free. */
item *item_new(void);
/* Frees it and everything it owns. Accepts NULL. */
void item_free(item *it);
/* Deep copy. Returns NULL on OOM. */
item *item_dup(const item *it);
/* Sets name to *val, taking ownership of *val on success only; an existing
 * value under name is replaced and freed. Returns 0, LAPSE_EINVAL (bad name)
 * or LAPSE_ENOMEM; on error it is unchanged. */
int item_set(item *it, const char *name, attr_value *val);
/* Sets name to a copy of *val. Same returns as item_set. */
int item_set_copy(item *it, const char *name, const attr_value *val);
/* Returns the value of name, borrowed until it is next modified, or NULL. */
const attr_value *item_get(const item *it, const char *name);
/* Removes name if present. Returns 1 if it was present, else 0. */
int item_remove(item *it, const char *name);
/* Deep equality (attribute order does not matter). */
int item_eq(const item *a, const item *b);
/* As item_eq, but N values (and NS elements) compare as written: "1.0" is
 * not "1". Equal exactly when the two encode to the same attributes, in
 * any order: whether a write leaves the stored item as it was. */
int item_eq_exact(const item *a, const item *b);
/* Whether it holds exactly the attributes of M value m, equal by item_eq's
 * rules (0 when m is not an M). */
int item_eq_map(const item *it, const attr_value *m);
/* DynamoDB's size accounting: the sum of name lengths and value sizes. */
size_t item_size(const item *it);

/* Appends the binary encoding of it to out. 0 or LAPSE_ENOMEM. */
int item_encode(const item *it, buf *out);
/* Decodes an item_encode()d item. Returns 0, LAPSE_ECORRUPT (bad bytes) or
 * LAPSE_ENOMEM; on success the caller frees *out with item_free. */
int item_decode(const void *data, size_t len, item **out);

/*
 * Finds the top-level attribute name in an item_encode()d item without
 * building the item (no allocation, except a scratch array for a map of more
 * than 16 entries): for hot paths that need one value of each of many stored
 * items, such as the TTL backfill and sweep (common/ttl.h
 * ttl_eval_encoded).
 *
 * The bytes are checked exactly as item_decode checks them, all of them and
 * not only up to the attribute: this returns LAPSE_ECORRUPT if and only if
 * item_decode would. Returns 0 with *type set and, for S, N and B, *val and
 * *vlen naming the value's bytes inside data (borrowed: valid as long as
 * data; not NUL-terminated; NULL and 0 for the other types); LAPSE_ENOTFOUND
 * when the item has no such top-level attribute; LAPSE_ECORRUPT (bad bytes)
 * or LAPSE_ENOMEM. On error the outputs are not modified.
 */
int item_encoded_get(const void *data, size_t len, const char *name, attr_type *type,
                     const char **val, size_t *vlen);

#endif
