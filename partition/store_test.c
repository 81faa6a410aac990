/*
 * store_test.c: the partition store against a real RocksDB in a scratch
 * directory: point operations with every condition kind, updates, queries
 * with every sort-key operator over S and N sort keys, pagination that must
 * return every item exactly once, scans, batch writes, table drops,
 * persistence across reopen, concurrent conditional writes, size limits.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../common/lapse_err.h"
#include "../storage/testdir.h"
#include "hash.h"
#include "store.h"

/* ======================================================================== */
/* Fixture and helpers                                                      */
/* ======================================================================== */

typedef struct fixture {
    char dir[512];
    char err[512];
    store *st;
} fixture;

static table_schema music;  /* Artist S, Song S, 8 partitions */
static table_schema events; /* Id S, Ts N, 4 partitions */
static table_schema plain;  /* Pk N, no sort key, 16 partitions */

static table_schema mk_schema(uint32_t id, const char *name, const char *pk, attr_type pkt,
                              const char *sk, attr_type skt, uint32_t partitions)
{
    table_schema t;
    memset(&t, 0, sizeof(t));
    t.id = id;
    snprintf(t.name, sizeof(t.name), "%s", name);
    snprintf(t.pk.name, sizeof(t.pk.name), "%s", pk);
    t.pk.type = pkt;
    if (sk != NULL) {
        snprintf(t.sk.name, sizeof(t.sk.name), "%s", sk);
        t.sk.type = skt;
    }
    t.partitions = partitions;
    return t;
}

