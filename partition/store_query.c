/*
 * store_query.c: the read side of the store that walks key ranges (see
 * store.h): Query over one partition key with a sort-key condition, Scan
 * over one partition, and counts. Each turns its request into one key range
 * of the items column family (itemkey.h) and pages through it with one
 * iterator; no lock is taken. The range and paging helpers are shared with
 * the index queries (store_index.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/keycodec.h"
#include "../common/lapse_err.h"
#include "itemkey.h"
#include "store_int.h"

static int oom(char *err, size_t errlen)
{
    return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
}

static int buf_set(buf *dst, const void *p, size_t n)
{
    buf_clear(dst);
    return buf_append(dst, p, n);
}

/* ======================================================================== */
/* Query and scan                                                           */
/* ======================================================================== */

void store_page_fini(store_page *p)
{
    if (p == NULL) {
        return;
    }
    for (size_t i = 0; i < p->n; i++) {
        item_free(p->items[i]);
    }
    free(p->items);
    item_free(p->last_key);
    memset(p, 0, sizeof(*p));
}

static int page_push(store_page *p, size_t *cap, item *it)
{
    if (p->n == *cap) {
        size_t nc = *cap == 0 ? 16 : *cap * 2;
        item **a = realloc(p->items, nc * sizeof(*a));
        if (a == NULL) {
            return LAPSE_ENOMEM;
        }
        p->items = a;
        *cap = nc;
    }
    p->items[p->n++] = it;
    return 0;
}

/* The key of an index entry's item: the table's keys and ix's keys. */
static int index_key_of(const table_schema *t, const index_def *ix, const item *it, item **out)
{
    const key_def *defs[4] = {&t->pk, &t->sk, &ix->pk, &ix->sk};
    item *k = item_new();
    if (k == NULL) {
        return LAPSE_ENOMEM;
    }
    for (int i = 0; i < 4; i++) {
        const attr_value *v = defs[i]->name[0] != 0 ? item_get(it, defs[i]->name) : NULL;
        if (v != NULL && item_set_copy(k, defs[i]->name, v) != 0) {
            item_free(k);
            return LAPSE_ENOMEM;
        }
    }
    *out = k;
    return 0;
}

/* Work per page: at most limit (or the byte budget's worth of) items are
 * decoded, plus one iterator step to learn whether anything is left. */
int store_collect(store *st, const table_schema *t, int cf, const index_def *ix, const buf *lo,
                  const buf *hi, int forward, uint32_t limit, store_page *out, char *err,
                  size_t errlen)
{
    int rv = 0;
    size_t cap = 0, bytes = 0;
    db_iter *it = NULL;
    memset(out, 0, sizeof(*out));
    if (hi != NULL && itemkey_cmp(lo->data, lo->len, hi->data, hi->len) >= 0) {
        return 0; /* empty range */
    }
    if ((rv = db_iter_new(&it, st->db, cf, lo->data, lo->len, hi ? hi->data : NULL,
                          hi ? hi->len : 0)) != 0) {
        return oom(err, errlen);
    }
    int stopped = 0;
    for (forward ? db_iter_seek_first(it) : db_iter_seek_last(it); db_iter_valid(it);
         forward ? db_iter_next(it) : db_iter_prev(it)) {
        size_t vlen = 0;
        const uint8_t *v = db_iter_value(it, &vlen);
        item *x = NULL;
        if ((rv = item_decode(v, vlen, &x)) != 0) {
            errf(rv, err, errlen, "stored item failed to decode (%s)", lapse_strerror(rv));
            goto fail;
        }
        if ((rv = page_push(out, &cap, x)) != 0) {
            item_free(x);
            oom(err, errlen);
            goto fail;
        }
        bytes += vlen;
        if ((limit > 0 && out->n >= limit) || bytes >= STORE_PAGE_MAX_BYTES) {
            stopped = 1;
            break;
        }
    }
    if (stopped) {
        /* Peek: a page that ends exactly at the range's end has no next
         * page, so last_key stays NULL. */
        forward ? db_iter_next(it) : db_iter_prev(it);
        const item *last = out->items[out->n - 1];
        if (db_iter_valid(it) && (rv = ix != NULL ? index_key_of(t, ix, last, &out->last_key)
                                                  : schema_key_of(t, last, &out->last_key)) != 0) {
            oom(err, errlen);
            goto fail;
        }
    }
    if ((rv = db_iter_status(it, err, errlen)) != 0) {
        goto fail;
    }
    db_iter_free(it);
    return 0;
fail:
    db_iter_free(it);
    store_page_fini(out);
    return rv;
}

