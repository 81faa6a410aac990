/*
 * outbox_test.c: the source side of replication against a real RocksDB:
 * the record each kind of write makes (and the writes that make none), TTL
 * deletes with their principal and the stream sequence that skips them when
 * the stream leaves them out, counters surviving reopen and failed writes
 * with no gap, acks and trimming below every destination's ack (acks and
 * the last seq not waiting for a write's stripe lock), read limits, drops,
 * and the invariant that makes all of it one WriteBatch with the item:
 * after every write of a random sequence (some of them failing), replaying
 * the outbox gives exactly the stored table, and the LSI family matches.
 */
#include <pthread.h>

#include "../common/clock.h"
#include "expiry.h"
#include "outbox.h"
#include "repl_testutil.h"
#include "store_int.h"

static item *fkey(const char *pk, int sk)
{
    return fitem(pk, sk, NULL, NULL, NULL, NULL);
}

static void assert_image(change_bytes b, const item *want)
{
    item *got = image_of(b);
    assert_true((got == NULL) == (want == NULL));
    if (got != NULL && !item_eq(got, want)) {
        fail_msg("an image differs from the item written");
    }
    item_free(got);
}

/* ======================================================================== */
/* Records of each write                                                    */
/* ======================================================================== */

static void test_records_of_each_write(void **state)
{
    fixture *f = *state;
    const uint32_t part = part_of_s("p", feed.partitions);
    const int64_t t0 = clock_wall_now().ms;
    item *a = fitem("p", 1, "u1", "5", "k", NULL);
    put(f, &feed, item_dup(a)); /* 1 INSERT */
    /* Writes that change nothing make no record (as DynamoDB Streams): the
     * same item again, or in another attribute order (other bytes). */
    put(f, &feed, item_dup(a));
    put(f, &feed,
        itm(5, "Kind", ATTR_S, "k", "At", ATTR_N, "5", "User", ATTR_S, "u1", "Sk", ATTR_N, "1",
            "Pk", ATTR_S, "p"));
    attr_value nine = val(ATTR_N, "9");
    store_update_action set_at = {"At", &nine};
    item *k = fkey("p", 1), *a2 = NULL, *a3 = NULL;
    assert_ok(store_update(f->st, &feed, k, &set_at, 1, NULL, &a2, f->err, sizeof(f->err)),
              f); /* 2 MODIFY */
    assert_ok(store_update(f->st, &feed, k, &set_at, 1, NULL, &a3, f->err, sizeof(f->err)),
              f); /* none: At is 9 already */
    item_free(a3);
    store_cond fails = {STORE_COND_NOT_EXISTS, "Pk", NULL};
    assert_code(store_put(f->st, &feed, a, &fails, NULL, f->err, sizeof(f->err)), LAPSE_ECONDITION,
                f); /* none */
    item *absent = fkey("p", 99);
    assert_ok(store_delete(f->st, &feed, absent, NULL, NULL, f->err, sizeof(f->err)), f); /* none */
    assert_ok(store_delete(f->st, &feed, k, NULL, NULL, f->err, sizeof(f->err)), f); /* 3 REMOVE */
    item *kb = fkey("p", 2), *b = NULL;
    assert_ok(store_update(f->st, &feed, kb, &set_at, 1, NULL, &b, f->err, sizeof(f->err)),
              f); /* 4 INSERT (an upsert) */
    item *c1 = fitem("p", 3, "u1", "1", NULL, NULL), *c2 = fitem("p", 3, "u2", "2", NULL, NULL);
    store_write w[4] = {{c1, NULL}, {c2, NULL}, {NULL, kb}, {NULL, absent}};
    assert_ok(store_batch_write(f->st, &feed, w, 4, f->err, sizeof(f->err)),
              f); /* 5 REMOVE of p/2, 6 INSERT of p/3 = c2 (key order) */
    const int64_t t1 = clock_wall_now().ms;

    change_list l;
    outbox_all(f, feed.id, part, &l);
    assert_int_equal(l.n, 6);
    static const change_event ev[6] = {CHANGE_INSERT, CHANGE_MODIFY, CHANGE_REMOVE,
                                       CHANGE_INSERT, CHANGE_REMOVE, CHANGE_INSERT};
    const item *olds[6] = {NULL, a, a2, NULL, b, NULL};
    const item *news[6] = {a, a2, NULL, b, NULL, c2};
    const item *keys[6] = {k, k, k, kb, kb, NULL};
    item *k3 = fkey("p", 3);
    keys[5] = k3;
    int64_t prev_ms = 0;
    for (size_t i = 0; i < l.n; i++) {
        change_record r = decode_ok(&l.v[i]);
        assert_true(r.seq == i + 1 && l.v[i].seq == i + 1);
        assert_true(r.stream_seq == i + 1); /* every user change is in the stream */
        assert_int_equal(r.table_id, feed.id);
        assert_int_equal(r.part, part);
        assert_int_equal(r.event, ev[i]);
        assert_int_equal(r.principal, CHANGE_USER);
        assert_true(r.commit_ms >= t0 && r.commit_ms <= t1 && r.commit_ms >= prev_ms);
        prev_ms = r.commit_ms;
        assert_image(r.old_image, olds[i]);
        assert_image(r.new_image, news[i]);
        assert_image(r.keys, keys[i]);
    }
    uint64_t last = 0;
    assert_ok(outbox_last_seq(f->st, feed.id, part, &last, f->err, sizeof(f->err)), f);
    assert_true(last == 6);
    /* A table without GSI or stream writes no records and no counters. */
    put(f, &music, song("Queen", "Bohemian", "1975"));
    assert_int_equal(cf_count(f->st, CF_OUTBOX, music.id), 0);
    assert_int_equal(cf_count(f->st, CF_REPL, music.id), 0);
    change_list_fini(&l);
    item_value_fini(&nine);
    item *frees[] = {a, k, a2, absent, kb, b, c1, c2, k3};
    for (size_t i = 0; i < sizeof(frees) / sizeof(frees[0]); i++) {
        item_free(frees[i]);
    }
}