#define assert_ok(call, f)                                                                         \
    do {                                                                                           \
        int rv_ = (call);                                                                          \
        if (rv_ != 0) {                                                                            \
            fail_msg("%s returned %d (%s): %s", #call, rv_, lapse_strerror(rv_), (f)->err);        \
        }                                                                                          \
    } while (0)

#define assert_code(call, code, f)                                                                 \
    do {                                                                                           \
        int rv_ = (call);                                                                          \
        if (rv_ != (code)) {                                                                       \
            fail_msg("%s returned %d (%s), expected %s: %s", #call, rv_, lapse_strerror(rv_),      \
                     lapse_strerror(code), (f)->err);                                              \
        }                                                                                          \
    } while (0)

static void reopen(fixture *f)
{
    store_close(f->st);
    f->st = NULL;
    assert_ok(store_open(&f->st, f->dir, f->err, sizeof(f->err)), f);
}

static int setup(void **state)
{
    music = mk_schema(1, "Music", "Artist", ATTR_S, "Song", ATTR_S, 8);
    events = mk_schema(2, "Events", "Id", ATTR_S, "Ts", ATTR_N, 4);
    plain = mk_schema(3, "Plain", "Pk", ATTR_N, NULL, 0, 16);
    fixture *f = calloc(1, sizeof(*f));
    if (f == NULL || testdir_make(f->dir, sizeof(f->dir), "store_test") != 0) {
        free(f);
        return -1;
    }
    /* A nested directory that does not exist yet: store_open creates it. */
    strncat(f->dir, "/data/db", sizeof(f->dir) - strlen(f->dir) - 1);
    if (store_open(&f->st, f->dir, f->err, sizeof(f->err)) != 0) {
        fprintf(stderr, "store_open: %s\n", f->err);
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    store_close(f->st);
    char *slash = strstr(f->dir, "/data/db");
    if (slash != NULL) {
        *slash = 0;
    }
    testdir_remove(f->dir);
    free(f);
    return 0;
}

static attr_value val(attr_type t, const char *text)
{
    attr_value v;
    int rv = item_value_init_bytes(&v, t, text, strlen(text));
    if (rv != 0) {
        fail_msg("bad test value %s: %s", text, lapse_strerror(rv));
    }
    return v;
}

/* itm(n, name1, type1, text1, ...): an item of n S/N/B attributes. */
static item *itm(int n, ...)
{
    item *it = item_new();
    assert_non_null(it);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        const char *name = va_arg(ap, const char *);
        attr_type t = (attr_type)va_arg(ap, int);
        const char *text = va_arg(ap, const char *);
        attr_value v = val(t, text);
        assert_int_equal(item_set(it, name, &v), 0);
    }
    va_end(ap);
    return it;
}

static item *song(const char *artist, const char *title, const char *year)
{
    if (year == NULL) {
        return itm(2, "Artist", ATTR_S, artist, "Song", ATTR_S, title);
    }
    return itm(3, "Artist", ATTR_S, artist, "Song", ATTR_S, title, "Year", ATTR_N, year);
}

static item *song_key(const char *artist, const char *title)
{
    return song(artist, title, NULL);
}

static void put(fixture *f, const table_schema *t, item *it)
{
    assert_ok(store_put(f->st, t, it, NULL, NULL, f->err, sizeof(f->err)), f);
    item_free(it);
}

static item *get(fixture *f, const table_schema *t, item *key)
{
    item *out = NULL;
    assert_ok(store_get(f->st, t, key, &out, f->err, sizeof(f->err)), f);
    item_free(key);
    return out;
}

static void assert_attr(const item *it, const char *name, attr_type t, const char *text)
{
    assert_non_null(it);
    const attr_value *v = item_get(it, name);
    if (v == NULL) {
        fail_msg("attribute %s missing", name);
    }
    attr_value want = val(t, text);
    if (!item_value_eq(v, &want)) {
        fail_msg("attribute %s is %.*s, expected %s", name, (int)v->u.bytes.len, v->u.bytes.ptr,
                 text);
    }
    item_value_fini(&want);
}

/* ======================================================================== */
/* Point operations and conditions                                          */
/* ======================================================================== */

static void test_put_get_delete(void **state)
{
    fixture *f = *state;
    item *x = song("Queen", "Bohemian", "1975");
    put(f, &music, item_dup(x));
    item *got = get(f, &music, song_key("Queen", "Bohemian"));
    assert_true(item_eq(got, x));
    item_free(got);
    assert_null(get(f, &music, song_key("Queen", "Other")));
    assert_null(get(f, &music, song_key("Other", "Bohemian")));
    /* Same key values in another table are another item. */
    assert_null(get(f, &events, itm(2, "Id", ATTR_S, "Queen", "Ts", ATTR_N, "1")));

    /* Replacing returns the old item. */
    item *old = NULL;
    item *y = song("Queen", "Bohemian", "1976");
    assert_ok(store_put(f->st, &music, y, NULL, &old, f->err, sizeof(f->err)), f);
    assert_true(item_eq(old, x));
    item_free(old);
    got = get(f, &music, song_key("Queen", "Bohemian"));
    assert_true(item_eq(got, y));
    item_free(got);

    /* Delete returns the old item; deleting again is fine and returns NULL. */
    item *k = song_key("Queen", "Bohemian");
    assert_ok(store_delete(f->st, &music, k, NULL, &old, f->err, sizeof(f->err)), f);
    assert_true(item_eq(old, y));
    item_free(old);
    assert_ok(store_delete(f->st, &music, k, NULL, &old, f->err, sizeof(f->err)), f);
    assert_null(old);
    assert_ok(store_delete(f->st, &music, k, NULL, NULL, f->err, sizeof(f->err)), f);
    assert_null(get(f, &music, song_key("Queen", "Bohemian")));
    item_free(k);
    item_free(x);
    item_free(y);

    /* A table without a sort key. */
    put(f, &plain, itm(2, "Pk", ATTR_N, "-12.5", "V", ATTR_S, "x"));
    got = get(f, &plain, itm(1, "Pk", ATTR_N, "-1.25E1")); /* numerically equal */
    assert_attr(got, "V", ATTR_S, "x");
    item_free(got);
}

static void test_bad_keys_refused(void **state)
{
    fixture *f = *state;
    item *out = NULL;
    /* Missing sort key, wrong type, extra attribute in a key, empty S key. */
    item *k = itm(1, "Artist", ATTR_S, "a");
    assert_code(store_get(f->st, &music, k, &out, f->err, sizeof(f->err)), LAPSE_EINVAL, f);
    assert_code(store_put(f->st, &music, k, NULL, NULL, f->err, sizeof(f->err)), LAPSE_EINVAL, f);
    item_free(k);
    k = itm(2, "Artist", ATTR_S, "a", "Song", ATTR_N, "1");
    assert_code(store_put(f->st, &music, k, NULL, NULL, f->err, sizeof(f->err)), LAPSE_EINVAL, f);
    item_free(k);
    k = song("a", "b", "1");
    assert_code(store_get(f->st, &music, k, &out, f->err, sizeof(f->err)), LAPSE_EINVAL, f);
    assert_code(store_delete(f->st, &music, k, NULL, NULL, f->err, sizeof(f->err)), LAPSE_EINVAL,
                f);
    item_free(k);
    k = song_key("", "b");
    assert_code(store_put(f->st, &music, k, NULL, NULL, f->err, sizeof(f->err)), LAPSE_EINVAL, f);
    item_free(k);
    assert_null(out);
}

static void test_conditions(void **state)
{
    fixture *f = *state;
    item *x = song("A", "s", "2000");
    item *x2 = song("A", "s", "2001");
    store_cond not_exists = {STORE_COND_NOT_EXISTS, "Artist", NULL};
    store_cond not_exists_year = {STORE_COND_NOT_EXISTS, "Year", NULL};
    store_cond exists = {STORE_COND_EXISTS, "Artist", NULL};
    store_cond exists_other = {STORE_COND_EXISTS, "Other", NULL};
    attr_value y2000 = val(ATTR_N, "2000.0"); /* numeric equality */
    attr_value y1999 = val(ATTR_N, "1999");
    attr_value s2000 = val(ATTR_S, "2000"); /* a different type is not equal */
    store_cond eq2000 = {STORE_COND_EQUALS, "Year", &y2000};
    store_cond eq1999 = {STORE_COND_EQUALS, "Year", &y1999};
    store_cond eq_s = {STORE_COND_EQUALS, "Year", &s2000};
    store_cond none = {STORE_COND_NONE, NULL, NULL};
    item *got;

    /* Absent item: no attribute exists. */
    assert_code(store_put(f->st, &music, x, &exists, NULL, f->err, sizeof(f->err)),
                LAPSE_ECONDITION, f);
    assert_code(store_put(f->st, &music, x, &eq2000, NULL, f->err, sizeof(f->err)),
                LAPSE_ECONDITION, f);
    assert_null(get(f, &music, song_key("A", "s")));
    assert_code(
        store_delete(f->st, &music, x2 /* not a key */, &exists, NULL, f->err, sizeof(f->err)),
        LAPSE_EINVAL, f);
    item *k = song_key("A", "s");
    assert_code(store_delete(f->st, &music, k, &exists, NULL, f->err, sizeof(f->err)),
                LAPSE_ECONDITION, f);
    assert_ok(store_delete(f->st, &music, k, &not_exists, NULL, f->err, sizeof(f->err)), f);
    assert_ok(store_put(f->st, &music, x, &none, NULL, f->err, sizeof(f->err)), f);
    assert_ok(store_delete(f->st, &music, k, NULL, NULL, f->err, sizeof(f->err)), f);
    assert_ok(store_put(f->st, &music, x, &not_exists, NULL, f->err, sizeof(f->err)), f);

    /* Present item. */
    item *old = NULL;
    assert_code(store_put(f->st, &music, x2, &not_exists, &old, f->err, sizeof(f->err)),
                LAPSE_ECONDITION, f);
    assert_null(old);
    assert_code(store_put(f->st, &music, x2, &eq1999, NULL, f->err, sizeof(f->err)),
                LAPSE_ECONDITION, f);
    assert_code(store_put(f->st, &music, x2, &eq_s, NULL, f->err, sizeof(f->err)), LAPSE_ECONDITION,
                f);
    assert_code(store_put(f->st, &music, x2, &exists_other, NULL, f->err, sizeof(f->err)),
                LAPSE_ECONDITION, f);
    assert_code(store_put(f->st, &music, x2, &not_exists_year, NULL, f->err, sizeof(f->err)),
                LAPSE_ECONDITION, f);
    got = get(f, &music, song_key("A", "s"));
    assert_true(item_eq(got, x)); /* unchanged by every failed write */
    item_free(got);
    assert_ok(store_put(f->st, &music, x2, &eq2000, &old, f->err, sizeof(f->err)), f);
    assert_true(item_eq(old, x));
    item_free(old);
    assert_ok(store_put(f->st, &music, x, &exists, NULL, f->err, sizeof(f->err)), f);

    /* Deletes. */
    assert_code(store_delete(f->st, &music, k, &eq1999, NULL, f->err, sizeof(f->err)),
                LAPSE_ECONDITION, f);
    assert_code(store_delete(f->st, &music, k, &not_exists, NULL, f->err, sizeof(f->err)),
                LAPSE_ECONDITION, f);
    got = get(f, &music, song_key("A", "s"));
    assert_non_null(got);
    item_free(got);
    assert_ok(store_delete(f->st, &music, k, &eq2000, &old, f->err, sizeof(f->err)), f);
    assert_true(item_eq(old, x));
    item_free(old);
    assert_null(get(f, &music, song_key("A", "s")));

    /* Malformed conditions. */
    store_cond no_attr = {STORE_COND_EXISTS, NULL, NULL};
    store_cond no_value = {STORE_COND_EQUALS, "Year", NULL};
    store_cond bad_kind = {(store_cond_kind)42, "Year", NULL};
    assert_code(store_put(f->st, &music, x, &no_attr, NULL, f->err, sizeof(f->err)), LAPSE_EINVAL,
                f);
    assert_code(store_put(f->st, &music, x, &no_value, NULL, f->err, sizeof(f->err)), LAPSE_EINVAL,
                f);
    assert_code(store_delete(f->st, &music, k, &bad_kind, NULL, f->err, sizeof(f->err)),
                LAPSE_EINVAL, f);

    item_value_fini(&y2000);
    item_value_fini(&y1999);
    item_value_fini(&s2000);
    item_free(k);
    item_free(x);
    item_free(x2);
}

static void test_update(void **state)
{
    fixture *f = *state;
    item *k = song_key("U", "s");
    attr_value y = val(ATTR_N, "1999");
    attr_value g = val(ATTR_S, "rock");
    attr_value g2 = val(ATTR_S, "pop");
    item *out = NULL;

    /* Upsert: the item is created from the key. */
    store_update_action set_y[] = {{"Year", &y}, {"Genre", &g}};
    assert_ok(store_update(f->st, &music, k, set_y, 2, NULL, &out, f->err, sizeof(f->err)), f);
    assert_int_equal(out->n, 4);
    assert_attr(out, "Artist", ATTR_S, "U");
    assert_attr(out, "Year", ATTR_N, "1999");
    item_free(out);

    /* SET replaces, REMOVE removes (removing an absent attribute is fine). */
    store_update_action mix[] = {{"Genre", &g2}, {"Year", NULL}, {"Nothing", NULL}};
    assert_ok(store_update(f->st, &music, k, mix, 3, NULL, NULL, f->err, sizeof(f->err)), f);
    item *got = get(f, &music, song_key("U", "s"));
    assert_int_equal(got->n, 3);
    assert_attr(got, "Genre", ATTR_S, "pop");
    assert_null(item_get(got, "Year"));
    item_free(got);

    /* Conditions. */
    store_cond has_year = {STORE_COND_EXISTS, "Year", NULL};
    store_cond is_pop = {STORE_COND_EQUALS, "Genre", &g2};
    assert_code(store_update(f->st, &music, k, set_y, 1, &has_year, &out, f->err, sizeof(f->err)),
                LAPSE_ECONDITION, f);
    assert_null(out);
    assert_ok(store_update(f->st, &music, k, set_y, 1, &is_pop, NULL, f->err, sizeof(f->err)), f);
    assert_ok(store_update(f->st, &music, k, NULL, 0, &has_year, NULL, f->err, sizeof(f->err)), f);
    item *k2 = song_key("U", "absent");
    assert_code(store_update(f->st, &music, k2, set_y, 1, &has_year, NULL, f->err, sizeof(f->err)),
                LAPSE_ECONDITION, f);
    assert_null(get(f, &music, song_key("U", "absent")));

    /* Key attributes cannot change. */
    attr_value other = val(ATTR_S, "other");
    store_update_action set_pk[] = {{"Artist", &other}};
    store_update_action set_sk[] = {{"Year", &y}, {"Song", &other}};
    store_update_action rm_sk[] = {{"Song", NULL}};
    store_update_action dup[] = {{"Year", &y}, {"Year", NULL}};
    assert_code(store_update(f->st, &music, k, set_pk, 1, NULL, NULL, f->err, sizeof(f->err)),
                LAPSE_EINVAL, f);
    assert_code(store_update(f->st, &music, k, set_sk, 2, NULL, NULL, f->err, sizeof(f->err)),
                LAPSE_EINVAL, f);
    assert_code(store_update(f->st, &music, k, rm_sk, 1, NULL, NULL, f->err, sizeof(f->err)),
                LAPSE_EINVAL, f);
    assert_code(store_update(f->st, &music, k, dup, 2, NULL, NULL, f->err, sizeof(f->err)),
                LAPSE_EINVAL, f);

    /* A result over the size limit is refused and nothing changes. */
    size_t big = 300 * 1024;
    char *blob = malloc(big);
    memset(blob, 'x', big);
    attr_value b1, b2;
    assert_int_equal(item_value_init_bytes(&b1, ATTR_B, blob, big), 0);
    assert_int_equal(item_value_init_bytes(&b2, ATTR_B, blob, big), 0);
    store_update_action one[] = {{"Blob1", &b1}};
    store_update_action two[] = {{"Blob2", &b2}};
    assert_ok(store_update(f->st, &music, k, one, 1, NULL, NULL, f->err, sizeof(f->err)), f);
    assert_code(store_update(f->st, &music, k, two, 1, NULL, NULL, f->err, sizeof(f->err)),
                LAPSE_ETOOBIG, f);
    got = get(f, &music, song_key("U", "s"));
    assert_non_null(item_get(got, "Blob1"));
    assert_null(item_get(got, "Blob2"));
    assert_attr(got, "Year", ATTR_N, "1999");
    item_free(got);

    free(blob);
    item_value_fini(&b1);
    item_value_fini(&b2);
    item_value_fini(&other);
    item_value_fini(&y);
    item_value_fini(&g);
    item_value_fini(&g2);
    item_free(k);
    item_free(k2);
}

static void test_oversized_item_refused(void **state)
{
    fixture *f = *state;
    size_t big = ITEM_MAX_BYTES + 1;
    char *blob = malloc(big);
    memset(blob, 'y', big);
    item *x = song_key("Big", "one");
    attr_value b;
    assert_int_equal(item_value_init_bytes(&b, ATTR_S, blob, big), 0);
    assert_int_equal(item_set(x, "Blob", &b), 0);
    assert_code(store_put(f->st, &music, x, NULL, NULL, f->err, sizeof(f->err)), LAPSE_ETOOBIG, f);
    assert_null(get(f, &music, song_key("Big", "one")));
    store_write w = {.put = x};
    assert_code(store_batch_write(f->st, &music, &w, 1, f->err, sizeof(f->err)), LAPSE_ETOOBIG, f);
    assert_null(get(f, &music, song_key("Big", "one")));
    item_free(x);

    /* A sort key over 1024 bytes. */
    blob[1025] = 0;
    x = song_key("Big", blob);
    assert_code(store_put(f->st, &music, x, NULL, NULL, f->err, sizeof(f->err)), LAPSE_ETOOBIG, f);
    item_free(x);
    free(blob);
}

/* ======================================================================== */
/* Queries                                                                  */
/* ======================================================================== */

typedef struct query_case {
    store_sk_op op;
    const char *v1, *v2;
    const char *expect[16]; /* sort key texts in ascending order, NULL-ended */
} query_case;

/* Runs q forward and reverse and checks the sort keys against expect. */
static void check_query(fixture *f, const table_schema *t, const char *pk, const query_case *q)
{
    attr_value pkv = val(t->pk.type, pk);
    attr_value v1, v2;
    store_sk_cond c = {q->op, NULL, NULL};
    if (q->v1 != NULL) {
        v1 = val(t->sk.type, q->v1);
        c.v1 = &v1;
    }
    if (q->v2 != NULL) {
        v2 = val(t->sk.type, q->v2);
        c.v2 = &v2;
    }
    size_t n = 0;
    while (q->expect[n] != NULL) {
        n++;
    }
    for (int forward = 1; forward >= 0; forward--) {
        store_page p;
        assert_ok(store_query(f->st, t, &pkv, &c, 0, forward, NULL, &p, f->err, sizeof(f->err)), f);
        if (p.n != n) {
            fail_msg("op %d %s %s (%s): %zu items, expected %zu", (int)q->op, q->v1 ? q->v1 : "",
                     q->v2 ? q->v2 : "", forward ? "forward" : "reverse", p.n, n);
        }
        for (size_t i = 0; i < n; i++) {
            const char *want = q->expect[forward ? i : n - 1 - i];
            assert_attr(p.items[i], t->sk.name, t->sk.type, want);
            assert_attr(p.items[i], t->pk.name, t->pk.type, pk);
        }
        assert_null(p.last_key);
        store_page_fini(&p);
    }
    if (q->v1 != NULL) {
        item_value_fini(&v1);
    }
    if (q->v2 != NULL) {
        item_value_fini(&v2);
    }
    item_value_fini(&pkv);
}

static void test_query_string_sort_key(void **state)
{
    fixture *f = *state;
    const char *sks[] = {"c", "ab", "a", "b", "abc", "ba", "a\x01", "B"};
    for (size_t i = 0; i < sizeof(sks) / sizeof(sks[0]); i++) {
        put(f, &music, song("Band", sks[i], "1"));
        put(f, &music, song("Band2", sks[i], "2")); /* another partition key */
        put(f, &music, song("Ban", sks[i], "3"));   /* a prefix of the partition key */
    }
    /* Byte order: "B" < "a" < "a\x01" < "ab" < "abc" < "b" < "ba" < "c". */
    const query_case cases[] = {
        {STORE_SK_NONE, NULL, NULL, {"B", "a", "a\x01", "ab", "abc", "b", "ba", "c"}},
        {STORE_SK_EQ, "ab", NULL, {"ab"}},
        {STORE_SK_EQ, "aa", NULL, {NULL}},
        {STORE_SK_LT, "b", NULL, {"B", "a", "a\x01", "ab", "abc"}},
        {STORE_SK_LE, "b", NULL, {"B", "a", "a\x01", "ab", "abc", "b"}},
        {STORE_SK_LT, "B", NULL, {NULL}},
        {STORE_SK_GT, "ab", NULL, {"abc", "b", "ba", "c"}},
        {STORE_SK_GE, "ab", NULL, {"ab", "abc", "b", "ba", "c"}},
        {STORE_SK_GT, "c", NULL, {NULL}},
        {STORE_SK_BETWEEN, "ab", "b", {"ab", "abc", "b"}},
        {STORE_SK_BETWEEN, "a", "a", {"a"}},
        {STORE_SK_BETWEEN, "aa", "aaa", {NULL}},
        {STORE_SK_BEGINS_WITH, "a", NULL, {"a", "a\x01", "ab", "abc"}},
        {STORE_SK_BEGINS_WITH, "ab", NULL, {"ab", "abc"}},
        {STORE_SK_BEGINS_WITH, "b", NULL, {"b", "ba"}},
        {STORE_SK_BEGINS_WITH, "abcd", NULL, {NULL}},
        {STORE_SK_BEGINS_WITH, "z", NULL, {NULL}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        check_query(f, &music, "Band", &cases[i]);
    }
    /* A partition key that has no items. */
    const query_case nothing = {STORE_SK_NONE, NULL, NULL, {NULL}};
    check_query(f, &music, "Nobody", &nothing);
}

static void test_query_number_sort_key(void **state)
{
    fixture *f = *state;
    const char *ts[] = {"10",  "-1.5", "0.001", "1E+30", "-100",  "1",     "0",
                        "0.5", "-1",   "100",   "1.5",   "-0.25", "-1E-10"};
    for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++) {
        put(f, &events, itm(3, "Id", ATTR_S, "dev", "Ts", ATTR_N, ts[i], "V", ATTR_S, ts[i]));
        put(f, &events, itm(2, "Id", ATTR_S, "dev2", "Ts", ATTR_N, ts[i]));
    }
    const query_case cases[] = {
        {STORE_SK_NONE,
         NULL,
         NULL,
         {"-100", "-1.5", "-1", "-0.25", "-1E-10", "0", "0.001", "0.5", "1", "1.5", "10", "100",
          "1E+30"}},
        {STORE_SK_EQ, "1.0", NULL, {"1"}},
        {STORE_SK_EQ, "-15E-1", NULL, {"-1.5"}},
        {STORE_SK_EQ, "2", NULL, {NULL}},
        {STORE_SK_LT, "0", NULL, {"-100", "-1.5", "-1", "-0.25", "-1E-10"}},
        {STORE_SK_LE, "-1", NULL, {"-100", "-1.5", "-1"}},
        {STORE_SK_GT, "1", NULL, {"1.5", "10", "100", "1E+30"}},
        {STORE_SK_GE,
         "-0.25",
         NULL,
         {"-0.25", "-1E-10", "0", "0.001", "0.5", "1", "1.5", "10", "100", "1E+30"}},
        {STORE_SK_GT, "1E+31", NULL, {NULL}},
        {STORE_SK_BETWEEN,
         "-1.5",
         "1.5",
         {"-1.5", "-1", "-0.25", "-1E-10", "0", "0.001", "0.5", "1", "1.5"}},
        {STORE_SK_BETWEEN, "-0.5", "0.0011", {"-0.25", "-1E-10", "0", "0.001"}},
        {STORE_SK_BETWEEN, "99.99", "100", {"100"}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        check_query(f, &events, "dev", &cases[i]);
    }
}

static void test_query_errors(void **state)
{
    fixture *f = *state;
    store_page p;
    attr_value pk = val(ATTR_S, "dev");
    attr_value npk = val(ATTR_N, "1");
    attr_value n1 = val(ATTR_N, "1");
    attr_value n2 = val(ATTR_N, "2");
    attr_value s1 = val(ATTR_S, "1");
    store_sk_cond bw_n = {STORE_SK_BEGINS_WITH, &n1, NULL};
    store_sk_cond wrong_type = {STORE_SK_EQ, &s1, NULL};
    store_sk_cond between_reversed = {STORE_SK_BETWEEN, &n2, &n1};
    store_sk_cond between_missing = {STORE_SK_BETWEEN, &n1, NULL};
    store_sk_cond bad_op = {(store_sk_op)99, &n1, NULL};
    store_sk_cond eq = {STORE_SK_EQ, &n1, NULL};
    const store_sk_cond *bad[] = {&bw_n, &wrong_type, &between_reversed, &between_missing, &bad_op};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_code(
            store_query(f->st, &events, &pk, bad[i], 0, 1, NULL, &p, f->err, sizeof(f->err)),
            LAPSE_EINVAL, f);
        assert_int_equal(p.n, 0);
        assert_null(p.items);
    }
    /* Empty or mistyped partition key; a sort key condition on a table
     * without one. */
    attr_value empty = val(ATTR_S, "");
    assert_code(store_query(f->st, &events, &empty, NULL, 0, 1, NULL, &p, f->err, sizeof(f->err)),
                LAPSE_EINVAL, f);
    item_value_fini(&empty);
    assert_code(store_query(f->st, &events, &npk, NULL, 0, 1, NULL, &p, f->err, sizeof(f->err)),
                LAPSE_EINVAL, f);
    assert_code(store_query(f->st, &plain, &npk, &eq, 0, 1, NULL, &p, f->err, sizeof(f->err)),
                LAPSE_EINVAL, f);
    /* An exclusive start key of another partition key. */
    item *start = itm(2, "Id", ATTR_S, "other", "Ts", ATTR_N, "1");
    assert_code(store_query(f->st, &events, &pk, NULL, 0, 1, start, &p, f->err, sizeof(f->err)),
                LAPSE_EINVAL, f);
    item_free(start);
    start = itm(1, "Id", ATTR_S, "dev"); /* missing its sort key */
    assert_code(store_query(f->st, &events, &pk, NULL, 0, 1, start, &p, f->err, sizeof(f->err)),
                LAPSE_EINVAL, f);
    item_free(start);
    item_value_fini(&pk);
    item_value_fini(&npk);
    item_value_fini(&n1);
    item_value_fini(&n2);
    item_value_fini(&s1);
    store_page_fini(NULL);
}

/* Pages through a query with limit and checks every Ts in [lo, hi] comes
 * back exactly once, in order. Returns the number of pages. */
static int walk_query(fixture *f, const char *pk, const store_sk_cond *sk, uint32_t limit,
                      int forward, int lo, int hi)
{
    attr_value pkv = val(ATTR_S, pk);
    item *start = NULL;
    int next = forward ? lo : hi, pages = 0;
    for (;;) {
        store_page p;
        assert_ok(store_query(f->st, &events, &pkv, sk, limit, forward, start, &p, f->err,
                              sizeof(f->err)),
                  f);
        item_free(start);
        start = NULL;
        pages++;
        if (limit > 0) {
            assert_true(p.n <= limit);
        }
        for (size_t i = 0; i < p.n; i++) {
            char want[32];
            snprintf(want, sizeof(want), "%d", next);
            assert_attr(p.items[i], "Ts", ATTR_N, want);
            next += forward ? 1 : -1;
        }
        if (p.last_key == NULL) {
            store_page_fini(&p);
            break;
        }
        /* last_key is the key of the last item returned, key attributes only. */
        assert_int_equal(p.last_key->n, 2);
        assert_true(p.n > 0);
        assert_true(item_value_eq(item_get(p.last_key, "Ts"), item_get(p.items[p.n - 1], "Ts")));
        start = p.last_key;
        p.last_key = NULL;
        store_page_fini(&p);
        assert_true(pages < 10000);
    }
    assert_int_equal(next, forward ? hi + 1 : lo - 1);
    item_value_fini(&pkv);
    return pages;
}

static void test_query_pagination(void **state)
{
    fixture *f = *state;
    enum { N = 100 };
    for (int i = 0; i < N; i++) {
        char ts[32];
        snprintf(ts, sizeof(ts), "%d", i);
        put(f, &events, itm(3, "Id", ATTR_S, "walk", "Ts", ATTR_N, ts, "Pad", ATTR_S, "x"));
    }
    put(f, &events, itm(2, "Id", ATTR_S, "walk2", "Ts", ATTR_N, "5"));
    const uint32_t limits[] = {1, 3, 7, 10, 99, 100, 101, 0};
    for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
        uint32_t l = limits[i];
        int pages_f = walk_query(f, "walk", NULL, l, 1, 0, N - 1);
        int pages_r = walk_query(f, "walk", NULL, l, 0, 0, N - 1);
        /* A limit that divides the count exactly needs no extra empty page. */
        int expect = l == 0 ? 1 : (N + (int)l - 1) / (int)l;
        assert_int_equal(pages_f, expect);
        assert_int_equal(pages_r, expect);
    }
    /* With a sort key condition. */
    attr_value a = val(ATTR_N, "20"), b = val(ATTR_N, "29.5");
    store_sk_cond between = {STORE_SK_BETWEEN, &a, &b};
    assert_int_equal(walk_query(f, "walk", &between, 3, 1, 20, 29), 4);
    assert_int_equal(walk_query(f, "walk", &between, 5, 0, 20, 29), 2);
    store_sk_cond gt = {STORE_SK_GT, &b, NULL};
    assert_int_equal(walk_query(f, "walk", &gt, 7, 0, 30, N - 1), 10);
    store_sk_cond lt = {STORE_SK_LT, &a, NULL};
    assert_int_equal(walk_query(f, "walk", &lt, 4, 1, 0, 19), 5);
    item_value_fini(&a);
    item_value_fini(&b);

    /* A start key that is not stored still works (the next key after it). */
    attr_value pkv = val(ATTR_S, "walk");
    item *start = itm(2, "Id", ATTR_S, "walk", "Ts", ATTR_N, "49.5");
    store_page p;
    assert_ok(store_query(f->st, &events, &pkv, NULL, 2, 1, start, &p, f->err, sizeof(f->err)), f);
    assert_int_equal(p.n, 2);
    assert_attr(p.items[0], "Ts", ATTR_N, "50");
    store_page_fini(&p);
    assert_ok(store_query(f->st, &events, &pkv, NULL, 2, 0, start, &p, f->err, sizeof(f->err)), f);
    assert_int_equal(p.n, 2);
    assert_attr(p.items[0], "Ts", ATTR_N, "49");
    assert_attr(p.items[1], "Ts", ATTR_N, "48");
    store_page_fini(&p);
    item_free(start);
    item_value_fini(&pkv);
}

