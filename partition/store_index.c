/*
 * store_index.c: queries of the secondary indexes (see store.h): an LSI
 * query over the lsi family, a GSI query over the gsi family. Each is one
 * key range, built as a base query's (docs/storage-format.md, "Key
 * ranges") over the index key's prefix, paged with store_collect. No lock
 * is taken.
 *
 * The sort-key bounds differ from a base query's in one way: index keys go
 * on with the table's keys after enc(index sk), so "just above every key
 * with sort key v" is succ(P | enc(v)), not P | enc(v) | 00.
 */
#include <stdio.h>
#include <string.h>

#include "../common/keycodec.h"
#include "../common/lapse_err.h"
#include "../placement/hash.h"
#include "itemkey.h"
#include "store_int.h"

static int check_pk(const key_def *kd, const attr_value *pk, char *err, size_t errlen)
{
    if (pk == NULL || pk->type != kd->type) {
        return errf(LAPSE_EINVAL, err, errlen, "partition key \"%s\" must be of type %s", kd->name,
                    item_type_name(kd->type));
    }
    if ((pk->type == ATTR_S || pk->type == ATTR_B) && pk->u.bytes.len == 0) {
        return errf(LAPSE_EINVAL, err, errlen, "partition key \"%s\" must not be empty", kd->name);
    }
    return 0;
}

/* One index query's key range: lo and hi its bounds, k its start key. */
typedef struct index_range {
    buf lo, hi, k;
} index_range;

/* Opens an index query: an empty range and page. */
static void range_open(index_range *r, store_page *out)
{
    buf_init(&r->lo);
    buf_init(&r->hi);
    buf_init(&r->k);
    memset(out, 0, sizeof(*out));
}

/* Ends an index query with outcome rv (returned), naming ENOMEM in err. */
static int range_close(index_range *r, int rv, char *err, size_t errlen)
{
    if (rv == LAPSE_ENOMEM) {
        errf(rv, err, errlen, "out of memory");
    }
    buf_fini(&r->lo);
    buf_fini(&r->hi);
    buf_fini(&r->k);
    return rv;
}

/* Bounds lo/hi (P on entry) by sk, narrows them by the start key k (when
 * non-empty; it must start with P) and collects the page. */
static int finish(store *st, const table_schema *t, int cf, const index_def *ix,
                  const store_sk_cond *sk, index_range *r, uint32_t limit, int forward,
                  store_page *out, char *err, size_t errlen)
{
    buf *lo = &r->lo, *hi = &r->hi, *k = &r->k;
    int rv, hi_none = 0;
    char owner[SCHEMA_MAX_NAME + 8];
    snprintf(owner, sizeof(owner), "index %s", ix->name);
    if (k->len > 0 && (k->len < lo->len || memcmp(k->data, lo->data, lo->len) != 0)) {
        return errf(LAPSE_EINVAL, err, errlen,
                    "the exclusive start key belongs to another partition key");
    }
    if ((rv = buf_append(hi, lo->data, lo->len)) != 0 ||
        (rv = store_sk_bounds(&ix->sk, owner, sk, 1, lo, hi, &hi_none, err, errlen)) != 0) {
        return rv;
    }
    if (k->len > 0 && (rv = store_apply_start(k, forward, lo, hi, &hi_none)) != 0) {
        return rv;
    }
    return store_collect(st, t, cf, ix, lo, hi_none ? NULL : hi, forward, limit, out, err, errlen);
}

/* ======================================================================== */
/* LSI                                                                      */
/* ======================================================================== */

/* The lsi key of start under ix, into k. */
static int lsi_start_key(const table_schema *t, const index_def *ix, const item *start, buf *k,
                         char *err, size_t errlen)
{
    buf ik;
    buf_init(&ik);
    uint32_t part = 0;
    size_t pk_end = 0;
    const attr_value *v = itemkey_index_value(start, &ix->sk);
    int rv = itemkey_of_item(&ik, t, start, &part);
    if (rv == 0 && v == NULL) {
        rv = LAPSE_EINVAL;
    }
    if (rv == 0 && (rv = itemkey_pk_end(t, ik.data, ik.len, &pk_end)) == 0) {
        rv = itemkey_lsi_of(k, ik.data, ik.len, pk_end, ix->id, v);
    }
    buf_fini(&ik);
    if (rv == LAPSE_EINVAL || rv == LAPSE_ECORRUPT) {
        return errf(LAPSE_EINVAL, err, errlen,
                    "bad exclusive start key: it needs the table's keys and \"%s\" of type %s",
                    ix->sk.name, item_type_name(ix->sk.type));
    }
    return rv;
}

