/*
 * stream_test.c: stream shards on a destination store, fed through
 * outbox_read -> apply_batch: gapless stream sequences per shard with the
 * outbox's bytes, TTL deletes left out when the stream says so, paged
 * reads, trimming by retention (commit times set with the replaceable wall
 * clock) in bounded steps, dropping a table on the destination, and a
 * stream turned on again numbered past the earlier generation.
 */
#include "../common/clock.h"
#include "apply.h"
#include "expiry.h"
#include "outbox.h"
#include "repl_testutil.h"
#include "store_int.h"
#include "stream.h"

#define HOUR_MS (3600 * 1000LL)

/* Two partition keys in two different partitions of feed. */
static void two_keys(const char **a, const char **b)
{
    static char ka[16], kb[16];
    strcpy(ka, "s0");
    for (int i = 1;; i++) {
        snprintf(kb, sizeof(kb), "s%d", i);
        if (part_of_s(kb, feed.partitions) != part_of_s(ka, feed.partitions)) {
            break;
        }
    }
    *a = ka;
    *b = kb;
}

/* Every record of shard (table, shard) on dst, read 3 at a time. */
static void shard_all(fixture *f, store *dst, uint32_t table_id, uint32_t shard, change_list *out)
{
    change_list page;
    change_list_init(&page);
    change_list_init(out);
    uint64_t after = 0;
    do {
        assert_ok(stream_read(dst, table_id, shard, after, 3, 0, &page, f->err, sizeof(f->err)), f);
        for (size_t i = 0; i < page.n; i++) {
            assert_int_equal(change_list_push(out, page.v[i].seq, page.v[i].data, page.v[i].len),
                             0);
            after = page.v[i].seq;
        }
    } while (page.n > 0);
    change_list_fini(&page);
}

/* Puts n items under pk, each with an Exp due before now when expiring. */
static void writes(fixture *f, const table_schema *t, const char *pk, int from, int n, int expiring)
{
    char exp[32];
    snprintf(exp, sizeof(exp), "%lld", (long long)(now_s - 10));
    for (int i = from; i < from + n; i++) {
        put(f, t, fitem(pk, i, "u", "1", NULL, expiring ? exp : NULL));
    }
}

static void test_shards(void **state)
{
    fixture *f = *state;
    store *dst = open_dst(f, "dst");
    apply_filter stream_only = {NULL, NULL, 1}, gsi_only = {owns_all, NULL, 0};
    store *gdst = open_dst(f, "gsi");
    table_schema quiet = feed; /* TTL deletes left out of the stream */
    quiet.id = 25;
    quiet.stream.ttl_deletes = 0;
    const char *ka, *kb;
    two_keys(&ka, &kb);
    const table_schema *tables[2] = {&feed, &quiet};
    unsigned seed = 3;
    for (int ti = 0; ti < 2; ti++) {
        const table_schema *t = tables[ti];
        writes(f, t, ka, 0, 5, 1);
        writes(f, t, kb, 0, 3, 0);
        for (uint32_t p = 0; p < t->partitions; p++) {
            expiry_sweep_result res = {0};
            assert_ok(expiry_sweep(f->st, t, p, clock_wall_now(), 10, &res, f->err, sizeof(f->err)),
                      f);
        }
        writes(f, t, ka, 10, 2, 0);
        ship_all(f, dst, t, &stream_only, &seed, 1);
        ship_all(f, gdst, t, &gsi_only, &seed, 0);
        for (uint32_t p = 0; p < t->partitions; p++) {
            change_list ob, sh;
            outbox_all(f, t->id, p, &ob);
            shard_all(f, dst, t->id, p, &sh);
            /* The shard is the outbox's records with a stream seq, byte for
             * byte, numbered 1, 2, 3, ... */
            size_t j = 0;
            for (size_t i = 0; i < ob.n; i++) {
                change_record r = decode_ok(&ob.v[i]);
                if (r.stream_seq == 0) {
                    assert_true(t->stream.ttl_deletes == 0 && r.principal == CHANGE_TTL);
                    continue;
                }
                assert_true(j < sh.n);
                assert_true(sh.v[j].seq == j + 1 && r.stream_seq == j + 1);
                assert_int_equal(sh.v[j].len, ob.v[i].len);
                assert_memory_equal(sh.v[j].data, ob.v[i].data, ob.v[i].len);
                j++;
            }
            assert_int_equal(j, sh.n);
            uint64_t last = 0;
            assert_ok(stream_last_seq(dst, t->id, p, &last, f->err, sizeof(f->err)), f);
            assert_true(last == sh.n);
            if (p == part_of_s(ka, t->partitions)) {
                /* 5 puts, 5 TTL deletes (in the stream or not), 2 puts */
                assert_int_equal(ob.n, 12);
                assert_int_equal(sh.n, t->stream.ttl_deletes ? 12 : 7);
            }
            change_list_fini(&ob);
            change_list_fini(&sh);
        }
        /* A destination that does not host the shard stores no records. */
        assert_int_equal(cf_count(gdst, CF_STREAM, t->id), 0);
    }
    store_close(dst);
    store_close(gdst);
}

