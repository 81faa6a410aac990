/*
 * apply_test.c: the destination side of replication against real
 * RocksDBs: a source store's outboxes shipped to destination stores with
 * outbox_read -> apply_batch, in orderly and in chaotic schedules (resent,
 * overlapping and reordered batches); the GSI family then equals the
 * projection of the source table, for a destination owning every GSI
 * partition and for one owning some (a model test with a fixed seed).
 * Also: exactly-once under resends, refused batches, GSI queries, stream
 * shards (gapless, TTL deletes left out), stream trimming by retention,
 * and drops.
 */
#include "../common/clock.h"
#include "apply.h"
#include "expiry.h"
#include "outbox.h"
#include "repl_testutil.h"
#include "snapshot.h"
#include "store_int.h"
#include "stream.h"

static int owns_odd(void *arg, uint32_t gsi, uint32_t part)
{
    (void)arg;
    (void)gsi;
    return part % 2 == 1;
}

/* ======================================================================== */
/* The expected GSI family, built by hand                                   */
/* ======================================================================== */

static const attr_value *key_val(const item *it, const key_def *kd)
{
    const attr_value *v = kd->name[0] ? item_get(it, kd->name) : NULL;
    if (v == NULL || v->type != kd->type || (v->type == ATTR_S && v->u.bytes.len == 0)) {
        return NULL;
    }
    return v;
}

/* The entries of it: table | index id | gsi part | enc(gsi pk) [| enc(gsi
 * sk)] | enc(pk) | enc(sk) -> projection, for the partitions owns keeps. */
static void expect_gsi(const table_schema *t, const item *it,
                       int (*owns)(void *, uint32_t, uint32_t), kvlist *want)
{
    buf k, v;
    buf_init(&k);
    buf_init(&v);
    for (uint32_t i = 0; i < t->ngsi; i++) {
        const index_def *g = &t->gsi[i];
        const attr_value *gpk = key_val(it, &g->pk), *gsk = key_val(it, &g->sk);
        if (gpk == NULL || (g->sk.name[0] != 0 && gsk == NULL)) {
            continue;
        }
        uint32_t gpart = 0;
        assert_int_equal(hash_partition(gpk, g->partitions, &gpart), 0);
        if (!owns(NULL, i, gpart)) {
            continue;
        }
        buf_clear(&k);
        buf_clear(&v);
        assert_int_equal(buf_append_u32be(&k, t->id), 0);
        assert_int_equal(buf_append_u32be(&k, g->id), 0);
        assert_int_equal(buf_append_u32be(&k, gpart), 0);
        enc(&k, gpk);
        if (gsk != NULL) {
            enc(&k, gsk);
        }
        enc(&k, item_get(it, t->pk.name));
        enc(&k, item_get(it, t->sk.name));
        item *p = item_new();
        const char *names[5] = {t->pk.name, t->sk.name, g->pk.name, g->sk.name, "Exp"};
        for (int n = 0; n < 5; n++) {
            const attr_value *x = names[n][0] ? item_get(it, names[n]) : NULL;
            if (x != NULL && (g->projection == INDEX_PROJECT_KEYS)) {
                assert_int_equal(item_set_copy(p, names[n], x), 0);
            }
        }
        assert_int_equal(item_encode(g->projection == INDEX_PROJECT_ALL ? it : p, &v), 0);
        item_free(p);
        kv_push(want, k.data, k.len, v.data, v.len);
    }
    buf_fini(&k);
    buf_fini(&v);
}

/* Fails unless dst's gsi family is the projection of every item in src. */
static void assert_gsi(fixture *f, store *dst, const table_schema *t,
                       int (*owns)(void *, uint32_t, uint32_t))
{
    kvlist want = {0}, got = {0};
    for (uint32_t p = 0; p < t->partitions; p++) {
        store_page pg;
        assert_ok(store_scan(f->st, t, p, 0, NULL, &pg, f->err, sizeof(f->err)), f);
        for (size_t i = 0; i < pg.n; i++) {
            expect_gsi(t, pg.items[i], owns, &want);
        }
        store_page_fini(&pg);
    }
    kv_sort(&want);
    cf_dump(dst, CF_GSI, t->id, &got);
    assert_kv_equal(&got, &want, "the gsi family");
    kv_fini(&want);
    kv_fini(&got);
}