/* A number written another way ("1E0" for "1.0", the same length and
 * value) changes the stored item, so it is a change: a MODIFY, through a
 * single put and through a batch (which compares the bytes). */
static void test_number_text_change_is_a_change(void **state)
{
    fixture *f = *state;
    const uint32_t part = part_of_s("q", feed.partitions);
    put(f, &feed, fitem("q", 1, "u1", "1.0", NULL, NULL)); /* 1 INSERT */
    put(f, &feed, fitem("q", 1, "u1", "1.0", NULL, NULL)); /* none: the same */
    put(f, &feed, fitem("q", 1, "u1", "1E0", NULL, NULL)); /* 2 MODIFY */
    item *again = fitem("q", 1, "u1", "1E0", NULL, NULL),
         *other = fitem("q", 1, "u1", "1.0", NULL, NULL);
    store_write w1[1] = {{again, NULL}}, w2[1] = {{other, NULL}};
    assert_ok(store_batch_write(f->st, &feed, w1, 1, f->err, sizeof(f->err)), f); /* none */
    assert_ok(store_batch_write(f->st, &feed, w2, 1, f->err, sizeof(f->err)), f); /* 3 MODIFY */
    change_list l;
    outbox_all(f, feed.id, part, &l);
    assert_int_equal(l.n, 3);
    static const change_event ev[3] = {CHANGE_INSERT, CHANGE_MODIFY, CHANGE_MODIFY};
    for (size_t i = 0; i < l.n; i++) {
        change_record r = decode_ok(&l.v[i]);
        assert_int_equal(r.event, ev[i]);
    }
    change_list_fini(&l);
    item_free(again);
    item_free(other);
}

/* ======================================================================== */
/* TTL deletes and the stream sequence                                      */
/* ======================================================================== */