static void test_page_stops_at_max_bytes(void **state)
{
    fixture *f = *state;
    size_t big = 100 * 1024;
    char *blob = malloc(big + 1);
    memset(blob, 'z', big);
    blob[big] = 0;
    enum { N = 12 };
    for (int i = 0; i < N; i++) {
        char ts[32];
        snprintf(ts, sizeof(ts), "%d", i);
        put(f, &events, itm(3, "Id", ATTR_S, "big", "Ts", ATTR_N, ts, "Blob", ATTR_S, blob));
    }
    free(blob);
    attr_value pkv = val(ATTR_S, "big");
    store_page p;
    assert_ok(store_query(f->st, &events, &pkv, NULL, 0, 1, NULL, &p, f->err, sizeof(f->err)), f);
    /* 10 items are just under 1 MiB, the 11th crosses it and ends the page. */
    assert_int_equal(p.n, 11);
    assert_non_null(p.last_key);
    assert_attr(p.last_key, "Ts", ATTR_N, "10");
    item *start = p.last_key;
    p.last_key = NULL;
    store_page_fini(&p);
    assert_ok(store_query(f->st, &events, &pkv, NULL, 0, 1, start, &p, f->err, sizeof(f->err)), f);
    assert_int_equal(p.n, 1);
    assert_null(p.last_key);
    assert_attr(p.items[0], "Ts", ATTR_N, "11");
    store_page_fini(&p);
    item_free(start);
    item_value_fini(&pkv);
}

