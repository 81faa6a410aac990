/*
 * expiry_test.c: the TTL expiry index against a real RocksDB in a scratch
 * directory: the index kept exact through random put/update/delete/batch
 * sequences (a property test against a model), the sweep's boundary, budget
 * and conditional delete (also racing updates on another thread), backfill
 * with a simulated crash and a config change, dropping a table's index,
 * undeletable items, the backlog and the write hook, and the naive scan of
 * --ttl-naive-scan.
 *
 * White-box where it must be: the test reads the expiry column family and
 * writes corrupt values through the store's db (store_int.h), and builds the
 * expected index keys by hand from the documented layout
 * (docs/storage-format.md), not with the code under test.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "../common/clock.h"
#include "expiry.h"
#include "itemkey.h"
#include "store_int.h"
#include "store_test_util.h"
#include "ttl.h"

static table_schema sess; /* Pk S, Sk N, 4 partitions, TTL on "Exp" */
static table_schema solo; /* Pk S, 2 partitions, TTL on "Exp" */

static int64_t base_s; /* real now, seconds, at setup: TTL values are relative to it */

static table_schema ttl_table(uint32_t id, const char *name, int with_sk, uint32_t parts)
{
    table_schema t = mk_schema(id, name, "Pk", ATTR_S, with_sk ? "Sk" : NULL, ATTR_N, parts);
    t.ttl.enabled = 1;
    snprintf(t.ttl.attribute, sizeof(t.ttl.attribute), "Exp");
    t.ttl.config_version = 1;
    return t;
}

static int esetup(void **state)
{
    sess = ttl_table(10, "Sessions", 1, 4);
    solo = ttl_table(11, "Solo", 0, 2);
    base_s = clock_wall_now().ms / 1000;
    return setup(state);
}

static clock_wall at_ms(int64_t ms)
{
    return (clock_wall){ms};
}

/* ======================================================================== */
/* Items and index keys                                                     */
/* ======================================================================== */

enum ttl_kind { K_NUM, K_FRAC, K_STR, K_MISSING, K_KINDS };

/* A Sessions item; Exp is v as N (K_NUM), v.75 (K_FRAC), v as S, or absent. */
static item *sitem(const table_schema *t, const char *pk, int sk, int kind, int64_t v)
{
    char skb[32], vb[48];
    snprintf(skb, sizeof(skb), "%d", sk);
    snprintf(vb, sizeof(vb), kind == K_FRAC ? "%lld.75" : "%lld", (long long)v);
    item *it =
        t->sk.name[0] ? itm(2, "Pk", ATTR_S, pk, "Sk", ATTR_N, skb) : itm(1, "Pk", ATTR_S, pk);
    if (kind != K_MISSING) {
        attr_value x = val(kind == K_STR ? ATTR_S : ATTR_N, vb);
        assert_int_equal(item_set(it, "Exp", &x), 0);
    }
    return it;
}

static item *skey(const table_schema *t, const char *pk, int sk)
{
    return sitem(t, pk, sk, K_MISSING, 0);
}

typedef struct keylist {
    buf *k;
    size_t n, cap;
} keylist;

static void kl_push(keylist *l, const uint8_t *p, size_t n)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->k = realloc(l->k, l->cap * sizeof(*l->k));
        assert_non_null(l->k);
    }
    buf_init(&l->k[l->n]);
    assert_int_equal(buf_append(&l->k[l->n], p, n), 0);
    l->n++;
}

static void kl_fini(keylist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        buf_fini(&l->k[i]);
    }
    free(l->k);
    memset(l, 0, sizeof(*l));
}

static int buf_cmp(const void *a, const void *b)
{
    const buf *x = a, *y = b;
    return itemkey_cmp(x->data, x->len, y->data, y->len);
}

/* The expected entry of it under t at now, built by hand from the layout:
 * table u32be | part u32be | due second u64be | enc(pk) enc(sk). */
static void expect_entry(const table_schema *t, const item *it, clock_wall now, keylist *l)
{
    int64_t due_ms = 0;
    if (ttl_eval(&t->ttl, it, now, &due_ms) != TTL_ELIGIBLE) {
        return;
    }
    buf k, e;
    buf_init(&k);
    buf_init(&e);
    uint32_t part = 0;
    assert_int_equal(itemkey_of_item(&k, t, it, &part), 0);
    assert_int_equal(buf_append(&e, k.data, 8), 0);
    assert_int_equal(buf_append_u64be(&e, (uint64_t)(due_ms / 1000)), 0);
    assert_int_equal(buf_append(&e, k.data + 8, k.len - 8), 0);
    kl_push(l, e.data, e.len);
    buf_fini(&k);
    buf_fini(&e);
}

/* Every entry of table_id in the expiry column family, in key order. */
static void index_of(fixture *f, uint32_t table_id, keylist *l)
{
    uint8_t lo[4], hi[9];
    size_t hlen = 0;
    itemkey_table_range(table_id, lo, hi, &hlen);
    db_iter *it = NULL;
    assert_int_equal(db_iter_new(&it, f->st->db, CF_EXPIRY, lo, 4, hi, hlen), 0);
    for (db_iter_seek_first(it); db_iter_valid(it); db_iter_next(it)) {
        size_t n = 0;
        const uint8_t *k = db_iter_key(it, &n);
        kl_push(l, k, n);
    }
    assert_ok(db_iter_status(it, f->err, sizeof(f->err)), f);
    db_iter_free(it);
}

static void dump(const char *what, const keylist *l)
{
    fprintf(stderr, "%s (%zu):\n", what, l->n);
    for (size_t i = 0; i < l->n && i < 20; i++) {
        fprintf(stderr, "  ");
        for (size_t j = 0; j < l->k[i].len; j++) {
            fprintf(stderr, "%02x", l->k[i].data[j]);
        }
        fprintf(stderr, "\n");
    }
}

/* Fails unless the index of t is exactly want (sorted here). */
static void assert_index(fixture *f, const table_schema *t, keylist *want)
{
    keylist got = {0};
    index_of(f, t->id, &got);
    qsort(want->k, want->n, sizeof(*want->k), buf_cmp);
    int same = got.n == want->n;
    for (size_t i = 0; same && i < got.n; i++) {
        same = buf_cmp(&got.k[i], &want->k[i]) == 0;
    }
    if (!same) {
        dump("index", &got);
        dump("expected", want);
        kl_fini(&got);
        fail_msg("the expiry index of table %u differs from the model", (unsigned)t->id);
    }
    kl_fini(&got);
}