/* Makes E (= P | enc(v)) the smallest key above every key whose sort key
 * is v: E | 00 when keys end after enc(sk), else succ(E) (index keys go on
 * with the table's keys; enc is self-delimiting, so exactly the keys with
 * sort key v start with E). */
static int past_value(buf *e, int suffixed)
{
    if (!suffixed) {
        return buf_append_byte(e, 0);
    }
    itemkey_successor(e); /* E starts with a table id: never all 0xFF */
    return 0;
}

int store_sk_bounds(const key_def *skd, const char *owner, const store_sk_cond *sk, int suffixed,
                    buf *lo, buf *hi, int *hi_none, char *err, size_t errlen)
{
    int rv;
    size_t plen = lo->len;
    if (sk == NULL || sk->op == STORE_SK_NONE) {
        *hi_none = itemkey_successor(hi);
        return 0;
    }
    if (skd->name[0] == 0) {
        return errf(LAPSE_EINVAL, err, errlen, "%s has no sort key", owner);
    }
    if (sk->op < STORE_SK_EQ || sk->op > STORE_SK_BEGINS_WITH) {
        return errf(LAPSE_EINVAL, err, errlen, "unknown sort key operator %d", (int)sk->op);
    }
    int nvals = sk->op == STORE_SK_BETWEEN ? 2 : 1;
    const attr_value *vs[2] = {sk->v1, sk->v2};
    for (int i = 0; i < nvals; i++) {
        if (vs[i] == NULL || vs[i]->type != skd->type) {
            return errf(LAPSE_EINVAL, err, errlen, "sort key condition value must be of type %s",
                        item_type_name(skd->type));
        }
    }
    if (sk->op == STORE_SK_BEGINS_WITH && skd->type == ATTR_N) {
        return errf(LAPSE_EINVAL, err, errlen,
                    "begins_with is not supported on sort key \"%s\" of type N", skd->name);
    }
    /* E = P | enc(v1). Keys equal to E are exactly the items with sk == v1;
     * E | 0x00 is the smallest key above all of them. */
    rv = 0;
    switch (sk->op) {
    case STORE_SK_EQ:
    case STORE_SK_LE:
        if ((rv = keycodec_append(hi, sk->v1)) == 0) {
            rv = past_value(hi, suffixed);
        }
        if (rv == 0 && sk->op == STORE_SK_EQ) {
            rv = keycodec_append(lo, sk->v1);
        }
        break;
    case STORE_SK_LT:
        rv = keycodec_append(hi, sk->v1);
        break;
    case STORE_SK_GT:
    case STORE_SK_GE:
        if ((rv = keycodec_append(lo, sk->v1)) == 0 && sk->op == STORE_SK_GT) {
            rv = past_value(lo, suffixed);
        }
        if (rv == 0) {
            *hi_none = itemkey_successor(hi);
        }
        break;
    case STORE_SK_BETWEEN:
        if ((rv = keycodec_append(lo, sk->v1)) == 0 && (rv = keycodec_append(hi, sk->v2)) == 0) {
            if (itemkey_cmp(lo->data + plen, lo->len - plen, hi->data + plen, hi->len - plen) > 0) {
                return errf(LAPSE_EINVAL, err, errlen,
                            "BETWEEN needs its lower bound <= its upper bound");
            }
            rv = past_value(hi, suffixed);
        }
        break;
    case STORE_SK_BEGINS_WITH:
        if ((rv = keycodec_append_prefix(lo, sk->v1)) == 0 &&
            (rv = keycodec_append_prefix(hi, sk->v1)) == 0) {
            *hi_none = itemkey_successor(hi);
        }
        break;
    default:
        break;
    }
    if (rv != 0) {
        return errf(rv, err, errlen, "cannot encode the sort key condition (%s)",
                    lapse_strerror(rv));
    }
    return 0;
}

