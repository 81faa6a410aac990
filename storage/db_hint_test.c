/*
 * db_hint_test.c: the insert-hinted families (db_options.hinted_cfs) against a
 * real RocksDB in a scratch directory: logs appended in order and trimmed by
 * range deletions from their bare prefix keep exactly their records; a
 * range deletion that begins at a longer key is refused with its whole
 * batch; and a write-ahead log written without that rule (an older build's)
 * is replayed safely when the family is opened with hints.
 *
 * The workload is the replication log's (partition/store_commit.c): per
 * partition, keys u32be table | u32be partition | u64be seq in order, and
 * trims of everything below a sequence number.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../common/buf.h"
#include "../common/lapse_err.h"
#include "db.h"
#include "storage_testutil.h"

#define PARTS 4
#define PREFIX 8          /* table | partition */
#define HINT (PREFIX + 1) /* and the top byte of seq */
#define ROUNDS 400
#define PER_ROUND 5
#define KEEP 12

/* The model: records [lo, next) of each partition. */
typedef struct model {
    uint64_t lo[PARTS];
    uint64_t next[PARTS];
} model;

static const char *const cfs[] = {"items", "log", "requests"};
static const char *const hinted_cfs[] = {"log", "requests"};
enum { CF_LOG = 1, CF_REQUESTS = 2 };

static db *open_log(testdir_fixture *f, int hinted)
{
    db *d = NULL;
    db_options o = {.block_cache_bytes = 8 << 20,
                    .create_if_missing = 1,
                    .hinted_cfs = hinted_cfs,
                    .nhinted = hinted ? 2 : 0,
                    .hint_prefix_len = HINT};
    testdir_assert_ok(db_open(&d, f->dir, &o, cfs, 3, f->err, sizeof(f->err)), f);
    return d;
}

/* The key of record seq of partition p (16 bytes), or its bare prefix. */
static size_t log_key(uint8_t *k, uint32_t p, uint64_t seq, int bare)
{
    buf_put_u32be(k, 7);
    buf_put_u32be(k + 4, p);
    if (bare) {
        return PREFIX;
    }
    buf_put_u64be(k + PREFIX, seq);
    return PREFIX + 8;
}

/* ROUNDS batches, each appending PER_ROUND records to every partition, in
 * turn, and every seventh trimming every partition to its last KEEP
 * records with a range deletion that begins at the bare prefix, or (long)
 * at the partition's record 0, as builds before the rule did. */
static void append_and_trim(testdir_fixture *f, model *m, db *d, int long_begin)
{
    for (int r = 0; r < ROUNDS; r++) {
        db_batch *b = db_batch_new();
        assert_non_null(b);
        for (uint32_t p = 0; p < PARTS; p++) {
            for (int i = 0; i < PER_ROUND; i++) {
                uint8_t k[16], v[8];
                buf_put_u64be(v, m->next[p]);
                size_t kl = log_key(k, p, m->next[p]++, 0);
                db_batch_put(b, d, CF_LOG, k, kl, v, sizeof(v));
            }
            if (r % 7 == 6) {
                uint8_t lo[16], hi[16];
                size_t ll = log_key(lo, p, 0, !long_begin);
                size_t hl = log_key(hi, p, m->next[p] - KEEP, 0);
                db_batch_delete_range(b, d, CF_LOG, lo, ll, hi, hl);
                m->lo[p] = m->next[p] - KEEP;
            }
        }
        testdir_assert_ok(db_write(d, b, 0, f->err, sizeof(f->err)), f);
        db_batch_free(b);
    }
}

/* The family holds exactly the model's records, in order, each with its
 * own sequence number as value. */
