/*
 * repl_testutil.c: the harness shared by the replication tests (declared
 * in repl_testutil.h).
 */
#include "repl_testutil.h"

#include "../common/clock.h"
#include "../common/keycodec.h"
#include "apply.h"
#include "itemkey.h"
#include "outbox.h"
#include "store_int.h"

table_schema orders;
table_schema feed;
int64_t now_s;

static index_def index_of(uint32_t id, const char *name, const char *pk, attr_type pkt,
                          const char *sk, attr_type skt, index_projection proj, uint32_t parts)
{
    index_def d;
    memset(&d, 0, sizeof(d));
    d.id = id;
    snprintf(d.name, sizeof(d.name), "%s", name);
    if (pk != NULL) {
        snprintf(d.pk.name, sizeof(d.pk.name), "%s", pk);
        d.pk.type = pkt;
    }
    if (sk != NULL) {
        snprintf(d.sk.name, sizeof(d.sk.name), "%s", sk);
        d.sk.type = skt;
    }
    d.projection = proj;
    d.partitions = parts;
    return d;
}

int rsetup(void **state)
{
    orders = mk_schema(20, "Orders", "Cust", ATTR_S, "Order", ATTR_S, 4);
    orders.nlsi = 2;
    orders.lsi[0] = index_of(1, "ByDate", NULL, 0, "Date", ATTR_N, INDEX_PROJECT_ALL, 0);
    orders.lsi[1] = index_of(2, "ByStatus", NULL, 0, "Status", ATTR_S, INDEX_PROJECT_ALL, 0);
    orders.ttl.enabled = 1;
    snprintf(orders.ttl.attribute, sizeof(orders.ttl.attribute), "Exp");
    orders.ttl.config_version = 1;

    feed = mk_schema(21, "Feed", "Pk", ATTR_S, "Sk", ATTR_N, 4);
    feed.ngsi = 2;
    feed.gsi[0] = index_of(3, "ByUser", "User", ATTR_S, "At", ATTR_N, INDEX_PROJECT_ALL, 4);
    feed.gsi[1] = index_of(4, "ByKind", "Kind", ATTR_S, NULL, 0, INDEX_PROJECT_KEYS, 2);
    feed.stream.enabled = 1;
    feed.stream.ttl_deletes = 1;
    feed.stream.retention_hours = 24;
    feed.ttl.enabled = 1;
    snprintf(feed.ttl.attribute, sizeof(feed.ttl.attribute), "Exp");
    feed.ttl.config_version = 1;
    now_s = clock_wall_now().ms / 1000;
    return setup(state);
}

int rteardown(void **state)
{
    clock_wall_set_offset_ms(0);
    return teardown(state);
}

/* ======================================================================== */
/* Families                                                                 */
/* ======================================================================== */

void kv_push(kvlist *l, const void *k, size_t klen, const void *v, size_t vlen)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = realloc(l->v, l->cap * sizeof(*l->v));
        assert_non_null(l->v);
    }
    kv *x = &l->v[l->n++];
    buf_init(&x->k);
    buf_init(&x->v);
    assert_int_equal(buf_append(&x->k, k, klen), 0);
    assert_int_equal(buf_append(&x->v, v, vlen), 0);
}

void kv_fini(kvlist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        buf_fini(&l->v[i].k);
        buf_fini(&l->v[i].v);
    }
    free(l->v);
    memset(l, 0, sizeof(*l));
}

static int kv_cmp(const void *a, const void *b)
{
    const kv *x = a, *y = b;
    return itemkey_cmp(x->k.data, x->k.len, y->k.data, y->k.len);
}

void kv_sort(kvlist *l)
{
    if (l->n > 1) {
        qsort(l->v, l->n, sizeof(*l->v), kv_cmp);
    }
}

void cf_dump(store *st, int cf, uint32_t table_id, kvlist *out)
{
    uint8_t lo[4], hi[9];
    size_t hlen = 0;
    itemkey_table_range(table_id, lo, hi, &hlen);
    db_iter *it = NULL;
    assert_int_equal(db_iter_new(&it, st->db, cf, lo, 4, hi, hlen), 0);
    for (db_iter_seek_first(it); db_iter_valid(it); db_iter_next(it)) {
        size_t kl = 0, vl = 0;
        const uint8_t *k = db_iter_key(it, &kl);
        const uint8_t *v = db_iter_value(it, &vl);
        kv_push(out, k, kl, v, vl);
    }
    char err[256];
    assert_int_equal(db_iter_status(it, err, sizeof(err)), 0);
    db_iter_free(it);
}

