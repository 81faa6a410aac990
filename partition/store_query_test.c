/*
 * store_query_test.c: the partition store's reads of many items against a
 * real RocksDB in a scratch directory: queries with every sort-key operator
 * over S and N sort keys, pagination that must return every item exactly
 * once, byte limits on pages, and scans.
 */
#include "store_testutil.h"

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
/* Scans                                                                    */
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

/* store_get_many reads across partitions in one MultiGet, aligned with the
 * keys, NULL for absent ones, and refuses a bad key without reading. */
static void test_get_many(void **state)
{
    fixture *f = *state;
    enum { N = 300 };
    item *keys[N];
    item *out[N];
    for (int i = 0; i < N; i++) {
        char title[32];
        snprintf(title, sizeof(title), "song%03d", i);
        if (i % 3 != 0) {
            put(f, &music, song("band", title, i % 2 ? "1999" : NULL));
        }
        keys[i] = song_key(i % 5 ? "band" : "other", title);
    }
    assert_ok(store_get_many(f->st, &music, (const item *const *)keys, N, out, f->err,
                             sizeof(f->err)),
              f);
    for (int i = 0; i < N; i++) {
        char title[32];
        snprintf(title, sizeof(title), "song%03d", i);
        if (i % 3 == 0 || i % 5 == 0) {
            assert_null(out[i]);
            continue;
        }
        assert_non_null(out[i]);
        assert_attr(out[i], "Song", ATTR_S, title);
        if (i % 2) {
            assert_attr(out[i], "Year", ATTR_N, "1999");
        } else {
            assert_null(item_get(out[i], "Year"));
        }
        item_free(out[i]);
    }
    item *bad = itm(1, "Artist", ATTR_S, "band"); /* no sort key */
    const item *two[2] = {keys[1], bad};
    assert_code(store_get_many(f->st, &music, two, 2, out, f->err, sizeof(f->err)), LAPSE_EINVAL,
                f);
    assert_null(out[0]);
    assert_null(out[1]);
    assert_non_null(strstr(f->err, "key 1"));
    item_free(bad);
    for (int i = 0; i < N; i++) {
        item_free(keys[i]);
    }
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_get_many),
        T(test_query_string_sort_key),
        T(test_query_number_sort_key),
        T(test_query_errors),
        T(test_query_pagination),
        T(test_page_stops_at_max_bytes),
        T(test_scan_paging),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
