/*
 * db_test.c: the RocksDB wrapper against a real RocksDB in a scratch
 * directory: persistence across reopen, column-family creation, batch
 * atomicity, iterator bounds and directions, MultiGet, range deletes, and the
 * error when a second open (in this process or another) finds the LOCK held.
 *
 * `db_test --hold DIR` is the helper process of the cross-process lock test:
 * it opens DIR, prints "ready", and keeps the database open until its stdin
 * closes.
 */
#include <pthread.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "../common/buf.h"
#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "db.h"
#include "storage_testutil.h"

static const char *const two_cfs[] = {"items", "meta"};

static db *open_db(testdir_fixture *f, const char *const *cfs, size_t ncf)
{
    db *d = NULL;
    db_options o = {.block_cache_bytes = 8 << 20, .create_if_missing = 1};
    testdir_assert_ok(db_open(&d, f->dir, &o, cfs, ncf, f->err, sizeof(f->err)), f);
    assert_non_null(d);
    return d;
}

static void put1(testdir_fixture *f, db *d, int cf, const char *k, const char *v)
{
    db_batch *b = db_batch_new();
    assert_non_null(b);
    db_batch_put(b, d, cf, k, strlen(k), v, strlen(v));
    testdir_assert_ok(db_write(d, b, 0, f->err, sizeof(f->err)), f);
    db_batch_free(b);
}

/* Asserts key k in cf holds v, or is absent when v is NULL. */
static void expect(testdir_fixture *f, db *d, int cf, const char *k, const char *v)
{
    buf val;
    buf_init(&val);
    int found = -1;
    testdir_assert_ok(db_get(d, cf, k, strlen(k), &val, &found, f->err, sizeof(f->err)), f);
    if (v == NULL) {
        assert_int_equal(found, 0);
        assert_int_equal(val.len, 0);
    } else {
        assert_int_equal(found, 1);
        assert_int_equal(val.len, strlen(v));
        assert_memory_equal(val.data, v, val.len);
    }
    buf_fini(&val);
}

static void test_reopen_keeps_data(void **state)
{
    testdir_fixture *f = *state;
    db *d = open_db(f, two_cfs, 2);
    put1(f, d, 0, "k1", "v1");
    put1(f, d, 1, "k1", "meta-v1");
    db_batch *b = db_batch_new();
    db_batch_put(b, d, 0, "k2", 2, "v2", 2);
    testdir_assert_ok(db_write(d, b, 1, f->err, sizeof(f->err)), f); /* synced write */
    db_batch_free(b);
    db_close(d);

    d = open_db(f, two_cfs, 2);
    expect(f, d, 0, "k1", "v1");
    expect(f, d, 0, "k2", "v2");
    expect(f, d, 1, "k1", "meta-v1");
    expect(f, d, 1, "k2", NULL); /* column families are separate key spaces */
    expect(f, d, 0, "nope", NULL);
    db_close(d);
}

static void test_missing_dir_without_create_fails(void **state)
{
    testdir_fixture *f = *state;
    char path[600];
    snprintf(path, sizeof(path), "%s/absent", f->dir);
    db *d = (db *)1;
    db_options o = {.create_if_missing = 0};
    int rv = db_open(&d, path, &o, two_cfs, 2, f->err, sizeof(f->err));
    assert_int_equal(rv, LAPSE_EIO);
    assert_null(d);
    assert_true(strlen(f->err) > 0);
}

static void test_column_families_created_and_kept(void **state)
{
    testdir_fixture *f = *state;
    const char *const first[] = {"a", "b"};
    db *d = open_db(f, first, 2);
    put1(f, d, 1, "key", "in-b");
    db_close(d);

    /* A new column family is created; existing ones keep their data. */
    const char *const more[] = {"a", "b", "c"};
    d = open_db(f, more, 3);
    expect(f, d, 1, "key", "in-b");
    expect(f, d, 2, "key", NULL);
    put1(f, d, 2, "key", "in-c");
    db_close(d);

    /* Listing only some (in another order) still opens; indexes follow the
     * caller's list. */
    const char *const some[] = {"c", "b"};
    d = open_db(f, some, 2);
    expect(f, d, 0, "key", "in-c");
    expect(f, d, 1, "key", "in-b");
    db_close(d);

    /* "default" may be listed explicitly. */
    const char *const withdef[] = {"default", "b"};
    d = open_db(f, withdef, 2);
    expect(f, d, 1, "key", "in-b");
    db_close(d);
}