int store_apply_start(buf *k, int forward, buf *lo, buf *hi, int *hi_none)
{
    int rv;
    if (forward) {
        /* Start just above the key: keys > K begin at K | 0x00. */
        if ((rv = buf_append_byte(k, 0)) != 0) {
            return rv;
        }
        if (itemkey_cmp(k->data, k->len, lo->data, lo->len) > 0) {
            return buf_set(lo, k->data, k->len);
        }
        return 0;
    }
    if (*hi_none || itemkey_cmp(k->data, k->len, hi->data, hi->len) < 0) {
        if ((rv = buf_set(hi, k->data, k->len)) != 0) {
            return rv;
        }
        *hi_none = 0;
    }
    return 0;
}

/* Checks an exclusive start key and encodes it into k with its partition. */
static int start_key(const table_schema *t, const item *start, buf *k, uint32_t *part, char *err,
                     size_t errlen)
{
    int rv;
    char why[256];
    if ((rv = schema_check_item(t, start, 1, why, sizeof(why))) != 0) {
        return errf(LAPSE_EINVAL, err, errlen, "bad exclusive start key: %s", why);
    }
    if ((rv = itemkey_of_item(k, t, start, part)) != 0) {
        return errf(rv, err, errlen, "cannot encode the exclusive start key");
    }
    return 0;
}

/* Ends a base query or scan with outcome rv (returned): frees its range
 * lo..hi, naming ENOMEM in err. */
static int range_done(int rv, buf *lo, buf *hi, char *err, size_t errlen)
{
    if (rv == LAPSE_ENOMEM) {
        oom(err, errlen);
    }
    buf_fini(lo);
    buf_fini(hi);
    return rv;
}

int store_query(store *st, const table_schema *t, const attr_value *pk, const store_sk_cond *sk,
                uint32_t limit, int forward, const item *exclusive_start, store_page *out,
                char *err, size_t errlen)
{
    int rv, hi_none = 0;
    uint32_t part, spart;
    buf lo, hi, sk_start;
    buf_init(&lo);
    buf_init(&hi);
    buf_init(&sk_start);
    memset(out, 0, sizeof(*out));
    if (pk == NULL || pk->type != t->pk.type) {
        rv = errf(LAPSE_EINVAL, err, errlen, "partition key \"%s\" must be of type %s", t->pk.name,
                  item_type_name(t->pk.type));
        goto out;
    }
    if ((pk->type == ATTR_S || pk->type == ATTR_B) && pk->u.bytes.len == 0) {
        rv = errf(LAPSE_EINVAL, err, errlen, "partition key \"%s\" must not be empty", t->pk.name);
        goto out;
    }
    if ((rv = itemkey_pk_prefix(&lo, t, pk, &part)) != 0) {
        errf(rv, err, errlen, "cannot encode the partition key (%s)", lapse_strerror(rv));
        goto out;
    }
    size_t plen = lo.len;
    if ((rv = buf_set(&hi, lo.data, lo.len)) != 0) {
        oom(err, errlen);
        goto out;
    }
    char owner[SCHEMA_MAX_NAME + 8];
    snprintf(owner, sizeof(owner), "table %s", t->name);
    if ((rv = store_sk_bounds(&t->sk, owner, sk, 0, &lo, &hi, &hi_none, err, errlen)) != 0) {
        goto out;
    }
    if (exclusive_start != NULL) {
        if ((rv = start_key(t, exclusive_start, &sk_start, &spart, err, errlen)) != 0) {
            goto out;
        }
        if (sk_start.len < plen || memcmp(sk_start.data, lo.data, plen) != 0) {
            rv = errf(LAPSE_EINVAL, err, errlen,
                      "the exclusive start key belongs to another partition key");
            goto out;
        }
        if ((rv = store_apply_start(&sk_start, forward, &lo, &hi, &hi_none)) != 0) {
            goto out;
        }
    }
    rv = store_collect(st, t, CF_ITEMS, NULL, &lo, hi_none ? NULL : &hi, forward, limit, out, err,
                       errlen);
    store_settle(st, t, part);
out:
    buf_fini(&sk_start);
    return range_done(rv, &lo, &hi, err, errlen);
}