/* The expected index of every item stored in t now (via scans). */
static void expect_stored(fixture *f, const table_schema *t, clock_wall now, keylist *l)
{
    for (uint32_t p = 0; p < t->partitions; p++) {
        store_page pg;
        assert_ok(store_scan(f->st, t, p, 0, NULL, &pg, f->err, sizeof(f->err)), f);
        for (size_t i = 0; i < pg.n; i++) {
            expect_entry(t, pg.items[i], now, l);
        }
        store_page_fini(&pg);
    }
}

static uint64_t count_items(fixture *f, const table_schema *t)
{
    uint64_t total = 0;
    for (uint32_t p = 0; p < t->partitions; p++) {
        uint64_t n = 0;
        assert_ok(store_count(f->st, t->id, p, &n, f->err, sizeof(f->err)), f);
        total += n;
    }
    return total;
}

static int exists(fixture *f, const table_schema *t, const char *pk, int sk)
{
    item *got = get(f, t, skey(t, pk, sk));
    item_free(got);
    return got != NULL;
}

/* ======================================================================== */
/* Key layout and write path                                                */
/* ======================================================================== */

static void test_entry_layout(void **state)
{
    fixture *f = *state;
    int64_t v = base_s + 1000;
    put(f, &sess, sitem(&sess, "alice", 7, K_FRAC, v)); /* 7.75 truncates to 7 */
    keylist got = {0};
    index_of(f, sess.id, &got);
    assert_int_equal(got.n, 1);
    const uint8_t *k = got.k[0].data;
    buf ik;
    buf_init(&ik);
    uint32_t part = 0;
    item *it = skey(&sess, "alice", 7);
    assert_int_equal(itemkey_of_item(&ik, &sess, it, &part), 0);
    assert_int_equal(got.k[0].len, ik.len + 8);
    assert_int_equal(buf_get_u32be(k), sess.id);
    assert_int_equal(buf_get_u32be(k + 4), part);
    assert_int_equal(buf_get_u64be(k + 8), (uint64_t)v);
    assert_memory_equal(k + 16, ik.data + 8, ik.len - 8);
    item_free(it);
    buf_fini(&ik);
    kl_fini(&got);

    /* A table with TTL off writes no entries. */
    table_schema off = sess;
    off.id = 12;
    off.ttl.enabled = 0;
    put(f, &off, sitem(&off, "bob", 1, K_NUM, v));
    index_of(f, off.id, &got);
    assert_int_equal(got.n, 0);
    kl_fini(&got);
}

/* The model: the current item of each key, or NULL. */
#define NPK 5
#define NSK 8
#define NKEYS (NPK * NSK)

typedef struct model {
    item *cur[NKEYS];
} model;

static const char *pk_name(int i)
{
    static const char *const names[NPK] = {"a", "bb", "c\x01", "dd", "e"};
    return names[i];
}

/* A random TTL value of a random kind: eligible past or future, too old, out
 * of range, a string, a fraction or missing. */
static item *random_item(const table_schema *t, int key, unsigned *seed, int *kind_out)
{
    int kind = rand_r(seed) % K_KINDS;
    int64_t v;
    switch (rand_r(seed) % 5) {
    case 0:
        v = base_s - 1 - rand_r(seed) % 100000; /* eligible, due */
        break;
    case 1:
        v = base_s + rand_r(seed) % 100000; /* eligible, later */
        break;
    case 2:
        v = base_s - 20 * TTL_SECONDS_PER_YEAR; /* too old */
        break;
    case 3:
        v = 4000000000000000000LL; /* out of range */
        break;
    default:
        v = base_s + rand_r(seed) % 4; /* few distinct values: unchanged dues */
        break;
    }
    *kind_out = kind;
    item *it = sitem(t, pk_name(key / NSK), key % NSK, kind, v);
    if (rand_r(seed) % 3 == 0) {
        attr_value x = val(ATTR_S, "payload");
        assert_int_equal(item_set(it, "Other", &x), 0);
    }
    return it;
}

static void model_set(model *m, int key, const item *it)
{
    item_free(m->cur[key]);
    m->cur[key] = it != NULL ? item_dup(it) : NULL;
}

