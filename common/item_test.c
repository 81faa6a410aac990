/* item_test: the item model (set/get/remove/dup/eq/size) and the binary
 * encoding: nested round trips, and rejection of truncated or corrupted
 * bytes without crashing (the bytes come from disk); item_encoded_get agrees
 * with item_decode + item_get on valid, corrupt and fuzzed bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "item.h"
#include "lapse_err.h"

static void set_bytes(item *it, const char *name, attr_type t, const char *p, size_t n)
{
    attr_value v;
    assert_int_equal(item_value_init_bytes(&v, t, p, n), 0);
    assert_int_equal(item_set(it, name, &v), 0);
    assert_int_equal(v.type, ATTR_NULL); /* ownership moved */
}

static void set_str(item *it, const char *name, const char *s)
{
    set_bytes(it, name, ATTR_S, s, strlen(s));
}

/* An item with every type, nested lists and maps, empty containers, binary
 * with NUL bytes and a string with an embedded NUL. */
static item *sample_item(void)
{
    item *it = item_new();
    assert_non_null(it);
    set_str(it, "UserName", "user1");
    set_bytes(it, "Age", ATTR_N, "42.50", 5);
    set_bytes(it, "Blob", ATTR_B, "\x00\x01\xff\x00", 4);
    set_bytes(it, "Nul", ATTR_S, "a\0b", 3);
    set_str(it, "Empty", "");
    attr_value v;
    item_value_init_bool(&v, 1);
    assert_int_equal(item_set(it, "Active", &v), 0);
    item_value_init_null(&v);
    assert_int_equal(item_set(it, "Nothing", &v), 0);

    attr_value list, map, inner, e;
    item_value_init_list(&list);
    for (int i = 0; i < 20; i++) {
        char num[16];
        snprintf(num, sizeof(num), "%d", i * 7 - 30);
        assert_int_equal(item_value_init_bytes(&e, ATTR_N, num, strlen(num)), 0);
        assert_int_equal(item_value_list_append(&list, &e), 0);
    }
    item_value_init_map(&map);
    item_value_init_list(&inner);
    item_value_init_bool(&e, 0);
    assert_int_equal(item_value_list_append(&inner, &e), 0);
    item_value_init_map(&e);
    assert_int_equal(item_value_list_append(&inner, &e), 0); /* empty M */
    assert_int_equal(item_value_map_set(&map, "inner", &inner), 0);
    assert_int_equal(item_value_init_bytes(&e, ATTR_S, "red", 3), 0);
    assert_int_equal(item_value_map_set(&map, "color", &e), 0);
    assert_int_equal(item_value_list_append(&list, &map), 0);
    item_value_init_list(&e);
    assert_int_equal(item_value_list_append(&list, &e), 0); /* empty L */
    assert_int_equal(item_set(it, "Tags", &list), 0);
    return it;
}

static void model_basics(void **state)
{
    (void)state;
    item *it = sample_item();
    assert_int_equal(it->n, 8);
    const attr_value *v = item_get(it, "Age");
    assert_non_null(v);
    assert_int_equal(v->type, ATTR_N);
    assert_string_equal(v->u.bytes.ptr, "42.50"); /* text kept as given */
    assert_null(item_get(it, "age"));

    /* replace keeps the position and frees the old value */
    set_str(it, "Age", "old");
    assert_int_equal(it->n, 8);
    assert_string_equal(it->attrs[1].name, "Age");
    assert_int_equal(item_get(it, "Age")->type, ATTR_S);

    /* remove keeps the order of the rest */
    assert_int_equal(item_remove(it, "Age"), 1);
    assert_int_equal(item_remove(it, "Age"), 0);
    assert_int_equal(it->n, 7);
    assert_string_equal(it->attrs[0].name, "UserName");
    assert_string_equal(it->attrs[1].name, "Blob");

    /* a bad name is refused and the value stays with the caller */
    attr_value x;
    assert_int_equal(item_value_init_bytes(&x, ATTR_S, "v", 1), 0);
    assert_int_equal(item_set(it, "", &x), LAPSE_EINVAL);
    assert_int_equal(x.type, ATTR_S);
    char *longname = malloc(ITEM_MAX_NAME_BYTES + 2);
    memset(longname, 'n', ITEM_MAX_NAME_BYTES + 1);
    longname[ITEM_MAX_NAME_BYTES + 1] = 0;
    assert_int_equal(item_set(it, longname, &x), LAPSE_EINVAL);
    longname[ITEM_MAX_NAME_BYTES] = 0;
    assert_int_equal(item_set(it, longname, &x), 0);
    free(longname);
    item_value_fini(&x);

    /* N must be a number */
    assert_int_equal(item_value_init_bytes(&x, ATTR_N, "12abc", 5), LAPSE_EINVAL);
    assert_int_equal(x.type, ATTR_NULL);
    attr_type t;
    assert_int_equal(item_type_parse("BOOL", &t), 0);
    assert_int_equal(t, ATTR_BOOL);
    assert_int_equal(item_type_parse("SS", &t), 0);
    assert_int_equal(t, ATTR_SS);
    assert_int_equal(item_type_parse("SSS", &t), LAPSE_EINVAL);
    assert_string_equal(item_type_name(ATTR_M), "M");
    item_free(it);
    item_free(NULL);
}