/* Random writes to feed: few users and kinds, so GSI keys move around. */
static void random_writes(fixture *f, unsigned *seed, int n)
{
    static const char *const users[] = {NULL, "u1", "u2", "u3", NULL};
    static const char *const ats[] = {NULL, "1", "2", "-5", "2.0"};
    static const char *const kinds[] = {NULL, "red", "blue"};
    char pk[8], exp[32];
    snprintf(exp, sizeof(exp), "%lld", (long long)(now_s - 10));
    for (int op = 0; op < n; op++) {
        snprintf(pk, sizeof(pk), "p%d", rand_r(seed) % 6);
        int sk = rand_r(seed) % 5, r = rand_r(seed) % 10;
        item *it = fitem(pk, sk, users[rand_r(seed) % 5], ats[rand_r(seed) % 5],
                         kinds[rand_r(seed) % 3], rand_r(seed) % 4 == 0 ? exp : NULL);
        if (r < 5) {
            put(f, &feed, it);
            continue;
        }
        item *k = fitem(pk, sk, NULL, NULL, NULL, NULL);
        if (r < 7) {
            store_update_action a[2] = {{"User", item_get(it, "User")}, {"At", item_get(it, "At")}};
            assert_ok(store_update(f->st, &feed, k, a, 2, NULL, NULL, f->err, sizeof(f->err)), f);
        } else if (r < 9) {
            assert_ok(store_delete(f->st, &feed, k, NULL, NULL, f->err, sizeof(f->err)), f);
        } else {
            for (uint32_t p = 0; p < feed.partitions; p++) {
                expiry_sweep_result res = {0};
                assert_ok(expiry_sweep(f->st, &feed, p, clock_wall_now(), 4, &res, f->err,
                                       sizeof(f->err)),
                          f);
            }
        }
        item_free(k);
        item_free(it);
    }
}

/* ======================================================================== */
/* Tests                                                                    */
/* ======================================================================== */

static void test_gsi_model(void **state)
{
    fixture *f = *state;
    store *all = open_dst(f, "all"), *odd = open_dst(f, "odd");
    apply_filter fa = {owns_all, NULL, 1}, fo = {owns_odd, NULL, 0};
    unsigned seed = 5150;
    for (int round = 0; round < 6; round++) {
        random_writes(f, &seed, 150);
        /* Half the partitions shipped in order, half in chaos; then all. */
        ship_part(f, all, &feed, (uint32_t)round % 4, &fa, &seed, 1);
        ship_all(f, all, &feed, &fa, &seed, round % 2);
        ship_all(f, odd, &feed, &fo, &seed, 1 - round % 2);
        assert_gsi(f, all, &feed, owns_all);
        assert_gsi(f, odd, &feed, owns_odd);
    }
    assert_true(cf_count(all, CF_GSI, feed.id) > 20);
    /* Shipping everything again changes nothing. */
    for (uint32_t p = 0; p < feed.partitions; p++) {
        change_list l;
        outbox_all(f, feed.id, p, &l);
        if (l.n == 0) {
            continue; /* no key of the test lands here */
        }
        const void *recs[1] = {l.v[0].data};
        size_t lens[1] = {l.v[0].len};
        uint64_t applied = 0;
        assert_ok(
            apply_batch(all, &feed, p, 1, 1, recs, lens, 1, &fa, &applied, f->err, sizeof(f->err)),
            f);
        assert_true(applied == l.v[l.n - 1].seq);
        change_list_fini(&l);
    }
    assert_gsi(f, all, &feed, owns_all);
    store_close(all);
    store_close(odd);
}