static void test_index_property(void **state)
{
    fixture *f = *state;
    model m;
    memset(&m, 0, sizeof(m));
    unsigned seed = 20240611;
    char sk[16];
    for (int op = 0; op < 3000; op++) {
        int key = rand_r(&seed) % NKEYS, kind;
        int r = rand_r(&seed) % 10;
        if (r < 3) { /* put */
            item *it = random_item(&sess, key, &seed, &kind);
            put(f, &sess, item_dup(it));
            model_set(&m, key, it);
            item_free(it);
        } else if (r < 4) { /* a put whose condition fails changes nothing */
            item *it = random_item(&sess, key, &seed, &kind);
            store_cond c = {STORE_COND_EXISTS, "NoSuchAttr", NULL};
            assert_code(store_put(f->st, &sess, it, &c, NULL, f->err, sizeof(f->err)),
                        LAPSE_ECONDITION, f);
            item_free(it);
        } else if (r < 6) { /* update: set, extend, shorten or remove Exp */
            item *src = random_item(&sess, key, &seed, &kind);
            const attr_value *e = item_get(src, "Exp");
            store_update_action a[2] = {{"Exp", e}, {"Touched", NULL}};
            attr_value touched = val(ATTR_N, "1");
            a[1].value = &touched;
            item *k = skey(&sess, pk_name(key / NSK), key % NSK), *nw = NULL;
            assert_ok(store_update(f->st, &sess, k, a, 1 + rand_r(&seed) % 2, NULL, &nw, f->err,
                                   sizeof(f->err)),
                      f);
            model_set(&m, key, nw);
            item_free(nw);
            item_free(k);
            item_free(src);
            item_value_fini(&touched);
        } else if (r < 8) { /* delete, sometimes of an absent item */
            item *k = skey(&sess, pk_name(key / NSK), key % NSK);
            assert_ok(store_delete(f->st, &sess, k, NULL, NULL, f->err, sizeof(f->err)), f);
            model_set(&m, key, NULL);
            item_free(k);
        } else { /* a batch with repeated keys: the last write to a key wins */
            store_write w[12];
            item *owned[12];
            int n = 1 + rand_r(&seed) % 12;
            for (int i = 0; i < n; i++) {
                int bk = rand_r(&seed) % 10; /* a narrow range: repeats */
                bk = (key + bk) % NKEYS;
                if (rand_r(&seed) % 3 == 0) {
                    owned[i] = skey(&sess, pk_name(bk / NSK), bk % NSK);
                    w[i] = (store_write){NULL, owned[i]};
                } else {
                    owned[i] = random_item(&sess, bk, &seed, &kind);
                    w[i] = (store_write){owned[i], NULL};
                }
            }
            assert_ok(store_batch_write(f->st, &sess, w, (size_t)n, f->err, sizeof(f->err)), f);
            for (int i = 0; i < n; i++) {
                const item *it = w[i].put != NULL ? w[i].put : w[i].delete_key;
                const attr_value *pk = item_get(it, "Pk");
                const attr_value *s = item_get(it, "Sk");
                int p = 0;
                while (strcmp(pk_name(p), pk->u.bytes.ptr) != 0) {
                    p++;
                }
                int bk = p * NSK + atoi(s->u.bytes.ptr);
                model_set(&m, bk, w[i].put);
            }
            for (int i = 0; i < n; i++) {
                item_free(owned[i]);
            }
        }
        (void)sk;
        if (op % 500 == 499 || op == 2999) {
            keylist want = {0};
            clock_wall now = clock_wall_now();
            for (int i = 0; i < NKEYS; i++) {
                if (m.cur[i] != NULL) {
                    expect_entry(&sess, m.cur[i], now, &want);
                }
            }
            assert_index(f, &sess, &want);
            kl_fini(&want);
        }
    }
    /* The model and the store agree on the items too. */
    int stored = 0;
    for (int i = 0; i < NKEYS; i++) {
        item *got = get(f, &sess, skey(&sess, pk_name(i / NSK), i % NSK));
        assert_true((got == NULL) == (m.cur[i] == NULL));
        assert_true(got == NULL || item_eq(got, m.cur[i]));
        stored += got != NULL;
        item_free(got);
        item_free(m.cur[i]);
    }
    assert_true(stored > 0);
}

/* ======================================================================== */
/* Sweep                                                                    */
/* ======================================================================== */

static void sweep(fixture *f, const table_schema *t, uint32_t part, int64_t now_ms, size_t max,
                  expiry_sweep_result *res)
{
    assert_ok(expiry_sweep(f->st, t, part, at_ms(now_ms), max, res, f->err, sizeof(f->err)), f);
}

/* Sweeps every partition of t until nothing is due; returns items deleted. */
static size_t sweep_all(fixture *f, const table_schema *t, int64_t now_ms, size_t max)
{
    size_t n = 0;
    for (uint32_t p = 0; p < t->partitions; p++) {
        expiry_sweep_result res = {0};
        do {
            sweep(f, t, p, now_ms, max, &res);
            n += res.deleted;
        } while (res.more);
    }
    return n;
}

static void test_sweep_boundary(void **state)
{
    fixture *f = *state;
    int64_t T = base_s + 1000; /* later than real now: the write path indexes it */
    /* One partition key, so everything lands in one partition. */
    put(f, &sess, sitem(&sess, "p", 1, K_NUM, T));
    put(f, &sess, sitem(&sess, "p", 2, K_FRAC, T)); /* T.75: due at T.000 too */
    put(f, &sess, sitem(&sess, "p", 3, K_NUM, T + 1));
    put(f, &sess, sitem(&sess, "p", 4, K_NUM, T + 5));
    put(f, &sess, sitem(&sess, "p", 5, K_STR, T - 10));
    put(f, &sess, sitem(&sess, "p", 6, K_MISSING, 0));
    put(f, &sess, sitem(&sess, "p", 7, K_NUM, base_s - 6 * TTL_SECONDS_PER_YEAR));
    uint32_t part = 0;
    attr_value pk = val(ATTR_S, "p");
    assert_int_equal(hash_partition(&pk, sess.partitions, &part), 0);
    item_value_fini(&pk);

    int64_t due[STORE_BATCH_MAX];
    expiry_sweep_result res = {.due_ms = due};
    int64_t next = 0;
    assert_ok(expiry_next_due(f->st, sess.id, part, &next, f->err, sizeof(f->err)), f);
    assert_int_equal(next, T * 1000);

    /* Due at T.000: not expired at now = T.000. */
    sweep(f, &sess, part, T * 1000, 100, &res);
    assert_int_equal(res.deleted, 0);
    assert_int_equal(res.stale, 0);
    assert_int_equal(res.more, 0);
    assert_int_equal(res.next_due_ms, T * 1000);
    assert_true(exists(f, &sess, "p", 1));

    /* Expired at T.001: both items due at T go, in one batch. */
    sweep(f, &sess, part, T * 1000 + 1, 100, &res);
    assert_int_equal(res.deleted, 2);
    assert_int_equal(res.stale, 0);
    assert_int_equal(due[0], T * 1000);
    assert_int_equal(due[1], T * 1000);
    assert_int_equal(res.next_due_ms, (T + 1) * 1000);
    assert_true(res.commit_ms > 0);
    assert_false(exists(f, &sess, "p", 1));
    assert_false(exists(f, &sess, "p", 2));
    assert_true(exists(f, &sess, "p", 3));

    /* Other partitions are untouched by this one's sweep; far in the future
     * only the eligible items are gone. */
    sweep(f, &sess, part, (T + 100) * 1000, 100, &res);
    assert_int_equal(res.deleted, 2);
    assert_int_equal(res.next_due_ms, EXPIRY_NONE);
    assert_false(exists(f, &sess, "p", 3));
    assert_false(exists(f, &sess, "p", 4));
    assert_true(exists(f, &sess, "p", 5));
    assert_true(exists(f, &sess, "p", 6));
    assert_true(exists(f, &sess, "p", 7));
    assert_ok(expiry_next_due(f->st, sess.id, part, &next, f->err, sizeof(f->err)), f);
    assert_int_equal(next, EXPIRY_NONE);

    /* Bad arguments are refused. */
    assert_code(expiry_sweep(f->st, &sess, part, at_ms(0), 0, &res, f->err, sizeof(f->err)),
                LAPSE_EINVAL, f);
    assert_code(expiry_sweep(f->st, &sess, part, at_ms(0), STORE_BATCH_MAX + 1, &res, f->err,
                             sizeof(f->err)),
                LAPSE_EINVAL, f);
}