int store_scan(store *st, const table_schema *t, uint32_t part, uint32_t limit,
               const item *exclusive_start, store_page *out, char *err, size_t errlen)
{
    int rv;
    buf lo, hi;
    buf_init(&lo);
    buf_init(&hi);
    memset(out, 0, sizeof(*out));
    if (part >= t->partitions) {
        return errf(LAPSE_EINVAL, err, errlen, "partition %u out of range (table has %u)",
                    (unsigned)part, (unsigned)t->partitions);
    }
    if ((rv = itemkey_append_prefix(&hi, t->id, part)) != 0) {
        goto out;
    }
    int hi_none = itemkey_successor(&hi);
    if (exclusive_start != NULL) {
        uint32_t spart = 0;
        if ((rv = start_key(t, exclusive_start, &lo, &spart, err, errlen)) != 0) {
            goto out;
        }
        if (spart != part) {
            rv = errf(LAPSE_EINVAL, err, errlen,
                      "the exclusive start key belongs to partition %u, not %u", (unsigned)spart,
                      (unsigned)part);
            goto out;
        }
        if ((rv = buf_append_byte(&lo, 0)) != 0) {
            goto out;
        }
    } else if ((rv = itemkey_append_prefix(&lo, t->id, part)) != 0) {
        goto out;
    }
    rv =
        store_collect(st, t, CF_ITEMS, NULL, &lo, hi_none ? NULL : &hi, 1, limit, out, err, errlen);
    store_settle(st, t, part);
out:
    return range_done(rv, &lo, &hi, err, errlen);
}

int store_count(store *st, uint32_t table_id, uint32_t part, uint64_t *out, char *err,
                size_t errlen)
{
    /* Visits every key of the partition: for tests and status, not requests. */
    store_size sz;
    int rv = store_estimate(st, table_id, part, UINT64_MAX, &sz, err, errlen);
    *out = sz.items;
    return rv;
}

/* Sizes the keys of family cf that start with prefix lo (store_estimate's
 * walk and scaling, for any family) and frees lo. built is what building lo
 * returned: when it is not 0, nothing is read and it is returned. */
static int estimate_prefix(store *st, int cf, buf *lo, int built, uint64_t max_items,
                           store_size *out, char *err, size_t errlen)
{
    buf hi;
    db_iter *it = NULL;
    int rv = built;
    memset(out, 0, sizeof(*out));
    buf_init(&hi);
    if (rv != 0 || (rv = buf_append(&hi, lo->data, lo->len)) != 0) {
        goto out;
    }
    int hi_none = itemkey_successor(&hi);
    if ((rv = db_iter_new(&it, st->db, cf, lo->data, lo->len, hi_none ? NULL : hi.data, hi.len)) !=
        0) {
        goto out;
    }
    /* Budget: max_items keys and values read, then one size estimate. */
    uint64_t n = 0, bytes = 0;
    db_iter_seek_first(it);
    for (; db_iter_valid(it) && n < max_items; db_iter_next(it)) {
        size_t vlen = 0;
        (void)db_iter_value(it, &vlen);
        n++;
        bytes += vlen;
    }
    int more = db_iter_valid(it);
    if ((rv = db_iter_status(it, err, errlen)) != 0) {
        goto out;
    }
    out->items = n;
    out->bytes = bytes;
    if (more && !hi_none) {
        uint64_t files = 0;
        if ((rv = db_approx_size(st->db, cf, lo->data, lo->len, hi.data, hi.len, &files, err,
                                 errlen)) != 0) {
            memset(out, 0, sizeof(*out));
            goto out;
        }
        out->estimated = 1;
        if (files > bytes && bytes > 0) {
            out->items = (uint64_t)((double)n * ((double)files / (double)bytes));
            out->bytes = files;
        }
    }
out:
    if (rv == LAPSE_ENOMEM) {
        oom(err, errlen);
    }
    db_iter_free(it);
    buf_fini(&hi);
    buf_fini(lo);
    return rv;
}

