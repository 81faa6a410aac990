/*
 * store_int.c: the internals every file of the store shares (store_int.h):
 * error text, the lock stripes and apply locks, the sweep cursors, the
 * read of one stored item, the u64 counters of the repl family and the
 * read of a sequence-keyed family (outbox, stream).
 *
 * It is the bottom of partition/'s call order: it uses the key layouts
 * (itemkey.c) and storage/ only, and none of the files that use it, so
 * every path of the store (writes, the sweep, the outbox, the apply)
 * calls down into it and nothing here calls back up.
 */
#include "store_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/lapse_err.h"
#include "itemkey.h"

static int oom(char *err, size_t errlen)
{
    return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
}

/* ======================================================================== */
/* Locks                                                                    */
/* ======================================================================== */

pthread_mutex_t *store_stripe(store *st, uint32_t table_id, uint32_t part)
{
    /* Partitions of one table map to distinct stripes (low bits of part
     * survive the xor), tables are spread by the multiplicative hash. */
    uint32_t h = (table_id * 0x9E3779B1u) ^ part;
    h ^= h >> 16;
    return &st->locks[h & (STORE_LOCK_STRIPES - 1)];
}

pthread_mutex_t *store_apply_lock(store *st, uint32_t table_id, uint32_t part)
{
    return &st->apply_locks[store_stripe(st, table_id, part) - st->locks];
}

static sweep_cursor *cursor_of(store *st, uint32_t table_id, uint32_t part)
{
    return &st->cursors[store_stripe(st, table_id, part) - st->locks];
}

sweep_cursor *store_sweep_cursor(store *st, uint32_t table_id, uint32_t part)
{
    sweep_cursor *c = cursor_of(st, table_id, part);
    return c->valid && c->table_id == table_id && c->part == part ? c : NULL;
}

void store_sweep_cursor_note(store *st, uint32_t table_id, uint32_t part, const uint8_t *ekey,
                             size_t elen)
{
    sweep_cursor *c = store_sweep_cursor(st, table_id, part);
    if (c != NULL && (ekey == NULL || itemkey_cmp(ekey, elen, c->key.data, c->key.len) < 0)) {
        c->valid = 0;
    }
}

void store_sweep_cursor_set(store *st, uint32_t table_id, uint32_t part, const uint8_t *key,
                            size_t len)
{
    sweep_cursor *c = store_sweep_cursor(st, table_id, part);
    if (c != NULL && itemkey_cmp(key, len, c->key.data, c->key.len) <= 0) {
        return;
    }
    c = cursor_of(st, table_id, part);
    buf_clear(&c->key);
    c->valid = buf_append(&c->key, key, len) == 0;
    c->table_id = table_id;
    c->part = part;
}

/* ======================================================================== */
/* Reads                                                                    */
/* ======================================================================== */

/* Reads and decodes the item under key; *out is NULL when absent. */
int store_read_item(store *st, const buf *key, buf *scratch, item **out, char *err, size_t errlen)
{
    int found = 0, rv;
    *out = NULL;
    if ((rv = db_get(st->db, CF_ITEMS, key->data, key->len, scratch, &found, err, errlen)) != 0) {
        return rv;
    }
    if (!found) {
        return 0;
    }
    if ((rv = item_decode(scratch->data, scratch->len, out)) != 0) {
        return errf(rv, err, errlen, "stored item failed to decode (%s)", lapse_strerror(rv));
    }
    return 0;
}

int store_seq_read(store *st, int cf, uint32_t table_id, uint32_t part, uint64_t after_seq,
                   size_t max_records, size_t max_bytes, change_list *out, const char *what,
                   char *err, size_t errlen)
{
    int rv;
    db_iter *it = NULL;
    buf lo, hi;
    buf_init(&lo);
    buf_init(&hi);
    change_list_fini(out);
    if (max_records == 0 || after_seq == UINT64_MAX) {
        return errf(LAPSE_EINVAL, err, errlen, "%s: bad arguments", what);
    }
    if ((rv = itemkey_seq_of(&lo, table_id, part, after_seq + 1)) != 0 ||
        (rv = itemkey_append_prefix(&hi, table_id, part)) != 0) {
        goto out;
    }
    int hi_none = itemkey_successor(&hi);
    if ((rv = db_iter_new(&it, st->db, cf, lo.data, lo.len, hi_none ? NULL : hi.data, hi.len)) !=
        0) {
        goto out;
    }
    /* Budget: max_records records and max_bytes bytes (the first record
     * always fits, so a huge record cannot stall a reader). */
    for (db_iter_seek_first(it); db_iter_valid(it) && out->n < max_records; db_iter_next(it)) {
        size_t klen = 0, vlen = 0;
        const uint8_t *k = db_iter_key(it, &klen);
        const uint8_t *v = db_iter_value(it, &vlen);
        if (out->n > 0 && max_bytes > 0 && out->bytes + vlen > max_bytes) {
            break;
        }
        if ((rv = change_list_push(out, itemkey_seq(k, klen), v, vlen)) != 0) {
            goto out;
        }
    }
    rv = db_iter_status(it, err, errlen);
out:
    if (rv == LAPSE_ENOMEM) {
        oom(err, errlen);
    }
    if (rv != 0) {
        change_list_fini(out);
    }
    db_iter_free(it);
    buf_fini(&lo);
    buf_fini(&hi);
    return rv;
}

/* ======================================================================== */
/* Replication counters                                                     */
/* ======================================================================== */

int store_repl_u64(store *st, uint32_t table_id, uint8_t kind, uint32_t part, int has_node,
                   uint32_t node, uint64_t *out, char *err, size_t errlen)
{
    uint8_t k[ITEMKEY_REPL_MAX];
    size_t klen = itemkey_repl(k, table_id, kind, part, has_node, node);
    int found = 0;
    buf v;
    buf_init(&v);
    int rv = db_get(st->db, CF_REPL, k, klen, &v, &found, err, errlen);
    *out = 0;
    if (rv == 0 && found) {
        if (v.len != 8) {
            rv = errf(LAPSE_ECORRUPT, err, errlen,
                      "a stored replication counter (kind %u) is malformed", (unsigned)kind);
        } else {
            *out = buf_get_u64be(v.data);
        }
    }
    buf_fini(&v);
    return rv;
}

void store_table_delete(store *st, db_batch *b, uint32_t table_id, const int *cfs, size_t n)
{
    uint8_t lo[4], hi[9];
    size_t hlen = 0;
    itemkey_table_range(table_id, lo, hi, &hlen);
    for (size_t i = 0; i < n; i++) {
        db_batch_delete_range(b, st->db, cfs[i], lo, sizeof(lo), hi, hlen);
    }
}

int store_table_compact(store *st, uint32_t table_id, const int *cfs, size_t n)
{
    uint8_t lo[4], hi[9];
    size_t hlen = 0;
    itemkey_table_range(table_id, lo, hi, &hlen);
    int rv = 0;
    for (size_t i = 0; i < n && rv == 0; i++) {
        rv = db_compact_range(st->db, cfs[i], lo, sizeof(lo), hi, hlen);
    }
    return rv;
}

void store_repl_put_u64(store *st, db_batch *b, uint32_t table_id, uint8_t kind, uint32_t part,
                        uint64_t val)
{
    uint8_t k[ITEMKEY_REPL_MAX], v[8];
    size_t klen = itemkey_repl(k, table_id, kind, part, 0, 0);
    buf_put_u64be(v, val);
    db_batch_put(b, st->db, CF_REPL, k, klen, v, sizeof(v));
}