/* ======================================================================== */
/* Scans, batches, drops, persistence                                       */
/* ======================================================================== */

static void test_scan_paging(void **state)
{
    fixture *f = *state;
    enum { N = 300 };
    static int seen[N];
    memset(seen, 0, sizeof(seen));
    for (int i = 0; i < N; i++) {
        char pk[32];
        snprintf(pk, sizeof(pk), "%d", i);
        put(f, &plain, itm(1, "Pk", ATTR_N, pk));
    }
    put(f, &events, itm(2, "Id", ATTR_S, "other-table", "Ts", ATTR_N, "1"));
    size_t total = 0;
    for (uint32_t part = 0; part < plain.partitions; part++) {
        uint64_t count = 0;
        assert_ok(store_count(f->st, plain.id, part, &count, f->err, sizeof(f->err)), f);
        size_t in_part = 0;
        item *start = NULL;
        for (;;) {
            store_page p;
            assert_ok(store_scan(f->st, &plain, part, 7, start, &p, f->err, sizeof(f->err)), f);
            item_free(start);
            start = NULL;
            assert_true(p.n <= 7);
            for (size_t i = 0; i < p.n; i++) {
                const attr_value *v = item_get(p.items[i], "Pk");
                int k = atoi(v->u.bytes.ptr);
                assert_true(k >= 0 && k < N);
                assert_int_equal(seen[k], 0);
                seen[k] = 1;
                uint32_t hp = 0;
                assert_int_equal(hash_partition(v, plain.partitions, &hp), 0);
                assert_int_equal(hp, part);
            }
            in_part += p.n;
            start = p.last_key;
            p.last_key = NULL;
            store_page_fini(&p);
            if (start == NULL) {
                break;
            }
        }
        assert_int_equal(in_part, count);
        total += in_part;
    }
    assert_int_equal(total, N);

    /* Errors: a partition out of range, a start key of another partition. */
    store_page p;
    assert_code(store_scan(f->st, &plain, plain.partitions, 0, NULL, &p, f->err, sizeof(f->err)),
                LAPSE_EINVAL, f);
    item *k = itm(1, "Pk", ATTR_N, "1");
    uint32_t kp = 0;
    attr_value one = val(ATTR_N, "1");
    assert_int_equal(hash_partition(&one, plain.partitions, &kp), 0);
    assert_code(
        store_scan(f->st, &plain, (kp + 1) % plain.partitions, 0, k, &p, f->err, sizeof(f->err)),
        LAPSE_EINVAL, f);
    item_value_fini(&one);
    item_free(k);
}

