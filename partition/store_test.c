/*
 * store_test.c: the partition store against a real RocksDB in a scratch
 * directory: point operations with every condition kind, updates, batch
 * writes, table drops, persistence across reopen, concurrent conditional
 * writes, size limits. Queries and scans are in store_query_test.c.
 */
#include <pthread.h>

#include "store_testutil.h"

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

/* it's attributes as an M value (caller finis it). */
static attr_value as_map(const item *it)
{
    attr_value m, v;
    item_value_init_map(&m);
    for (size_t i = 0; i < it->n; i++) {
        assert_int_equal(item_value_dup(&v, &it->attrs[i].value), 0);
        assert_int_equal(item_value_map_set(&m, it->attrs[i].name, &v), 0);
    }
    return m;
}

/* STORE_COND_ITEM_EQUALS holds only while the item is exactly the one
 * given: not when absent, changed, with an attribute more or less. */
static void test_item_equals_condition(void **state)
{
    fixture *f = *state;
    item *x = song("B", "s", "2000"), *x2 = song("B", "s", "2001");
    item *k = song_key("B", "s");
    attr_value mx = as_map(x), mx2 = as_map(x2), more = as_map(x), less = as_map(x);
    attr_value extra = val(ATTR_S, "x");
    assert_int_equal(item_value_map_set(&more, "Extra", &extra), 0);
    assert_int_equal(less.u.map.n, 3);
    item_value_fini(&less.u.map.v[2].value); /* drop Year (the last attribute) */
    free(less.u.map.v[2].name);
    less.u.map.n = 2;
    store_cond is_x = {STORE_COND_ITEM_EQUALS, NULL, &mx},
               is_x2 = {STORE_COND_ITEM_EQUALS, NULL, &mx2};
    store_cond is_more = {STORE_COND_ITEM_EQUALS, NULL, &more};
    store_cond is_less = {STORE_COND_ITEM_EQUALS, NULL, &less};
    assert_code(store_put(f->st, &music, x, &is_x, NULL, f->err, sizeof(f->err)), LAPSE_ECONDITION,
                f); /* absent */
    assert_ok(store_put(f->st, &music, x, NULL, NULL, f->err, sizeof(f->err)), f);
    const store_cond *fails[] = {&is_x2, &is_more, &is_less};
    for (size_t i = 0; i < 3; i++) {
        assert_code(store_put(f->st, &music, x2, fails[i], NULL, f->err, sizeof(f->err)),
                    LAPSE_ECONDITION, f);
    }
    assert_ok(store_put(f->st, &music, x2, &is_x, NULL, f->err, sizeof(f->err)), f);
    assert_code(store_delete(f->st, &music, k, &is_x, NULL, f->err, sizeof(f->err)),
                LAPSE_ECONDITION, f); /* x2 now */
    assert_ok(store_delete(f->st, &music, k, &is_x2, NULL, f->err, sizeof(f->err)), f);
    /* Malformed: no value, or not an M. */
    attr_value s = val(ATTR_S, "x");
    store_cond no_value = {STORE_COND_ITEM_EQUALS, NULL, NULL},
               not_map = {STORE_COND_ITEM_EQUALS, NULL, &s};
    assert_code(store_put(f->st, &music, x, &no_value, NULL, f->err, sizeof(f->err)), LAPSE_EINVAL,
                f);
    assert_code(store_put(f->st, &music, x, &not_map, NULL, f->err, sizeof(f->err)), LAPSE_EINVAL,
                f);
    item_value_fini(&s);
    item_value_fini(&mx);
    item_value_fini(&mx2);
    item_value_fini(&more);
    item_value_fini(&less);
    item_free(k);
    item_free(x);
    item_free(x2);
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
/* Batches, drops, persistence                                              */
/* ======================================================================== */

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
    /* Sizes: exact within the walk's budget; past it, marked estimated
     * (the items are in the memtable: counted as walked). */
    for (uint32_t p = 0; p < music.partitions; p++) {
        uint64_t c = 0;
        store_size sz, cut;
        assert_ok(store_count(f->st, music.id, p, &c, f->err, sizeof(f->err)), f);
        assert_ok(store_estimate(f->st, music.id, p, 1000000, &sz, f->err, sizeof(f->err)), f);
        assert_true(sz.items == c && !sz.estimated && (sz.bytes > 0) == (c > 0));
        assert_ok(store_estimate(f->st, music.id, p, 1, &cut, f->err, sizeof(f->err)), f);
        assert_int_equal(cut.estimated, c > 1);
        assert_true(cut.items == (c > 0 ? 1 : 0) && cut.bytes <= sz.bytes);
    }

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
    assert_ok(store_meta_put(f->st, "node_id", "7", 1, 1, f->err, sizeof(f->err)), f);
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
        T(test_item_equals_condition),
        T(test_update),
        T(test_oversized_item_refused),
        T(test_batch_write),
        T(test_drop_table),
        T(test_persistence_and_meta),
        T(test_concurrent_conditional_puts),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
