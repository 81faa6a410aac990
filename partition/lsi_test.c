/*
 * lsi_test.c: local secondary indexes against a real RocksDB: the entry
 * layout and sparseness, the index kept exact through a random sequence of
 * puts, conditional puts, updates, deletes and batch writes (checked
 * against a model after every write), the TTL sweep's deletes, queries in
 * index order with every sort-key condition and paging, a failed write
 * leaving nothing behind, drops, and a store created before the new
 * families.
 *
 * White-box: the lsi family is read directly and the expected keys are
 * built by hand from the layout in docs/replication.md.
 */
#include "../common/clock.h"
#include "expiry.h"
#include "repl_testutil.h"
#include "store_int.h"

/* ======================================================================== */
/* Layout, sparseness, write paths                                          */
/* ======================================================================== */

static void test_layout_and_sparse(void **state)
{
    fixture *f = *state;
    item *m[4];
    m[0] = order("ann", "o1", "20240102", "paid");
    m[1] = order("ann", "o2", "-3.5", NULL); /* no Status: not in ByStatus */
    m[2] = order("bob", "o1", NULL, NULL);   /* in neither */
    m[3] = order("bob", "o2", "1E+3", NULL); /* in ByDate only */
    for (int i = 0; i < 4; i++) {
        put(f, &orders, item_dup(m[i]));
    }
    /* An index key of the wrong type, or empty, is refused and changes
     * nothing (as DynamoDB refuses it), by every write path. */
    item *bad[2] = {order("bob", "o1", "5", "#7"), order("bob", "o2", "6", "")};
    for (int i = 0; i < 2; i++) {
        assert_code(store_put(f->st, &orders, bad[i], NULL, NULL, f->err, sizeof(f->err)),
                    LAPSE_EINVAL, f);
        assert_non_null(strstr(f->err, "local secondary index \"ByStatus\""));
        store_write w = {bad[i], NULL};
        assert_code(store_batch_write(f->st, &orders, &w, 1, f->err, sizeof(f->err)), LAPSE_EINVAL,
                    f);
        item *k = okey("ann", "o1"), *nw = NULL;
        store_update_action a = {"Status", item_get(bad[i], "Status")};
        assert_code(store_update(f->st, &orders, k, &a, 1, NULL, &nw, f->err, sizeof(f->err)),
                    LAPSE_EINVAL, f);
        assert_null(nw);
        item_free(k);
        item_free(bad[i]);
    }
    assert_int_equal(cf_count(f->st, CF_LSI, orders.id), 4);
    assert_lsi(f, &orders, m, 4);
    /* DescribeTable's LSI figures count the same entries, partition by
     * partition (a budget of 1: the walk stops and says so). */
    uint64_t sized = 0;
    for (uint32_t p = 0; p < orders.partitions; p++) {
        for (uint32_t j = 0; j < orders.nlsi; j++) {
            store_size sz, cut;
            assert_ok(store_estimate_lsi(f->st, orders.id, p, orders.lsi[j].id, 100, &sz, f->err,
                                         sizeof(f->err)),
                      f);
            assert_true(!sz.estimated && (sz.bytes > 0) == (sz.items > 0));
            assert_ok(store_estimate_lsi(f->st, orders.id, p, orders.lsi[j].id, 1, &cut, f->err,
                                         sizeof(f->err)),
                      f);
            assert_int_equal(cut.estimated, sz.items > 1);
            sized += sz.items;
        }
    }
    assert_int_equal(sized, 4);
    /* A table without LSIs writes none. */
    put(f, &music, song("Queen", "Bohemian", "1975"));
    assert_int_equal(cf_count(f->st, CF_LSI, music.id), 0);
    for (int i = 0; i < 4; i++) {
        item_free(m[i]);
    }
}

#define NCUST 3
#define NORD 10
#define NKEYS (NCUST * NORD)

static const char *const custs[NCUST] = {"a", "bb", "c\x01"};

