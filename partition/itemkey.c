/*
 * itemkey.c: the items and expiry key layouts (see itemkey.h).
 */
#include "itemkey.h"

#include <string.h>

#include "../common/keycodec.h"
#include "../common/lapse_err.h"
#include "hash.h"

static void put_u32be(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

int itemkey_append_prefix(buf *k, uint32_t table_id, uint32_t part)
{
    uint8_t p[ITEMKEY_PREFIX_BYTES];
    put_u32be(p, table_id);
    put_u32be(p + 4, part);
    return buf_append(k, p, sizeof(p));
}

int itemkey_pk_prefix(buf *k, const table_schema *t, const attr_value *pk, uint32_t *part)
{
    int rv;
    buf_clear(k);
    if ((rv = itemkey_append_prefix(k, t->id, 0)) != 0 || (rv = keycodec_append(k, pk)) != 0) {
        return rv;
    }
    *part = hash_partition_of_bytes(k->data + ITEMKEY_PREFIX_BYTES, k->len - ITEMKEY_PREFIX_BYTES,
                                    t->partitions);
    put_u32be(k->data + 4, *part);
    return 0;
}

int itemkey_of_item(buf *k, const table_schema *t, const item *it, uint32_t *part)
{
    int rv;
    const attr_value *pk = item_get(it, t->pk.name);
    if (pk == NULL || pk->type != t->pk.type) {
        return LAPSE_EINVAL;
    }
    if ((rv = itemkey_pk_prefix(k, t, pk, part)) != 0) {
        return rv;
    }
    if (t->sk.name[0] != 0) {
        const attr_value *sk = item_get(it, t->sk.name);
        if (sk == NULL || sk->type != t->sk.type) {
            return LAPSE_EINVAL;
        }
        if ((rv = keycodec_append(k, sk)) != 0) {
            return rv;
        }
    }
    return 0;
}

int itemkey_successor(buf *k)
{
    while (k->len > 0 && k->data[k->len - 1] == 0xFF) {
        k->len--;
    }
    if (k->data != NULL) {
        k->data[k->len] = 0; /* keep buf's terminator invariant */
    }
    if (k->len == 0) {
        return 1;
    }
    k->data[k->len - 1]++;
    return 0;
}

void itemkey_table_range(uint32_t table_id, uint8_t lo[4], uint8_t hi[9], size_t *hlen)
{
    put_u32be(lo, table_id);
    if (table_id == UINT32_MAX) {
        /* Partitions are < SCHEMA_MAX_PARTITIONS, so 9 bytes of 0xFF are
         * above every key of this table. */
        memset(hi, 0xFF, 9);
        *hlen = 9;
    } else {
        put_u32be(hi, table_id + 1);
        *hlen = 4;
    }
}

int itemkey_expiry_of(buf *k, const uint8_t *ikey, size_t ilen, int64_t due_s)
{
    buf_clear(k);
    if (buf_reserve(k, ilen + 8) != 0) {
        return LAPSE_ENOMEM;
    }
    /* Cannot fail after the reserve. */
    buf_append(k, ikey, ITEMKEY_PREFIX_BYTES);
    buf_append_u64be(k, due_s > 0 ? (uint64_t)due_s : 0);
    buf_append(k, ikey + ITEMKEY_PREFIX_BYTES, ilen - ITEMKEY_PREFIX_BYTES);
    return 0;
}

int itemkey_expiry_bound(buf *k, uint32_t table_id, uint32_t part, uint64_t due_s)
{
    int rv;
    buf_clear(k);
    if ((rv = itemkey_append_prefix(k, table_id, part)) != 0) {
        return rv;
    }
    return buf_append_u64be(k, due_s);
}

int64_t itemkey_expiry_due_s(const uint8_t *ekey, size_t elen)
{
    if (elen < ITEMKEY_EXPIRY_HEAD_BYTES) {
        return -1;
    }
    uint64_t s = buf_get_u64be(ekey + ITEMKEY_PREFIX_BYTES);
    return s > (uint64_t)INT64_MAX / 1000 ? INT64_MAX / 1000 : (int64_t)s;
}

int itemkey_of_expiry(buf *k, const uint8_t *ekey, size_t elen)
{
    buf_clear(k);
    if (elen < ITEMKEY_EXPIRY_HEAD_BYTES) {
        return LAPSE_ECORRUPT;
    }
    if (buf_reserve(k, elen - 8) != 0) {
        return LAPSE_ENOMEM;
    }
    buf_append(k, ekey, ITEMKEY_PREFIX_BYTES);
    buf_append(k, ekey + ITEMKEY_EXPIRY_HEAD_BYTES, elen - ITEMKEY_EXPIRY_HEAD_BYTES);
    return 0;
}

int itemkey_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n > 0 ? memcmp(a, b, n) : 0;
    if (c != 0) {
        return c;
    }
    return alen < blen ? -1 : (alen > blen ? 1 : 0);
}