static void test_trim_by_retention(void **state)
{
    fixture *f = *state;
    store *dst = open_dst(f, "dst");
    apply_filter stream_only = {NULL, NULL, 1};
    const char *ka, *kb;
    two_keys(&ka, &kb);
    unsigned seed = 4;
    /* Three generations an hour apart, 3 records per shard each. */
    for (int h = 0; h < 3; h++) {
        clock_wall_set_offset_ms(h * HOUR_MS);
        writes(f, &feed, ka, h * 3, 3, 0);
        writes(f, &feed, kb, h * 3, 3, 0);
    }
    ship_all(f, dst, &feed, &stream_only, &seed, 0);
    const uint32_t shards[2] = {part_of_s(ka, feed.partitions), part_of_s(kb, feed.partitions)};
    /* At +2h with a 90-minute retention the first generation goes, in
     * steps of at most 2 records looked at. */
    clock_wall_set_offset_ms(2 * HOUR_MS);
    size_t total = 0, trimmed = 0;
    int more = 1, steps = 0;
    while (more) {
        assert_ok(stream_trim(dst, feed.id, clock_wall_now(), 90 * 60 * 1000, 2, &trimmed, &more,
                              f->err, sizeof(f->err)),
                  f);
        total += trimmed;
        assert_true(++steps < 20);
    }
    assert_int_equal(total, 6);
    assert_true(steps > 1);
    for (int i = 0; i < 2; i++) {
        change_list sh;
        shard_all(f, dst, feed.id, shards[i], &sh);
        assert_int_equal(sh.n, 6);
        assert_true(sh.v[0].seq == 4 && sh.v[5].seq == 9);
        change_list_fini(&sh);
    }
    /* Nothing more is old: a second pass trims nothing. */
    assert_ok(stream_trim(dst, feed.id, clock_wall_now(), 90 * 60 * 1000, 100, &trimmed, &more,
                          f->err, sizeof(f->err)),
              f);
    assert_int_equal(trimmed, 0);
    assert_false(more);
    /* Everything is old an hour later with no retention; the last seq
     * stays, and the next record continues it. */
    clock_wall_set_offset_ms(3 * HOUR_MS);
    assert_ok(stream_trim(dst, feed.id, clock_wall_now(), 0, 100, &trimmed, &more, f->err,
                          sizeof(f->err)),
              f);
    assert_int_equal(trimmed, 12);
    assert_int_equal(cf_count(dst, CF_STREAM, feed.id), 0);
    uint64_t last = 0;
    assert_ok(stream_last_seq(dst, feed.id, shards[0], &last, f->err, sizeof(f->err)), f);
    assert_true(last == 9);
    writes(f, &feed, ka, 50, 1, 0);
    ship_all(f, dst, &feed, &stream_only, &seed, 0);
    change_list sh;
    shard_all(f, dst, feed.id, shards[0], &sh);
    assert_int_equal(sh.n, 1);
    assert_true(sh.v[0].seq == 10);
    change_list_fini(&sh);
    assert_code(
        stream_trim(dst, feed.id, clock_wall_now(), 0, 0, &trimmed, &more, f->err, sizeof(f->err)),
        LAPSE_EINVAL, f);
    store_close(dst);
}

static void test_drop_on_destination(void **state)
{
    fixture *f = *state;
    store *dst = open_dst(f, "dst");
    apply_filter fa = {owns_all, NULL, 1};
    table_schema other = feed;
    other.id = 26;
    unsigned seed = 5;
    writes(f, &feed, "d", 0, 5, 0);
    writes(f, &other, "d", 0, 5, 0);
    ship_all(f, dst, &feed, &fa, &seed, 0);
    ship_all(f, dst, &other, &fa, &seed, 0);
    assert_true(cf_count(dst, CF_GSI, feed.id) > 0);
    assert_ok(store_drop_table(dst, feed.id, f->err, sizeof(f->err)), f);
    assert_int_equal(cf_count(dst, CF_GSI, feed.id), 0);
    assert_int_equal(cf_count(dst, CF_STREAM, feed.id), 0);
    assert_int_equal(cf_count(dst, CF_REPL, feed.id), 0);
    uint64_t a = 1;
    uint32_t p = part_of_s("d", feed.partitions);
    assert_ok(apply_applied_seq(dst, feed.id, p, &a, f->err, sizeof(f->err)), f);
    assert_true(a == 0);
    assert_ok(stream_last_seq(dst, feed.id, p, &a, f->err, sizeof(f->err)), f);
    assert_true(a == 0);
    assert_int_equal(cf_count(dst, CF_GSI, other.id), 5 * 1); /* ByUser only */
    assert_int_equal(cf_count(dst, CF_STREAM, other.id), 5);
    store_close(dst);
}