static void key_names(int key, const char **cust, char *ord)
{
    *cust = custs[key / NORD];
    sprintf(ord, "o%d", key % NORD);
}

static item *random_order(int key, unsigned *seed)
{
    static const char *const dates[] = {NULL, "-5", "0", "1.5", "7", "7.0", "1E+2", "-0.25"};
    static const char *const stats[] = {NULL, "new", "paid", NULL, "packed", "shipped"};
    const char *cust;
    char ord[8];
    key_names(key, &cust, ord);
    return order(cust, ord, dates[rand_r(seed) % 8], stats[rand_r(seed) % 6]);
}

static int key_of(const item *it)
{
    const attr_value *c = item_get(it, "Cust"), *o = item_get(it, "Order");
    int ci = 0;
    while (strcmp(custs[ci], c->u.bytes.ptr) != 0) {
        ci++;
    }
    return ci * NORD + atoi(o->u.bytes.ptr + 1);
}

static void model_set(item **m, int key, const item *it)
{
    item_free(m[key]);
    m[key] = it != NULL ? item_dup(it) : NULL;
}

static void test_lsi_follows_every_write(void **state)
{
    fixture *f = *state;
    item *m[NKEYS] = {0};
    unsigned seed = 7301;
    for (int op = 0; op < 1500; op++) {
        int key = rand_r(&seed) % NKEYS, r = rand_r(&seed) % 10;
        const char *cust;
        char ord[8];
        key_names(key, &cust, ord);
        if (r < 3) {
            item *it = random_order(key, &seed);
            put(f, &orders, item_dup(it));
            model_set(m, key, it);
            item_free(it);
        } else if (r < 4) { /* a failed condition changes nothing */
            item *it = random_order(key, &seed);
            store_cond c = {STORE_COND_EXISTS, "NoSuchAttr", NULL};
            assert_code(store_put(f->st, &orders, it, &c, NULL, f->err, sizeof(f->err)),
                        LAPSE_ECONDITION, f);
            item_free(it);
        } else if (r < 6) { /* update: set or remove Date and Status */
            item *src = random_order(key, &seed);
            store_update_action a[2] = {{"Date", item_get(src, "Date")},
                                        {"Status", item_get(src, "Status")}};
            item *k = okey(cust, ord), *nw = NULL;
            size_t na = 1 + rand_r(&seed) % 2;
            assert_ok(store_update(f->st, &orders, k, a + (na == 1 ? rand_r(&seed) % 2 : 0), na,
                                   NULL, &nw, f->err, sizeof(f->err)),
                      f);
            model_set(m, key, nw);
            item_free(nw);
            item_free(k);
            item_free(src);
        } else if (r < 8) { /* delete, sometimes of an absent item */
            item *k = okey(cust, ord);
            assert_ok(store_delete(f->st, &orders, k, NULL, NULL, f->err, sizeof(f->err)), f);
            model_set(m, key, NULL);
            item_free(k);
        } else { /* a batch with repeated keys: the last write to a key wins */
            store_write w[10];
            item *owned[10];
            int n = 1 + rand_r(&seed) % 10;
            for (int i = 0; i < n; i++) {
                int bk = (key + rand_r(&seed) % 8) % NKEYS;
                const char *bc;
                char bo[8];
                key_names(bk, &bc, bo);
                if (rand_r(&seed) % 3 == 0) {
                    owned[i] = okey(bc, bo);
                    w[i] = (store_write){NULL, owned[i]};
                } else {
                    owned[i] = random_order(bk, &seed);
                    w[i] = (store_write){owned[i], NULL};
                }
            }
            assert_ok(store_batch_write(f->st, &orders, w, (size_t)n, f->err, sizeof(f->err)), f);
            for (int i = 0; i < n; i++) {
                const item *it = w[i].put != NULL ? w[i].put : w[i].delete_key;
                model_set(m, key_of(it), w[i].put);
                item_free(owned[i]);
            }
        }
        /* After every write: the LSI family is exactly the model's. */
        assert_lsi(f, &orders, m, NKEYS);
    }
    for (int i = 0; i < NKEYS; i++) {
        item_free(m[i]);
    }
}