/* Writes to t: user puts and TTL deletes interleaved; returns the records. */
static void ttl_mix(fixture *f, const table_schema *t, change_list *l)
{
    char exp[32];
    snprintf(exp, sizeof(exp), "%lld", (long long)(now_s + 100));
    for (int i = 0; i < 4; i++) {
        put(f, t, fitem("m", i, "u", "1", NULL, exp));       /* due at now + 100 */
        put(f, t, fitem("m", 10 + i, "u", "1", NULL, NULL)); /* never expires */
    }
    expiry_sweep_result res = {0};
    uint32_t part = part_of_s("m", t->partitions);
    assert_ok(expiry_sweep(f->st, t, part, (clock_wall){(now_s + 200) * 1000}, 2, &res, f->err,
                           sizeof(f->err)),
              f);
    assert_int_equal(res.deleted, 2);
    put(f, t, fitem("m", 20, NULL, NULL, NULL, NULL));
    assert_ok(expiry_sweep(f->st, t, part, (clock_wall){(now_s + 200) * 1000}, 10, &res, f->err,
                           sizeof(f->err)),
              f);
    assert_int_equal(res.deleted, 2);
    put(f, t, fitem("m", 21, NULL, NULL, NULL, NULL));
    outbox_all(f, t->id, part, l);
    assert_int_equal(l->n, 14); /* 8 puts, 2 deletes, 1 put, 2 deletes, 1 put */
}

static void test_ttl_deletes_and_stream_seq(void **state)
{
    fixture *f = *state;
    table_schema off = feed, nostream = feed;
    off.id = 22;
    off.stream.ttl_deletes = 0;
    nostream.id = 23;
    nostream.stream.enabled = 0;
    const table_schema *tables[3] = {&feed, &off, &nostream};
    for (int ti = 0; ti < 3; ti++) {
        const table_schema *t = tables[ti];
        change_list l;
        ttl_mix(f, t, &l);
        uint64_t want_stream = 1;
        size_t ttl_records = 0;
        for (size_t i = 0; i < l.n; i++) {
            change_record r = decode_ok(&l.v[i]);
            assert_true(r.seq == i + 1);
            int is_ttl = r.principal == CHANGE_TTL;
            if (is_ttl) {
                ttl_records++;
                assert_int_equal(r.event, CHANGE_REMOVE);
                assert_int_equal(r.ttl_attr.len, 3);
                assert_memory_equal(r.ttl_attr.data, "Exp", 3);
                assert_true(r.expires_at_ms == (now_s + 100) * 1000);
                assert_true(r.deleted_at_ms == r.commit_ms);
                assert_null(r.new_image.data);
                item *old = image_of(r.old_image), *key = image_of(r.keys);
                char exp[32];
                snprintf(exp, sizeof(exp), "%lld", (long long)(now_s + 100));
                assert_non_null(old);
                assert_attr(old, "Exp", ATTR_N, exp);
                assert_int_equal(key->n, 2);
                assert_true(item_value_eq(item_get(key, "Pk"), item_get(old, "Pk")));
                assert_true(item_value_eq(item_get(key, "Sk"), item_get(old, "Sk")));
                item_free(old);
                item_free(key);
            }
            int carried = t->stream.enabled && (!is_ttl || t->stream.ttl_deletes);
            if (carried) {
                assert_true(r.stream_seq == want_stream);
                want_stream++;
            } else {
                assert_true(r.stream_seq == 0);
            }
        }
        assert_int_equal(ttl_records, 4);
        change_list_fini(&l);
    }
}

/* ======================================================================== */
/* Counters, acks, trimming, reads, drops                                   */
/* ======================================================================== */

static void expect_seqs(fixture *f, uint32_t part, uint64_t n)
{
    change_list l;
    outbox_all(f, feed.id, part, &l);
    assert_int_equal(l.n, n);
    for (size_t i = 0; i < l.n; i++) {
        change_record r = decode_ok(&l.v[i]);
        assert_true(r.seq == i + 1 && r.stream_seq == i + 1);
    }
    uint64_t last = 0;
    assert_ok(outbox_last_seq(f->st, feed.id, part, &last, f->err, sizeof(f->err)), f);
    assert_true(last == n);
    change_list_fini(&l);
}