static void test_batch_write(void **state)
{
    fixture *f = *state;
    enum { N = 400 };
    item *items[N];
    store_write w[N];
    for (int i = 0; i < N; i++) {
        char sk[32];
        snprintf(sk, sizeof(sk), "%04d", i);
        char pk[32];
        snprintf(pk, sizeof(pk), "artist%d", i % 37);
        items[i] = song(pk, sk, "1");
        w[i] = (store_write){.put = items[i]};
    }
    assert_ok(store_batch_write(f->st, &music, w, N, f->err, sizeof(f->err)), f);
    uint64_t total = 0;
    int parts_used = 0;
    for (uint32_t p = 0; p < music.partitions; p++) {
        uint64_t c = 0;
        assert_ok(store_count(f->st, music.id, p, &c, f->err, sizeof(f->err)), f);
        total += c;
        parts_used += c > 0;
    }
    assert_int_equal(total, N);
    assert_true(parts_used > 1);

    /* Deletes and puts mixed; a later write to the same key wins. */
    item *k0 = song_key("artist0", "0000");
    item *k1 = song_key("artist1", "0001");
    item *new1 = song("artist1", "0001", "2");
    item *again = song("artist2", "0002", "3");
    store_write mix[] = {{.delete_key = k0}, {.put = new1}, {.delete_key = k1}, {.put = again}};
    assert_ok(store_batch_write(f->st, &music, mix, 4, f->err, sizeof(f->err)), f);
    assert_null(get(f, &music, song_key("artist0", "0000")));
    assert_null(get(f, &music, song_key("artist1", "0001")));
    item *got = get(f, &music, song_key("artist2", "0002"));
    assert_attr(got, "Year", ATTR_N, "3");
    item_free(got);

    /* One bad write: nothing at all is applied. */
    item *bad = itm(1, "Artist", ATTR_S, "no-sort-key");
    item *fresh = song("fresh", "x", "1");
    store_write with_bad[] = {{.put = fresh}, {.delete_key = k0}, {.put = bad}};
    assert_code(store_batch_write(f->st, &music, with_bad, 3, f->err, sizeof(f->err)), LAPSE_EINVAL,
                f);
    assert_null(get(f, &music, song_key("fresh", "x")));
    store_write neither[] = {{.put = fresh}, {0}};
    assert_code(store_batch_write(f->st, &music, neither, 2, f->err, sizeof(f->err)), LAPSE_EINVAL,
                f);
    store_write both[] = {{.put = fresh, .delete_key = k0}};
    assert_code(store_batch_write(f->st, &music, both, 1, f->err, sizeof(f->err)), LAPSE_EINVAL, f);
    store_write del_not_key[] = {{.delete_key = fresh}};
    assert_code(store_batch_write(f->st, &music, del_not_key, 1, f->err, sizeof(f->err)),
                LAPSE_EINVAL, f);
    assert_null(get(f, &music, song_key("fresh", "x")));
    assert_ok(store_batch_write(f->st, &music, NULL, 0, f->err, sizeof(f->err)), f);

    /* Over the limit. */
    store_write *many = calloc(STORE_BATCH_MAX + 1, sizeof(*many));
    for (int i = 0; i <= STORE_BATCH_MAX; i++) {
        many[i].put = fresh;
    }
    assert_code(store_batch_write(f->st, &music, many, STORE_BATCH_MAX + 1, f->err, sizeof(f->err)),
                LAPSE_ETOOBIG, f);
    assert_ok(store_batch_write(f->st, &music, many, STORE_BATCH_MAX, f->err, sizeof(f->err)), f);
    free(many);

    for (int i = 0; i < N; i++) {
        item_free(items[i]);
    }
    item_free(k0);
    item_free(k1);
    item_free(new1);
    item_free(again);
    item_free(bad);
    item_free(fresh);
}

