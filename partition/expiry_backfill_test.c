/*
 * expiry_backfill_test.c: the rest of the TTL expiry index against a real
 * RocksDB: the backlog and the write hook, undeletable items, dropping a
 * table's index, the backfill (complete, resumed after a simulated crash,
 * with concurrent writes, after a config change) and the naive scan of
 * --ttl-naive-scan. The write path and the sweep are in expiry_test.c.
 */
#include "expiry_testutil.h"

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

static void test_undeletable(void **state)
{
    fixture *f = *state;
    with_stream(&sess); /* items are read, so found corrupt, only there */
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
    assert_int_equal(index_count(f, sess.id), 3);
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
    assert_int_equal(index_count(f, sess.id), 1); /* x/2, still skipped */
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
    with_stream(&sess); /* items are read, so found corrupt, only there */
    int64_t T = base_s + 1000;
    for (int i = 0; i < 20; i++) {
        put(f, &sess, sitem(&sess, "d", i, K_NUM, T + i));
        put(f, &solo, sitem(&solo, i % 2 ? "s1" : "s2", 0, K_NUM, T + i));
    }
    uint64_t scanned = 0;
    int done = 0;
    assert_ok(expiry_backfill_step(f->st, &sess, 0, at_ms(T * 1000), 1000, &scanned, NULL, &done,
                                   f->err, sizeof(f->err)),
              f);
    assert_true(done);
    progress_exists(f, "backfill/10/0", 1);
    corrupt(f, &sess, skey(&sess, "d", 0));
    sweep_all(f, &sess, T * 1000 + 1, 10); /* d/0 becomes undeletable */

    assert_ok(expiry_drop_table(f->st, sess.id, f->err, sizeof(f->err)), f);
    assert_int_equal(index_count(f, sess.id), 0);
    progress_exists(f, "backfill/10/0", 0);
    assert_ok(expiry_backfill_done(f->st, &sess, 0, &done, f->err, sizeof(f->err)), f);
    assert_false(done);
    assert_int_equal(count_items(f, &sess), 20);  /* items stay: only TTL is off */
    assert_int_equal(index_count(f, solo.id), 2); /* the other table's index is intact */
    assert_ok(expiry_drop_table(f->st, sess.id, f->err, sizeof(f->err)), f); /* idempotent */

    /* store_drop_table drops the index and progress too. */
    assert_ok(expiry_backfill_step(f->st, &solo, 1, at_ms(T * 1000), 1000, &scanned, NULL, &done,
                                   f->err, sizeof(f->err)),
              f);
    progress_exists(f, "backfill/11/1", 1);
    assert_ok(store_drop_table(f->st, solo.id, f->err, sizeof(f->err)), f);
    assert_int_equal(index_count(f, solo.id), 0);
    progress_exists(f, "backfill/11/1", 0);

    /* After the drop, re-enabling rebuilds by backfill and the once
     * undeletable key is forgotten with the table: swept again (and found
     * undeletable again, counted once more). */
    sess.ttl.config_version = 2;
    for (uint32_t p = 0; p < sess.partitions; p++) {
        do {
            assert_ok(expiry_backfill_step(f->st, &sess, p, clock_wall_now(), 1000, &scanned, NULL,
                                           &done, f->err, sizeof(f->err)),
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
    assert_int_equal(index_count(f, t->id), 0);
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
            assert_ok(expiry_backfill_step(f->st, t, p, clock_wall_now(), max, &n, NULL, &done,
                                           f->err, sizeof(f->err)),
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
        assert_ok(expiry_backfill_step(f->st, &sess, p, clock_wall_now(), 50, &again, NULL, &done,
                                       f->err, sizeof(f->err)),
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
                                       NULL, &fin, f->err, sizeof(f->err)),
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