static void equality_and_dup(void **state)
{
    (void)state;
    item *a = sample_item();
    item *b = item_dup(a);
    assert_non_null(b);
    assert_true(item_eq(a, b));
    /* order does not matter */
    attr_value v;
    assert_int_equal(item_value_dup(&v, item_get(a, "UserName")), 0);
    assert_int_equal(item_remove(b, "UserName"), 1);
    assert_int_equal(item_set(b, "UserName", &v), 0);
    assert_true(item_eq(a, b));
    assert_true(item_eq_exact(a, b)); /* another order: the same stored item */
    /* numbers compare numerically, but not exactly */
    set_bytes(b, "Age", ATTR_N, "4.25E1", 6);
    assert_true(item_eq(a, b));
    assert_false(item_eq_exact(a, b));
    set_bytes(b, "Age", ATTR_N, "42.51", 5);
    assert_false(item_eq(a, b));
    set_bytes(b, "Age", ATTR_N, "42.5", 4);
    /* a deep change is seen */
    attr_value *tags = (attr_value *)item_get(b, "Tags");
    attr_value *m = &tags->u.list.v[20];
    assert_int_equal(m->type, ATTR_M);
    assert_int_equal(item_value_init_bytes(&v, ATTR_S, "blue", 4), 0);
    assert_int_equal(item_value_map_set(m, "color", &v), 0);
    assert_int_equal(m->u.map.n, 2);
    assert_false(item_eq(a, b));
    /* S with embedded NUL compares by length too */
    item *c = item_dup(a);
    set_bytes(c, "Nul", ATTR_S, "a\0c", 3);
    assert_false(item_eq(a, c));
    item_free(a);
    item_free(b);
    item_free(c);
}

static void size_accounting(void **state)
{
    (void)state;
    item *it = item_new();
    set_str(it, "ab", "hello");                   /* 2 + 5 */
    set_bytes(it, "n", ATTR_N, "12345", 5);       /* 1 + (5+1)/2+1 = 1 + 4 */
    set_bytes(it, "z", ATTR_N, "0000000000", 10); /* 1 + 1 */
    attr_value v;
    item_value_init_bool(&v, 0);
    assert_int_equal(item_set(it, "b", &v), 0); /* 1 + 1 */
    item_value_init_list(&v);
    attr_value e;
    item_value_init_null(&e);
    assert_int_equal(item_value_list_append(&v, &e), 0);
    assert_int_equal(item_set(it, "l", &v), 0); /* 1 + 3 + (1 + 1) */
    assert_int_equal(item_size(it), 7 + 5 + 2 + 2 + 6);
    item_free(it);
}

static void encode(const item *it, buf *b)
{
    buf_init(b);
    assert_int_equal(item_encode(it, b), 0);
}

static void check_agrees(const void *data, size_t len, const char *name);