size_t cf_count(store *st, int cf, uint32_t table_id)
{
    kvlist l = {0};
    cf_dump(st, cf, table_id, &l);
    size_t n = l.n;
    kv_fini(&l);
    return n;
}

static void hex(const char *what, const buf *b)
{
    fprintf(stderr, "  %s: ", what);
    for (size_t i = 0; i < b->len && i < 64; i++) {
        fprintf(stderr, "%02x", b->data[i]);
    }
    fprintf(stderr, "%s\n", b->len > 64 ? "..." : "");
}

void assert_kv_equal(const kvlist *got, const kvlist *want, const char *what)
{
    size_t n = got->n < want->n ? got->n : want->n;
    for (size_t i = 0; i < n; i++) {
        const kv *g = &got->v[i], *w = &want->v[i];
        if (kv_cmp(g, w) != 0 || g->v.len != w->v.len ||
            (g->v.len > 0 && memcmp(g->v.data, w->v.data, g->v.len) != 0)) {
            fprintf(stderr, "%s: pair %zu of %zu/%zu differs\n", what, i, got->n, want->n);
            hex("got key ", &g->k);
            hex("want key", &w->k);
            hex("got val ", &g->v);
            hex("want val", &w->v);
            fail_msg("%s differs from the model", what);
        }
    }
    if (got->n != want->n) {
        fail_msg("%s: %zu pairs, expected %zu", what, got->n, want->n);
    }
}

uint32_t part_of_s(const char *pk, uint32_t n)
{
    attr_value v = val(ATTR_S, pk);
    uint32_t p = 0;
    assert_int_equal(hash_partition(&v, n, &p), 0);
    item_value_fini(&v);
    return p;
}

void enc(buf *b, const attr_value *v)
{
    assert_int_equal(keycodec_append(b, v), 0);
}

/* ======================================================================== */
/* Orders and LSI entries                                                   */
/* ======================================================================== */

/* The LSI entries the model says item it has, built from the layout:
 * table | part | index id | enc(pk) | enc(lsi sk) | enc(sk) -> item. */
void expect_lsi(const table_schema *t, const item *it, kvlist *want)
{
    const attr_value *pk = item_get(it, t->pk.name), *sk = item_get(it, t->sk.name);
    buf k, v;
    buf_init(&k);
    buf_init(&v);
    assert_int_equal(item_encode(it, &v), 0);
    for (uint32_t i = 0; i < t->nlsi; i++) {
        const attr_value *x = item_get(it, t->lsi[i].sk.name);
        if (x == NULL || x->type != t->lsi[i].sk.type ||
            (x->type == ATTR_S && x->u.bytes.len == 0)) {
            continue; /* sparse */
        }
        buf_clear(&k);
        assert_int_equal(buf_append_u32be(&k, t->id), 0);
        assert_int_equal(buf_append_u32be(&k, part_of_s(pk->u.bytes.ptr, t->partitions)), 0);
        assert_int_equal(buf_append_u32be(&k, t->lsi[i].id), 0);
        enc(&k, pk);
        enc(&k, x);
        enc(&k, sk);
        kv_push(want, k.data, k.len, v.data, v.len);
    }
    buf_fini(&k);
    buf_fini(&v);
}

void assert_lsi(fixture *f, const table_schema *t, item *const *model, size_t n)
{
    kvlist want = {0}, got = {0};
    for (size_t i = 0; i < n; i++) {
        if (model[i] != NULL) {
            expect_lsi(t, model[i], &want);
        }
    }
    kv_sort(&want);
    cf_dump(f->st, CF_LSI, t->id, &got);
    assert_kv_equal(&got, &want, "the lsi family");
    kv_fini(&want);
    kv_fini(&got);
}

/* An Orders item; date/status NULL: absent. status "#n": an N (the wrong
 * type, which writes refuse). */
item *order(const char *cust, const char *ord, const char *date, const char *status)
{
    item *it = itm(2, "Cust", ATTR_S, cust, "Order", ATTR_S, ord);
    if (date != NULL) {
        attr_value v = val(ATTR_N, date);
        assert_int_equal(item_set(it, "Date", &v), 0);
    }
    if (status != NULL) {
        attr_value v = status[0] == '#' ? val(ATTR_N, status + 1) : val(ATTR_S, status);
        assert_int_equal(item_set(it, "Status", &v), 0);
    }
    return it;
}

item *okey(const char *cust, const char *ord)
{
    return order(cust, ord, NULL, NULL);
}

/* ======================================================================== */
/* Outbox records                                                           */
/* ======================================================================== */

