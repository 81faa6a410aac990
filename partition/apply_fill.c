/*
 * apply_fill.c: a copy that lost records (apply.h, REPL_MISSING) made whole
 * again: its gaps, the stream fill from another copy's records and the GSI
 * fill from its source partition's items.
 */
#include <inttypes.h>
#include <string.h>

#include "../common/change.h"
#include "../common/lapse_err.h"
#include "apply.h"
#include "itemkey.h"
#include "store_int.h"

static int oom(char *err, size_t errlen)
{
    return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
}

/* The REPL_MISSING mark of (table_id, part) when it lies past the filled
 * mark of kind filled_kind, else 0. */
static int gap_of(store *st, uint32_t table_id, uint32_t part, uint8_t filled_kind, uint64_t *mark,
                  char *err, size_t errlen)
{
    uint64_t missing = 0, filled = 0;
    *mark = 0;
    if (!atomic_load(&st->missing_marks)) {
        return 0; /* no mark anywhere here (read at open, set on the first) */
    }
    int rv = store_repl_u64(st, table_id, REPL_MISSING, part, 0, 0, &missing, err, errlen);
    if (rv == 0 && missing != 0) {
        rv = store_repl_u64(st, table_id, filled_kind, part, 0, 0, &filled, err, errlen);
    }
    if (rv == 0 && missing > filled) {
        *mark = missing;
    }
    return rv;
}

/* Sets the filled mark of kind filled_kind of (table_id, part) to mark,
 * under the apply lock, unless the REPL_MISSING mark moved meanwhile. */
static int set_filled(store *st, uint32_t table_id, uint32_t part, uint8_t filled_kind,
                      uint64_t mark, char *err, size_t errlen)
{
    uint64_t missing = 0;
    pthread_mutex_t *mu = store_apply_lock(st, table_id, part);
    pthread_mutex_lock(mu);
    int rv = store_repl_u64(st, table_id, REPL_MISSING, part, 0, 0, &missing, err, errlen);
    if (rv == 0 && missing == mark) {
        db_batch *b = db_batch_new();
        if (b == NULL) {
            rv = oom(err, errlen);
        } else {
            store_repl_put_u64(st, b, table_id, filled_kind, part, mark);
            rv = db_write(st->db, b, 0, err, errlen);
            db_batch_free(b);
        }
    }
    pthread_mutex_unlock(mu);
    return rv;
}

int apply_forget_missing(store *st, uint32_t table_id, uint32_t src_part, int stream, int gsi,
                         int *dropped, char *err, size_t errlen)
{
    uint64_t missing = 0, sf = 0, gf = 0;
    *dropped = 0;
    pthread_mutex_t *mu = store_apply_lock(st, table_id, src_part);
    pthread_mutex_lock(mu);
    int rv = store_repl_u64(st, table_id, REPL_MISSING, src_part, 0, 0, &missing, err, errlen);
    if (rv == 0 && missing != 0) {
        rv = store_repl_u64(st, table_id, REPL_STREAM_FILLED, src_part, 0, 0, &sf, err, errlen);
    }
    if (rv == 0 && missing != 0) {
        rv = store_repl_u64(st, table_id, REPL_GSI_FILLED, src_part, 0, 0, &gf, err, errlen);
    }
    if (rv == 0 && missing != 0 && (!stream || sf >= missing) && (!gsi || gf >= missing)) {
        db_batch *b = db_batch_new();
        if (b == NULL) {
            rv = oom(err, errlen);
        } else {
            static const uint8_t kinds[] = {REPL_MISSING, REPL_STREAM_FILLED, REPL_GSI_FILLED};
            for (size_t i = 0; i < sizeof(kinds); i++) {
                uint8_t k[ITEMKEY_REPL_MAX];
                size_t klen = itemkey_repl(k, table_id, kinds[i], src_part, 0, 0);
                db_batch_delete(b, st->db, CF_REPL, k, klen);
            }
            rv = db_write(st->db, b, 0, err, errlen);
            db_batch_free(b);
            *dropped = rv == 0;
        }
    }
    pthread_mutex_unlock(mu);
    return rv;
}

