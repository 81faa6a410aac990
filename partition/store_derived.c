/*
 * store_derived.c: the writes an item change derives, added to the
 * WriteBatch of the change itself (docs/storage-format.md, "Writes and
 * durability"; docs/replication.md, "The write path"):
 *
 *   - the TTL expiry index entry (tables with TTL enabled, expiry.h);
 *   - the LSI entries (tables with LSIs): the old version's entries are
 *     deleted and the new version's put, each keyed by the LSI sort key;
 *   - one outbox record (tables with a GSI or a stream), numbered by the
 *     partition's next_seq, with the partition's counters in repl.
 *
 * Everything here works from the encoded old and new values (the sweep
 * never decodes items): an LSI sort key is read in place with
 * item_encoded_get, and the images of a record are the stored bytes. A
 * write that leaves the item as it was makes no outbox record (DynamoDB
 * Streams makes none; no GSI entry changes either); only then, when the
 * two values have equal lengths and differ in bytes, are both decoded.
 */
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/change.h"
#include "itemkey.h"
#include "store_int.h"
#include "../common/ttl.h"

static int oom(char *err, size_t errlen)
{
    return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
}

/* ======================================================================== */
/* The expiry index                                                         */
/* ======================================================================== */

int store_derived_expiry_due_s(const table_schema *t, const item *it, clock_wall now,
                               int64_t *due_s)
{
    int64_t due_ms = 0;
    if (it == NULL || ttl_eval(&t->ttl, it, now, &due_ms) != TTL_ELIGIBLE) {
        return 0;
    }
    *due_s = due_ms / 1000; /* a whole second (ttl.h) */
    return 1;
}

expiry_entry store_derived_expiry_entry(const table_schema *t, const item *it, clock_wall now)
{
    expiry_entry e = {0, 0};
    e.has = store_derived_expiry_due_s(t, it, now, &e.due_s);
    return e;
}

int store_derived_expiry_change(store *st, db_batch *b, const uint8_t *ikey, size_t ilen,
                                expiry_entry o, expiry_entry n, buf *scratch, int64_t *min_due_ms)
{
    if (o.has == n.has && (!o.has || o.due_s == n.due_s)) {
        return 0; /* an unchanged entry costs nothing */
    }
    if (o.has) {
        if (itemkey_expiry_of(scratch, ikey, ilen, o.due_s) != 0) {
            return LAPSE_ENOMEM;
        }
        db_batch_delete(b, st->db, CF_EXPIRY, scratch->data, scratch->len);
    }
    if (n.has) {
        if (itemkey_expiry_of(scratch, ikey, ilen, n.due_s) != 0) {
            return LAPSE_ENOMEM;
        }
        db_batch_put(b, st->db, CF_EXPIRY, scratch->data, scratch->len, "", 0);
        store_sweep_cursor_note(st, buf_get_u32be(ikey), buf_get_u32be(ikey + 4), scratch->data,
                                scratch->len);
        if (n.due_s * 1000 < *min_due_ms) {
            *min_due_ms = n.due_s * 1000;
        }
    }
    return 0;
}

void store_derived_notify(store *st, uint32_t table_id, uint32_t part, int64_t min_due_ms)
{
    if (min_due_ms != STORE_NO_DUE && st->hook != NULL) {
        st->hook(st->hook_arg, table_id, part, min_due_ms);
    }
}

/* ======================================================================== */
/* LSI entries and outbox records                                           */
/* ======================================================================== */

void store_derived_begin(store_derived *d, store *st, const table_schema *t, uint32_t part)
{
    memset(d, 0, sizeof(*d));
    d->st = st;
    d->t = t;
    d->part = part;
    d->outbox = schema_has_outbox(t);
    /* Under the lock: commit times follow sequence order (up to clock steps). */
    d->commit_ms = d->outbox ? clock_wall_now().ms : 0;
    buf_init(&d->k);
    buf_init(&d->k2);
    buf_init(&d->rec);
    buf_init(&d->keys);
}