static void test_bad_arguments(void **state)
{
    testdir_fixture *f = *state;
    db *d = NULL;
    const char *const dup[] = {"x", "x"};
    assert_int_equal(db_open(&d, f->dir, NULL, dup, 2, f->err, sizeof(f->err)), LAPSE_EINVAL);
    const char *const empty[] = {""};
    assert_int_equal(db_open(&d, f->dir, NULL, empty, 1, f->err, sizeof(f->err)), LAPSE_EINVAL);
    const char *many[DB_MAX_CF + 1];
    for (size_t i = 0; i < DB_MAX_CF + 1; i++) {
        many[i] = "m";
    }
    assert_int_equal(db_open(&d, f->dir, NULL, many, DB_MAX_CF + 1, f->err, sizeof(f->err)),
                     LAPSE_EINVAL);
    assert_null(d);
    db_close(NULL);
}

static void test_batch_is_atomic(void **state)
{
    testdir_fixture *f = *state;
    db *d = open_db(f, two_cfs, 2);
    put1(f, d, 0, "gone", "x");

    db_batch *b = db_batch_new();
    assert_non_null(b);
    db_batch_put(b, d, 0, "a", 1, "1", 1);
    db_batch_put(b, d, 1, "a", 1, "meta", 4);
    db_batch_delete(b, d, 0, "gone", 4);
    assert_int_equal(db_batch_count(b), 3);
    /* Nothing is visible before the write. */
    expect(f, d, 0, "a", NULL);
    expect(f, d, 0, "gone", "x");
    testdir_assert_ok(db_write(d, b, 0, f->err, sizeof(f->err)), f);
    expect(f, d, 0, "a", "1");
    expect(f, d, 1, "a", "meta");
    expect(f, d, 0, "gone", NULL);

    /* The last write to a key in a batch wins; clear empties the batch. */
    db_batch_clear(b);
    assert_int_equal(db_batch_count(b), 0);
    db_batch_put(b, d, 0, "a", 1, "2", 1);
    db_batch_put(b, d, 0, "a", 1, "3", 1);
    testdir_assert_ok(db_write(d, b, 0, f->err, sizeof(f->err)), f);
    expect(f, d, 0, "a", "3");
    db_batch_free(b);
    db_batch_free(NULL);
    db_close(d);
}

/* Another thread's db_batch_thread batch, handed back at once. */
static void *other_thread_batch(void *arg)
{
    db_batch *b = db_batch_thread();
    *(db_batch **)arg = b;
    db_batch_thread_done(b);
    return NULL;
}

/* A thread's own batch: empty each time, the same one call after call
 * (its buffer kept), another thread's another; one that grew past
 * DB_BATCH_THREAD_KEEP is freed when handed back, and the next is new. */