static void test_sweep_budget(void **state)
{
    fixture *f = *state;
    int64_t T = base_s + 1000;
    for (int i = 0; i < 25; i++) {
        put(f, &solo, sitem(&solo, "same", 0, K_NUM, T + i % 2)); /* overwritten: 1 item */
    }
    char pk[16];
    uint32_t part = 0;
    for (int i = 0; i < 25; i++) {
        snprintf(pk, sizeof(pk), "k%d", i);
        put(f, &solo, sitem(&solo, pk, 0, K_NUM, T));
    }
    put(f, &solo, sitem(&solo, "later", 0, K_NUM, T + 50));
    /* Sweep whichever partition holds most; check totals over both. */
    size_t total = 0;
    int rounds = 0;
    for (part = 0; part < solo.partitions; part++) {
        expiry_sweep_result res = {0};
        do {
            sweep(f, &solo, part, (T + 10) * 1000, 4, &res);
            assert_true(res.deleted <= 4);
            if (res.more) {
                assert_int_equal(res.deleted, 4);
                assert_int_equal(res.next_due_ms, T * 1000);
            }
            total += res.deleted;
            rounds++;
        } while (res.more);
        assert_true(res.next_due_ms == EXPIRY_NONE || res.next_due_ms == (T + 50) * 1000);
    }
    assert_int_equal(total, 26); /* 25 + "same", which ended due at T */
    assert_true(rounds >= 26 / 4 + 1);
    assert_int_equal(count_items(f, &solo), 1);
}

static void test_sweep_honours_updates(void **state)
{
    fixture *f = *state;
    int64_t T = base_s + 1000;
    for (int i = 0; i < 6; i++) {
        put(f, &sess, sitem(&sess, "u", i, K_NUM, T));
    }
    char ext[32];
    snprintf(ext, sizeof(ext), "%lld", (long long)(T + 3600));
    attr_value later = val(ATTR_N, ext), str = val(ATTR_S, "soon"), old = val(ATTR_N, "1000");
    store_update_action extend = {"Exp", &later}, remove = {"Exp", NULL}, to_str = {"Exp", &str},
                        too_old = {"Exp", &old};
    item *k;
    /* After the items fell due, before the sweep: extend, remove, retype,
     * make too old, replace with a put, delete. */
    k = skey(&sess, "u", 0);
    assert_ok(store_update(f->st, &sess, k, &extend, 1, NULL, NULL, f->err, sizeof(f->err)), f);
    item_free(k);
    k = skey(&sess, "u", 1);
    assert_ok(store_update(f->st, &sess, k, &remove, 1, NULL, NULL, f->err, sizeof(f->err)), f);
    item_free(k);
    k = skey(&sess, "u", 2);
    assert_ok(store_update(f->st, &sess, k, &to_str, 1, NULL, NULL, f->err, sizeof(f->err)), f);
    item_free(k);
    k = skey(&sess, "u", 3);
    assert_ok(store_update(f->st, &sess, k, &too_old, 1, NULL, NULL, f->err, sizeof(f->err)), f);
    item_free(k);
    put(f, &sess, sitem(&sess, "u", 4, K_MISSING, 0));
    k = skey(&sess, "u", 5);
    assert_ok(store_delete(f->st, &sess, k, NULL, NULL, f->err, sizeof(f->err)), f);
    item_free(k);

    assert_int_equal(sweep_all(f, &sess, T * 1000 + 1, 100), 0);
    for (int i = 0; i < 5; i++) {
        assert_true(exists(f, &sess, "u", i));
    }
    /* The extended one goes at its new instant. */
    assert_int_equal(sweep_all(f, &sess, (T + 3600) * 1000 + 1, 100), 1);
    assert_false(exists(f, &sess, "u", 0));

    /* The sweep's guard: an entry that does not match its item (written
     * behind the store's back) is removed as stale, the item kept. */
    put(f, &sess, sitem(&sess, "g", 1, K_NUM, T + 7200));
    buf ik, ek;
    buf_init(&ik);
    buf_init(&ek);
    uint32_t part = 0;
    k = skey(&sess, "g", 1);
    assert_int_equal(itemkey_of_item(&ik, &sess, k, &part), 0);
    item_free(k);
    assert_int_equal(itemkey_expiry_of(&ek, ik.data, ik.len, T), 0);
    db_batch *b = db_batch_new();
    db_batch_put(b, f->st->db, CF_EXPIRY, ek.data, ek.len, "", 0);
    k = skey(&sess, "ghost", 1); /* an entry whose item does not exist */
    uint32_t gpart = 0;
    assert_int_equal(itemkey_of_item(&ik, &sess, k, &gpart), 0);
    item_free(k);
    assert_int_equal(itemkey_expiry_of(&ek, ik.data, ik.len, T), 0);
    db_batch_put(b, f->st->db, CF_EXPIRY, ek.data, ek.len, "", 0);
    assert_ok(db_write(f->st->db, b, 0, f->err, sizeof(f->err)), f);
    db_batch_free(b);
    reopen(f); /* entries written behind the store's back: drop its sweep cursors */
    expiry_sweep_result res = {0};
    sweep(f, &sess, part, T * 1000 + 1, 100, &res);
    assert_int_equal(res.deleted, 0);
    assert_int_equal(res.stale, part == gpart ? 2 : 1);
    if (part != gpart) {
        sweep(f, &sess, gpart, T * 1000 + 1, 100, &res);
        assert_int_equal(res.stale, 1);
    }
    assert_true(exists(f, &sess, "g", 1));
    buf_fini(&ik);
    buf_fini(&ek);
    item_value_fini(&later);
    item_value_fini(&str);
    item_value_fini(&old);
}

/* The race: an updater puts each key expired, then extends it (conditional
 * on the item still existing) while sweeps run. Every put item is either
 * deleted by a sweep (then the extension fails) or extended (then no sweep
 * may delete it). So deletions == failed extensions exactly, and every
 * extended item survives. */
#define RACE_KEYS 200
#define RACE_ROUNDS 15