/* ======================================================================== */
/* GSI copies                                                               */
/* ======================================================================== */

/* Looks at the table's REPL_MISSING marks: *found is set at the first
 * one, or with unfilled_gsi, at the first past its source's GSI filled
 * mark. */
static int scan_marks(store *st, uint32_t table_id, int unfilled_gsi, int *found, char *err,
                      size_t errlen)
{
    *found = 0;
    if (!atomic_load(&st->missing_marks)) {
        return 0; /* no mark anywhere here (read at open, set on the first) */
    }
    uint8_t lo[ITEMKEY_REPL_MAX], hi[ITEMKEY_REPL_MAX];
    size_t lolen = itemkey_repl(lo, table_id, REPL_MISSING, 0, 0, 0);
    size_t hilen = itemkey_repl(hi, table_id, REPL_MISSING + 1, 0, 0, 0);
    db_iter *it = NULL;
    int rv = db_iter_new(&it, st->db, CF_REPL, lo, lolen, hi, hilen);
    if (rv != 0) {
        return oom(err, errlen);
    }
    for (db_iter_seek_first(it); rv == 0 && !*found && db_iter_valid(it); db_iter_next(it)) {
        size_t klen = 0, vlen = 0;
        const uint8_t *k = db_iter_key(it, &klen);
        const uint8_t *v = db_iter_value(it, &vlen);
        uint64_t filled = 0;
        if (klen != lolen || vlen != 8) {
            rv = errf(LAPSE_ECORRUPT, err, errlen, "a stored missing mark is malformed");
        } else if (!unfilled_gsi) {
            *found = 1;
        } else {
            uint32_t part = buf_get_u32be(k + 5);
            rv = store_repl_u64(st, table_id, REPL_GSI_FILLED, part, 0, 0, &filled, err, errlen);
            *found = rv == 0 && buf_get_u64be(v) > filled;
        }
    }
    if (rv == 0) {
        rv = db_iter_status(it, err, errlen);
    }
    db_iter_free(it);
    return rv;
}

int apply_missing(store *st, uint32_t table_id, int64_t src_part, int *missing, char *err,
                  size_t errlen)
{
    if (src_part < 0) {
        return scan_marks(st, table_id, 1, missing, err, errlen);
    }
    uint64_t mark = 0;
    int rv = gap_of(st, table_id, (uint32_t)src_part, REPL_GSI_FILLED, &mark, err, errlen);
    *missing = rv == 0 && mark != 0;
    return rv;
}

int apply_missing_any(store *st, uint32_t table_id, int *any, char *err, size_t errlen)
{
    return scan_marks(st, table_id, 0, any, err, errlen);
}

int apply_gsi_gap(store *st, uint32_t table_id, uint32_t src_part, uint64_t *mark, char *err,
                  size_t errlen)
{
    return gap_of(st, table_id, src_part, REPL_GSI_FILLED, mark, err, errlen);
}

