/*
 * expiry_testutil.c: the fixture, items and index helpers shared by
 * expiry_test.c and expiry_backfill_test.c (declared in expiry_testutil.h).
 */
#include "expiry_testutil.h"

#include "itemkey.h"
#include "store_int.h"

table_schema sess;
table_schema solo;
int64_t base_s;

table_schema ttl_table(uint32_t id, const char *name, int with_sk, uint32_t parts)
{
    table_schema t = mk_schema(id, name, "Pk", ATTR_S, with_sk ? "Sk" : NULL, ATTR_N, parts);
    t.ttl.enabled = 1;
    snprintf(t.ttl.attribute, sizeof(t.ttl.attribute), "Exp");
    t.ttl.config_version = 1;
    return t;
}

void with_stream(table_schema *t)
{
    t->stream.enabled = 1;
    t->stream.ttl_deletes = 1;
}

int esetup(void **state)
{
    sess = ttl_table(10, "Sessions", 1, 4);
    solo = ttl_table(11, "Solo", 0, 2);
    base_s = clock_wall_now().ms / 1000;
    return setup(state);
}

clock_wall at_ms(int64_t ms)
{
    return (clock_wall){ms};
}

/* ======================================================================== */
/* Items and index keys                                                     */
/* ======================================================================== */

/* A Sessions item; Exp is v as N (K_NUM), v.75 (K_FRAC), v as S, or absent. */
item *sitem(const table_schema *t, const char *pk, int sk, int kind, int64_t v)
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

item *skey(const table_schema *t, const char *pk, int sk)
{
    return sitem(t, pk, sk, K_MISSING, 0);
}

void kl_push(keylist *l, const uint8_t *p, size_t n)
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

void kl_fini(keylist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        buf_fini(&l->k[i]);
    }
    free(l->k);
    memset(l, 0, sizeof(*l));
}

int buf_cmp(const void *a, const void *b)
{
    const buf *x = a, *y = b;
    return itemkey_cmp(x->data, x->len, y->data, y->len);
}

/* The expected entry of it under t at now, built by hand from the layout:
 * table u32be | part u32be | due second u64be | enc(pk) enc(sk). */
void expect_entry(const table_schema *t, const item *it, clock_wall now, keylist *l)
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
void index_of(fixture *f, uint32_t table_id, keylist *l)
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

size_t index_count(fixture *f, uint32_t table_id)
{
    keylist got = {0};
    index_of(f, table_id, &got);
    size_t n = got.n;
    kl_fini(&got);
    return n;
}

void dump(const char *what, const keylist *l)
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
void assert_index(fixture *f, const table_schema *t, keylist *want)
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
void expect_stored(fixture *f, const table_schema *t, clock_wall now, keylist *l)
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

uint64_t count_items(fixture *f, const table_schema *t)
{
    uint64_t total = 0;
    for (uint32_t p = 0; p < t->partitions; p++) {
        uint64_t n = 0;
        assert_ok(store_count(f->st, t->id, p, &n, f->err, sizeof(f->err)), f);
        total += n;
    }
    return total;
}

int exists(fixture *f, const table_schema *t, const char *pk, int sk)
{
    item *got = get(f, t, skey(t, pk, sk));
    item_free(got);
    return got != NULL;
}

void sweep(fixture *f, const table_schema *t, uint32_t part, int64_t now_ms, size_t max,
           expiry_sweep_result *res)
{
    assert_ok(expiry_sweep(f->st, t, part, at_ms(now_ms), max, res, f->err, sizeof(f->err)), f);
}

/* Sweeps every partition of t until nothing is due; returns items deleted. */
size_t sweep_all(fixture *f, const table_schema *t, int64_t now_ms, size_t max)
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

/* Overwrites the stored value of the item with key it with bytes that do not
 * decode, leaving its index entry. */
void corrupt(fixture *f, const table_schema *t, item *key)
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