static void expect_model(testdir_fixture *f, const model *m, db *d)
{
    db_iter *it = NULL;
    assert_int_equal(db_iter_new(&it, d, CF_LOG, NULL, 0, NULL, 0), 0);
    db_iter_seek_first(it);
    for (uint32_t p = 0; p < PARTS; p++) {
        for (uint64_t s = m->lo[p]; s < m->next[p]; s++) {
            uint8_t want[16];
            log_key(want, p, s, 0);
            size_t kl = 0, vl = 0;
            if (!db_iter_valid(it)) {
                fail_msg("partition %u: record %llu missing", (unsigned)p, (unsigned long long)s);
            }
            const uint8_t *k = db_iter_key(it, &kl);
            const uint8_t *v = db_iter_value(it, &vl);
            if (kl != sizeof(want) || memcmp(k, want, kl) != 0) {
                fail_msg("partition %u: record %llu is not next", (unsigned)p,
                         (unsigned long long)s);
            }
            assert_int_equal(vl, 8);
            assert_int_equal(buf_get_u64be(v), s);
            db_iter_next(it);
        }
    }
    assert_false(db_iter_valid(it));
    testdir_assert_ok(db_iter_status(it, f->err, sizeof(f->err)), f);
    db_iter_free(it);
}

static void test_trimmed_log_keeps_its_records(void **state)
{
    testdir_fixture *f = *state;
    model m = {0};
    db *d = open_log(f, 1);
    append_and_trim(f, &m, d, 0);
    expect_model(f, &m, d);
    db_close(d);
    d = open_log(f, 1); /* the same again after a replay of the WAL */
    expect_model(f, &m, d);
    append_and_trim(f, &m, d, 0);
    expect_model(f, &m, d);
    db_close(d);
}

/* A range deletion that begins at a key of HINT bytes or more fails its
 * whole batch, puts included, in either hinted family; one in another
 * family does not. */
static void test_long_range_delete_refused(void **state)
{
    testdir_fixture *f = *state;
    db *d = open_log(f, 1);
    uint8_t k[16], lo[16];
    size_t kl = log_key(k, 1, 5, 0);
    log_key(lo, 1, 0, 0);
    db_batch *b = db_batch_new();
    assert_non_null(b);
    db_batch_put(b, d, CF_LOG, k, kl, "v", 1);
    db_batch_delete_range(b, d, CF_LOG, lo, HINT, k, kl);
    assert_int_equal(db_write(d, b, 0, f->err, sizeof(f->err)), LAPSE_EINVAL);
    assert_non_null(strstr(f->err, "range deletion"));
    db_batch_clear(b);
    db_batch_delete_range(b, d, CF_REQUESTS, lo, sizeof(lo), k, kl);
    assert_int_equal(db_write(d, b, 0, f->err, sizeof(f->err)), LAPSE_EINVAL);
    db_batch_clear(b);
    db_batch_delete_range(b, d, CF_REQUESTS, lo, PREFIX, k, kl);
    testdir_assert_ok(db_write(d, b, 0, f->err, sizeof(f->err)), f);
    db_batch_clear(b);
    db_batch_delete_range(b, d, 0, lo, sizeof(lo), k, kl);
    db_batch_put(b, d, CF_LOG, k, kl, "v", 1);
    testdir_assert_ok(db_write(d, b, 0, f->err, sizeof(f->err)), f);
    db_batch_free(b);

    buf v;
    buf_init(&v);
    int found = 0;
    testdir_assert_ok(db_get(d, CF_LOG, k, kl, &v, &found, f->err, sizeof(f->err)), f);
    assert_true(found);
    buf_fini(&v);
    db_close(d);
}

/* A log written without hints by the older rule (trims from record 0)
 * and left in the write-ahead log (no flush at close): the hinted open
 * replays it first without hints, and every record is as written. */
static void test_older_log_replayed_safely(void **state)
{
    testdir_fixture *f = *state;
    model m = {0};
    db *d = open_log(f, 0);
    append_and_trim(f, &m, d, 1);
    expect_model(f, &m, d);
    db_close(d);
    d = open_log(f, 1);
    expect_model(f, &m, d);
    append_and_trim(f, &m, d, 0);
    expect_model(f, &m, d);
    db_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_trimmed_log_keeps_its_records, testdir_setup,
                                        testdir_teardown),
        cmocka_unit_test_setup_teardown(test_long_range_delete_refused, testdir_setup,
                                        testdir_teardown),
        cmocka_unit_test_setup_teardown(test_older_log_replayed_safely, testdir_setup,
                                        testdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