int apply_gsi_fill(store *st, const table_schema *t, uint32_t src_part, const apply_filter *f,
                   const void *const *items, const size_t *lens, size_t n, char *err, size_t errlen)
{
    if (f == NULL || f->owns_gsi == NULL || src_part >= t->partitions) {
        return errf(LAPSE_EINVAL, err, errlen, "apply_gsi_fill: bad arguments");
    }
    db_batch *b = db_batch_new();
    buf k, val;
    buf_init(&k);
    buf_init(&val);
    if (b == NULL) {
        return oom(err, errlen);
    }
    int rv = 0;
    for (size_t i = 0; i < n && rv == 0; i++) {
        item *it = NULL;
        if ((rv = item_decode(items[i], lens[i], &it)) != 0) {
            rv = rv == LAPSE_ENOMEM ? oom(err, errlen)
                                    : errf(rv, err, errlen, "item %zu does not decode", i);
            break;
        }
        for (uint32_t g = 0; g < t->ngsi && rv == 0; g++) {
            uint32_t gpart = 0;
            rv = itemkey_gsi_of(&k, t, &t->gsi[g], it, &gpart);
            if (rv == LAPSE_ENOTFOUND) {
                rv = 0; /* not in this index */
            } else if (rv == LAPSE_EINVAL) {
                rv = errf(rv, err, errlen, "item %zu lacks the table's keys", i);
            } else if (rv == 0 && f->owns_gsi(f->arg, g, gpart)) {
                buf_clear(&val);
                if ((rv = apply_project(t, g, it, &val)) == 0) {
                    db_batch_put(b, st->db, CF_GSI, k.data, k.len, val.data, val.len);
                } else {
                    rv = oom(err, errlen);
                }
            } else if (rv == LAPSE_ENOMEM) {
                rv = oom(err, errlen);
            }
        }
        item_free(it);
    }
    if (rv == 0 && db_batch_count(b) > 0) {
        pthread_mutex_t *mu = store_apply_lock(st, t->id, src_part);
        pthread_mutex_lock(mu);
        rv = db_write(st->db, b, 0, err, errlen);
        pthread_mutex_unlock(mu);
    }
    buf_fini(&k);
    buf_fini(&val);
    db_batch_free(b);
    return rv;
}

int apply_gsi_filled(store *st, uint32_t table_id, uint32_t src_part, uint64_t mark, char *err,
                     size_t errlen)
{
    return set_filled(st, table_id, src_part, REPL_GSI_FILLED, mark, err, errlen);
}

/* ======================================================================== */
/* Stream copies                                                            */
/* ======================================================================== */

int apply_stream_gap(store *st, uint32_t table_id, uint32_t shard, uint64_t *mark, char *err,
                     size_t errlen)
{
    return gap_of(st, table_id, shard, REPL_STREAM_FILLED, mark, err, errlen);
}

int apply_stream_fill_need(store *st, uint32_t table_id, uint32_t shard, uint64_t mark,
                           uint64_t *need, char *err, size_t errlen)
{
    uint64_t applied = 0;
    int rv = apply_applied_seq(st, table_id, shard, &applied, err, errlen);
    *need = rv == 0 && mark > 0 && applied == mark - 1 ? applied : mark;
    return rv;
}

int apply_stream_fill(store *st, const table_schema *t, uint32_t shard, uint64_t mark,
                      const void *const *recs, const size_t *lens, size_t n, int *past, char *err,
                      size_t errlen)
{
    *past = 0;
    db_batch *b = db_batch_new();
    buf sk;
    buf_init(&sk);
    if (b == NULL) {
        return oom(err, errlen);
    }
    int rv = 0;
    uint64_t top = 0, last = 0;
    pthread_mutex_t *mu = store_apply_lock(st, t->id, shard);
    pthread_mutex_lock(mu);
    for (size_t i = 0; i < n && rv == 0; i++) {
        change_record r;
        if ((rv = change_decode_head(recs[i], lens[i], &r)) != 0) {
            rv = errf(rv, err, errlen, "record %zu does not decode", i);
        } else if (r.table_id != t->id || r.part != shard || r.stream_seq == 0) {
            rv = errf(LAPSE_EINVAL, err, errlen,
                      "record %zu (table %" PRIu32 " shard %" PRIu32 " stream seq %" PRIu64
                      ") is no record of stream shard %" PRIu32 " of table %" PRIu32,
                      i, r.table_id, r.part, r.stream_seq, shard, t->id);
        } else if (r.seq > mark) {
            *past = 1;
        } else if ((rv = itemkey_seq_of(&sk, t->id, shard, r.stream_seq)) != 0) {
            rv = oom(err, errlen);
        } else {
            db_batch_put(b, st->db, CF_STREAM, sk.data, sk.len, recs[i], lens[i]);
            top = r.stream_seq > top ? r.stream_seq : top;
        }
    }
    if (rv == 0 &&
        (rv = store_repl_u64(st, t->id, REPL_STREAM_LAST, shard, 0, 0, &last, err, errlen)) == 0) {
        if (top > last) {
            store_repl_put_u64(st, b, t->id, REPL_STREAM_LAST, shard, top);
        }
        rv = db_batch_count(b) > 0 ? db_write(st->db, b, 0, err, errlen) : 0;
    }
    pthread_mutex_unlock(mu);
    buf_fini(&sk);
    db_batch_free(b);
    if (rv != 0) {
        *past = 0;
    }
    return rv;
}