static void round_trip(void **state)
{
    (void)state;
    item *it = sample_item();
    buf b;
    encode(it, &b);
    item *out = NULL;
    assert_int_equal(item_decode(b.data, b.len, &out), 0);
    assert_true(item_eq(it, out));
    /* attribute order and the N text survive exactly */
    assert_int_equal(out->n, it->n);
    for (size_t i = 0; i < it->n; i++) {
        assert_string_equal(out->attrs[i].name, it->attrs[i].name);
    }
    assert_string_equal(item_get(out, "Age")->u.bytes.ptr, "42.50");
    /* a decoded item can grow like any other */
    set_str(out, "Extra", "x");
    attr_value *tags = (attr_value *)item_get(out, "Tags");
    attr_value e;
    item_value_init_null(&e);
    assert_int_equal(item_value_list_append(tags, &e), 0);
    assert_int_equal(tags->u.list.n, 23);
    /* the encoding is deterministic */
    buf b2;
    item *again = NULL;
    assert_int_equal(item_decode(b.data, b.len, &again), 0);
    encode(again, &b2);
    assert_int_equal(b.len, b2.len);
    assert_memory_equal(b.data, b2.data, b.len);
    /* empty item */
    item *empty = item_new();
    buf b3;
    encode(empty, &b3);
    item *e2 = NULL;
    assert_int_equal(item_decode(b3.data, b3.len, &e2), 0);
    assert_int_equal(e2->n, 0);
    item_free(empty);
    item_free(e2);
    buf_fini(&b3);
    item_free(again);
    buf_fini(&b2);
    item_free(out);
    item_free(it);
    buf_fini(&b);
}

static void expect_corrupt(const char *what, const void *p, size_t n);

/* A set of type t holding the n texts. */
static attr_value make_set(attr_type t, const char *const *texts, size_t n)
{
    attr_value set, e;
    item_value_init_set(&set, t);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(
            item_value_init_bytes(&e, item_set_elem_type(t), texts[i], strlen(texts[i])), 0);
        assert_int_equal(item_value_set_add(&set, &e), 0);
    }
    return set;
}

/* Sets: checks, equality in any order, NS elements as numbers, size,
 * copies, and the encoding (invariant 4). */