typedef struct racer {
    fixture *f;
    int64_t T;
    size_t failed_ext;
    int errors;
    int extended[RACE_KEYS]; /* the last round's extension succeeded */
    atomic_int done;
} racer;

static void *race_updates(void *arg)
{
    racer *r = arg;
    char ext[32];
    snprintf(ext, sizeof(ext), "%lld", (long long)(r->T + 100000));
    attr_value later = val(ATTR_N, ext);
    char err[256];
    for (int round = 0; round < RACE_ROUNDS; round++) {
        /* All puts first, then all extensions: a wide window for sweeps. */
        for (int i = 0; i < RACE_KEYS; i++) {
            item *it = sitem(&sess, "race", i, K_NUM, r->T);
            if (store_put(r->f->st, &sess, it, NULL, NULL, err, sizeof(err)) != 0) {
                r->errors++;
            }
            item_free(it);
        }
        for (int i = 0; i < RACE_KEYS; i++) {
            /* Half the time remove the TTL rather than extend it. */
            store_update_action a = {"Exp", (i + round) % 2 ? &later : NULL};
            store_cond c = {STORE_COND_EXISTS, "Pk", NULL};
            item *k = skey(&sess, "race", i);
            int rv = store_update(r->f->st, &sess, k, &a, 1, &c, NULL, err, sizeof(err));
            item_free(k);
            if (rv == LAPSE_ECONDITION) {
                r->failed_ext++;
                r->extended[i] = 0;
            } else if (rv == 0) {
                r->extended[i] = 1;
            } else {
                r->errors++;
            }
        }
    }
    item_value_fini(&later);
    atomic_store(&r->done, 1);
    return NULL;
}

static void test_sweep_races_updates(void **state)
{
    fixture *f = *state;
    racer *r = calloc(1, sizeof(*r));
    r->f = f;
    r->T = base_s + 1000;
    uint32_t part = 0;
    attr_value pk = val(ATTR_S, "race");
    assert_int_equal(hash_partition(&pk, sess.partitions, &part), 0);
    item_value_fini(&pk);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, race_updates, r), 0);
    size_t deleted = 0;
    int64_t due[8];
    int sweeps = 0;
    while (!atomic_load(&r->done)) {
        expiry_sweep_result res = {.due_ms = due};
        sweep(f, &sess, part, r->T * 1000 + 1, 8, &res);
        for (size_t i = 0; i < res.deleted; i++) {
            assert_int_equal(due[i], r->T * 1000);
        }
        deleted += res.deleted;
        sweeps++;
    }
    pthread_join(th, NULL);
    assert_int_equal(r->errors, 0);
    /* One more sweep: whatever the last puts left expired and unextended. */
    deleted += sweep_all(f, &sess, r->T * 1000 + 1, 100);
    assert_int_equal(deleted, r->failed_ext);
    assert_true(deleted > 0); /* the race happened */
    for (int i = 0; i < RACE_KEYS; i++) {
        if (exists(f, &sess, "race", i) != r->extended[i]) {
            fail_msg("key %d: extended %d but exists %d", i, r->extended[i],
                     exists(f, &sess, "race", i));
        }
    }
    fprintf(stderr, "race: %d sweeps, %zu deleted, %zu extensions failed\n", sweeps, deleted,
            r->failed_ext);
    free(r);
}

/* ======================================================================== */
/* Backlog, hook, undeletable, drop                                         */
/* ======================================================================== */

static void test_backlog(void **state)
{
    fixture *f = *state;
    int64_t T = base_s + 1000;
    char pk[16];
    for (int i = 0; i < 40; i++) {
        snprintf(pk, sizeof(pk), "b%d", i);
        put(f, &solo, sitem(&solo, pk, 0, K_NUM, i < 30 ? T + i : T + 1000 + i));
    }
    uint64_t total = 0, n = 0;
    int64_t oldest = EXPIRY_NONE, first = EXPIRY_NONE;
    for (uint32_t p = 0; p < solo.partitions; p++) {
        assert_ok(expiry_backlog(f->st, solo.id, p, at_ms((T + 500) * 1000), 1000, &n, &oldest,
                                 f->err, sizeof(f->err)),
                  f);
        total += n;
        if (oldest < first) {
            first = oldest;
        }
    }
    assert_int_equal(total, 30);
    assert_int_equal(first, T * 1000);
    /* Capped, and empty before anything is due. */
    assert_ok(expiry_backlog(f->st, solo.id, 0, at_ms((T + 500) * 1000), 3, &n, &oldest, f->err,
                             sizeof(f->err)),
              f);
    assert_true(n <= 3);
    assert_ok(expiry_backlog(f->st, solo.id, 0, at_ms(T * 1000), 1000, &n, &oldest, f->err,
                             sizeof(f->err)),
              f);
    assert_int_equal(n, 0);
    assert_int_equal(oldest, EXPIRY_NONE);
    assert_int_equal(sweep_all(f, &solo, (T + 500) * 1000, 7), 30);
    for (uint32_t p = 0; p < solo.partitions; p++) {
        assert_ok(expiry_backlog(f->st, solo.id, p, at_ms((T + 500) * 1000), 1000, &n, &oldest,
                                 f->err, sizeof(f->err)),
                  f);
        assert_int_equal(n, 0);
    }
}

typedef struct hook_log {
    int calls;
    int64_t last_due;
    uint32_t table, part;
} hook_log;

static void on_due(void *arg, uint32_t table_id, uint32_t part, int64_t due_ms)
{
    hook_log *h = arg;
    h->calls++;
    h->last_due = due_ms;
    h->table = table_id;
    h->part = part;
}