static void test_exactly_once(void **state)
{
    fixture *f = *state;
    store *dst = open_dst(f, "dst");
    apply_filter fa = {owns_all, NULL, 0}; /* GSIs only, no stream shard */
    const uint32_t part = part_of_s("x", feed.partitions);
    /* 1: put with User u1; 2: delete; 3..10: x/2..x/9, all in ByUser but
     * x/7 and x/8 (records 8 and 9), which are in no index. */
    put(f, &feed, fitem("x", 1, "u1", "1", "red", NULL));
    item *k = fitem("x", 1, NULL, NULL, NULL, NULL);
    assert_ok(store_delete(f->st, &feed, k, NULL, NULL, f->err, sizeof(f->err)), f);
    item_free(k);
    for (int i = 2; i < 10; i++) {
        put(f, &feed, fitem("x", i, i == 7 || i == 8 ? NULL : "u2", "3", NULL, NULL));
    }
    change_list l;
    outbox_all(f, feed.id, part, &l);
    assert_int_equal(l.n, 10);
    const void *recs[10];
    size_t lens[10];
    for (size_t i = 0; i < 10; i++) {
        recs[i] = l.v[i].data;
        lens[i] = l.v[i].len;
    }
    uint64_t a = 0;
    int w = 0;
    char *e = f->err;
    size_t el = sizeof(f->err);
    assert_ok(apply_batch(dst, &feed, part, 1, 2, recs, lens, 2, &fa, &a, e, el), f);
    assert_true(a == 2);
    /* Record 1 again would put back the entry record 2 deleted. */
    assert_ok(apply_batch(dst, &feed, part, 1, 1, recs, lens, 1, &fa, &a, e, el), f);
    assert_true(a == 2);
    assert_int_equal(cf_count(dst, CF_GSI, feed.id), 0);
    assert_ok(apply_batch(dst, &feed, part, 1, 5, recs, lens, 5, &fa, &a, e, el), f);
    assert_true(a == 5);
    assert_code(apply_batch(dst, &feed, part, 8, 10, recs + 7, lens + 7, 3, &fa, &a, e, el),
                LAPSE_ESTATE, f);
    assert_true(a == 5);
    assert_ok(apply_batch(dst, &feed, part, 4, 7, recs + 3, lens + 3, 4, &fa, &a, e, el), f);
    assert_true(a == 7);
    /* A batch may leave out records that carry nothing for this node (8
     * and 9) and still advance applied over them. */
    for (size_t i = 0; i < 10; i++) {
        int wanted = -1;
        assert_int_equal(apply_record_wanted(&feed, recs[i], lens[i], &fa, &wanted), 0);
        assert_int_equal(wanted, i != 7 && i != 8);
        apply_filter none = {NULL, NULL, 0}, stream = {NULL, NULL, 1};
        assert_int_equal(apply_record_wanted(&feed, recs[i], lens[i], &none, &wanted), 0);
        assert_false(wanted);
        assert_int_equal(apply_record_wanted(&feed, recs[i], lens[i], &stream, &wanted), 0);
        assert_true(wanted);
    }
    assert_int_equal(apply_record_wanted(&feed, recs[0], lens[0] - 1, &fa, &w), LAPSE_ECORRUPT);
    assert_ok(apply_batch(dst, &feed, part, 8, 10, recs + 9, lens + 9, 1, &fa, &a, e, el), f);
    assert_true(a == 10);
    assert_int_equal(cf_count(dst, CF_GSI, feed.id), 6); /* x/2..x/6 and x/9 in ByUser */
    uint64_t sized = 0; /* DescribeTable's GSI figures count the same entries */
    for (uint32_t g = 0; g < feed.ngsi; g++) {
        for (uint32_t p = 0; p < feed.gsi[g].partitions; p++) {
            store_size sz;
            assert_ok(store_estimate_gsi(dst, feed.id, feed.gsi[g].id, p, 100, &sz, e, el), f);
            assert_true(!sz.estimated && (sz.bytes > 0) == (sz.items > 0));
            sized += sz.items;
        }
    }
    assert_int_equal(sized, 6);
    assert_int_equal(cf_count(dst, CF_STREAM, feed.id), 0);
    reopen(f); /* the source; the destination's counter is on disk too */
    store_close(dst);
    dst = open_dst(f, "dst");
    assert_ok(apply_applied_seq(dst, feed.id, part, &a, e, el), f);
    assert_true(a == 10);
    change_list_fini(&l);
    store_close(dst);
}