static void sets(void **state)
{
    (void)state;
    static const char *const abc[] = {"a", "b", "c"}, *const cab[] = {"c", "a", "b"},
                             *const aba[] = {"a", "b", "a"}, *const nums[] = {"1", "2.5", "-3"},
                             *const nums2[] = {"-3", "2.50", "1.0"}, *const dupn[] = {"10", "1E1"};
    attr_value s1 = make_set(ATTR_SS, abc, 3), s2 = make_set(ATTR_SS, cab, 3);
    const attr_value *dup = NULL;
    assert_int_equal(item_value_set_check(&s1, &dup), 0);
    assert_true(item_value_eq(&s1, &s2)); /* any order */
    attr_value s3 = make_set(ATTR_SS, aba, 3);
    assert_int_equal(item_value_set_check(&s3, &dup), LAPSE_EINVAL);
    assert_non_null(dup);
    assert_string_equal(dup->u.bytes.ptr, "a");
    attr_value n1 = make_set(ATTR_NS, nums, 3), n2 = make_set(ATTR_NS, nums2, 3);
    assert_true(item_value_eq(&n1, &n2)); /* numerically */
    attr_value n3 = make_set(ATTR_NS, dupn, 2);
    assert_int_equal(item_value_set_check(&n3, &dup), LAPSE_EINVAL); /* 10 = 1E1 */
    attr_value empty;
    item_value_init_set(&empty, ATTR_BS);
    assert_int_equal(item_value_set_check(&empty, &dup), LAPSE_EINVAL);
    assert_null(dup);
    /* Only the element type goes in; sets and lists differ. */
    attr_value e;
    assert_int_equal(item_value_init_bytes(&e, ATTR_N, "1", 1), 0);
    assert_int_equal(item_value_set_add(&s1, &e), LAPSE_EINVAL);
    assert_true(item_value_set_has(&n1, &e)); /* "1" is "1.0" */
    assert_false(item_value_set_has(&s1, &e));
    item_value_fini(&e);
    assert_int_equal(item_set_elem_type(ATTR_NS), ATTR_N);
    assert_int_equal(item_set_elem_type(ATTR_L), 0);
    assert_false(item_value_eq(&s1, &n1));
    /* Exactly: numbers as written, in sets and alone. */
    item *i1 = item_new(), *i2 = item_new();
    attr_value c1, c2;
    assert_int_equal(item_value_dup(&c1, &n1), 0);
    assert_int_equal(item_value_dup(&c2, &n2), 0);
    assert_int_equal(item_set(i1, "ns", &c1), 0);
    assert_int_equal(item_set(i2, "ns", &c2), 0);
    assert_true(item_eq(i1, i2));
    assert_false(item_eq_exact(i1, i2)); /* "2.5" is written "2.50" in n2 */
    assert_true(item_eq_exact(i1, i1));
    item_free(i1);
    item_free(i2);
    attr_value shorter = make_set(ATTR_SS, abc, 2);
    assert_false(item_value_eq(&s1, &shorter));
    assert_int_equal(item_value_size(&s1), 3); /* the elements' sizes */
    assert_string_equal(item_type_name(ATTR_BS), "BS");

    /* An item with sets encodes, decodes equal and copies equal. */
    item *it = item_new();
    attr_value c;
    assert_int_equal(item_value_dup(&c, &s1), 0);
    assert_int_equal(c.type, ATTR_SS);
    assert_int_equal(item_set(it, "ss", &c), 0);
    assert_int_equal(item_set(it, "ns", &n1), 0);
    buf b;
    encode(it, &b);
    item *back = NULL;
    assert_int_equal(item_decode(b.data, b.len, &back), 0);
    assert_true(item_eq(it, back));
    assert_int_equal(item_get(back, "ns")->type, ATTR_NS);
    check_agrees(b.data, b.len, "ns");
    check_agrees(b.data, b.len, "ss");
    item_free(back);
    buf_fini(&b);
    item_free(it);
    /* Encodings of bad sets are corrupt. */
    expect_corrupt("empty SS",
                   "\x01\x01\x01"
                   "a"
                   "\x08\x00",
                   6);
    expect_corrupt("SS holding an N",
                   "\x01\x01\x01"
                   "a"
                   "\x08\x01\x02\x01"
                   "1",
                   9);
    expect_corrupt("SS with a duplicate",
                   "\x01\x01\x01"
                   "a"
                   "\x08\x02\x01\x01x\x01\x01x",
                   12);
    expect_corrupt("NS with 1 and 1.0",
                   "\x01\x01\x01"
                   "a"
                   "\x09\x02\x02\x01"
                   "1\x02\x03"
                   "1.0",
                   14);
    item *two = NULL;
    assert_int_equal(item_decode("\x01\x01\x01"
                                 "a"
                                 "\x08\x02\x01\x01x\x01\x01y",
                                 12, &two),
                     0);
    assert_int_equal(item_get(two, "a")->u.list.n, 2);
    item_free(two);
    item_value_fini(&s1);
    item_value_fini(&s2);
    item_value_fini(&s3);
    item_value_fini(&n2);
    item_value_fini(&n3);
    item_value_fini(&shorter);
}

/* Every proper prefix of an encoding is rejected. */
static void truncation_rejected(void **state)
{
    (void)state;
    item *it = sample_item();
    buf b;
    encode(it, &b);
    for (size_t k = 0; k < b.len; k++) {
        item *out = NULL;
        /* copy so ASan sees reads past the truncated length */
        uint8_t *p = malloc(k ? k : 1);
        memcpy(p, b.data, k);
        int rv = item_decode(p, k, &out);
        free(p);
        if (rv != LAPSE_ECORRUPT) {
            fail_msg("%zu-byte prefix of %zu: %s", k, b.len, lapse_strerror(rv));
        }
        assert_null(out);
    }
    /* and trailing garbage too */
    assert_int_equal(buf_append_byte(&b, 0), 0);
    item *out = NULL;
    assert_int_equal(item_decode(b.data, b.len, &out), LAPSE_ECORRUPT);
    item_free(it);
    buf_fini(&b);
}

