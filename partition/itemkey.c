/*
 * itemkey.c: the key layouts of the store's column families (see
 * itemkey.h).
 */
#include "itemkey.h"

#include <string.h>

#include "../common/buf.h"
#include "../common/item.h"
#include "../common/keycodec.h"
#include "../common/lapse_err.h"
#include "../placement/hash.h"

int itemkey_append_prefix(buf *k, uint32_t table_id, uint32_t part)
{
    uint8_t p[ITEMKEY_PREFIX_BYTES];
    buf_put_u32be(p, table_id);
    buf_put_u32be(p + 4, part);
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
    buf_put_u32be(k->data + 4, *part);
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
    buf_put_u32be(lo, table_id);
    if (table_id == UINT32_MAX) {
        /* Partitions are < SCHEMA_MAX_PARTITIONS, so 9 bytes of 0xFF are
         * above every key of this table. */
        memset(hi, 0xFF, 9);
        *hlen = 9;
    } else {
        buf_put_u32be(hi, table_id + 1);
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

/* ======================================================================== */
/* Splitting and decoding items keys                                        */
/* ======================================================================== */

/* The length of the one enc() value of type t at p (keycodec's format,
 * docs/key-encoding.md), without decoding it. 0 or LAPSE_ECORRUPT. */
static int enc_len(const uint8_t *p, size_t len, attr_type t, size_t *used)
{
    if (t == ATTR_S || t == ATTR_B) {
        for (size_t i = 0; i + 1 < len; i++) {
            if (p[i] != 0) {
                continue;
            }
            if (p[i + 1] == 0x01) {
                *used = i + 2;
                return 0;
            }
            if (p[i + 1] != 0xFF) {
                return LAPSE_ECORRUPT;
            }
            i++; /* an escaped 00 */
        }
        return LAPSE_ECORRUPT;
    }
    if (t != ATTR_N || len < 1) {
        return LAPSE_ECORRUPT;
    }
    if (p[0] == 0x02) { /* zero */
        *used = 1;
        return 0;
    }
    if (p[0] != 0x01 && p[0] != 0x03) {
        return LAPSE_ECORRUPT;
    }
    /* Digit nibbles are 1..10 and the terminator nibble is 0 (0xF when
     * complemented for a negative number). */
    const uint8_t end = p[0] == 0x01 ? 0x0F : 0x00;
    for (size_t i = 3; i < len; i++) {
        if ((p[i] >> 4) == end || (p[i] & 0x0F) == end) {
            *used = i + 1;
            return 0;
        }
    }
    return LAPSE_ECORRUPT;
}

int itemkey_pk_end(const table_schema *t, const uint8_t *ikey, size_t ilen, size_t *pk_end)
{
    size_t used = 0;
    if (ilen < ITEMKEY_PREFIX_BYTES ||
        enc_len(ikey + ITEMKEY_PREFIX_BYTES, ilen - ITEMKEY_PREFIX_BYTES, t->pk.type, &used) != 0) {
        return LAPSE_ECORRUPT;
    }
    *pk_end = ITEMKEY_PREFIX_BYTES + used;
    if (t->sk.name[0] == 0 && *pk_end != ilen) {
        return LAPSE_ECORRUPT;
    }
    return 0;
}

int itemkey_decode_key(const table_schema *t, const uint8_t *ikey, size_t ilen, item **out)
{
    int rv;
    size_t used = 0, off = ITEMKEY_PREFIX_BYTES;
    attr_value v;
    *out = NULL;
    item *k = item_new();
    if (k == NULL) {
        return LAPSE_ENOMEM;
    }
    const key_def *defs[2] = {&t->pk, &t->sk};
    for (int i = 0; i < 2 && defs[i]->name[0] != 0; i++) {
        if (off > ilen) {
            rv = LAPSE_ECORRUPT;
            goto fail;
        }
        if ((rv = keycodec_decode(ikey + off, ilen - off, defs[i]->type, &v, &used)) != 0) {
            goto fail;
        }
        if ((rv = item_set(k, defs[i]->name, &v)) != 0) {
            item_value_fini(&v);
            goto fail;
        }
        off += used;
    }
    if (off != ilen) {
        rv = LAPSE_ECORRUPT;
        goto fail;
    }
    *out = k;
    return 0;
fail:
    item_free(k);
    return rv;
}

/* ======================================================================== */
/* Secondary index keys                                                     */
/* ======================================================================== */

static int key_value_ok(const attr_value *v, const key_def *kd)
{
    if (v == NULL || v->type != kd->type) {
        return 0;
    }
    return v->type == ATTR_N || v->u.bytes.len > 0;
}

const attr_value *itemkey_index_value(const item *it, const key_def *kd)
{
    const attr_value *v = it != NULL ? item_get(it, kd->name) : NULL;
    return key_value_ok(v, kd) ? v : NULL;
}

int itemkey_index_value_encoded(const uint8_t *data, size_t len, const key_def *kd, attr_value *v,
                                int *has)
{
    attr_type type = ATTR_NULL;
    const char *p = NULL;
    size_t n = 0;
    *has = 0;
    int rv = data != NULL ? item_encoded_get(data, len, kd->name, &type, &p, &n) : LAPSE_ENOTFOUND;
    if (rv == LAPSE_ENOMEM) {
        return rv;
    }
    if (rv != 0 || type != kd->type) {
        return 0; /* absent, mistyped, or a stored value that does not decode */
    }
    /* A borrowed view: keycodec_append reads ptr and len only. */
    v->type = type;
    v->u.bytes.ptr = (char *)p;
    v->u.bytes.len = n;
    *has = key_value_ok(v, kd);
    return 0;
}

int itemkey_lsi_of(buf *k, const uint8_t *ikey, size_t ilen, size_t pk_end, uint32_t index_id,
                   const attr_value *sk)
{
    int rv;
    buf_clear(k);
    if ((rv = buf_reserve(k, ilen + 4 + 16)) != 0 ||
        (rv = buf_append(k, ikey, ITEMKEY_PREFIX_BYTES)) != 0 ||
        (rv = buf_append_u32be(k, index_id)) != 0 ||
        (rv = buf_append(k, ikey + ITEMKEY_PREFIX_BYTES, pk_end - ITEMKEY_PREFIX_BYTES)) != 0 ||
        (rv = keycodec_append(k, sk)) != 0) {
        return rv;
    }
    return buf_append(k, ikey + pk_end, ilen - pk_end);
}

int itemkey_gsi_prefix(buf *k, uint32_t table_id, uint32_t index_id, uint32_t gpart)
{
    uint8_t p[12];
    buf_put_u32be(p, table_id);
    buf_put_u32be(p + 4, index_id);
    buf_put_u32be(p + 8, gpart);
    buf_clear(k);
    return buf_append(k, p, sizeof(p));
}

int itemkey_gsi_of(buf *k, const table_schema *t, const index_def *g, const item *it,
                   uint32_t *gpart)
{
    int rv;
    const attr_value *gpk = itemkey_index_value(it, &g->pk);
    const attr_value *gsk = g->sk.name[0] != 0 ? itemkey_index_value(it, &g->sk) : NULL;
    if (gpk == NULL || (g->sk.name[0] != 0 && gsk == NULL)) {
        return LAPSE_ENOTFOUND;
    }
    const attr_value *pk = item_get(it, t->pk.name);
    const attr_value *sk = t->sk.name[0] != 0 ? item_get(it, t->sk.name) : NULL;
    if (pk == NULL || pk->type != t->pk.type ||
        (t->sk.name[0] != 0 && (sk == NULL || sk->type != t->sk.type))) {
        return LAPSE_EINVAL;
    }
    if ((rv = itemkey_gsi_prefix(k, t->id, g->id, 0)) != 0 || (rv = keycodec_append(k, gpk)) != 0) {
        return rv;
    }
    *gpart = hash_partition_of_bytes(k->data + 12, k->len - 12, g->partitions);
    buf_put_u32be(k->data + 8, *gpart);
    if ((gsk != NULL && (rv = keycodec_append(k, gsk)) != 0) ||
        (rv = keycodec_append(k, pk)) != 0 || (sk != NULL && (rv = keycodec_append(k, sk)) != 0)) {
        return rv;
    }
    return 0;
}

/* ======================================================================== */
/* Outbox, stream and repl keys                                             */
/* ======================================================================== */

int itemkey_seq_of(buf *k, uint32_t a, uint32_t b, uint64_t seq)
{
    uint8_t p[16];
    buf_put_u32be(p, a);
    buf_put_u32be(p + 4, b);
    buf_put_u64be(p + 8, seq);
    buf_clear(k);
    return buf_append(k, p, sizeof(p));
}

uint64_t itemkey_seq(const uint8_t *k, size_t len)
{
    return len < 16 ? 0 : buf_get_u64be(k + 8);
}

size_t itemkey_repl(uint8_t out[ITEMKEY_REPL_MAX], uint32_t table_id, uint8_t kind, uint32_t part,
                    int with_node, uint32_t node)
{
    buf_put_u32be(out, table_id);
    out[4] = kind;
    buf_put_u32be(out + 5, part);
    if (!with_node) {
        return 9;
    }
    buf_put_u32be(out + 9, node);
    return 13;
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