static void test_hook(void **state)
{
    fixture *f = *state;
    hook_log h = {0};
    store_set_expiry_hook(f->st, on_due, &h);
    int64_t T = base_s + 1000;
    put(f, &sess, sitem(&sess, "h", 1, K_NUM, T));
    assert_int_equal(h.calls, 1);
    assert_int_equal(h.last_due, T * 1000);
    assert_int_equal(h.table, sess.id);
    put(f, &sess, sitem(&sess, "h", 1, K_NUM, T)); /* same entry: nothing new */
    put(f, &sess, sitem(&sess, "h", 2, K_STR, T));
    assert_int_equal(h.calls, 1);
    store_write w[3];
    item *a = sitem(&sess, "h", 3, K_NUM, T + 9), *b = sitem(&sess, "h", 4, K_NUM, T + 4),
         *c = sitem(&sess, "h", 5, K_NUM, T + 6);
    w[0] = (store_write){a, NULL};
    w[1] = (store_write){b, NULL};
    w[2] = (store_write){c, NULL};
    assert_ok(store_batch_write(f->st, &sess, w, 3, f->err, sizeof(f->err)), f);
    assert_int_equal(h.calls, 2); /* one partition key: one group */
    assert_int_equal(h.last_due, (T + 4) * 1000);
    store_set_expiry_hook(f->st, NULL, NULL);
    put(f, &sess, sitem(&sess, "h", 6, K_NUM, T));
    assert_int_equal(h.calls, 2);
    item_free(a);
    item_free(b);
    item_free(c);
}

/* Overwrites the stored value of the item with key it with bytes that do not
 * decode, leaving its index entry. */
static void corrupt(fixture *f, const table_schema *t, item *key)
{
    buf ik;
    buf_init(&ik);
    uint32_t part = 0;
    assert_int_equal(itemkey_of_item(&ik, t, key, &part), 0);
    db_batch *b = db_batch_new();
    db_batch_put(b, f->st->db, CF_ITEMS, ik.data, ik.len, "\xff\xfe garbage", 10);
    assert_ok(db_write(f->st->db, b, 0, f->err, sizeof(f->err)), f);
    db_batch_free(b);
    buf_fini(&ik);
    item_free(key);
}

static void test_undeletable(void **state)
{
    fixture *f = *state;
    int64_t T = base_s + 1000;
    uint32_t part = 0;
    attr_value pk = val(ATTR_S, "x");
    assert_int_equal(hash_partition(&pk, sess.partitions, &part), 0);
    item_value_fini(&pk);
    /* Three corrupt items due first, then ten good ones. */
    for (int i = 0; i < 13; i++) {
        put(f, &sess, sitem(&sess, "x", i, K_NUM, i < 3 ? T : T + 1));
    }
    for (int i = 0; i < 3; i++) {
        corrupt(f, &sess, skey(&sess, "x", i));
    }
    /* A budget of 2: the corrupt ones cost budget once, then never again. */
    expiry_sweep_result res = {0};
    size_t deleted = 0, undeletable = 0;
    int rounds = 0;
    do {
        sweep(f, &sess, part, (T + 5) * 1000, 2, &res);
        deleted += res.deleted;
        undeletable += res.undeletable;
        assert_true(++rounds < 20);
    } while (res.more);
    assert_int_equal(deleted, 10);
    assert_int_equal(undeletable, 3);
    assert_int_equal(res.next_due_ms, EXPIRY_NONE); /* not stuck in the past */
    sweep(f, &sess, part, (T + 5) * 1000, 2, &res);
    assert_int_equal(res.deleted + res.undeletable + res.stale, 0);
    uint64_t n = 0;
    int64_t oldest = 0, next = 0;
    assert_ok(expiry_backlog(f->st, sess.id, part, at_ms((T + 5) * 1000), 100, &n, &oldest, f->err,
                             sizeof(f->err)),
              f);
    assert_int_equal(n, 0);
    assert_ok(expiry_next_due(f->st, sess.id, part, &next, f->err, sizeof(f->err)), f);
    assert_int_equal(next, EXPIRY_NONE);
    /* A new entry below the sweep's resume point, then skipped entries at or
     * after the cutoff: next_due passes over them. */
    put(f, &sess, sitem(&sess, "x", 20, K_NUM, T - 100));
    sweep(f, &sess, part, T * 1000, 2, &res);
    assert_int_equal(res.deleted, 1);
    assert_int_equal(res.next_due_ms, EXPIRY_NONE);
    sweep(f, &sess, part, (T + 5) * 1000, 2, &res); /* resumes past the skipped ones */
    assert_int_equal(res.deleted + res.undeletable + res.stale, 0);
    /* Their entries are still there, and reads report the corruption. */
    keylist got = {0};
    index_of(f, sess.id, &got);
    assert_int_equal(got.n, 3);
    kl_fini(&got);
    item *out = NULL;
    item *k = skey(&sess, "x", 0);
    assert_code(store_get(f->st, &sess, k, &out, f->err, sizeof(f->err)), LAPSE_ECORRUPT, f);
    item_free(k);
    /* Deleting a corrupt item leaves its entry, which the sweep (no longer
     * skipping it) removes as stale; an unconditional put over one repairs
     * it and the sweep takes it again. */
    k = skey(&sess, "x", 1);
    assert_ok(store_delete(f->st, &sess, k, NULL, NULL, f->err, sizeof(f->err)), f);
    item_free(k);
    sweep(f, &sess, part, (T + 5) * 1000, 10, &res);
    assert_int_equal(res.deleted, 0);
    assert_int_equal(res.stale, 1);
    put(f, &sess, sitem(&sess, "x", 0, K_NUM, T + 2));
    sweep(f, &sess, part, (T + 5) * 1000, 10, &res);
    assert_int_equal(res.deleted, 1);
    assert_int_equal(res.stale, 1); /* x/0's leftover entry due at T */
    assert_false(exists(f, &sess, "x", 0));
    index_of(f, sess.id, &got);
    assert_int_equal(got.n, 1); /* x/2, still skipped */
    kl_fini(&got);
    /* A fresh store instance retries it once (the set is in memory). */
    reopen(f);
    sweep(f, &sess, part, (T + 5) * 1000, 10, &res);
    assert_int_equal(res.undeletable, 1);
    sweep(f, &sess, part, (T + 5) * 1000, 10, &res);
    assert_int_equal(res.undeletable, 0);
}

static void progress_exists(fixture *f, const char *name, int want)
{
    buf v;
    buf_init(&v);
    int found = 0;
    assert_ok(store_meta_get(f->st, name, &v, &found, f->err, sizeof(f->err)), f);
    assert_int_equal(found, want);
    buf_fini(&v);
}