static void test_counters_survive_reopen_and_failures(void **state)
{
    fixture *f = *state;
    const uint32_t part = part_of_s("r", feed.partitions);
    for (int i = 0; i < 5; i++) {
        put(f, &feed, fitem("r", i, "u", "1", NULL, NULL));
    }
    reopen(f);
    expect_seqs(f, part, 5);
    /* Failed writes (a put, a batch, a delete) take no number. */
    item *it = fitem("r", 9, NULL, NULL, NULL, NULL), *k = fkey("r", 0);
    db_fault_write(f->st->db, 1);
    assert_code(store_put(f->st, &feed, it, NULL, NULL, f->err, sizeof(f->err)), LAPSE_EIO, f);
    store_write w = {it, NULL};
    db_fault_write(f->st->db, 1);
    assert_code(store_batch_write(f->st, &feed, &w, 1, f->err, sizeof(f->err)), LAPSE_EIO, f);
    db_fault_write(f->st->db, 1);
    assert_code(store_delete(f->st, &feed, k, NULL, NULL, f->err, sizeof(f->err)), LAPSE_EIO, f);
    expect_seqs(f, part, 5);
    for (int i = 5; i < 10; i++) {
        put(f, &feed, fitem("r", i, "u", "1", NULL, NULL));
    }
    expect_seqs(f, part, 10);
    reopen(f);
    assert_ok(store_delete(f->st, &feed, k, NULL, NULL, f->err, sizeof(f->err)), f);
    expect_seqs(f, part, 11);
    item_free(it);
    item_free(k);
}

static void test_ack_and_trim(void **state)
{
    fixture *f = *state;
    const uint32_t part = part_of_s("t", feed.partitions);
    for (int i = 0; i < 20; i++) {
        put(f, &feed, fitem("t", i, NULL, NULL, NULL, NULL));
    }
    char *e = f->err;
    size_t el = sizeof(f->err);
    assert_ok(outbox_ack(f->st, feed.id, part, 1, 15, e, el), f);
    assert_ok(outbox_ack(f->st, feed.id, part, 2, 8, e, el), f);
    assert_ok(outbox_ack(f->st, feed.id, part, 2, 5, e, el), f); /* lower: ignored */
    assert_code(outbox_ack(f->st, feed.id, part, 2, 21, e, el), LAPSE_EINVAL, f);
    uint64_t v = 0;
    assert_ok(outbox_acked(f->st, feed.id, part, 2, &v, e, el), f);
    assert_true(v == 8);
    const uint32_t dests[3] = {1, 2, 3};
    assert_ok(outbox_trim(f->st, feed.id, part, dests, 2, 0, &v, e, el), f);
    assert_true(v == 8);
    change_list l;
    change_list_init(&l);
    assert_ok(outbox_read(f->st, feed.id, part, 0, 100, 0, &l, e, el), f);
    assert_int_equal(l.n, 12);
    assert_true(l.v[0].seq == 9); /* only the records both acked are gone */
    assert_ok(outbox_pending(f->st, feed.id, part, 1, &v, e, el), f);
    assert_true(v == 5);
    assert_ok(outbox_pending(f->st, feed.id, part, 2, &v, e, el), f);
    assert_true(v == 12);
    assert_ok(outbox_pending(f->st, feed.id, part, 3, &v, e, el), f);
    assert_true(v == 20);
    /* Destination 3 has acked nothing: trimming with it deletes nothing. */
    assert_ok(outbox_trim(f->st, feed.id, part, dests, 3, 8, &v, e, el), f);
    assert_true(v == 0);
    assert_code(outbox_trim(f->st, feed.id, part, dests, 0, 8, &v, e, el), LAPSE_EINVAL, f);
    /* Acks persist; the last seq is kept through a trim of everything. */
    reopen(f);
    for (uint32_t d = 1; d <= 3; d++) {
        assert_ok(outbox_ack(f->st, feed.id, part, d, 20, e, el), f);
    }
    /* From past the earlier trim (records 1..8 are gone already). */
    assert_ok(outbox_trim(f->st, feed.id, part, dests, 3, 8, &v, e, el), f);
    assert_true(v == 20);
    assert_ok(outbox_read(f->st, feed.id, part, 0, 100, 0, &l, e, el), f);
    assert_int_equal(l.n, 0);
    /* Nothing past `trimmed`: no write, the acked seq reported. */
    assert_ok(outbox_trim(f->st, feed.id, part, dests, 3, 20, &v, e, el), f);
    assert_true(v == 20);
    assert_ok(outbox_last_seq(f->st, feed.id, part, &v, e, el), f);
    assert_true(v == 20);
    put(f, &feed, fitem("t", 99, NULL, NULL, NULL, NULL));
    assert_ok(outbox_read(f->st, feed.id, part, 0, 100, 0, &l, e, el), f);
    assert_int_equal(l.n, 1);
    assert_true(l.v[0].seq == 21);
    change_list_fini(&l);
}