static void test_refused_batches(void **state)
{
    fixture *f = *state;
    store *dst = open_dst(f, "dst");
    apply_filter fa = {owns_all, NULL, 1};
    const uint32_t part = part_of_s("y", feed.partitions);
    table_schema other = feed;
    other.id = 40;
    put(f, &feed, fitem("y", 1, "u", "1", "k", NULL));
    put(f, &feed, fitem("y", 2, "u", "1", "k", NULL));
    put(f, &other, fitem("y", 1, "u", "1", "k", NULL));
    change_list l, lo;
    outbox_all(f, feed.id, part, &l);
    outbox_all(f, other.id, part, &lo);
    const void *recs[2] = {l.v[0].data, l.v[1].data};
    size_t lens[2] = {l.v[0].len, l.v[1].len};
    uint64_t a = 0;
    char *e = f->err;
    size_t el = sizeof(f->err);
    /* Bad arguments. */
    assert_code(apply_batch(dst, &feed, part, 0, 1, recs, lens, 1, &fa, &a, e, el), LAPSE_EINVAL,
                f);
    assert_code(apply_batch(dst, &feed, part, 2, 1, recs, lens, 0, &fa, &a, e, el), LAPSE_EINVAL,
                f);
    assert_code(apply_batch(dst, &feed, part, 1, 1, recs, lens, 2, &fa, &a, e, el), LAPSE_EINVAL,
                f);
    assert_code(apply_batch(dst, &feed, feed.partitions, 1, 1, recs, lens, 1, &fa, &a, e, el),
                LAPSE_EINVAL, f);
    /* Out of order, out of range, of another table, of another partition. */
    const void *swapped[2] = {recs[1], recs[0]};
    size_t slens[2] = {lens[1], lens[0]};
    assert_code(apply_batch(dst, &feed, part, 1, 2, swapped, slens, 2, &fa, &a, e, el),
                LAPSE_EINVAL, f);
    assert_code(apply_batch(dst, &feed, part, 2, 2, recs, lens, 1, &fa, &a, e, el), LAPSE_ESTATE,
                f);
    assert_code(apply_batch(dst, &feed, part, 1, 1, recs + 1, lens + 1, 1, &fa, &a, e, el),
                LAPSE_EINVAL, f);
    const void *foreign[1] = {lo.v[0].data};
    size_t flens[1] = {lo.v[0].len};
    assert_code(apply_batch(dst, &feed, part, 1, 1, foreign, flens, 1, &fa, &a, e, el),
                LAPSE_EINVAL, f);
    assert_code(
        apply_batch(dst, &feed, (part + 1) % feed.partitions, 1, 1, recs, lens, 1, &fa, &a, e, el),
        LAPSE_EINVAL, f);
    /* A record that does not decode: nothing of the batch is applied. */
    size_t cut[2] = {lens[0], lens[1] - 1}; /* the second one truncated */
    assert_code(apply_batch(dst, &feed, part, 1, 2, recs, cut, 2, &fa, &a, e, el), LAPSE_ECORRUPT,
                f);
    assert_ok(apply_applied_seq(dst, feed.id, part, &a, e, el), f);
    assert_true(a == 0);
    assert_int_equal(cf_count(dst, CF_GSI, feed.id), 0);
    assert_int_equal(cf_count(dst, CF_STREAM, feed.id), 0);
    assert_int_equal(cf_count(dst, CF_REPL, feed.id), 0);
    assert_ok(apply_batch(dst, &feed, part, 1, 2, recs, lens, 2, &fa, &a, e, el), f);
    assert_true(a == 2);
    change_list_fini(&l);
    change_list_fini(&lo);
    store_close(dst);
}

/* Queries ByUser (gsi 0) or ByKind (gsi 1) for pk on dst and checks the
 * Pk/Sk of the items returned, in order (want: "pk/sk" strings, NULL-
 * terminated), also paged two at a time. */