static void expect_corrupt(const char *what, const void *p, size_t n)
{
    item *out = NULL;
    int rv = item_decode(p, n, &out);
    if (rv != LAPSE_ECORRUPT) {
        fail_msg("%s: decode returned %s", what, lapse_strerror(rv));
    }
}

static void specific_corruptions(void **state)
{
    (void)state;
    /* hand-built encodings: version 1, count, (name, value)... */
    expect_corrupt("bad version", "\x02\x00", 2);
    expect_corrupt("empty input", "", 0);
    expect_corrupt("unknown type",
                   "\x01\x01\x01"
                   "a"
                   "\x0b",
                   5);
    expect_corrupt("type 0",
                   "\x01\x01\x01"
                   "a"
                   "\x00",
                   5);
    expect_corrupt("BOOL 2",
                   "\x01\x01\x01"
                   "a"
                   "\x04\x02",
                   6);
    expect_corrupt("bad N",
                   "\x01\x01\x01"
                   "a"
                   "\x02\x02"
                   "1x",
                   8);
    expect_corrupt("empty name",
                   "\x01\x01\x00"
                   "\x05",
                   4);
    expect_corrupt("NUL in name",
                   "\x01\x01\x02"
                   "a\0"
                   "\x05",
                   6);
    expect_corrupt("duplicate names",
                   "\x01\x02\x01"
                   "a"
                   "\x05"
                   "\x01"
                   "a"
                   "\x05",
                   9);
    expect_corrupt("huge count", "\x01\xff\xff\xff\xff\x0f", 6);
    expect_corrupt("huge length",
                   "\x01\x01\x01"
                   "a"
                   "\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
                   16);
    expect_corrupt("varint overflow",
                   "\x01\x01\x01"
                   "a"
                   "\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f",
                   16);
    expect_corrupt("list count beyond input",
                   "\x01\x01\x01"
                   "a"
                   "\x06\x05\x05",
                   7);
    expect_corrupt("dup names in M",
                   "\x01\x01\x01"
                   "m"
                   "\x07\x02\x01x\x05\x01x\x05",
                   12);
    /* a valid one for contrast */
    item *out = NULL;
    assert_int_equal(item_decode("\x01\x02\x01"
                                 "a"
                                 "\x05"
                                 "\x01"
                                 "b"
                                 "\x04\x01",
                                 9, &out),
                     0);
    assert_int_equal(item_get(out, "b")->u.boolean, 1);
    item_free(out);

    /* nesting: 32 levels decode, 33 are corrupt */
    for (int depth = 32; depth <= 33; depth++) {
        buf b;
        buf_init(&b);
        assert_int_equal(buf_append(&b,
                                    "\x01\x01\x01"
                                    "a",
                                    4),
                         0);
        for (int i = 1; i < depth; i++) {
            assert_int_equal(buf_append(&b, "\x06\x01", 2), 0);
        }
        assert_int_equal(buf_append_byte(&b, 0x05), 0);
        int rv = item_decode(b.data, b.len, &out);
        assert_int_equal(rv, depth <= ITEM_MAX_DEPTH ? 0 : LAPSE_ECORRUPT);
        if (rv == 0) {
            item_free(out);
        }
        buf_fini(&b);
    }
}

/* Random byte flips, insertions and deletions: decode returns 0 or
 * ECORRUPT and never crashes (ASan build checks every read). */