static void test_ttl_sweep_deletes_entries(void **state)
{
    fixture *f = *state;
    item *m[6];
    char exp[32];
    for (int i = 0; i < 6; i++) {
        char ord[8];
        sprintf(ord, "o%d", i);
        m[i] = order("ttl", ord, "5", i % 2 ? "open" : NULL);
        snprintf(exp, sizeof(exp), "%lld", (long long)(now_s + (i < 4 ? 100 : 100000)));
        attr_value e = val(ATTR_N, exp);
        assert_int_equal(item_set(m[i], "Exp", &e), 0);
        put(f, &orders, item_dup(m[i]));
    }
    assert_lsi(f, &orders, m, 6);
    uint32_t part = part_of_s("ttl", orders.partitions);
    expiry_sweep_result res = {0};
    assert_ok(expiry_sweep(f->st, &orders, part, (clock_wall){(now_s + 200) * 1000}, 100, &res,
                           f->err, sizeof(f->err)),
              f);
    assert_int_equal(res.deleted, 4);
    for (int i = 0; i < 4; i++) {
        item_free(m[i]);
        m[i] = NULL;
    }
    assert_lsi(f, &orders, m, 6);
    /* The naive scan keeps the LSI too. */
    buf resume;
    buf_init(&resume);
    int done = 0;
    assert_ok(expiry_naive_step(f->st, &orders, part, (clock_wall){(now_s + 200000) * 1000}, 100,
                                100, &resume, &done, &res, f->err, sizeof(f->err)),
              f);
    assert_int_equal(res.deleted, 2);
    buf_fini(&resume);
    item_free(m[4]);
    item_free(m[5]);
    assert_int_equal(cf_count(f->st, CF_LSI, orders.id), 0);
}

/* A write whose WriteBatch fails leaves the item and its entries as they
 * were: they are in one batch, so there is no partial state to see. */
static void test_failed_write_changes_nothing(void **state)
{
    fixture *f = *state;
    item *m[1] = {order("x", "o1", "1", "a")};
    put(f, &orders, item_dup(m[0]));
    item *nw = order("x", "o1", "2", "b");
    db_fault_write(f->st->db, 1);
    assert_code(store_put(f->st, &orders, nw, NULL, NULL, f->err, sizeof(f->err)), LAPSE_EIO, f);
    assert_lsi(f, &orders, m, 1);
    item *k = okey("x", "o1");
    db_fault_write(f->st->db, 1);
    assert_code(store_delete(f->st, &orders, k, NULL, NULL, f->err, sizeof(f->err)), LAPSE_EIO, f);
    store_write w = {nw, NULL};
    db_fault_write(f->st->db, 1);
    assert_code(store_batch_write(f->st, &orders, &w, 1, f->err, sizeof(f->err)), LAPSE_EIO, f);
    assert_lsi(f, &orders, m, 1);
    item *got = get(f, &orders, okey("x", "o1"));
    assert_true(item_eq(got, m[0]));
    item_free(got);
    item_free(k);
    item_free(nw);
    item_free(m[0]);
}

/* ======================================================================== */
/* Queries                                                                  */
/* ======================================================================== */

/* Queries ByDate/ByStatus of cust and checks the orders returned, in order
 * (want: order names, NULL-terminated). Also pages through the same query
 * two items at a time and checks the pages concatenate to the same list. */