/* A replica's copy is trimmed as far as its primary says, never past its
 * own last record, and from past the previous trim. */
static void test_trim_copy(void **state)
{
    fixture *f = *state;
    const uint32_t part = part_of_s("c", feed.partitions);
    for (int i = 0; i < 10; i++) {
        put(f, &feed, fitem("c", i, NULL, NULL, NULL, NULL));
    }
    char *e = f->err;
    size_t el = sizeof(f->err);
    uint64_t v = 0, first = 0;
    assert_ok(outbox_first_seq(f->st, feed.id, part, &first, e, el), f);
    assert_true(first == 1);
    assert_ok(outbox_trim_copy(f->st, feed.id, part, 0, 4, &v, e, el), f);
    assert_true(v == 4);
    assert_ok(outbox_first_seq(f->st, feed.id, part, &first, e, el), f);
    assert_true(first == 5);
    /* The primary trimmed past this copy's last record: only its own go. */
    assert_ok(outbox_trim_copy(f->st, feed.id, part, 4, 25, &v, e, el), f);
    assert_true(v == 10);
    assert_ok(outbox_first_seq(f->st, feed.id, part, &first, e, el), f);
    assert_true(first == 0);
    /* Records arriving later are not hidden by the earlier trim. */
    put(f, &feed, fitem("c", 11, NULL, NULL, NULL, NULL));
    assert_ok(outbox_first_seq(f->st, feed.id, part, &first, e, el), f);
    assert_true(first == 11);
    /* Nothing new to trim: where it was. */
    assert_ok(outbox_trim_copy(f->st, feed.id, part, 10, 10, &v, e, el), f);
    assert_true(v == 10);
    assert_ok(outbox_first_seq(f->st, feed.id, part, &first, e, el), f);
    assert_true(first == 11);
}

static void test_read_limits(void **state)
{
    fixture *f = *state;
    const uint32_t part = part_of_s("l", feed.partitions);
    for (int i = 0; i < 10; i++) {
        put(f, &feed, fitem("l", i, NULL, NULL, NULL, NULL));
    }
    change_list l;
    change_list_init(&l);
    assert_ok(outbox_read(f->st, feed.id, part, 3, 4, 0, &l, f->err, sizeof(f->err)), f);
    assert_int_equal(l.n, 4);
    assert_true(l.v[0].seq == 4 && l.v[3].seq == 7);
    /* A byte limit below one record still returns one. */
    assert_ok(outbox_read(f->st, feed.id, part, 0, 100, 1, &l, f->err, sizeof(f->err)), f);
    assert_int_equal(l.n, 1);
    size_t one = l.v[0].len;
    assert_ok(outbox_read(f->st, feed.id, part, 0, 100, 2 * one + 1, &l, f->err, sizeof(f->err)),
              f);
    assert_int_equal(l.n, 2);
    assert_ok(outbox_read(f->st, feed.id, part, 10, 100, 0, &l, f->err, sizeof(f->err)), f);
    assert_int_equal(l.n, 0);
    assert_code(outbox_read(f->st, feed.id, part, 0, 0, 0, &l, f->err, sizeof(f->err)),
                LAPSE_EINVAL, f);
    change_list_fini(&l);
}