static void test_drop_table(void **state)
{
    fixture *f = *state;
    int64_t T = base_s + 1000;
    for (int i = 0; i < 20; i++) {
        put(f, &sess, sitem(&sess, "d", i, K_NUM, T + i));
        put(f, &solo, sitem(&solo, i % 2 ? "s1" : "s2", 0, K_NUM, T + i));
    }
    uint64_t scanned = 0;
    int done = 0;
    assert_ok(expiry_backfill_step(f->st, &sess, 0, at_ms(T * 1000), 1000, &scanned, &done, f->err,
                                   sizeof(f->err)),
              f);
    assert_true(done);
    progress_exists(f, "backfill/10/0", 1);
    corrupt(f, &sess, skey(&sess, "d", 0));
    sweep_all(f, &sess, T * 1000 + 1, 10); /* d/0 becomes undeletable */

    assert_ok(expiry_drop_table(f->st, sess.id, f->err, sizeof(f->err)), f);
    keylist got = {0};
    index_of(f, sess.id, &got);
    assert_int_equal(got.n, 0);
    kl_fini(&got);
    progress_exists(f, "backfill/10/0", 0);
    assert_ok(expiry_backfill_done(f->st, &sess, 0, &done, f->err, sizeof(f->err)), f);
    assert_false(done);
    assert_int_equal(count_items(f, &sess), 20); /* items stay: only TTL is off */
    index_of(f, solo.id, &got);
    assert_int_equal(got.n, 2); /* the other table's index is intact */
    kl_fini(&got);
    assert_ok(expiry_drop_table(f->st, sess.id, f->err, sizeof(f->err)), f); /* idempotent */

    /* store_drop_table drops the index and progress too. */
    assert_ok(expiry_backfill_step(f->st, &solo, 1, at_ms(T * 1000), 1000, &scanned, &done, f->err,
                                   sizeof(f->err)),
              f);
    progress_exists(f, "backfill/11/1", 1);
    assert_ok(store_drop_table(f->st, solo.id, f->err, sizeof(f->err)), f);
    index_of(f, solo.id, &got);
    assert_int_equal(got.n, 0);
    kl_fini(&got);
    progress_exists(f, "backfill/11/1", 0);

    /* After the drop, re-enabling rebuilds by backfill and the once
     * undeletable key is forgotten with the table: swept again (and found
     * undeletable again, counted once more). */
    sess.ttl.config_version = 2;
    for (uint32_t p = 0; p < sess.partitions; p++) {
        do {
            assert_ok(expiry_backfill_step(f->st, &sess, p, clock_wall_now(), 1000, &scanned, &done,
                                           f->err, sizeof(f->err)),
                      f);
        } while (!done);
    }
    size_t undeletable = 0;
    for (uint32_t p = 0; p < sess.partitions; p++) {
        expiry_sweep_result res = {0};
        sweep(f, &sess, p, (T + 100) * 1000, 100, &res);
        undeletable += res.undeletable;
    }
    assert_int_equal(undeletable, 0); /* corrupt items are not indexed by backfill */
    assert_int_equal(count_items(f, &sess), 1);
}

/* ======================================================================== */
/* Backfill                                                                 */
/* ======================================================================== */

/* Writes n items of every TTL kind into t with TTL off. */
static void fill_untracked(fixture *f, table_schema *t, int n, unsigned seed)
{
    table_schema off = *t;
    off.ttl.enabled = 0;
    char pk[16];
    for (int i = 0; i < n; i++) {
        snprintf(pk, sizeof(pk), "f%d", i % 37);
        int kind = rand_r(&seed) % K_KINDS;
        int64_t v = rand_r(&seed) % 4 == 0 ? base_s - 30 * TTL_SECONDS_PER_YEAR
                                           : base_s - 5000 + rand_r(&seed) % 10000;
        put(f, &off, sitem(&off, pk, i, kind, v));
    }
    keylist got = {0};
    index_of(f, t->id, &got);
    assert_int_equal(got.n, 0);
    kl_fini(&got);
}

/* Runs steps of max items on every partition until done (or, when stop_after
 * > 0, for that many steps per partition). Adds the items scanned per
 * partition to scanned[]. */
static void backfill(fixture *f, const table_schema *t, size_t max, int stop_after,
                     uint64_t *scanned)
{
    for (uint32_t p = 0; p < t->partitions; p++) {
        int done = 0, steps = 0;
        while (!done && (stop_after == 0 || steps < stop_after)) {
            uint64_t n = 0;
            assert_ok(expiry_backfill_step(f->st, t, p, clock_wall_now(), max, &n, &done, f->err,
                                           sizeof(f->err)),
                      f);
            assert_true(n <= max);
            scanned[p] += n;
            steps++;
        }
    }
}

static void test_backfill_complete(void **state)
{
    fixture *f = *state;
    fill_untracked(f, &sess, 600, 7);
    /* Sweeps before the backfill find nothing (and remember how far they
     * looked: the backfill's entries below that must still be found). */
    int64_t later_ms = (base_s + 10000) * 1000;
    assert_int_equal(sweep_all(f, &sess, later_ms, 100), 0);
    uint64_t scanned[4] = {0};
    backfill(f, &sess, 50, 0, scanned);
    for (uint32_t p = 0; p < sess.partitions; p++) {
        uint64_t n = 0;
        int done = 0;
        assert_ok(store_count(f->st, sess.id, p, &n, f->err, sizeof(f->err)), f);
        assert_int_equal(scanned[p], n); /* each item scanned exactly once */
        assert_ok(expiry_backfill_done(f->st, &sess, p, &done, f->err, sizeof(f->err)), f);
        assert_true(done);
        /* A finished partition's steps return at once. */
        uint64_t again = 0;
        assert_ok(expiry_backfill_step(f->st, &sess, p, clock_wall_now(), 50, &again, &done, f->err,
                                       sizeof(f->err)),
                  f);
        assert_int_equal(again, 0);
        assert_true(done);
    }
    keylist want = {0};
    expect_stored(f, &sess, clock_wall_now(), &want);
    assert_true(want.n > 100);
    assert_index(f, &sess, &want);

    /* The step that reads a partition's last item reports done. */
    table_schema v3 = sess;
    v3.ttl.config_version = 3;
    for (uint32_t p = 0; p < sess.partitions; p++) {
        uint64_t n = 0;
        int fin = 0;
        assert_ok(expiry_backfill_step(f->st, &v3, p, clock_wall_now(), (size_t)scanned[p], &n,
                                       &fin, f->err, sizeof(f->err)),
                  f);
        assert_int_equal(n, scanned[p]);
        assert_true(fin);
    }

    /* A new enable (config version) starts over from the first item. */
    table_schema v2 = sess;
    v2.ttl.config_version = 2;
    int done = 1;
    assert_ok(expiry_backfill_done(f->st, &v2, 0, &done, f->err, sizeof(f->err)), f);
    assert_false(done);
    uint64_t rescanned[4] = {0};
    backfill(f, &v2, 1000, 0, rescanned);
    assert_memory_equal(rescanned, scanned, sizeof(scanned));
    /* Everything indexed is due by later_ms (values within base_s +- 5000). */
    assert_int_equal(sweep_all(f, &v2, later_ms, 100), want.n);
    kl_fini(&want);
}