int store_query_lsi(store *st, const table_schema *t, uint32_t lsi, const attr_value *pk,
                    const store_sk_cond *sk, uint32_t limit, int forward,
                    const item *exclusive_start, store_page *out, char *err, size_t errlen)
{
    int rv;
    uint32_t part = 0;
    index_range r;
    buf p;
    buf_init(&p);
    range_open(&r, out);
    if (lsi >= t->nlsi) {
        return errf(LAPSE_EINVAL, err, errlen, "table %s has no LSI number %u", t->name,
                    (unsigned)lsi);
    }
    const index_def *ix = &t->lsi[lsi];
    if ((rv = check_pk(&t->pk, pk, err, errlen)) != 0) {
        goto out;
    }
    /* P = table | part | index id | enc(pk) */
    if ((rv = itemkey_pk_prefix(&p, t, pk, &part)) != 0 ||
        (rv = buf_append(&r.lo, p.data, ITEMKEY_PREFIX_BYTES)) != 0 ||
        (rv = buf_append_u32be(&r.lo, ix->id)) != 0 ||
        (rv = buf_append(&r.lo, p.data + ITEMKEY_PREFIX_BYTES, p.len - ITEMKEY_PREFIX_BYTES)) !=
            0) {
        errf(rv, err, errlen, "cannot encode the partition key (%s)", lapse_strerror(rv));
        goto out;
    }
    if (exclusive_start != NULL &&
        (rv = lsi_start_key(t, ix, exclusive_start, &r.k, err, errlen)) != 0) {
        goto out;
    }
    rv = finish(st, t, CF_LSI, ix, sk, &r, limit, forward, out, err, errlen);
    store_settle(st, t, part);
out:
    buf_fini(&p);
    return range_close(&r, rv, err, errlen);
}

/* ======================================================================== */
/* GSI                                                                      */
/* ======================================================================== */

int store_query_gsi(store *st, const table_schema *t, uint32_t gsi, uint32_t gsi_part,
                    const attr_value *pk, const store_sk_cond *sk, uint32_t limit, int forward,
                    const item *exclusive_start, store_page *out, char *err, size_t errlen)
{
    int rv;
    index_range r;
    range_open(&r, out);
    if (gsi >= t->ngsi) {
        return errf(LAPSE_EINVAL, err, errlen, "table %s has no GSI number %u", t->name,
                    (unsigned)gsi);
    }
    const index_def *g = &t->gsi[gsi];
    if ((rv = check_pk(&g->pk, pk, err, errlen)) != 0) {
        goto out;
    }
    /* P = table | index id | gsi part | enc(gsi pk) */
    if ((rv = itemkey_gsi_prefix(&r.lo, t->id, g->id, gsi_part)) != 0 ||
        (rv = keycodec_append(&r.lo, pk)) != 0) {
        errf(rv, err, errlen, "cannot encode the partition key (%s)", lapse_strerror(rv));
        goto out;
    }
    uint32_t want = hash_partition_of_bytes(r.lo.data + 12, r.lo.len - 12, g->partitions);
    if (want != gsi_part) {
        rv = errf(LAPSE_EINVAL, err, errlen,
                  "the partition key belongs to partition %u of index %s, not %u", (unsigned)want,
                  g->name, (unsigned)gsi_part);
        goto out;
    }
    if (exclusive_start != NULL) {
        uint32_t spart = 0;
        rv = itemkey_gsi_of(&r.k, t, g, exclusive_start, &spart);
        if (rv == LAPSE_ENOTFOUND || rv == LAPSE_EINVAL) {
            rv = errf(LAPSE_EINVAL, err, errlen,
                      "bad exclusive start key: it needs the table's keys and the keys "
                      "of index %s",
                      g->name);
        }
        if (rv != 0) {
            goto out;
        }
    }
    rv = finish(st, t, CF_GSI, g, sk, &r, limit, forward, out, err, errlen);
out:
    return range_close(&r, rv, err, errlen);
}