void store_derived_end(store_derived *d)
{
    buf_fini(&d->k);
    buf_fini(&d->k2);
    buf_fini(&d->rec);
    buf_fini(&d->keys);
}

/* Adds the LSI changes of the item at ikey from old to nw. */
static int lsi_change(store_derived *d, db_batch *b, const uint8_t *ikey, size_t ilen,
                      const uint8_t *old, size_t olen, const uint8_t *nw, size_t nlen)
{
    int rv;
    size_t pk_end = 0;
    if (itemkey_pk_end(d->t, ikey, ilen, &pk_end) != 0) {
        return LAPSE_ECORRUPT;
    }
    for (uint32_t i = 0; i < d->t->nlsi; i++) {
        const index_def *ix = &d->t->lsi[i];
        attr_value ov, nv; /* borrowed views into old and nw */
        int ho = 0, hn = 0;
        if ((rv = itemkey_index_value_encoded(old, olen, &ix->sk, &ov, &ho)) != 0 ||
            (rv = itemkey_index_value_encoded(nw, nlen, &ix->sk, &nv, &hn)) != 0) {
            return rv;
        }
        if (ho && (rv = itemkey_lsi_of(&d->k, ikey, ilen, pk_end, ix->id, &ov)) != 0) {
            return rv;
        }
        if (hn && (rv = itemkey_lsi_of(&d->k2, ikey, ilen, pk_end, ix->id, &nv)) != 0) {
            return rv;
        }
        if (ho && !(hn && itemkey_cmp(d->k.data, d->k.len, d->k2.data, d->k2.len) == 0)) {
            db_batch_delete(b, d->st->db, CF_LSI, d->k.data, d->k.len);
        }
        if (hn) { /* projection all: the item itself */
            db_batch_put(b, d->st->db, CF_LSI, d->k2.data, d->k2.len, nw, nlen);
        }
    }
    return 0;
}

/* Whether an old value decodes (item_encoded_get accepts exactly what
 * item_decode does; no attribute has an empty name). */
static int decodes(const uint8_t *v, size_t len, int *ok)
{
    attr_type type;
    const char *p = NULL;
    size_t n = 0;
    int rv = item_encoded_get(v, len, "", &type, &p, &n);
    *ok = rv == LAPSE_ENOTFOUND;
    return rv == LAPSE_ENOMEM ? rv : 0;
}

/* Whether new value nw is the item old already was, for callers that have
 * only the bytes (store_batch_write): the same bytes, or the same attributes
 * in another order (the only way two encodings of one item differ, so only
 * then, at equal lengths, are both decoded). An undecodable old value is a
 * change. */
static int unchanged(const uint8_t *old, size_t olen, const uint8_t *nw, size_t nlen)
{
    if (olen != nlen) {
        return 0;
    }
    if (memcmp(old, nw, olen) == 0) {
        return 1;
    }
    item *a = NULL, *b = NULL;
    int same =
        item_decode(old, olen, &a) == 0 && item_decode(nw, nlen, &b) == 0 && item_eq_exact(a, b);
    item_free(a);
    item_free(b);
    return same;
}