void outbox_all(fixture *f, uint32_t table_id, uint32_t part, change_list *out)
{
    change_list page;
    change_list_init(&page);
    change_list_init(out);
    uint64_t after = 0;
    for (;;) {
        assert_ok(outbox_read(f->st, table_id, part, after, 7, 0, &page, f->err, sizeof(f->err)),
                  f);
        if (page.n == 0) {
            break;
        }
        for (size_t i = 0; i < page.n; i++) {
            if (out->n > 0 && page.v[i].seq != out->v[out->n - 1].seq + 1) {
                fail_msg("outbox seq %llu follows %llu", (unsigned long long)page.v[i].seq,
                         (unsigned long long)out->v[out->n - 1].seq);
            }
            assert_int_equal(change_list_push(out, page.v[i].seq, page.v[i].data, page.v[i].len),
                             0);
        }
        after = page.v[page.n - 1].seq;
    }
    change_list_fini(&page);
}

change_record decode_ok(const change_entry *e)
{
    change_record r;
    int rv = change_decode(e->data, e->len, &r);
    if (rv != 0) {
        fail_msg("record %llu does not decode: %s", (unsigned long long)e->seq, lapse_strerror(rv));
    }
    return r;
}

item *image_of(change_bytes b)
{
    if (b.data == NULL) {
        return NULL;
    }
    item *it = NULL;
    assert_int_equal(item_decode(b.data, b.len, &it), 0);
    return it;
}

/* ======================================================================== */
/* Feed items and shipping                                                  */
/* ======================================================================== */

item *fitem(const char *pk, int sk, const char *user, const char *at, const char *kind,
            const char *exp)
{
    char s[16];
    snprintf(s, sizeof(s), "%d", sk);
    item *it = itm(2, "Pk", ATTR_S, pk, "Sk", ATTR_N, s);
    const char *names[4] = {"User", "At", "Kind", "Exp"};
    const char *vals[4] = {user, at, kind, exp};
    for (int i = 0; i < 4; i++) {
        if (vals[i] != NULL) {
            attr_value v = val(i % 2 ? ATTR_N : ATTR_S, vals[i]);
            assert_int_equal(item_set(it, names[i], &v), 0);
        }
    }
    return it;
}

store *open_dst(fixture *f, const char *tag)
{
    char path[600];
    snprintf(path, sizeof(path), "%s-%s", f->dir, tag); /* removed with the fixture */
    store *st = NULL;
    assert_ok(store_open(&st, path, f->err, sizeof(f->err)), f);
    return st;
}

int owns_all(void *arg, uint32_t gsi, uint32_t part)
{
    (void)arg;
    (void)gsi;
    (void)part;
    return 1;
}

/* Ships partition part's whole outbox (never trimmed here) to dst. With
 * chaos, batches start anywhere from a few records below applied to one
 * past applied + 1: resent, overlapping and early (refused) batches. */
void ship_part(fixture *f, store *dst, const table_schema *t, uint32_t part,
               const apply_filter *flt, unsigned *seed, int chaos)
{
    change_list l;
    outbox_all(f, t->id, part, &l);
    uint64_t last = l.n > 0 ? l.v[l.n - 1].seq : 0, applied = 0;
    assert_ok(apply_applied_seq(dst, t->id, part, &applied, f->err, sizeof(f->err)), f);
    const void *recs[16];
    size_t lens[16];
    while (applied < last) {
        uint64_t from = applied + 1;
        if (chaos) {
            int64_t lo = (int64_t)applied - 3;
            from = (uint64_t)(lo < 1 ? 1 : lo) + (uint64_t)(rand_r(seed) % 6);
        }
        uint64_t to = from + (uint64_t)(rand_r(seed) % 16);
        to = to > last ? last : to;
        if (from > to) {
            continue;
        }
        size_t n = 0;
        for (uint64_t s = from; s <= to; s++, n++) {
            recs[n] = l.v[s - 1].data;
            lens[n] = l.v[s - 1].len;
        }
        uint64_t before = applied;
        int rv = apply_batch(dst, t, part, from, to, recs, lens, n, flt, &applied, f->err,
                             sizeof(f->err));
        if (from > before + 1) {
            assert_code(rv, LAPSE_ESTATE, f);
            assert_true(applied == before);
        } else {
            assert_ok(rv, f);
            assert_true(applied == (to > before ? to : before));
        }
    }
    change_list_fini(&l);
}

void ship_all(fixture *f, store *dst, const table_schema *t, const apply_filter *flt,
              unsigned *seed, int chaos)
{
    for (uint32_t p = 0; p < t->partitions; p++) {
        ship_part(f, dst, t, p, flt, seed, chaos);
    }
}