static void test_drop_table(void **state)
{
    fixture *f = *state;
    const uint32_t part = part_of_s("d", feed.partitions);
    for (int i = 0; i < 5; i++) {
        put(f, &feed, fitem("d", i, NULL, NULL, NULL, NULL));
    }
    assert_ok(outbox_ack(f->st, feed.id, part, 1, 3, f->err, sizeof(f->err)), f);
    assert_ok(store_drop_table(f->st, feed.id, f->err, sizeof(f->err)), f);
    assert_int_equal(cf_count(f->st, CF_OUTBOX, feed.id), 0);
    assert_int_equal(cf_count(f->st, CF_REPL, feed.id), 0);
    /* The cached counters went with the table. */
    put(f, &feed, fitem("d", 0, NULL, NULL, NULL, NULL));
    expect_seqs(f, part, 1);
}

/* The shipper reads the last seq and records acks while a TTL sweep may
 * hold the partition's stripe lock for a whole batch: neither waits for it
 * when the cached counters answer (with a lock that did wait, this test
 * deadlocks and its timeout fails it). An ack beyond the last record is
 * still refused, after checking under the lock. */
static void test_ack_does_not_wait_for_writes(void **state)
{
    fixture *f = *state;
    const uint32_t part = part_of_s("w", feed.partitions);
    for (int i = 0; i < 6; i++) {
        put(f, &feed, fitem("w", i, NULL, NULL, NULL, NULL));
    }
    char *e = f->err;
    size_t el = sizeof(f->err);
    uint64_t v = 0;
    pthread_mutex_t *mu = store_stripe(f->st, feed.id, part);
    pthread_mutex_lock(mu); /* a write in progress */
    assert_ok(outbox_last_seq(f->st, feed.id, part, &v, e, el), f);
    assert_true(v == 6);
    assert_ok(outbox_ack(f->st, feed.id, part, 1, 4, e, el), f);
    assert_ok(outbox_ack(f->st, feed.id, part, 1, 6, e, el), f);
    assert_ok(outbox_ack(f->st, feed.id, part, 1, 5, e, el), f); /* lower: ignored */
    pthread_mutex_unlock(mu);
    assert_ok(outbox_acked(f->st, feed.id, part, 1, &v, e, el), f);
    assert_true(v == 6);
    assert_code(outbox_ack(f->st, feed.id, part, 1, 7, e, el), LAPSE_EINVAL, f);
    /* A cold cache (after reopen) falls back to the lock and the store. */
    reopen(f);
    assert_ok(outbox_last_seq(f->st, feed.id, part, &v, e, el), f);
    assert_true(v == 6);
    assert_code(outbox_ack(f->st, feed.id, part, 2, 7, e, el), LAPSE_EINVAL, f);
    assert_ok(outbox_ack(f->st, feed.id, part, 2, 6, e, el), f);
}

/* Writers on one partition from several threads: the numbering stays
 * gapless and in commit order (the stripe lock hands out seq numbers). */
#define WRITERS 4
#define WRITES 150

typedef struct writer {
    fixture *f;
    int id;
    int errors;
} writer;

static void *write_many(void *arg)
{
    writer *w = arg;
    char err[256];
    for (int i = 0; i < WRITES; i++) {
        char at[16];
        snprintf(at, sizeof at, "%d", i); /* each write changes the item */
        item *it = fitem("cc", w->id * 1000 + i % 50, "u", at, NULL, NULL);
        if (i % 10 == 9) {
            store_write bw[2] = {{it, NULL}, {it, NULL}}; /* one key: one record */
            w->errors += store_batch_write(w->f->st, &feed, bw, 2, err, sizeof(err)) != 0;
        } else {
            w->errors += store_put(w->f->st, &feed, it, NULL, NULL, err, sizeof(err)) != 0;
        }
        item_free(it);
    }
    return NULL;
}