static uint64_t table_count(fixture *f, const table_schema *t)
{
    uint64_t total = 0;
    for (uint32_t p = 0; p < t->partitions; p++) {
        uint64_t c = 0;
        assert_ok(store_count(f->st, t->id, p, &c, f->err, sizeof(f->err)), f);
        total += c;
    }
    return total;
}

static void test_drop_table(void **state)
{
    fixture *f = *state;
    for (int i = 0; i < 50; i++) {
        char s[32];
        snprintf(s, sizeof(s), "%d", i);
        put(f, &music, song(s, s, s));
        put(f, &events, itm(2, "Id", ATTR_S, s, "Ts", ATTR_N, s));
    }
    /* The tables around the dropped one keep their items. */
    table_schema last = mk_schema(UINT32_MAX, "Last", "Pk", ATTR_N, NULL, 0, 2);
    put(f, &last, itm(1, "Pk", ATTR_N, "1"));
    assert_int_equal(table_count(f, &music), 50);
    assert_ok(store_drop_table(f->st, music.id, f->err, sizeof(f->err)), f);
    assert_int_equal(table_count(f, &music), 0);
    assert_null(get(f, &music, song_key("7", "7")));
    assert_int_equal(table_count(f, &events), 50);
    assert_int_equal(table_count(f, &last), 1);
    assert_ok(store_drop_table(f->st, music.id, f->err, sizeof(f->err)), f); /* idempotent */
    reopen(f);
    assert_int_equal(table_count(f, &music), 0);
    assert_int_equal(table_count(f, &events), 50);
    /* The table id with no successor. */
    assert_ok(store_drop_table(f->st, UINT32_MAX, f->err, sizeof(f->err)), f);
    assert_int_equal(table_count(f, &last), 0);
    assert_int_equal(table_count(f, &events), 50);
    /* A dropped table's id can take new items. */
    put(f, &music, song("after", "drop", NULL));
    assert_int_equal(table_count(f, &music), 1);
}