/* A copy that lost records (applied the source from record 6 on, after the
 * source trimmed 1..5) is filled from a whole copy: records of the gap are
 * put, those past it left to the source's batches, and once told it is
 * filled it holds exactly what the whole copy holds and reads as whole; a
 * later loss opens a new gap that the old fill does not close. */
static void test_fill_from_another_copy(void **state)
{
    fixture *f = *state;
    store *whole = open_dst(f, "whole"), *lost = open_dst(f, "lost");
    apply_filter stream_only = {NULL, NULL, 1};
    const uint32_t p = part_of_s("fill", feed.partitions);
    writes(f, &feed, "fill", 0, 8, 0);
    change_list l;
    outbox_all(f, feed.id, p, &l);
    assert_int_equal(l.n, 8);
    const void *recs[8];
    size_t lens[8];
    for (size_t i = 0; i < 8; i++) {
        recs[i] = l.v[i].data;
        lens[i] = l.v[i].len;
    }
    char *e = f->err;
    size_t el = sizeof(f->err);
    uint64_t a = 0, gap = 1;
    int noted = 0, past = 0;
    assert_ok(apply_batch(whole, &feed, p, 1, 8, recs, lens, 8, &stream_only, &a, e, el), f);
    assert_ok(apply_note_missing(lost, feed.id, p, 6, &noted, e, el), f);
    assert_int_equal(noted, 1);
    assert_ok(apply_batch(lost, &feed, p, 1, 8, recs + 5, lens + 5, 3, &stream_only, &a, e, el), f);
    assert_ok(apply_stream_gap(whole, feed.id, p, &gap, e, el), f);
    assert_true(gap == 0);
    assert_ok(apply_stream_gap(lost, feed.id, p, &gap, e, el), f);
    assert_true(gap == 5);

    change_list w;
    shard_all(f, whole, feed.id, p, &w);
    assert_int_equal(w.n, 8);
    const void *wr[8];
    size_t wl[8];
    for (size_t i = 0; i < 8; i++) {
        wr[i] = w.v[i].data;
        wl[i] = w.v[i].len;
    }
    /* A record of another shard spoils the page: nothing is written. */
    assert_code(
        apply_stream_fill(lost, &feed, (p + 1) % feed.partitions, 5, wr, wl, 8, &past, e, el),
        LAPSE_EINVAL, f);
    assert_int_equal(cf_count(lost, CF_STREAM, feed.id), 3);
    /* The first page ends inside the gap; the second reaches past it. */
    assert_ok(apply_stream_fill(lost, &feed, p, 5, wr, wl, 3, &past, e, el), f);
    assert_int_equal(past, 0);
    assert_ok(apply_stream_fill(lost, &feed, p, 5, wr + 3, wl + 3, 5, &past, e, el), f);
    assert_int_equal(past, 1);
    assert_ok(apply_stream_gap(lost, feed.id, p, &gap, e, el), f);
    assert_true(gap == 5); /* until told */
    assert_ok(apply_stream_filled(lost, feed.id, p, 5, e, el), f);
    assert_ok(apply_stream_gap(lost, feed.id, p, &gap, e, el), f);
    assert_true(gap == 0);
    change_list got;
    shard_all(f, lost, feed.id, p, &got);
    assert_int_equal(got.n, 8);
    for (size_t i = 0; i < 8; i++) {
        assert_true(got.v[i].seq == w.v[i].seq);
        assert_int_equal(got.v[i].len, w.v[i].len);
        assert_memory_equal(got.v[i].data, w.v[i].data, w.v[i].len);
    }
    uint64_t last = 0;
    assert_ok(stream_last_seq(lost, feed.id, p, &last, e, el), f);
    assert_true(last == w.v[7].seq);
    /* GSI entries of the source stay missing: filling is the stream's. */
    int missing = 0;
    assert_ok(apply_missing(lost, feed.id, p, &missing, e, el), f);
    assert_int_equal(missing, 1);

    /* A new loss past the fill: a new gap; the old mark closes nothing. */
    assert_ok(apply_note_missing(lost, feed.id, p, 20, &noted, e, el), f);
    assert_int_equal(noted, 1);
    assert_ok(apply_stream_filled(lost, feed.id, p, 5, e, el), f);
    assert_ok(apply_stream_gap(lost, feed.id, p, &gap, e, el), f);
    assert_true(gap == 19);
    change_list_fini(&got);
    change_list_fini(&w);
    change_list_fini(&l);
    store_close(lost);
    store_close(whole);
}