static void test_concurrent_writers(void **state)
{
    fixture *f = *state;
    pthread_t th[WRITERS];
    writer w[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (writer){f, i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, write_many, &w[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].errors, 0);
    }
    change_list l;
    outbox_all(f, feed.id, part_of_s("cc", feed.partitions), &l); /* checks gapless */
    assert_int_equal(l.n, WRITERS * WRITES);
    int64_t prev = 0;
    for (size_t i = 0; i < l.n; i++) {
        change_record r = decode_ok(&l.v[i]);
        assert_true(r.seq == i + 1 && r.stream_seq == i + 1);
        assert_true(r.commit_ms >= prev);
        prev = r.commit_ms;
    }
    change_list_fini(&l);
}

/* ======================================================================== */
/* The outbox mirrors the store after every write                           */
/* ======================================================================== */

#define NCUST 3
#define NORD 8
#define NKEYS (NCUST * NORD)

static const char *const custs[NCUST] = {"a", "b", "c"};

typedef struct mirror {
    item *model[NKEYS];   /* what the store must hold */
    item *replica[NKEYS]; /* the outbox replayed */
    uint64_t seen[4];     /* last seq replayed, per partition */
} mirror;

static int key_index(const item *it)
{
    const attr_value *c = item_get(it, "Cust"), *o = item_get(it, "Order");
    int ci = 0;
    while (strcmp(custs[ci], c->u.bytes.ptr) != 0) {
        ci++;
    }
    return ci * NORD + atoi(o->u.bytes.ptr + 1);
}

static item *random_combo(int key, unsigned *seed)
{
    static const char *const dates[] = {NULL, "1", "2", "-3"};
    static const char *const stats[] = {NULL, "x", "y"};
    char ord[8];
    sprintf(ord, "o%d", key % NORD);
    item *it = order(custs[key / NORD], ord, dates[rand_r(seed) % 4], stats[rand_r(seed) % 3]);
    int e = rand_r(seed) % 3;
    if (e > 0) {
        char exp[32];
        snprintf(exp, sizeof(exp), "%lld", (long long)(e == 1 ? now_s - 10 : now_s + 100000));
        attr_value v = val(ATTR_N, exp);
        assert_int_equal(item_set(it, "Exp", &v), 0);
    }
    return it;
}

static void set(item **slot, const item *it)
{
    item_free(*slot);
    *slot = it != NULL ? item_dup(it) : NULL;
}

/* Replays the new records of every partition into the replica, checking
 * each old image against it, then compares replica, model, store and the
 * LSI family. */
static void check_mirror(fixture *f, const table_schema *t, mirror *m)
{
    change_list l;
    change_list_init(&l);
    for (uint32_t p = 0; p < t->partitions; p++) {
        assert_ok(outbox_read(f->st, t->id, p, m->seen[p], 1000, 0, &l, f->err, sizeof(f->err)), f);
        for (size_t i = 0; i < l.n; i++) {
            change_record r = decode_ok(&l.v[i]);
            assert_true(r.seq == m->seen[p] + 1);
            m->seen[p] = r.seq;
            item *key = image_of(r.keys), *nw = image_of(r.new_image);
            int k = key_index(key);
            assert_image(r.old_image, m->replica[k]);
            set(&m->replica[k], nw);
            item_free(key);
            item_free(nw);
        }
    }
    change_list_fini(&l);
    for (int k = 0; k < NKEYS; k++) {
        char ord[8];
        sprintf(ord, "o%d", k % NORD);
        item *got = get(f, t, okey(custs[k / NORD], ord));
        assert_true((got == NULL) == (m->model[k] == NULL));
        assert_true(got == NULL || item_eq(got, m->model[k]));
        assert_true((m->replica[k] == NULL) == (got == NULL));
        assert_true(got == NULL || item_eq(got, m->replica[k]));
        item_free(got);
    }
    assert_lsi(f, t, m->model, NKEYS);
}