static void test_persistence_and_meta(void **state)
{
    fixture *f = *state;
    item *x = song("Persist", "s", "1");
    put(f, &music, item_dup(x));
    put(f, &plain, itm(1, "Pk", ATTR_N, "42"));
    assert_ok(store_meta_put(f->st, "node_id", "7", 1, f->err, sizeof(f->err)), f);
    reopen(f);
    item *got = get(f, &music, song_key("Persist", "s"));
    assert_true(item_eq(got, x));
    item_free(got);
    got = get(f, &plain, itm(1, "Pk", ATTR_N, "42"));
    assert_non_null(got);
    item_free(got);
    buf v;
    buf_init(&v);
    int found = 0;
    assert_ok(store_meta_get(f->st, "node_id", &v, &found, f->err, sizeof(f->err)), f);
    assert_int_equal(found, 1);
    assert_int_equal(v.len, 1);
    assert_memory_equal(v.data, "7", 1);
    assert_ok(store_meta_get(f->st, "absent", &v, &found, f->err, sizeof(f->err)), f);
    assert_int_equal(found, 0);
    assert_int_equal(v.len, 0);
    buf_fini(&v);
    item_free(x);

    /* A second store on the same directory is refused while this one is open. */
    store *second = NULL;
    char err[512] = "";
    assert_int_equal(store_open(&second, f->dir, err, sizeof(err)), LAPSE_EIO);
    assert_null(second);
    assert_true(strlen(err) > 0);
    store_close(NULL);
}

