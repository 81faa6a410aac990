/*
 * expiry_test.c: the TTL expiry index against a real RocksDB in a scratch
 * directory: the entry layout, the index kept exact through random
 * put/update/delete/batch sequences (a property test against a model), and
 * the sweep's boundary, budget and conditional delete (also racing updates
 * on another thread). Backlog, hook, undeletable items, drops, backfill and
 * the naive scan are in expiry_backfill_test.c.
 *
 * White-box where it must be: the test reads the expiry column family and
 * writes entries through the store's db (store_int.h), and builds the
 * expected index keys by hand from the documented layout
 * (docs/storage-format.md), not with the code under test.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "expiry_testutil.h"
#include "itemkey.h"
#include "store_int.h"

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

/* Puts n items "<prefix>NNNN" into t, due at second due_s. */
static void put_run(fixture *f, const table_schema *t, const char *prefix, int from, int n,
                    int64_t due_s)
{
    char pk[32];
    for (int i = from; i < from + n; i++) {
        snprintf(pk, sizeof(pk), "%s%04d", prefix, i);
        put(f, t, sitem(t, pk, 0, K_NUM, due_s));
    }
}

/* A plain table's sweep of a long run of entries deletes them with one range
 * tombstone: exactly the entries it collected go, the first one past the
 * budget and the ones not yet due stay, and an entry written into the
 * deleted range afterwards is seen and swept like any other. */
static void test_sweep_range(void **state)
{
    fixture *f = *state;
    table_schema w = ttl_table(23, "Wide", 0, 1);
    int64_t T = base_s + 1000;
    put_run(f, &w, "w", 0, 1300, T);
    put_run(f, &w, "z", 0, 5, T + 100);
    expiry_sweep_result res = {0};
    sweep(f, &w, 0, (T + 1) * 1000, 1000, &res);
    assert_int_equal(res.deleted, 1000);
    assert_true(res.more);
    assert_int_equal(index_count(f, w.id), 305);
    assert_int_equal(count_items(f, &w), 305);
    sweep(f, &w, 0, (T + 1) * 1000, 1000, &res);
    assert_int_equal(res.deleted, 300);
    assert_false(res.more);
    assert_int_equal(res.next_due_ms, (T + 100) * 1000);
    assert_int_equal(index_count(f, w.id), 5);
    /* Into the deleted range: one due at T again, one due later. */
    put_run(f, &w, "w", 350, 1, T);
    put_run(f, &w, "w", 351, 1, T + 50);
    assert_int_equal(index_count(f, w.id), 7);
    sweep(f, &w, 0, (T + 1) * 1000, 1000, &res);
    assert_int_equal(res.deleted, 1);
    assert_false(exists(f, &w, "w0350", 0));
    assert_true(exists(f, &w, "w0351", 0));
    assert_int_equal(sweep_all(f, &w, (T + 101) * 1000, 1000), 6);
    assert_int_equal(index_count(f, w.id), 0);
    assert_int_equal(count_items(f, &w), 0);
    /* The tombstones survive a reopen (the WAL) and a flush of the index. */
    put_run(f, &w, "v", 0, 400, T);
    assert_int_equal(sweep_all(f, &w, (T + 1) * 1000, 1000), 400);
    reopen(f);
    assert_int_equal(index_count(f, w.id), 0);
    assert_int_equal(sweep_all(f, &w, (T + 1) * 1000, 1000), 0);
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
     * behind the store's back) is removed as stale, the item kept. Items
     * are read, and so can be checked, where the delete needs the old
     * image: a table with a stream (test_sweep_trusts_entries has the rest). */
    with_stream(&sess);
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

/* One race on sess as it is configured. */
static void race_once(fixture *f)
{
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
    fprintf(stderr, "race (%s): %d sweeps, %zu deleted, %zu extensions failed\n",
            sess.stream.enabled ? "items read" : "entries trusted", sweeps, deleted, r->failed_ext);
    free(r);
}

/* Both sweeps: the one that trusts the entry (a plain table) and the one
 * that reads each item (a table with a stream). */
static void test_sweep_races_updates(void **state)
{
    fixture *f = *state;
    race_once(f);
    with_stream(&sess);
    race_once(f);
}

/*
 * A plain table's sweep does not read the items it deletes: the entry, kept
 * in step with the item in every WriteBatch, proves the due instant. It
 * must still agree with the reading sweep on what is due (the offset, the
 * boundary millisecond) and on the guard, which moves with now: an item
 * indexed while eligible whose value has since fallen more than guard_years
 * behind is no longer deleted by either.
 */
static void test_sweep_trusts_entries(void **state)
{
    fixture *f = *state;
    table_schema plain_t = ttl_table(20, "Plain", 0, 1);
    table_schema read_t = ttl_table(21, "Streamed", 0, 1);
    with_stream(&read_t);
    plain_t.ttl.offset_s = read_t.ttl.offset_s = 60;
    plain_t.ttl.guard_years = read_t.ttl.guard_years = 1;
    int64_t T = base_s + 1000;
    int64_t year_s = TTL_SECONDS_PER_YEAR;
    const table_schema *ts[2] = {&plain_t, &read_t};
    for (int i = 0; i < 2; i++) {
        const table_schema *t = ts[i];
        put(f, t, sitem(t, "due", 0, K_NUM, T));
        int64_t due[4];
        expiry_sweep_result res = {.due_ms = due};
        /* T + 60 s is the due instant: not yet expired at it. */
        sweep(f, t, 0, (T + 60) * 1000, 10, &res);
        assert_int_equal(res.deleted + res.stale, 0);
        /* Eligible when put, a year minus 70 s before T: long due, and
         * behind the guard 10 s after T + 60. */
        put(f, t, sitem(t, "old", 0, K_NUM, T - year_s + 70));
        sweep(f, t, 0, (T + 80) * 1000 + 1, 10, &res);
        assert_int_equal(res.deleted, 1);
        assert_int_equal(due[0], (T + 60) * 1000);
        assert_int_equal(res.stale, 1);
        assert_false(exists(f, t, "due", 0));
        assert_true(exists(f, t, "old", 0));
        assert_int_equal(index_count(f, t->id), 0);
    }
    /* What the plain table gives up: an item corrupted behind the store's
     * back is not judged, its entry is believed (the table with a stream
     * counts it undeletable: expiry_backfill_test). */
    put(f, &plain_t, sitem(&plain_t, "bad", 0, K_NUM, T));
    corrupt(f, &plain_t, skey(&plain_t, "bad", 0));
    expiry_sweep_result res = {0};
    sweep(f, &plain_t, 0, (T + 61) * 1000, 10, &res);
    assert_int_equal(res.deleted, 1);
    assert_int_equal(res.undeletable, 0);
    assert_int_equal(count_items(f, &plain_t), 1); /* "old" */
}
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_entry_layout, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_index_property, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_boundary, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_budget, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_range, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_honours_updates, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_races_updates, esetup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_trusts_entries, esetup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