static void fuzz_mutations(void **state)
{
    (void)state;
    item *it = sample_item();
    buf b;
    encode(it, &b);
    uint64_t x = 12345;
    int ok = 0, corrupt = 0;
    for (int round = 0; round < 30000; round++) {
        uint8_t *p = malloc(b.len + 8);
        memcpy(p, b.data, b.len);
        size_t n = b.len;
        int flips = 1 + round % 4;
        for (int f = 0; f < flips; f++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            size_t pos = (size_t)(x % n);
            switch ((x >> 32) % 4) {
            case 0:
                p[pos] ^= (uint8_t)(1u << ((x >> 40) % 8));
                break;
            case 1:
                p[pos] = (uint8_t)(x >> 48);
                break;
            case 2:
                n = pos + 1; /* truncate */
                break;
            default:
                if (n < b.len + 8) {
                    memmove(p + pos + 1, p + pos, n - pos);
                    p[pos] = (uint8_t)(x >> 24);
                    n++;
                }
                break;
            }
        }
        uint8_t *q = malloc(n);
        memcpy(q, p, n);
        free(p);
        check_agrees(q, n, "Age");
        check_agrees(q, n, "Tags");
        item *out = NULL;
        int rv = item_decode(q, n, &out);
        free(q);
        if (rv == 0) {
            ok++;
            buf re;
            encode(out, &re);
            item *back = NULL;
            assert_int_equal(item_decode(re.data, re.len, &back), 0);
            assert_true(item_eq(out, back));
            item_free(back);
            buf_fini(&re);
            item_free(out);
        } else {
            assert_int_equal(rv, LAPSE_ECORRUPT);
            corrupt++;
        }
    }
    assert_true(corrupt > 0);
    print_message("fuzz: %d decoded, %d rejected\n", ok, corrupt);
    item_free(it);
    buf_fini(&b);
}

/* ======================================================================== */
/* item_encoded_get: one attribute without decoding                         */
/* ======================================================================== */

/* item_encoded_get(data, name) must agree with item_decode + item_get: the
 * same ECORRUPT verdict, and for a decodable item the same presence, type
 * and bytes. Checked for every top-level name of it, a missing name and a
 * case-variant. */
static void check_agrees(const void *data, size_t len, const char *name)
{
    item *x = NULL;
    int drv = item_decode(data, len, &x);
    attr_type type = (attr_type)0;
    const char *v = (const char *)"unset";
    size_t vl = 777;
    int grv = item_encoded_get(data, len, name, &type, &v, &vl);
    if (drv != 0) {
        assert_int_equal(drv, LAPSE_ECORRUPT);
        assert_int_equal(grv, LAPSE_ECORRUPT);
        assert_int_equal(vl, 777); /* outputs untouched on error */
        return;
    }
    const attr_value *want = item_get(x, name);
    if (want == NULL) {
        assert_int_equal(grv, LAPSE_ENOTFOUND);
        assert_int_equal(vl, 777);
    } else {
        assert_int_equal(grv, 0);
        assert_int_equal(type, want->type);
        if (want->type == ATTR_S || want->type == ATTR_N || want->type == ATTR_B) {
            assert_int_equal(vl, want->u.bytes.len);
            assert_memory_equal(v, want->u.bytes.ptr, vl);
            /* borrowed from data */
            assert_true(v >= (const char *)data && v + vl <= (const char *)data + len);
        } else {
            assert_null(v);
            assert_int_equal(vl, 0);
        }
    }
    item_free(x);
}

static void encoded_get_finds(void **state)
{
    (void)state;
    item *it = sample_item();
    buf b;
    encode(it, &b);
    for (size_t i = 0; i < it->n; i++) {
        check_agrees(b.data, b.len, it->attrs[i].name);
    }
    check_agrees(b.data, b.len, "age");     /* names are case-sensitive */
    check_agrees(b.data, b.len, "missing"); /* absent */
    check_agrees(b.data, b.len, "inner");   /* nested only: not top-level */
    check_agrees(b.data, b.len, "");        /* never a name */
    attr_type type;
    const char *v = NULL;
    size_t vl = 0;
    assert_int_equal(item_encoded_get(b.data, b.len, "Age", &type, &v, &vl), 0);
    assert_int_equal(type, ATTR_N);
    assert_int_equal(vl, 5);
    assert_memory_equal(v, "42.50", 5);
    assert_int_equal(item_encoded_get(b.data, b.len, "Nul", &type, &v, &vl), 0);
    assert_int_equal(type, ATTR_S);
    assert_int_equal(vl, 3);
    assert_memory_equal(v, "a\0b", 3);
    assert_int_equal(item_encoded_get(b.data, b.len, "Tags", &type, &v, &vl), 0);
    assert_int_equal(type, ATTR_L);
    /* an empty item */
    item *empty = item_new();
    buf e;
    encode(empty, &e);
    assert_int_equal(item_encoded_get(e.data, e.len, "Age", &type, &v, &vl), LAPSE_ENOTFOUND);
    item_free(empty);
    buf_fini(&e);
    item_free(it);
    buf_fini(&b);
}