static void expect_gsi_query(fixture *f, store *dst, uint32_t gsi, const char *pk,
                             const store_sk_cond *sk, int forward, const char *const *want)
{
    attr_value v = val(ATTR_S, pk);
    uint32_t gpart = 0;
    assert_int_equal(hash_partition(&v, feed.gsi[gsi].partitions, &gpart), 0);
    size_t n = 0, got = 0;
    while (want[n] != NULL) {
        n++;
    }
    item *start = NULL;
    for (int paged = 0; paged < 2; paged++) {
        got = 0;
        do {
            store_page pg;
            assert_ok(store_query_gsi(dst, &feed, gsi, gpart, &v, sk, paged ? 2 : 0, forward, start,
                                      &pg, f->err, sizeof(f->err)),
                      f);
            for (size_t i = 0; i < pg.n; i++) {
                char name[32];
                const attr_value *p = item_get(pg.items[i], "Pk"), *s = item_get(pg.items[i], "Sk");
                snprintf(name, sizeof(name), "%s/%s", p->u.bytes.ptr, s->u.bytes.ptr);
                if (got >= n || strcmp(name, want[got]) != 0) {
                    fail_msg("item %zu is %s, expected %s", got, name,
                             got < n ? want[got] : "none");
                }
                got++;
                if (gsi == 1) { /* keys only: table keys, Kind, Exp */
                    assert_null(item_get(pg.items[i], "User"));
                    assert_non_null(item_get(pg.items[i], "Kind"));
                }
            }
            item_free(start);
            start = pg.last_key;
            pg.last_key = NULL;
            store_page_fini(&pg);
        } while (start != NULL);
        assert_int_equal(got, n);
    }
    item_value_fini(&v);
}

static void test_gsi_query(void **state)
{
    fixture *f = *state;
    store *dst = open_dst(f, "dst");
    apply_filter fa = {owns_all, NULL, 0};
    put(f, &feed, fitem("a", 1, "ann", "5", "red", NULL));
    put(f, &feed, fitem("b", 1, "ann", "2", "red", "123"));
    put(f, &feed, fitem("b", 2, "ann", "5", NULL, NULL));
    put(f, &feed, fitem("c", 7, "ann", "-1", "blue", NULL));
    put(f, &feed, fitem("a", 2, "bob", "5", "red", NULL));
    put(f, &feed, fitem("a", 3, NULL, "5", "red", NULL)); /* not in ByUser */
    unsigned seed = 1;
    ship_all(f, dst, &feed, &fa, &seed, 0);
    attr_value five = val(ATTR_N, "5"), two = val(ATTR_N, "2");
    expect_gsi_query(f, dst, 0, "ann", NULL, 1, (const char *[]){"c/7", "b/1", "a/1", "b/2", NULL});
    expect_gsi_query(f, dst, 0, "ann", NULL, 0, (const char *[]){"b/2", "a/1", "b/1", "c/7", NULL});
    store_sk_cond c = {STORE_SK_EQ, &five, NULL};
    expect_gsi_query(f, dst, 0, "ann", &c, 1, (const char *[]){"a/1", "b/2", NULL});
    c = (store_sk_cond){STORE_SK_GT, &two, NULL};
    expect_gsi_query(f, dst, 0, "ann", &c, 1, (const char *[]){"a/1", "b/2", NULL});
    c = (store_sk_cond){STORE_SK_LE, &two, NULL};
    expect_gsi_query(f, dst, 0, "ann", &c, 0, (const char *[]){"b/1", "c/7", NULL});
    expect_gsi_query(f, dst, 1, "red", NULL, 1, (const char *[]){"a/1", "a/2", "a/3", "b/1", NULL});
    expect_gsi_query(f, dst, 0, "nobody", NULL, 1, (const char *[]){NULL});
    /* Refused: no such GSI, the wrong GSI partition, a sort key condition
     * on a GSI without one, a start key without the index keys. */
    attr_value ann = val(ATTR_S, "ann");
    uint32_t gpart = 0;
    assert_int_equal(hash_partition(&ann, 4, &gpart), 0);
    store_page pg;
    char *e = f->err;
    size_t el = sizeof(f->err);
    assert_code(store_query_gsi(dst, &feed, 2, gpart, &ann, NULL, 0, 1, NULL, &pg, e, el),
                LAPSE_EINVAL, f);
    assert_code(store_query_gsi(dst, &feed, 0, (gpart + 1) % 4, &ann, NULL, 0, 1, NULL, &pg, e, el),
                LAPSE_EINVAL, f);
    c = (store_sk_cond){STORE_SK_EQ, &five, NULL};
    assert_code(store_query_gsi(dst, &feed, 1, 0, &ann, &c, 0, 1, NULL, &pg, e, el), LAPSE_EINVAL,
                f);
    item *bad = fitem("a", 1, NULL, NULL, NULL, NULL);
    assert_code(store_query_gsi(dst, &feed, 0, gpart, &ann, NULL, 0, 1, bad, &pg, e, el),
                LAPSE_EINVAL, f);
    item_free(bad);
    item_value_fini(&ann);
    item_value_fini(&five);
    item_value_fini(&two);
    store_close(dst);
}