/* A stream turned on again (generation 1) numbers its records from its
 * base, past every record of generation 0. A shard copy that starts with
 * the new generation (the outbox trimmed records 1..3 before it hosted the
 * shard) is whole once the generation's first record is applied: what it
 * misses is no record of this stream. One that missed that first record
 * too has a gap. Turned off, a stream's records are dropped. */
static void test_stream_turned_on_again(void **state)
{
    fixture *f = *state;
    store *whole = open_dst(f, "whole"), *fresh = open_dst(f, "fresh"), *late = open_dst(f, "late");
    apply_filter stream_only = {NULL, NULL, 1};
    const uint32_t p = part_of_s("gen", feed.partitions);
    table_schema again = feed;
    again.stream.generation = 1;
    const uint64_t base = schema_stream_base(&again.stream);
    assert_true(base == UINT64_C(1) << 40);
    writes(f, &feed, "gen", 0, 3, 0);
    writes(f, &again, "gen", 3, 2, 0);
    change_list l;
    outbox_all(f, feed.id, p, &l);
    assert_int_equal(l.n, 5);
    const void *recs[5];
    size_t lens[5];
    const uint64_t want[5] = {1, 2, 3, base, base + 1};
    for (size_t i = 0; i < 5; i++) {
        change_record r;
        recs[i] = l.v[i].data;
        lens[i] = l.v[i].len;
        assert_ok(change_decode_head(recs[i], lens[i], &r), f);
        assert_true(r.stream_seq == want[i]);
    }
    char *e = f->err;
    size_t el = sizeof(f->err);
    uint64_t a = 0, gap = 1, last = 0;
    int noted = 0;
    assert_ok(apply_batch(whole, &feed, p, 1, 5, recs, lens, 5, &stream_only, &a, e, el), f);
    assert_ok(apply_note_missing(fresh, feed.id, p, 4, &noted, e, el), f);
    assert_int_equal(noted, 1);
    assert_ok(apply_stream_gap(fresh, feed.id, p, &gap, e, el), f);
    assert_true(gap == 3); /* until the generation's first record comes */
    assert_ok(apply_batch(fresh, &feed, p, 1, 5, recs + 3, lens + 3, 2, &stream_only, &a, e, el),
              f);
    assert_ok(apply_stream_gap(fresh, feed.id, p, &gap, e, el), f);
    assert_true(gap == 0);
    assert_ok(apply_note_missing(late, feed.id, p, 5, &noted, e, el), f);
    assert_ok(apply_batch(late, &feed, p, 1, 5, recs + 4, lens + 4, 1, &stream_only, &a, e, el), f);
    assert_ok(apply_stream_gap(late, feed.id, p, &gap, e, el), f);
    assert_true(gap == 4);
    /* Read from the generation's base, every copy holds its two records. */
    change_list page;
    change_list_init(&page);
    store *copies[2] = {whole, fresh};
    for (int c = 0; c < 2; c++) {
        assert_ok(stream_read(copies[c], feed.id, p, base - 1, 10, 0, &page, e, el), f);
        assert_int_equal(page.n, 2);
        assert_true(page.v[0].seq == base && page.v[1].seq == base + 1);
        assert_ok(stream_last_seq(copies[c], feed.id, p, &last, e, el), f);
        assert_true(last == base + 1);
    }
    change_list_fini(&page);
    /* Turned off: the records go, the last seq and the marks stay, another
     * table's records stay. */
    table_schema other = feed;
    other.id = 27;
    unsigned seed = 6;
    writes(f, &other, "o", 0, 2, 0);
    ship_all(f, whole, &other, &stream_only, &seed, 0);
    const size_t others = cf_count(whole, CF_STREAM, other.id);
    assert_true(others == 2);
    assert_ok(stream_drop(whole, feed.id, e, el), f);
    assert_int_equal(cf_count(whole, CF_STREAM, feed.id), 0);
    assert_int_equal(cf_count(whole, CF_STREAM, other.id), others);
    assert_ok(stream_last_seq(whole, feed.id, p, &last, e, el), f);
    assert_true(last == base + 1);
    assert_ok(apply_stream_gap(fresh, feed.id, p, &gap, e, el), f);
    assert_ok(stream_drop(fresh, feed.id, e, el), f);
    assert_ok(apply_stream_gap(fresh, feed.id, p, &gap, e, el), f);
    assert_true(gap == 0);
    change_list_fini(&l);
    store_close(late);
    store_close(fresh);
    store_close(whole);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_shards, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_trim_by_retention, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_drop_on_destination, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_fill_from_another_copy, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_stream_turned_on_again, rsetup, rteardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