static void test_thread_batch_is_kept(void **state)
{
    testdir_fixture *f = *state;
    db *d = open_db(f, two_cfs, 2);
    db_batch *b = db_batch_thread();
    assert_non_null(b);
    db_batch_put(b, d, 0, "a", 1, "1", 1);
    testdir_assert_ok(db_write(d, b, 0, f->err, sizeof(f->err)), f);
    db_batch_thread_done(b);
    db_batch *again = db_batch_thread();
    assert_ptr_equal(again, b);
    assert_int_equal(db_batch_count(again), 0);
    expect(f, d, 0, "a", "1");

    pthread_t t;
    db_batch *theirs = NULL;
    assert_int_equal(pthread_create(&t, NULL, other_thread_batch, &theirs), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_non_null(theirs);
    assert_ptr_not_equal(theirs, again);

    static char big[1 << 20];
    for (unsigned i = 0; i <= DB_BATCH_THREAD_KEEP / sizeof(big); i++) {
        db_batch_put(again, d, 0, &i, sizeof(i), big, sizeof(big));
    }
    db_batch_thread_done(again); /* freed: ASan would see a use after */
    db_batch *fresh = db_batch_thread();
    assert_non_null(fresh);
    assert_int_equal(db_batch_count(fresh), 0);
    db_batch_thread_done(fresh);
    db_close(d);
}

static void fill(testdir_fixture *f, db *d, int n)
{
    db_batch *b = db_batch_new();
    for (int i = 0; i < n; i++) {
        char k[16], v[16];
        snprintf(k, sizeof(k), "k%02d", i);
        snprintf(v, sizeof(v), "v%02d", i);
        db_batch_put(b, d, 0, k, strlen(k), v, strlen(v));
    }
    testdir_assert_ok(db_write(d, b, 0, f->err, sizeof(f->err)), f);
    db_batch_free(b);
}

static void assert_at(const db_iter *it, const char *k)
{
    assert_true(db_iter_valid(it));
    size_t len = 0;
    const uint8_t *p = db_iter_key(it, &len);
    if (len != strlen(k) || memcmp(p, k, len) != 0) {
        fail_msg("iterator at %.*s, expected %s", (int)len, (const char *)p, k);
    }
    const uint8_t *v = db_iter_value(it, &len);
    assert_int_equal(len, strlen(k));
    assert_int_equal(v[0], 'v');
    assert_memory_equal(v + 1, k + 1, len - 1);
}

static void test_iterator_bounds_seek_reverse(void **state)
{
    testdir_fixture *f = *state;
    db *d = open_db(f, two_cfs, 2);
    fill(f, d, 20);
    put1(f, d, 1, "k07", "other-cf"); /* must not show up */

    db_iter *it = NULL;
    assert_int_equal(db_iter_new(&it, d, 0, "k05", 3, "k15", 3), 0);
    assert_false(db_iter_valid(it)); /* unpositioned until a seek */

    /* Forward over [k05, k15). */
    int n = 0;
    for (db_iter_seek_first(it); db_iter_valid(it); db_iter_next(it)) {
        char k[16];
        snprintf(k, sizeof(k), "k%02d", 5 + n);
        assert_at(it, k);
        n++;
    }
    assert_int_equal(n, 10);
    testdir_assert_ok(db_iter_status(it, f->err, sizeof(f->err)), f);

    /* Backward from the last key in range. */
    n = 0;
    for (db_iter_seek_last(it); db_iter_valid(it); db_iter_prev(it)) {
        char k[16];
        snprintf(k, sizeof(k), "k%02d", 14 - n);
        assert_at(it, k);
        n++;
    }
    assert_int_equal(n, 10);

    db_iter_seek(it, "k10", 3);
    assert_at(it, "k10");
    db_iter_seek(it, "k10x", 4);
    assert_at(it, "k11");
    db_iter_seek_for_prev(it, "k12x", 4);
    assert_at(it, "k12");
    db_iter_seek_for_prev(it, "k12", 3);
    assert_at(it, "k12");
    db_iter_seek(it, "k00", 3); /* below the lower bound: clamps to it */
    assert_at(it, "k05");
    db_iter_seek(it, "k15", 3); /* the upper bound is exclusive */
    assert_false(db_iter_valid(it));
    db_iter_seek(it, "k2", 2);
    assert_false(db_iter_valid(it));
    db_iter_seek_for_prev(it, "k99", 3);
    assert_at(it, "k14");
    testdir_assert_ok(db_iter_status(it, f->err, sizeof(f->err)), f);
    db_iter_free(it);

    /* Unbounded both ways. */
    assert_int_equal(db_iter_new(&it, d, 0, NULL, 0, NULL, 0), 0);
    n = 0;
    for (db_iter_seek_first(it); db_iter_valid(it); db_iter_next(it)) {
        n++;
    }
    assert_int_equal(n, 20);
    db_iter_seek_last(it);
    assert_at(it, "k19");
    db_iter_free(it);

    /* Only a lower bound; a bound buffer freed by the caller is not used. */
    char *lo = strdup("k18");
    assert_int_equal(db_iter_new(&it, d, 0, lo, 3, NULL, 0), 0);
    memset(lo, 'z', 3);
    free(lo);
    n = 0;
    for (db_iter_seek_first(it); db_iter_valid(it); db_iter_next(it)) {
        n++;
    }
    assert_int_equal(n, 2);
    db_iter_free(it);
    db_iter_free(NULL);
    db_close(d);
}

static void test_multi_get(void **state)
{
    testdir_fixture *f = *state;
    db *d = open_db(f, two_cfs, 2);
    fill(f, d, 5);
    const void *keys[4] = {"k03", "zz", "k00", "k04"};
    size_t klens[4] = {3, 2, 3, 3};
    buf vals[4];
    int found[4];
    for (int i = 0; i < 4; i++) {
        buf_init(&vals[i]);
    }
    testdir_assert_ok(db_multi_get(d, 0, 4, keys, klens, vals, found, f->err, sizeof(f->err)), f);
    assert_int_equal(found[0], 1);
    assert_int_equal(found[1], 0);
    assert_int_equal(found[2], 1);
    assert_int_equal(found[3], 1);
    assert_memory_equal(vals[0].data, "v03", 3);
    assert_int_equal(vals[1].len, 0);
    assert_memory_equal(vals[2].data, "v00", 3);
    assert_memory_equal(vals[3].data, "v04", 3);
    /* The other column family has none of them. */
    testdir_assert_ok(db_multi_get(d, 1, 4, keys, klens, vals, found, f->err, sizeof(f->err)), f);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(found[i], 0);
        buf_fini(&vals[i]);
    }
    testdir_assert_ok(db_multi_get(d, 0, 0, NULL, NULL, NULL, NULL, f->err, sizeof(f->err)), f);
    db_close(d);
}