/* A copy that misses records says so for its table until the end, also
 * after the store is reopened (the marks are read at open); a store with
 * no mark answers without reading any (the common case, every read). */
static void test_missing_marks_survive_a_reopen(void **state)
{
    fixture *f = *state;
    int missing = 1, noted = 0;
    assert_ok(apply_missing(f->st, feed.id, -1, &missing, f->err, sizeof f->err), f);
    assert_int_equal(missing, 0);
    /* Records 1..9 of source partition 2 were trimmed before any was applied. */
    assert_ok(apply_note_missing(f->st, feed.id, 2, 10, &noted, f->err, sizeof f->err), f);
    assert_int_equal(noted, 1);
    assert_ok(apply_missing(f->st, feed.id, -1, &missing, f->err, sizeof f->err), f);
    assert_int_equal(missing, 1);
    reopen(f);
    missing = 0;
    assert_ok(apply_missing(f->st, feed.id, -1, &missing, f->err, sizeof f->err), f);
    assert_int_equal(missing, 1);
    assert_ok(apply_missing(f->st, feed.id, 2, &missing, f->err, sizeof f->err), f);
    assert_int_equal(missing, 1);
    assert_ok(apply_missing(f->st, feed.id, 3, &missing, f->err, sizeof f->err), f);
    assert_int_equal(missing, 0);
    assert_ok(apply_missing(f->st, orders.id, -1, &missing, f->err, sizeof f->err), f);
    assert_int_equal(missing, 0);
}

/* The items a snapshot_next call hands out, copied. */
static int collect(void *arg, const snapshot_entry *e)
{
    kv_push(arg, e->key, e->klen, e->val, e->vlen);
    return 0;
}

/* Applies records [from, to] of recs (1-based seqs) to dst as one batch
 * after applied (the records before from were trimmed). */
static void apply_range(fixture *f, store *dst, uint32_t part, uint64_t applied, uint64_t from,
                        uint64_t to, const change_list *l, const apply_filter *fa)
{
    const void *recs[64];
    size_t lens[64];
    size_t n = 0;
    for (uint64_t s = from; s <= to; s++, n++) {
        recs[n] = l->v[s - 1].data;
        lens[n] = l->v[s - 1].len;
    }
    uint64_t a = 0;
    assert_ok(apply_batch(dst, &feed, part, applied + 1, to, recs, lens, n, fa, &a, f->err,
                          sizeof(f->err)),
              f);
    assert_true(a == to);
}

/* GSI copies that lost records 1..3 of a partition (applied 4..6 only) are
 * filled from the partition's items read in pages of one item from
 * snapshots taken later (at outbox seq 8 while the copy stands at 6), then
 * take records 7..8 (an item moving between users, one deleted): their
 * entries end equal to a whole copy's, and they answer again. */