int store_derived_change(store_derived *d, db_batch *b, const uint8_t *ikey, size_t ilen,
                         const uint8_t *old, size_t olen, const uint8_t *nw, size_t nlen, int same,
                         const store_derived_expiry_delete *ttl, char *err, size_t errlen)
{
    int rv, old_ok = 0;
    const table_schema *t = d->t;
    if (t->nlsi > 0 && (rv = lsi_change(d, b, ikey, ilen, old, olen, nw, nlen)) != 0) {
        return rv == LAPSE_ENOMEM ? oom(err, errlen)
                                  : errf(rv, err, errlen, "cannot derive the LSI keys");
    }
    if (!d->outbox || (old == NULL && nw == NULL)) {
        return 0; /* deleting an absent item makes no record */
    }
    if (ttl == NULL && old != NULL && nw != NULL &&
        (same == STORE_SAME_UNKNOWN ? unchanged(old, olen, nw, nlen) : same)) {
        return 0; /* as DynamoDB: a write that changes nothing makes no record */
    }
    if (!d->loaded) {
        if ((rv = outbox_counters_get(d->st, t->id, d->part, &d->next_seq, &d->next_stream_seq, err,
                                      errlen)) != 0) {
            return rv;
        }
        d->loaded = 1;
    }
    if (old != NULL && decodes(old, olen, &old_ok) != 0) {
        return oom(err, errlen);
    }
    item *key = NULL;
    if ((rv = itemkey_decode_key(t, ikey, ilen, &key)) != 0) {
        return rv == LAPSE_ENOMEM ? oom(err, errlen)
                                  : errf(rv, err, errlen, "an items key does not decode");
    }
    buf_clear(&d->keys);
    rv = item_encode(key, &d->keys);
    item_free(key);
    if (rv != 0) {
        return oom(err, errlen);
    }
    const int carried = t->stream.enabled && (ttl == NULL || t->stream.ttl_deletes);
    if (carried && d->next_stream_seq < schema_stream_base(&t->stream)) {
        /* The first record of a stream turned on again: its generation
         * numbers from its base, past every record of earlier ones. */
        d->next_stream_seq = schema_stream_base(&t->stream);
    }
    change_record r;
    memset(&r, 0, sizeof(r));
    r.table_id = t->id;
    r.part = d->part;
    r.seq = d->next_seq;
    r.stream_seq = carried ? d->next_stream_seq : 0;
    r.commit_ms = d->commit_ms;
    r.event = nw == NULL ? CHANGE_REMOVE : (old_ok ? CHANGE_MODIFY : CHANGE_INSERT);
    r.principal = ttl != NULL ? CHANGE_TTL : CHANGE_USER;
    if (ttl != NULL) {
        r.ttl_attr.data = (const uint8_t *)t->ttl.attribute;
        r.ttl_attr.len = strlen(t->ttl.attribute);
        r.expires_at_ms = ttl->expires_at_ms;
        r.deleted_at_ms = d->commit_ms;
    }
    r.keys = (change_bytes){d->keys.data, d->keys.len};
    if (old_ok) {
        r.old_image = (change_bytes){old, olen};
    }
    if (nw != NULL) {
        r.new_image = (change_bytes){nw, nlen};
    }
    buf_clear(&d->rec);
    if ((rv = change_encode(&r, &d->rec)) != 0 ||
        (rv = itemkey_seq_of(&d->k, t->id, d->part, r.seq)) != 0) {
        return rv == LAPSE_ENOMEM ? oom(err, errlen)
                                  : errf(rv, err, errlen, "cannot encode a change record");
    }
    db_batch_put(b, d->st->db, CF_OUTBOX, d->k.data, d->k.len, d->rec.data, d->rec.len);
    d->next_seq++;
    d->next_stream_seq += carried;
    d->records++;
    return 0;
}

int store_derived_finish(store_derived *d, db_batch *b, char *err, size_t errlen)
{
    if (d->records == 0) {
        return 0;
    }
    uint8_t k[ITEMKEY_REPL_MAX];
    size_t klen = itemkey_repl(k, d->t->id, REPL_SOURCE, d->part, 0, 0);
    buf_clear(&d->rec);
    if (buf_append_u64be(&d->rec, d->next_seq) != 0 ||
        buf_append_u64be(&d->rec, d->next_stream_seq) != 0) {
        return oom(err, errlen);
    }
    db_batch_put(b, d->st->db, CF_REPL, k, klen, d->rec.data, d->rec.len);
    return 0;
}

void store_derived_committed(store_derived *d)
{
    if (d->records > 0) {
        outbox_counters_cache(d->st, d->t->id, d->part, d->next_seq, d->next_stream_seq);
    }
}