static void expect_query(fixture *f, uint32_t lsi, const char *cust, const store_sk_cond *sk,
                         int forward, const char *const *want)
{
    attr_value pk = val(ATTR_S, cust);
    store_page pg;
    assert_ok(store_query_lsi(f->st, &orders, lsi, &pk, sk, 0, forward, NULL, &pg, f->err,
                              sizeof(f->err)),
              f);
    size_t n = 0;
    while (want[n] != NULL) {
        n++;
    }
    if (pg.n != n) {
        fail_msg("query returned %zu items, expected %zu", pg.n, n);
    }
    for (size_t i = 0; i < n; i++) {
        assert_attr(pg.items[i], "Order", ATTR_S, want[i]);
    }
    assert_null(pg.last_key);
    store_page_fini(&pg);
    size_t got = 0;
    item *start = NULL;
    do {
        assert_ok(store_query_lsi(f->st, &orders, lsi, &pk, sk, 2, forward, start, &pg, f->err,
                                  sizeof(f->err)),
                  f);
        for (size_t i = 0; i < pg.n; i++) {
            assert_true(got < n);
            assert_attr(pg.items[i], "Order", ATTR_S, want[got++]);
        }
        item_free(start);
        start = pg.last_key;
        pg.last_key = NULL;
        store_page_fini(&pg);
    } while (start != NULL);
    assert_int_equal(got, n);
    item_value_fini(&pk);
}

static void test_query(void **state)
{
    fixture *f = *state;
    /* Dates with duplicates (o2, o5 and o7 on 7; o3 and o8 on 1.5). */
    put(f, &orders, order("c", "o1", "-10", "paid"));
    put(f, &orders, order("c", "o2", "7", "new"));
    put(f, &orders, order("c", "o3", "1.5", "paid"));
    put(f, &orders, order("c", "o4", "100", "pending"));
    put(f, &orders, order("c", "o5", "7.0", NULL));
    put(f, &orders, order("c", "o6", NULL, "packed"));
    put(f, &orders, order("c", "o7", "7", "paid"));
    put(f, &orders, order("c", "o8", "1.5", NULL));
    put(f, &orders, order("d", "o1", "7", "paid")); /* another customer */
    attr_value seven = val(ATTR_N, "7"), one5 = val(ATTR_N, "1.5"), pa = val(ATTR_S, "pa"),
               paid = val(ATTR_S, "paid"), zero = val(ATTR_N, "0");
    const char *all[] = {"o1", "o3", "o8", "o2", "o5", "o7", "o4", NULL};
    const char *rev[] = {"o4", "o7", "o5", "o2", "o8", "o3", "o1", NULL};
    expect_query(f, 0, "c", NULL, 1, all);
    expect_query(f, 0, "c", NULL, 0, rev);
    store_sk_cond c = {STORE_SK_EQ, &seven, NULL};
    expect_query(f, 0, "c", &c, 1, (const char *[]){"o2", "o5", "o7", NULL});
    expect_query(f, 0, "c", &c, 0, (const char *[]){"o7", "o5", "o2", NULL});
    c = (store_sk_cond){STORE_SK_LT, &seven, NULL};
    expect_query(f, 0, "c", &c, 1, (const char *[]){"o1", "o3", "o8", NULL});
    c = (store_sk_cond){STORE_SK_LE, &seven, NULL};
    expect_query(f, 0, "c", &c, 1, (const char *[]){"o1", "o3", "o8", "o2", "o5", "o7", NULL});
    c = (store_sk_cond){STORE_SK_GT, &one5, NULL};
    expect_query(f, 0, "c", &c, 1, (const char *[]){"o2", "o5", "o7", "o4", NULL});
    c = (store_sk_cond){STORE_SK_GE, &one5, NULL};
    expect_query(f, 0, "c", &c, 0, (const char *[]){"o4", "o7", "o5", "o2", "o8", "o3", NULL});
    c = (store_sk_cond){STORE_SK_BETWEEN, &zero, &seven};
    expect_query(f, 0, "c", &c, 1, (const char *[]){"o3", "o8", "o2", "o5", "o7", NULL});
    c = (store_sk_cond){STORE_SK_BEGINS_WITH, &pa, NULL};
    expect_query(f, 1, "c", &c, 1, (const char *[]){"o6", "o1", "o3", "o7", NULL});
    c = (store_sk_cond){STORE_SK_EQ, &paid, NULL};
    expect_query(f, 1, "c", &c, 1, (const char *[]){"o1", "o3", "o7", NULL});
    expect_query(f, 1, "nobody", NULL, 1, (const char *[]){NULL});

    /* Refused: no such LSI, a value of the wrong type, begins_with on N, a
     * start key without the LSI key or of another partition key. */
    attr_value pk = val(ATTR_S, "c");
    store_page pg;
    assert_code(
        store_query_lsi(f->st, &orders, 2, &pk, NULL, 0, 1, NULL, &pg, f->err, sizeof(f->err)),
        LAPSE_EINVAL, f);
    c = (store_sk_cond){STORE_SK_EQ, &paid, NULL};
    assert_code(
        store_query_lsi(f->st, &orders, 0, &pk, &c, 0, 1, NULL, &pg, f->err, sizeof(f->err)),
        LAPSE_EINVAL, f);
    c = (store_sk_cond){STORE_SK_BEGINS_WITH, &seven, NULL};
    assert_code(
        store_query_lsi(f->st, &orders, 0, &pk, &c, 0, 1, NULL, &pg, f->err, sizeof(f->err)),
        LAPSE_EINVAL, f);
    item *bad = okey("c", "o1");
    assert_code(
        store_query_lsi(f->st, &orders, 0, &pk, NULL, 0, 1, bad, &pg, f->err, sizeof(f->err)),
        LAPSE_EINVAL, f);
    item_free(bad);
    bad = order("d", "o1", "7", NULL);
    assert_code(
        store_query_lsi(f->st, &orders, 0, &pk, NULL, 0, 1, bad, &pg, f->err, sizeof(f->err)),
        LAPSE_EINVAL, f);
    item_free(bad);
    item_value_fini(&pk);
    item_value_fini(&seven);
    item_value_fini(&one5);
    item_value_fini(&pa);
    item_value_fini(&paid);
    item_value_fini(&zero);
}