static void test_delete_range_and_compact(void **state)
{
    testdir_fixture *f = *state;
    db *d = open_db(f, two_cfs, 2);
    fill(f, d, 20);
    db_batch *b = db_batch_new();
    db_batch_delete_range(b, d, 0, "k05", 3, "k15", 3);
    testdir_assert_ok(db_write(d, b, 0, f->err, sizeof(f->err)), f);
    db_batch_free(b);
    assert_int_equal(db_compact_range(d, 0, "k05", 3, "k15", 3), 0);
    assert_int_equal(db_compact_range(d, 0, NULL, 0, NULL, 0), 0);
    expect(f, d, 0, "k04", "v04");
    expect(f, d, 0, "k05", NULL);
    expect(f, d, 0, "k14", NULL);
    expect(f, d, 0, "k15", "v15");
    db_iter *it = NULL;
    assert_int_equal(db_iter_new(&it, d, 0, NULL, 0, NULL, 0), 0);
    int n = 0;
    for (db_iter_seek_first(it); db_iter_valid(it); db_iter_next(it)) {
        n++;
    }
    testdir_assert_ok(db_iter_status(it, f->err, sizeof(f->err)), f);
    assert_int_equal(n, 10);
    db_iter_free(it);
    db_close(d);

    d = open_db(f, two_cfs, 2);
    expect(f, d, 0, "k10", NULL);
    expect(f, d, 0, "k19", "v19");
    db_close(d);
}

/* The estimate of a range's size: what is in files counts (a compaction
 * flushes the memtable first), a range with nothing counts nothing, and an
 * unbounded range is refused (a bad family asserts in debug builds, as
 * everywhere in db.c). */
static void test_approx_size_of_a_range(void **state)
{
    testdir_fixture *f = *state;
    db *d = open_db(f, two_cfs, 2);
    char k[16], v[256];
    memset(v, 'v', sizeof v);
    db_batch *b = db_batch_new();
    assert_non_null(b);
    for (int i = 0; i < 4000; i++) {
        snprintf(k, sizeof k, "a%05d", i);
        v[i % sizeof v] = (char)('a' + i % 26); /* keep it from compressing to nothing */
        db_batch_put(b, d, 0, k, strlen(k), v, sizeof v);
    }
    testdir_assert_ok(db_write(d, b, 0, f->err, sizeof(f->err)), f);
    db_batch_free(b);
    assert_int_equal(db_compact_range(d, 0, NULL, 0, NULL, 0), 0);
    uint64_t in_a = 0, in_b = 1;
    testdir_assert_ok(db_approx_size(d, 0, "a", 1, "b", 1, &in_a, f->err, sizeof(f->err)), f);
    testdir_assert_ok(db_approx_size(d, 0, "b", 1, "c", 1, &in_b, f->err, sizeof(f->err)), f);
    assert_true(in_a > 4000 * 16); /* 4000 entries of 262 bytes, even compressed */
    assert_true(in_a < 4000 * 1024);
    assert_true(in_b == 0);
    assert_int_equal(db_approx_size(d, 0, "a", 1, NULL, 0, &in_a, f->err, sizeof(f->err)),
                     LAPSE_EINVAL);
    db_close(d);
}