static void test_backfill_resumes_after_crash(void **state)
{
    fixture *f = *state;
    fill_untracked(f, &sess, 600, 11);
    /* Reference: the index an uninterrupted run builds, from the data. */
    keylist want = {0};
    expect_stored(f, &sess, clock_wall_now(), &want);

    uint64_t scanned[4] = {0};
    backfill(f, &sess, 40, 2, scanned); /* two steps per partition */
    reopen(f);                          /* the crash: progress is on disk */
    backfill(f, &sess, 40, 1, scanned);
    reopen(f);
    /* A stale record of another version does not confuse the current one. */
    table_schema v0 = sess;
    v0.ttl.config_version = 0;
    int done = 1;
    assert_ok(expiry_backfill_done(f->st, &v0, 0, &done, f->err, sizeof(f->err)), f);
    assert_false(done);
    backfill(f, &sess, 40, 0, scanned);
    for (uint32_t p = 0; p < sess.partitions; p++) {
        uint64_t n = 0;
        assert_ok(store_count(f->st, sess.id, p, &n, f->err, sizeof(f->err)), f);
        if (scanned[p] != n) {
            fail_msg("partition %u: %llu items scanned across steps, %llu stored", (unsigned)p,
                     (unsigned long long)scanned[p], (unsigned long long)n);
        }
    }
    assert_index(f, &sess, &want);
    kl_fini(&want);
}

static void test_backfill_with_concurrent_writes(void **state)
{
    fixture *f = *state;
    fill_untracked(f, &sess, 400, 3);
    uint64_t scanned[4] = {0};
    unsigned seed = 99;
    char pk[16];
    /* Writes between steps (TTL now on): the write path and the backfill
     * together must end with the exact index. */
    for (int round = 0; round < 20; round++) {
        backfill(f, &sess, 15, 1, scanned);
        for (int i = 0; i < 10; i++) {
            int k = rand_r(&seed) % 500;
            snprintf(pk, sizeof(pk), "f%d", k % 37);
            int r = rand_r(&seed) % 3;
            if (r == 0) {
                item *key = skey(&sess, pk, k);
                assert_ok(store_delete(f->st, &sess, key, NULL, NULL, f->err, sizeof(f->err)), f);
                item_free(key);
            } else {
                put(f, &sess,
                    sitem(&sess, pk, k, r == 1 ? K_NUM : K_MISSING, base_s + rand_r(&seed) % 1000));
            }
        }
    }
    backfill(f, &sess, 15, 0, scanned);
    keylist want = {0};
    expect_stored(f, &sess, clock_wall_now(), &want);
    assert_index(f, &sess, &want);
    kl_fini(&want);
}

/* The naive scan (--ttl-naive-scan): full passes in small steps delete
 * exactly the expired items, with their index entries, and nothing else
 * (strings, missing and not-yet-due values survive). */
static void test_naive_scan(void **state)
{
    fixture *f = *state;
    int64_t T = base_s + 1000;
    char pk[16];
    int want_left = 0;
    for (int i = 0; i < 40; i++) {
        snprintf(pk, sizeof(pk), "n%d", i);
        int kind = i % 4 == 3 ? K_STR : (i % 7 == 0 ? K_MISSING : K_NUM);
        int64_t v = i % 2 ? T : T + 100; /* odd: due before now */
        put(f, &solo, sitem(&solo, pk, 0, kind, v));
        want_left += !(kind == K_NUM && i % 2);
    }
    int64_t due[STORE_BATCH_MAX];
    size_t deleted = 0;
    for (uint32_t part = 0; part < solo.partitions; part++) {
        buf resume;
        buf_init(&resume);
        int done = 0, steps = 0;
        while (!done) {
            expiry_sweep_result res;
            memset(&res, 0, sizeof(res));
            res.due_ms = due;
            assert_ok(expiry_naive_step(f->st, &solo, part, at_ms((T + 10) * 1000), 3, 2, &resume,
                                        &done, &res, f->err, sizeof(f->err)),
                      f);
            assert_true(res.deleted <= 2);
            for (size_t i = 0; i < res.deleted; i++) {
                assert_int_equal(due[i], T * 1000);
            }
            assert_int_equal(res.more, !done);
            deleted += res.deleted;
            assert_true(++steps < 100);
        }
        buf_fini(&resume);
    }
    assert_int_equal(count_items(f, &solo), want_left);
    assert_int_equal(deleted, 40 - want_left);
    /* The index lists exactly the survivors that have an eligible value. */
    keylist want = {0}, got = {0};
    expect_stored(f, &solo, at_ms((T + 10) * 1000), &want);
    index_of(f, solo.id, &got);
    assert_int_equal(got.n, want.n);
    assert_int_equal(got.n, 17); /* the 20 even (not due), less 0, 14, 28 (missing) */
    kl_fini(&want);
    kl_fini(&got);
    /* A second pass finds nothing more. */
    for (uint32_t part = 0; part < solo.partitions; part++) {
        buf resume;
        buf_init(&resume);
        expiry_sweep_result res;
        memset(&res, 0, sizeof(res));
        int done = 0;
        assert_ok(expiry_naive_step(f->st, &solo, part, at_ms((T + 10) * 1000), 1000, 1000, &resume,
                                    &done, &res, f->err, sizeof(f->err)),
                  f);
        assert_true(done);
        assert_int_equal(res.deleted, 0);
        buf_fini(&resume);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_entry_layout, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_index_property, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_boundary, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_budget, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_honours_updates, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_races_updates, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_backlog, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_hook, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_undeletable, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_drop_table, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_backfill_complete, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_backfill_resumes_after_crash, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_backfill_with_concurrent_writes, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_naive_scan, esetup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