static void test_outbox_mirrors_store(void **state)
{
    fixture *f = *state;
    table_schema t = orders; /* LSIs and TTL */
    t.id = 24;
    t.stream.enabled = 1;
    t.stream.ttl_deletes = 1;
    mirror *m = calloc(1, sizeof(*m));
    unsigned seed = 99173;
    size_t failures = 0, sweeps = 0;
    for (int op = 0; op < 800; op++) {
        int key = rand_r(&seed) % NKEYS, r = rand_r(&seed) % 12;
        char ord[8];
        sprintf(ord, "o%d", key % NORD);
        /* One write in ten fails in RocksDB: it must leave no trace. */
        int fail = r < 10 && rand_r(&seed) % 10 == 0;
        if (fail) {
            db_fault_write(f->st->db, 1);
            failures++;
        }
        int want = fail ? LAPSE_EIO : 0;
        if (r < 3) {
            item *it = random_combo(key, &seed);
            assert_code(store_put(f->st, &t, it, NULL, NULL, f->err, sizeof(f->err)), want, f);
            if (!fail) {
                set(&m->model[key], it);
            }
            item_free(it);
        } else if (r < 5) {
            item *src = random_combo(key, &seed), *k = okey(custs[key / NORD], ord), *nw = NULL;
            store_update_action a[2] = {{"Date", item_get(src, "Date")},
                                        {"Status", item_get(src, "Status")}};
            assert_code(store_update(f->st, &t, k, a, 2, NULL, &nw, f->err, sizeof(f->err)), want,
                        f);
            if (!fail) {
                set(&m->model[key], nw);
            }
            item_free(nw);
            item_free(k);
            item_free(src);
        } else if (r < 7) {
            item *k = okey(custs[key / NORD], ord);
            /* Deleting an absent item writes nothing, so nothing can fail. */
            want = fail && m->model[key] != NULL ? LAPSE_EIO : 0;
            assert_code(store_delete(f->st, &t, k, NULL, NULL, f->err, sizeof(f->err)), want, f);
            if (!fail) {
                set(&m->model[key], NULL);
            }
            item_free(k);
        } else if (r < 10) {
            /* One partition key, so one group: a failure fails it all. */
            store_write w[6];
            item *owned[6] = {NULL};
            int n = 1 + rand_r(&seed) % 6, base = key / NORD * NORD;
            for (int i = 0; i < n; i++) {
                int bk = base + rand_r(&seed) % NORD;
                char bo[8];
                sprintf(bo, "o%d", bk % NORD);
                if (rand_r(&seed) % 3 == 0) {
                    owned[i] = okey(custs[bk / NORD], bo);
                    w[i] = (store_write){NULL, owned[i]};
                } else {
                    owned[i] = random_combo(bk, &seed);
                    w[i] = (store_write){owned[i], NULL};
                }
            }
            assert_code(store_batch_write(f->st, &t, w, (size_t)n, f->err, sizeof(f->err)), want,
                        f);
            for (int i = 0; i < n; i++) {
                if (!fail) {
                    set(&m->model[key_index(owned[i])], w[i].put);
                }
                item_free(owned[i]);
            }
        } else { /* the TTL sweep of every partition */
            clock_wall now = clock_wall_now();
            for (uint32_t p = 0; p < t.partitions; p++) {
                expiry_sweep_result res = {0};
                assert_ok(expiry_sweep(f->st, &t, p, now, 3, &res, f->err, sizeof(f->err)), f);
            }
            for (int k = 0; k < NKEYS; k++) {
                const attr_value *e = m->model[k] ? item_get(m->model[k], "Exp") : NULL;
                if (e != NULL && atoll(e->u.bytes.ptr) < now_s) {
                    set(&m->model[k], NULL);
                }
            }
            sweeps++;
        }
        db_fault_write(f->st->db, 0);
        check_mirror(f, &t, m);
    }
    assert_true(failures > 20 && sweeps > 20);
    for (int k = 0; k < NKEYS; k++) {
        item_free(m->model[k]);
        item_free(m->replica[k]);
    }
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_records_of_each_write, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_number_text_change_is_a_change, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_ttl_deletes_and_stream_seq, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_counters_survive_reopen_and_failures, rsetup,
                                        rteardown),
        cmocka_unit_test_setup_teardown(test_ack_and_trim, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_trim_copy, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_read_limits, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_ack_does_not_wait_for_writes, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_drop_table, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_concurrent_writers, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_outbox_mirrors_store, rsetup, rteardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