/* In the expiring family, a compaction drops the entries whose stamp is
 * older than expire_after_ms and keeps the younger ones, stampless ones and
 * every entry of the other families. */
static void put_stamped(testdir_fixture *f, db *d, int cf, const char *k, int64_t stamp_ms)
{
    buf v;
    buf_init(&v);
    assert_int_equal(buf_append_u64be(&v, (uint64_t)stamp_ms), 0);
    assert_int_equal(buf_append_byte(&v, 'x'), 0);
    db_batch *b = db_batch_new();
    assert_non_null(b);
    db_batch_put(b, d, cf, k, strlen(k), v.data, v.len);
    buf_fini(&v);
    testdir_assert_ok(db_write(d, b, 0, f->err, sizeof(f->err)), f);
    db_batch_free(b);
}

static int present(testdir_fixture *f, db *d, int cf, const char *k)
{
    buf val;
    buf_init(&val);
    int found = -1;
    testdir_assert_ok(db_get(d, cf, k, strlen(k), &val, &found, f->err, sizeof(f->err)), f);
    buf_fini(&val);
    return found;
}

static void test_expiring_family_drops_old_entries(void **state)
{
    testdir_fixture *f = *state;
    db *d = NULL;
    db_options o = {.block_cache_bytes = 8 << 20,
                    .create_if_missing = 1,
                    .expiring_cf = "meta",
                    .expire_after_ms = 60000};
    testdir_assert_ok(db_open(&d, f->dir, &o, two_cfs, 2, f->err, sizeof(f->err)), f);
    int64_t now = clock_wall_now().ms;
    put_stamped(f, d, 1, "old", now - 120000);
    put_stamped(f, d, 1, "young", now - 1000);
    put1(f, d, 1, "short", "abc");
    put_stamped(f, d, 0, "other", now - 120000);
    assert_int_equal(present(f, d, 1, "old"), 1); /* nothing compacted yet */
    assert_int_equal(db_compact_range(d, 1, NULL, 0, NULL, 0), 0);
    assert_int_equal(db_compact_range(d, 0, NULL, 0, NULL, 0), 0);
    assert_int_equal(present(f, d, 1, "old"), 0);
    assert_int_equal(present(f, d, 1, "young"), 1);
    assert_int_equal(present(f, d, 1, "short"), 1);
    assert_int_equal(present(f, d, 0, "other"), 1);

    /* Two minutes later the young one has aged out too. */
    clock_wall_set_offset_ms(120000);
    put1(f, d, 1, "later", "abc"); /* something to compact again */
    assert_int_equal(db_compact_range(d, 1, NULL, 0, NULL, 0), 0);
    clock_wall_set_offset_ms(0);
    assert_int_equal(present(f, d, 1, "young"), 0);
    assert_int_equal(present(f, d, 1, "short"), 1);
    db_close(d);
}

/* An iterator at a snapshot sees the data as of the snapshot in every
 * family, whatever was written, deleted or range-deleted after it; one
 * without sees the latest. */
static int count_at(testdir_fixture *f, db *d, const db_snapshot *snap, int cf)
{
    db_iter *it = NULL;
    assert_int_equal(db_iter_new_at(&it, d, snap, cf, NULL, 0, NULL, 0), 0);
    int n = 0;
    for (db_iter_seek_first(it); db_iter_valid(it); db_iter_next(it)) {
        n++;
    }
    testdir_assert_ok(db_iter_status(it, f->err, sizeof(f->err)), f);
    db_iter_free(it);
    return n;
}