static void test_gsi_fill_from_items(void **state)
{
    fixture *f = *state;
    store *whole = open_dst(f, "whole"), *lost = open_dst(f, "lost");
    apply_filter fa = {owns_all, NULL, 0};
    const uint32_t part = part_of_s("g", feed.partitions);
    char *e = f->err;
    size_t el = sizeof(f->err);
    for (int i = 1; i <= 6; i++) {
        put(f, &feed, fitem("g", i, i % 2 ? "ann" : "bob", "5", "red", NULL));
    }
    change_list l;
    outbox_all(f, feed.id, part, &l);
    assert_int_equal(l.n, 6);
    apply_range(f, whole, part, 0, 1, 6, &l, &fa);
    int noted = 0, missing = 0;
    assert_ok(apply_note_missing(lost, feed.id, part, 4, &noted, e, el), f);
    apply_range(f, lost, part, 0, 4, 6, &l, &fa);
    assert_ok(apply_missing(lost, feed.id, -1, &missing, e, el), f);
    assert_int_equal(missing, 1);
    uint64_t gap = 0;
    assert_ok(apply_gsi_gap(lost, feed.id, part, &gap, e, el), f);
    assert_true(gap == 3);
    /* Records 7 and 8, written before the fill reads the items. */
    put(f, &feed, fitem("g", 1, "bob", "5", "red", NULL));
    item *k = fitem("g", 2, NULL, NULL, NULL, NULL);
    assert_ok(store_delete(f->st, &feed, k, NULL, NULL, e, el), f);
    item_free(k);
    change_list_fini(&l);
    outbox_all(f, feed.id, part, &l);
    assert_int_equal(l.n, 8);

    /* Pages of one item, each from a snapshot of its own. */
    kvlist items = {0};
    snapshot *sn = NULL;
    uint64_t last = 0;
    int done = 0;
    while (!done) {
        const kv *prev = items.n > 0 ? &items.v[items.n - 1] : NULL;
        assert_ok(snapshot_open_items(&sn, f->st, feed.id, part, prev ? prev->k.data : NULL,
                                      prev ? prev->k.len : 0, &last, e, el),
                  f);
        assert_true(last == 8);
        size_t before = items.n;
        assert_ok(snapshot_next(sn, 1, collect, &items, &done, e, el), f);
        snapshot_close(sn);
        assert_true(items.n - before <= 1);
        if (items.n > before) {
            const void *v[1] = {items.v[items.n - 1].v.data};
            size_t vl[1] = {items.v[items.n - 1].v.len};
            assert_ok(apply_gsi_fill(lost, &feed, part, &fa, v, vl, 1, e, el), f);
        }
    }
    assert_int_equal(items.n, 5);
    /* A start key outside the partition is refused. */
    assert_code(snapshot_open_items(&sn, f->st, feed.id, part + 1, items.v[0].k.data,
                                    items.v[0].k.len, &last, e, el),
                LAPSE_EINVAL, f);
    assert_ok(apply_gsi_filled(lost, feed.id, part, 3, e, el), f);
    assert_ok(apply_missing(lost, feed.id, -1, &missing, e, el), f);
    assert_int_equal(missing, 0);
    apply_range(f, whole, part, 6, 7, 8, &l, &fa);
    apply_range(f, lost, part, 6, 7, 8, &l, &fa);
    kvlist got = {0}, want = {0};
    cf_dump(lost, CF_GSI, feed.id, &got);
    cf_dump(whole, CF_GSI, feed.id, &want);
    assert_true(want.n > 0);
    assert_kv_equal(&got, &want, "the filled copy's GSI entries");
    /* Whole (no stream kept here): the marks go, and no read looks at any. */
    int dropped = 0, any = 1;
    assert_ok(apply_forget_missing(lost, feed.id, part, 1, 1, &dropped, e, el), f);
    assert_int_equal(dropped, 0); /* a stream copy, were it kept, is not filled */
    assert_ok(apply_forget_missing(lost, feed.id, part, 0, 1, &dropped, e, el), f);
    assert_int_equal(dropped, 1);
    assert_ok(apply_missing_any(lost, feed.id, &any, e, el), f);
    assert_int_equal(any, 0);
    kv_fini(&got);
    kv_fini(&want);
    kv_fini(&items);
    change_list_fini(&l);
    store_close(lost);
    store_close(whole);
}

/* A GSI copy new on a node that applied records 1..4 of a partition for
 * its other copies (apply_note_new_copy): the records through 4 are
 * marked missing for the GSI kind only (the shard copy, not new, is
 * filled through the mark at once); with nothing applied, nothing is
 * marked. apply_drop_copy then clears one GSI partition's entries and
 * leaves the others. */