/* ======================================================================== */
/* Drops and old stores                                                     */
/* ======================================================================== */

static void test_drop_table(void **state)
{
    fixture *f = *state;
    table_schema other = orders;
    other.id = 30;
    for (int i = 0; i < 10; i++) {
        char ord[8];
        sprintf(ord, "o%d", i);
        put(f, &orders, order("p", ord, "1", "s"));
        put(f, &other, order("p", ord, "1", "s"));
    }
    assert_int_equal(cf_count(f->st, CF_LSI, orders.id), 20);
    assert_ok(store_drop_table(f->st, orders.id, f->err, sizeof(f->err)), f);
    assert_int_equal(cf_count(f->st, CF_LSI, orders.id), 0);
    assert_int_equal(cf_count(f->st, CF_LSI, other.id), 20);
}

static void test_old_store_gains_families(void **state)
{
    fixture *f = *state;
    store_close(f->st);
    f->st = NULL;
    /* Recreate the directory as a store of before this change. */
    char old[600];
    snprintf(old, sizeof(old), "%s-old", f->dir);
    const char *const before[] = {"items", "meta", "expiry"};
    db *d = NULL;
    assert_ok(db_open(&d, old, NULL, before, 3, f->err, sizeof(f->err)), f);
    db_close(d);
    assert_ok(store_open(&f->st, old, f->err, sizeof(f->err)), f);
    item *m[1] = {order("z", "o1", "3", "ok")};
    put(f, &orders, item_dup(m[0]));
    assert_lsi(f, &orders, m, 1);
    store_close(f->st);
    assert_ok(store_open(&f->st, old, f->err, sizeof(f->err)), f);
    assert_lsi(f, &orders, m, 1);
    item_free(m[0]);
    store_close(f->st);
    f->st = NULL;
    testdir_remove(old);
    assert_ok(store_open(&f->st, f->dir, f->err, sizeof(f->err)), f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_layout_and_sparse, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_lsi_follows_every_write, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_ttl_sweep_deletes_entries, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_failed_write_changes_nothing, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_query, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_drop_table, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_old_store_gains_families, rsetup, rteardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