static void test_snapshot_sees_one_moment(void **state)
{
    testdir_fixture *f = *state;
    db *d = open_db(f, two_cfs, 2);
    fill(f, d, 20);
    db_batch *b = db_batch_new();
    db_batch_put(b, d, 1, "x", 1, "1", 1);
    testdir_assert_ok(db_write(d, b, 0, f->err, sizeof(f->err)), f);
    db_snapshot *snap = db_snapshot_new(d);
    assert_non_null(snap);
    db_batch_clear(b);
    db_batch_delete_range(b, d, 0, "k05", 3, "k15", 3);
    db_batch_put(b, d, 0, "k99", 3, "new", 3);
    db_batch_delete(b, d, 1, "x", 1);
    db_batch_put(b, d, 1, "y", 1, "2", 1);
    testdir_assert_ok(db_write(d, b, 0, f->err, sizeof(f->err)), f);
    db_batch_free(b);
    assert_int_equal(count_at(f, d, snap, 0), 20);
    assert_int_equal(count_at(f, d, NULL, 0), 11);
    db_iter *it = NULL;
    assert_int_equal(db_iter_new_at(&it, d, snap, 1, NULL, 0, NULL, 0), 0);
    db_iter_seek_first(it);
    assert_true(db_iter_valid(it));
    size_t klen;
    const uint8_t *k = db_iter_key(it, &klen);
    assert_memory_equal(k, "x", 1);
    db_iter_next(it);
    assert_false(db_iter_valid(it));
    db_iter_free(it);
    db_snapshot_free(snap);
    db_snapshot_free(NULL);
    assert_int_equal(count_at(f, d, NULL, 1), 1);
    db_close(d);
}

/* A logged batch replayed into a second store (as a replica applies the
 * primary's batch) leaves the same data; a malformed log is refused. */
static void test_batch_log_replays_elsewhere(void **state)
{
    testdir_fixture *f = *state;
    db *d = open_db(f, two_cfs, 2);
    fill(f, d, 20);
    char dir2[512];
    assert_int_equal(testdir_make(dir2, sizeof(dir2), "db_test_replica"), 0);
    db *r = NULL;
    db_options o = {.block_cache_bytes = 8 << 20, .create_if_missing = 1};
    testdir_assert_ok(db_open(&r, dir2, &o, two_cfs, 2, f->err, sizeof(f->err)), f);
    fill(f, r, 20);

    db_batch *b = db_batch_new();
    assert_non_null(b);
    size_t len = 1;
    assert_null(db_batch_log(b, &len)); /* logging is off */
    assert_int_equal(len, 0);
    db_batch_log_start(b);
    db_batch_put(b, d, 1, "m1", 2, "", 0); /* an empty value */
    db_batch_delete(b, d, 0, "k00", 3);
    db_batch_delete_range(b, d, 0, "k05", 3, "k15", 3);
    db_batch_put(b, d, 0, "k10", 3, "again", 5);
    testdir_assert_ok(db_write(d, b, 0, f->err, sizeof(f->err)), f);
    const uint8_t *log = db_batch_log(b, &len);
    assert_non_null(log);

    db_batch *rb = db_batch_new();
    size_t ops = 0;
    assert_int_equal(db_batch_replay(rb, r, log, len, &ops), 0);
    assert_int_equal(ops, 4);
    assert_int_equal(db_batch_count(rb), 4);
    testdir_assert_ok(db_write(r, rb, 0, f->err, sizeof(f->err)), f);
    for (db *x = d;; x = r) {
        expect(f, x, 1, "m1", "");
        expect(f, x, 0, "k00", NULL);
        expect(f, x, 0, "k01", "v01");
        expect(f, x, 0, "k05", NULL);
        expect(f, x, 0, "k10", "again");
        expect(f, x, 0, "k15", "v15");
        if (x == r) {
            break;
        }
    }
    /* Every truncation of the log, an unknown family and an unknown op are
     * refused, never applied past the first bad byte into a crash. */
    for (size_t cut = 1; cut < len; cut++) {
        db_batch_clear(rb);
        int rv = db_batch_replay(rb, r, log, cut, NULL);
        assert_true(rv == LAPSE_ECORRUPT || rv == 0);
    }
    uint8_t bad[len];
    memcpy(bad, log, len);
    bad[1] = 9; /* family 9 of 2 */
    assert_int_equal(db_batch_replay(rb, r, bad, len, NULL), LAPSE_ECORRUPT);
    memcpy(bad, log, len);
    bad[0] = 'X';
    assert_int_equal(db_batch_replay(rb, r, bad, len, NULL), LAPSE_ECORRUPT);
    db_batch_clear(rb);
    assert_int_equal(db_batch_replay(rb, r, log, 2, NULL), LAPSE_ECORRUPT);
    db_batch_free(rb);
    db_batch_free(b);
    db_close(r);
    db_close(d);
    testdir_remove(dir2);
}