/* Every prefix of a valid encoding, the specific corruptions item_decode
 * rejects, and maps with more than 16 names (the heap duplicate check). */
static void encoded_get_rejects_corrupt(void **state)
{
    (void)state;
    item *it = sample_item();
    buf b;
    encode(it, &b);
    attr_type type;
    const char *v;
    size_t vl;
    for (size_t n = 0; n < b.len; n++) {
        assert_int_equal(item_encoded_get(b.data, n, "Age", &type, &v, &vl), LAPSE_ECORRUPT);
        check_agrees(b.data, n, "Age");
    }
    /* trailing byte */
    assert_int_equal(buf_append_byte(&b, 0), 0);
    assert_int_equal(item_encoded_get(b.data, b.len, "Age", &type, &v, &vl), LAPSE_ECORRUPT);
    buf_fini(&b);
    item_free(it);
#define BYTES(lit) lit, sizeof(lit) - 1
    static const struct {
        const char *bytes;
        size_t len;
    } bad[] = {
        {BYTES("\x02\x00")}, /* unknown format */
        {BYTES("\x01\x02\x01"
               "a\x05\x01"
               "a\x05")},            /* duplicate top-level name */
        {BYTES("\x01\x01\x00\x05")}, /* empty name */
        {BYTES("\x01\x01\x02"
               "a\x00\x05")}, /* NUL in a name */
        {BYTES("\x01\x01\x01"
               "a\x09")}, /* unknown type */
        {BYTES("\x01\x01\x01"
               "a\x04\x02")}, /* BOOL 2 */
        {BYTES("\x01\x01\x01"
               "a\x02\x03"
               "1x2")}, /* bad N */
        {BYTES("\x01\x01\x01"
               "b\x06\x01\x02\x02"
               "zz")}, /* bad N inside an L */
        {BYTES("\x01\x01\x01"
               "m\x07\x02\x01"
               "k\x05\x01"
               "k\x05")}, /* duplicate in an M */
        {BYTES("\x01\x01\x01"
               "a\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f")}, /* huge length */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(item_encoded_get(bad[i].bytes, bad[i].len, "a", &type, &v, &vl),
                         LAPSE_ECORRUPT);
        check_agrees(bad[i].bytes, bad[i].len, "a");
    }
#undef BYTES
    /* A top-level map and a nested map of 40 names, with and without a
     * repeated name. */
    for (int nested = 0; nested <= 1; nested++) {
        for (int dup = 0; dup <= 1; dup++) {
            buf m;
            buf_init(&m);
            assert_int_equal(buf_append(&m,
                                        nested ? "\x01\x02\x01"
                                                 "T\x02\x01"
                                                 "9\x01"
                                                 "M\x07"
                                               : "\x01",
                                        nested ? 10 : 1),
                             0);
            assert_int_equal(buf_append_byte(&m, 40), 0);
            for (int k = 0; k < 40; k++) {
                char name[8];
                int nl = snprintf(name, sizeof(name), "n%02d", dup && k == 39 ? 3 : k);
                assert_int_equal(buf_append_byte(&m, (uint8_t)nl), 0);
                assert_int_equal(buf_append(&m, name, (size_t)nl), 0);
                assert_int_equal(buf_append(&m,
                                            "\x02\x01"
                                            "7",
                                            3),
                                 0);
            }
            int rv = item_encoded_get(m.data, m.len, nested ? "T" : "n05", &type, &v, &vl);
            assert_int_equal(rv, dup ? LAPSE_ECORRUPT : 0);
            check_agrees(m.data, m.len, nested ? "T" : "n05");
            buf_fini(&m);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(model_basics),         cmocka_unit_test(equality_and_dup),
        cmocka_unit_test(size_accounting),      cmocka_unit_test(sets),
        cmocka_unit_test(round_trip),           cmocka_unit_test(truncation_rejected),
        cmocka_unit_test(specific_corruptions), cmocka_unit_test(fuzz_mutations),
        cmocka_unit_test(encoded_get_finds),    cmocka_unit_test(encoded_get_rejects_corrupt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