/* ======================================================================== */
/* Concurrency                                                              */
/* ======================================================================== */

enum { THREADS = 8, ROUNDS = 25, INCREMENTS = 40 };

typedef struct race {
    fixture *f;
    pthread_barrier_t *barrier;
    int id;
    int wins[ROUNDS];
    int errors;
} race;

static void *race_put(void *arg)
{
    race *r = arg;
    char err[256];
    store_cond c = {STORE_COND_NOT_EXISTS, "Artist", NULL};
    for (int round = 0; round < ROUNDS; round++) {
        char sk[32], who[32];
        snprintf(sk, sizeof(sk), "round%d", round);
        snprintf(who, sizeof(who), "%d", r->id);
        item *x = itm(3, "Artist", ATTR_S, "race", "Song", ATTR_S, sk, "Winner", ATTR_N, who);
        pthread_barrier_wait(r->barrier);
        int rv = store_put(r->f->st, &music, x, &c, NULL, err, sizeof(err));
        if (rv == 0) {
            r->wins[round] = 1;
        } else if (rv != LAPSE_ECONDITION) {
            r->errors++;
        }
        item_free(x);
    }
    return NULL;
}

/* Read-modify-write increments with an equality condition, retried. */
static void *race_increment(void *arg)
{
    race *r = arg;
    char err[256];
    pthread_barrier_wait(r->barrier);
    for (int i = 0; i < INCREMENTS; i++) {
        for (;;) {
            item *k = song_key("counter", "c");
            item *cur = NULL;
            if (store_get(r->f->st, &music, k, &cur, err, sizeof(err)) != 0 || cur == NULL) {
                r->errors++;
                item_free(k);
                return NULL;
            }
            const attr_value *v = item_get(cur, "N");
            char next[32];
            snprintf(next, sizeof(next), "%d", atoi(v->u.bytes.ptr) + 1);
            store_cond c = {STORE_COND_EQUALS, "N", v};
            attr_value nv = val(ATTR_N, next);
            store_update_action a = {"N", &nv};
            int rv = store_update(r->f->st, &music, k, &a, 1, &c, NULL, err, sizeof(err));
            item_value_fini(&nv);
            item_free(cur);
            item_free(k);
            if (rv == 0) {
                break;
            }
            if (rv != LAPSE_ECONDITION) {
                r->errors++;
                return NULL;
            }
        }
    }
    return NULL;
}

static void run_threads(fixture *f, void *(*fn)(void *), race *rs)
{
    pthread_t th[THREADS];
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        memset(&rs[i], 0, sizeof(rs[i]));
        rs[i].f = f;
        rs[i].barrier = &barrier;
        rs[i].id = i;
        assert_int_equal(pthread_create(&th[i], NULL, fn, &rs[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    pthread_barrier_destroy(&barrier);
}

static void test_concurrent_conditional_puts(void **state)
{
    fixture *f = *state;
    race rs[THREADS];
    run_threads(f, race_put, rs);
    for (int round = 0; round < ROUNDS; round++) {
        int wins = 0, winner = -1;
        for (int i = 0; i < THREADS; i++) {
            assert_int_equal(rs[i].errors, 0);
            if (rs[i].wins[round]) {
                wins++;
                winner = i;
            }
        }
        if (wins != 1) {
            fail_msg("round %d: %d attribute_not_exists puts succeeded", round, wins);
        }
        char sk[32], who[32];
        snprintf(sk, sizeof(sk), "round%d", round);
        snprintf(who, sizeof(who), "%d", winner);
        item *got = get(f, &music, song_key("race", sk));
        assert_attr(got, "Winner", ATTR_N, who); /* the stored item is the winner's */
        item_free(got);
    }

    put(f, &music, itm(3, "Artist", ATTR_S, "counter", "Song", ATTR_S, "c", "N", ATTR_N, "0"));
    run_threads(f, race_increment, rs);
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(rs[i].errors, 0);
    }
    item *got = get(f, &music, song_key("counter", "c"));
    char want[16];
    snprintf(want, sizeof(want), "%d", THREADS * INCREMENTS);
    assert_attr(got, "N", ATTR_N, want); /* no lost update */
    item_free(got);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_put_get_delete),
        T(test_bad_keys_refused),
        T(test_conditions),
        T(test_update),
        T(test_oversized_item_refused),
        T(test_query_string_sort_key),
        T(test_query_number_sort_key),
        T(test_query_errors),
        T(test_query_pagination),
        T(test_page_stops_at_max_bytes),
        T(test_scan_paging),
        T(test_batch_write),
        T(test_drop_table),
        T(test_persistence_and_meta),
        T(test_concurrent_conditional_puts),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