static void test_second_open_sees_lock(void **state)
{
    testdir_fixture *f = *state;
    db *d = open_db(f, two_cfs, 2);
    db *d2 = (db *)1;
    int rv = db_open(&d2, f->dir, NULL, two_cfs, 2, f->err, sizeof(f->err));
    assert_int_equal(rv, LAPSE_EIO);
    assert_null(d2);
    /* The daemons print RocksDB's message, which names the LOCK file. */
    if (strstr(f->err, "LOCK") == NULL && strstr(f->err, "lock") == NULL) {
        fail_msg("lock error does not mention the lock: %s", f->err);
    }
    /* The first handle keeps working, and after close the lock is free. */
    put1(f, d, 0, "still", "ok");
    db_close(d);
    d = open_db(f, two_cfs, 2);
    expect(f, d, 0, "still", "ok");
    db_close(d);
}

extern char **environ;

/* The helper process: holds the database open until stdin reaches EOF. */
static int hold_lock(const char *dir)
{
    db *d = NULL;
    char err[512];
    if (db_open(&d, dir, NULL, two_cfs, 2, err, sizeof(err)) != 0) {
        fprintf(stderr, "hold: %s\n", err);
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0) {
    }
    db_close(d);
    return 0;
}

static void test_lock_held_by_another_process(void **state)
{
    testdir_fixture *f = *state;
    int in[2], out[2];
    assert_int_equal(pipe(in), 0);
    assert_int_equal(pipe(out), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    char self[512];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    assert_true(n > 0);
    self[n] = 0;
    char *argv[] = {self, "--hold", f->dir, NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, self, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);

    char line[16] = "";
    ssize_t got = read(out[0], line, sizeof(line) - 1);
    if (got < 5 || strncmp(line, "ready", 5) != 0) {
        close(in[1]);
        waitpid(pid, NULL, 0);
        fail_msg("helper process did not open the database");
    }
    db *d = (db *)1;
    int rv = db_open(&d, f->dir, NULL, two_cfs, 2, f->err, sizeof(f->err));
    close(in[1]); /* lets the helper close and exit */
    int status = 0;
    waitpid(pid, &status, 0);
    close(out[0]);
    assert_int_equal(rv, LAPSE_EIO);
    assert_null(d);
    if (strstr(f->err, "LOCK") == NULL && strstr(f->err, "lock") == NULL) {
        fail_msg("lock error does not mention the lock: %s", f->err);
    }
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* Released with the process: this open succeeds. */
    d = open_db(f, two_cfs, 2);
    db_close(d);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--hold") == 0) {
        return hold_lock(argv[2]);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reopen_keeps_data, testdir_setup, testdir_teardown),
        cmocka_unit_test_setup_teardown(test_missing_dir_without_create_fails, testdir_setup,
                                        testdir_teardown),
        cmocka_unit_test_setup_teardown(test_column_families_created_and_kept, testdir_setup,
                                        testdir_teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, testdir_setup, testdir_teardown),
        cmocka_unit_test_setup_teardown(test_batch_is_atomic, testdir_setup, testdir_teardown),
        cmocka_unit_test_setup_teardown(test_thread_batch_is_kept, testdir_setup, testdir_teardown),
        cmocka_unit_test_setup_teardown(test_iterator_bounds_seek_reverse, testdir_setup,
                                        testdir_teardown),
        cmocka_unit_test_setup_teardown(test_multi_get, testdir_setup, testdir_teardown),
        cmocka_unit_test_setup_teardown(test_delete_range_and_compact, testdir_setup,
                                        testdir_teardown),
        cmocka_unit_test_setup_teardown(test_approx_size_of_a_range, testdir_setup,
                                        testdir_teardown),
        cmocka_unit_test_setup_teardown(test_expiring_family_drops_old_entries, testdir_setup,
                                        testdir_teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_sees_one_moment, testdir_setup,
                                        testdir_teardown),
        cmocka_unit_test_setup_teardown(test_batch_log_replays_elsewhere, testdir_setup,
                                        testdir_teardown),
        cmocka_unit_test_setup_teardown(test_second_open_sees_lock, testdir_setup,
                                        testdir_teardown),
        cmocka_unit_test_setup_teardown(test_lock_held_by_another_process, testdir_setup,
                                        testdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