static void test_new_copy_marks(void **state)
{
    fixture *f = *state;
    store *dst = open_dst(f, "newcopy");
    apply_filter fa = {owns_all, NULL, 0};
    const uint32_t part = part_of_s("n", feed.partitions);
    char *e = f->err;
    size_t el = sizeof(f->err);
    for (int i = 1; i <= 4; i++) {
        put(f, &feed, fitem("n", i, i % 2 ? "ann" : "bob", "5", "red", NULL));
    }
    change_list l;
    outbox_all(f, feed.id, part, &l);
    assert_int_equal(l.n, 4);
    uint64_t mark = 9, gap = 0;
    int any = 1;
    /* Nothing applied yet: nothing missed. */
    assert_ok(apply_note_new_copy(dst, feed.id, part, 1, 0, &mark, e, el), f);
    assert_true(mark == 0);
    assert_ok(apply_missing_any(dst, feed.id, &any, e, el), f);
    assert_int_equal(any, 0);
    apply_range(f, dst, part, 0, 1, 4, &l, &fa);
    assert_ok(apply_note_new_copy(dst, feed.id, part, 1, 0, &mark, e, el), f);
    assert_true(mark == 4);
    assert_ok(apply_gsi_gap(dst, feed.id, part, &gap, e, el), f);
    assert_true(gap == 4);
    assert_ok(apply_stream_gap(dst, feed.id, part, &gap, e, el), f);
    assert_true(gap == 0); /* the shard copy is not new: whole through the mark */
    /* A second new copy before the fill: the mark moves on, so a fill under
     * way for the old one cannot end the new gap. */
    assert_ok(apply_note_new_copy(dst, feed.id, part, 0, 1, &mark, e, el), f);
    assert_true(mark == 5);
    assert_ok(apply_stream_gap(dst, feed.id, part, &gap, e, el), f);
    assert_true(gap == 5);
    assert_ok(apply_gsi_gap(dst, feed.id, part, &gap, e, el), f);
    assert_true(gap == 5); /* its own gap stays open */
    /* The gap ends at record 4, the last there is: another copy that
     * applied through 4 fills it (asking for 5 of a quiet source, the
     * fill waited for good). Once record 5 is applied here, it is 5. */
    uint64_t need = 0;
    assert_ok(apply_stream_fill_need(dst, feed.id, part, mark, &need, e, el), f);
    assert_true(need == 4);
    put(f, &feed, fitem("n", 5, "ann", "5", "red", NULL));
    change_list_fini(&l);
    outbox_all(f, feed.id, part, &l);
    assert_int_equal(l.n, 5);
    apply_range(f, dst, part, 4, 5, 5, &l, &fa);
    assert_ok(apply_stream_fill_need(dst, feed.id, part, mark, &need, e, el), f);
    assert_true(need == 5);
    assert_ok(apply_stream_fill_need(dst, feed.id, part, 3, &need, e, el), f);
    assert_true(need == 3); /* a mark behind what is applied here: the mark */

    /* Dropping one GSI partition's copy leaves the others' entries. */
    kvlist before = {0}, after = {0};
    cf_dump(dst, CF_GSI, feed.id, &before);
    assert_true(before.n >= 2);
    uint32_t gpart = 0;
    assert_true(before.v[0].k.len >= 12);
    gpart = (uint32_t)before.v[0].k.data[8] << 24 | (uint32_t)before.v[0].k.data[9] << 16 |
            (uint32_t)before.v[0].k.data[10] << 8 | before.v[0].k.data[11];
    uint32_t index_id = (uint32_t)before.v[0].k.data[4] << 24 |
                        (uint32_t)before.v[0].k.data[5] << 16 |
                        (uint32_t)before.v[0].k.data[6] << 8 | before.v[0].k.data[7];
    assert_ok(apply_drop_copy(dst, feed.id, index_id, gpart, e, el), f);
    cf_dump(dst, CF_GSI, feed.id, &after);
    size_t kept = 0;
    for (size_t i = 0; i < before.n; i++) {
        const uint8_t *k = before.v[i].k.data;
        uint32_t gp = (uint32_t)k[8] << 24 | (uint32_t)k[9] << 16 | (uint32_t)k[10] << 8 | k[11];
        uint32_t id = (uint32_t)k[4] << 24 | (uint32_t)k[5] << 16 | (uint32_t)k[6] << 8 | k[7];
        kept += gp != gpart || id != index_id;
    }
    assert_int_equal(after.n, kept);
    assert_true(after.n < before.n);
    kv_fini(&before);
    kv_fini(&after);
    change_list_fini(&l);
    store_close(dst);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gsi_model, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_exactly_once, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_refused_batches, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_gsi_query, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_missing_marks_survive_a_reopen, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_gsi_fill_from_items, rsetup, rteardown),
        cmocka_unit_test_setup_teardown(test_new_copy_marks, rsetup, rteardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