int store_estimate(store *st, uint32_t table_id, uint32_t part, uint64_t max_items, store_size *out,
                   char *err, size_t errlen)
{
    buf lo;
    buf_init(&lo);
    int rv = itemkey_append_prefix(&lo, table_id, part);
    return estimate_prefix(st, CF_ITEMS, &lo, rv, max_items, out, err, errlen);
}

int store_estimate_lsi(store *st, uint32_t table_id, uint32_t part, uint32_t index_id,
                       uint64_t max_items, store_size *out, char *err, size_t errlen)
{
    buf lo;
    buf_init(&lo);
    int rv = itemkey_append_prefix(&lo, table_id, part);
    if (rv == 0) {
        rv = buf_append_u32be(&lo, index_id);
    }
    return estimate_prefix(st, CF_LSI, &lo, rv, max_items, out, err, errlen);
}

int store_estimate_gsi(store *st, uint32_t table_id, uint32_t index_id, uint32_t gsi_part,
                       uint64_t max_items, store_size *out, char *err, size_t errlen)
{
    buf lo;
    buf_init(&lo);
    int rv = itemkey_gsi_prefix(&lo, table_id, index_id, gsi_part);
    return estimate_prefix(st, CF_GSI, &lo, rv, max_items, out, err, errlen);
}

/* ======================================================================== */
/* Batched point reads                                                      */
/* ======================================================================== */

int store_get_many(store *st, const table_schema *t, const item *const *keys, size_t n, item **out,
                   char *err, size_t errlen)
{
    int rv = 0;
    uint32_t part;
    buf *k = calloc(n ? n : 1, sizeof(buf));
    buf *vals = calloc(n ? n : 1, sizeof(buf));
    const void **kp = calloc(n ? n : 1, sizeof(void *));
    size_t *kl = calloc(n ? n : 1, sizeof(size_t));
    int *found = calloc(n ? n : 1, sizeof(int));
    for (size_t i = 0; i < n; i++) {
        out[i] = NULL;
    }
    if (k == NULL || vals == NULL || kp == NULL || kl == NULL || found == NULL) {
        rv = oom(err, errlen);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        buf_init(&k[i]);
        buf_init(&vals[i]);
        char why[256];
        if ((rv = schema_check_item(t, keys[i], 1, why, sizeof(why))) != 0) {
            errf(rv, err, errlen, "key %zu: %s", i, why);
            goto out;
        }
        if ((rv = itemkey_of_item(&k[i], t, keys[i], &part)) != 0) {
            errf(rv, err, errlen, "key %zu: cannot encode the key (%s)", i, lapse_strerror(rv));
            goto out;
        }
        kp[i] = k[i].data;
        kl[i] = k[i].len;
    }
    if ((rv = db_multi_get(st->db, CF_ITEMS, n, kp, kl, vals, found, err, errlen)) != 0) {
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        /* each partition the keys fall in, once (bytes 4..8 of a key) */
        size_t first = 0;
        while (memcmp(k[first].data + 4, k[i].data + 4, 4) != 0) {
            first++;
        }
        if (first == i) {
            store_settle(st, t, buf_get_u32be(k[i].data + 4));
        }
    }
    for (size_t i = 0; i < n && rv == 0; i++) {
        if (found[i] && (rv = item_decode(vals[i].data, vals[i].len, &out[i])) != 0) {
            errf(rv, err, errlen, "stored item %zu does not decode (%s)", i, lapse_strerror(rv));
        }
    }
out:
    if (rv != 0) {
        for (size_t i = 0; i < n; i++) {
            item_free(out[i]);
            out[i] = NULL;
        }
    }
    for (size_t i = 0; k != NULL && vals != NULL && i < n; i++) {
        buf_fini(&k[i]);
        buf_fini(&vals[i]);
    }
    free(k);
    free(vals);
    free(kp);
    free(kl);
    free(found);
    return rv;
}