int apply_stream_filled(store *st, uint32_t table_id, uint32_t shard, uint64_t mark, char *err,
                        size_t errlen)
{
    return set_filled(st, table_id, shard, REPL_STREAM_FILLED, mark, err, errlen);
}

/* ======================================================================== */
/* Dropping a copy                                                          */
/* ======================================================================== */

/* The key range [lo, hi) of this node's copy of stream shard part of
 * table_id (index_id 0) or of partition part of its GSI index_id, in
 * *cf. Returns 0, LAPSE_ENOMEM or LAPSE_EINVAL, with err. */
static int copy_range(uint32_t table_id, uint32_t index_id, uint32_t part, buf *lo, buf *hi,
                      int *cf, char *err, size_t errlen)
{
    int rv = index_id != 0 ? itemkey_gsi_prefix(lo, table_id, index_id, part)
                           : itemkey_append_prefix(lo, table_id, part);
    if (rv == 0) {
        rv = buf_append(hi, lo->data, lo->len);
    }
    if (rv != 0) {
        return oom(err, errlen);
    }
    if (itemkey_successor(hi) != 0) { /* all 0xFF: ids are never that large */
        return errf(LAPSE_EINVAL, err, errlen, "table %u: no key range for part %u",
                    (unsigned)table_id, (unsigned)part);
    }
    *cf = index_id != 0 ? CF_GSI : CF_STREAM;
    return 0;
}

int apply_drop_copy(store *st, uint32_t table_id, uint32_t index_id, uint32_t part, char *err,
                    size_t errlen)
{
    buf lo, hi;
    buf_init(&lo);
    buf_init(&hi);
    int cf = 0;
    int rv = copy_range(table_id, index_id, part, &lo, &hi, &cf, err, errlen);
    db_batch *b = rv == 0 ? db_batch_new() : NULL;
    if (rv == 0 && b == NULL) {
        rv = oom(err, errlen);
    }
    if (rv == 0) {
        db_batch_delete_range(b, st->db, cf, lo.data, lo.len, hi.data, hi.len);
        rv = db_write(st->db, b, 0, err, errlen);
    }
    db_batch_free(b);
    buf_fini(&lo);
    buf_fini(&hi);
    return rv;
}

int apply_copy_held(store *st, uint32_t table_id, uint32_t index_id, uint32_t part, int *held,
                    char *err, size_t errlen)
{
    buf lo, hi;
    buf_init(&lo);
    buf_init(&hi);
    int cf = 0;
    db_iter *it = NULL;
    int rv = copy_range(table_id, index_id, part, &lo, &hi, &cf, err, errlen);
    if (rv == 0) {
        rv = db_iter_new(&it, st->db, cf, lo.data, lo.len, hi.data, hi.len);
        if (rv != 0) {
            rv = errf(rv, err, errlen, "table %u: cannot read part %u's copy: %s",
                      (unsigned)table_id, (unsigned)part, lapse_strerror(rv));
        }
    }
    if (rv == 0) {
        db_iter_seek_first(it);
        *held = db_iter_valid(it);
        rv = db_iter_status(it, err, errlen);
    }
    db_iter_free(it);
    buf_fini(&lo);
    buf_fini(&hi);
    return rv;
}
