/*
 * apply.c: applying batches of change records on a destination node (see
 * apply.h): GSI entries from the records' images, stream records, and the
 * applied counter, in one WriteBatch per batch under the apply lock of the
 * source partition.
 */
#include "apply.h"

#include <inttypes.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/change.h"
#include "itemkey.h"
#include "store_int.h"

static int oom(char *err, size_t errlen)
{
    return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
}

int apply_applied_seq(store *st, uint32_t table_id, uint32_t src_part, uint64_t *applied, char *err,
                      size_t errlen)
{
    return store_repl_u64(st, table_id, REPL_APPLIED, src_part, 0, 0, applied, err, errlen);
}

int apply_note_missing(store *st, uint32_t table_id, uint32_t src_part, uint64_t first_kept,
                       int *noted, char *err, size_t errlen)
{
    uint64_t applied = 0, missing = 0;
    *noted = 0;
    pthread_mutex_t *mu = store_apply_lock(st, table_id, src_part);
    pthread_mutex_lock(mu);
    int rv = apply_applied_seq(st, table_id, src_part, &applied, err, errlen);
    if (rv == 0) {
        rv = store_repl_u64(st, table_id, REPL_MISSING, src_part, 0, 0, &missing, err, errlen);
    }
    if (rv == 0 && first_kept > applied + 1 && first_kept - 1 > missing) {
        db_batch *b = db_batch_new();
        if (b == NULL) {
            rv = oom(err, errlen);
        } else {
            store_repl_put_u64(st, b, table_id, REPL_MISSING, src_part, first_kept - 1);
            atomic_store(&st->missing_marks, 1); /* before the mark can be read */
            rv = db_write(st->db, b, 0, err, errlen);
            db_batch_free(b);
            *noted = rv == 0;
        }
    }
    pthread_mutex_unlock(mu);
    return rv;
}

int apply_note_new_copy(store *st, uint32_t table_id, uint32_t src_part, int gsi_new,
                        int stream_new, uint64_t *mark, char *err, size_t errlen)
{
    uint64_t applied = 0, missing = 0, gf = 0, sf = 0;
    *mark = 0;
    pthread_mutex_t *mu = store_apply_lock(st, table_id, src_part);
    pthread_mutex_lock(mu);
    int rv = apply_applied_seq(st, table_id, src_part, &applied, err, errlen);
    if (rv == 0) {
        rv = store_repl_u64(st, table_id, REPL_MISSING, src_part, 0, 0, &missing, err, errlen);
    }
    if (rv == 0) {
        rv = store_repl_u64(st, table_id, REPL_GSI_FILLED, src_part, 0, 0, &gf, err, errlen);
    }
    if (rv == 0) {
        rv = store_repl_u64(st, table_id, REPL_STREAM_FILLED, src_part, 0, 0, &sf, err, errlen);
    }
    if (rv == 0 && applied > 0) {
        /* The mark moves even when nothing was applied past it, so that a
         * fill under way for the old mark cannot end the new kinds' gap. */
        uint64_t m = applied > missing ? applied : missing + 1;
        db_batch *b = db_batch_new();
        if (b == NULL) {
            rv = oom(err, errlen);
        } else {
            store_repl_put_u64(st, b, table_id, REPL_MISSING, src_part, m);
            /* A new kind is filled from nothing; one that is not new and
             * had no gap of its own holds every record through m. */
            if (gsi_new || gf >= missing) {
                store_repl_put_u64(st, b, table_id, REPL_GSI_FILLED, src_part, gsi_new ? 0 : m);
            }
            if (stream_new || sf >= missing) {
                store_repl_put_u64(st, b, table_id, REPL_STREAM_FILLED, src_part,
                                   stream_new ? 0 : m);
            }
            atomic_store(&st->missing_marks, 1); /* before the mark can be read */
            rv = db_write(st->db, b, 0, err, errlen);
            db_batch_free(b);
            *mark = rv == 0 ? m : 0;
        }
    }
    pthread_mutex_unlock(mu);
    return rv;
}

/* ======================================================================== */
/* GSI entries                                                              */
/* ======================================================================== */

static int copy_attr(item *dst, const item *src, const char *name)
{
    const attr_value *v = name[0] != 0 ? item_get(src, name) : NULL;
    return v != NULL ? item_set_copy(dst, name, v) : 0;
}

int apply_project(const table_schema *t, uint32_t gsi, const item *it, buf *out)
{
    const index_def *g = &t->gsi[gsi];
    if (g->projection == INDEX_PROJECT_ALL) {
        return item_encode(it, out);
    }
    item *p = item_new();
    if (p == NULL) {
        return LAPSE_ENOMEM;
    }
    /* The TTL attribute is projected so an index read can hide expired
     * items before their delete arrives. */
    const char *names[5] = {t->pk.name, t->sk.name, g->pk.name, g->sk.name, t->ttl.attribute};
    int rv = 0;
    for (int i = 0; i < 5 && rv == 0; i++) {
        rv = copy_attr(p, it, names[i]);
    }
    if (rv == 0) {
        rv = item_encode(p, out);
    }
    item_free(p);
    return rv;
}

/* Scratch for deriving GSI deltas. */
typedef struct gsi_scratch {
    buf ko, kn, val;
} gsi_scratch;

/* Adds to b the GSI deltas of record r for the GSI partitions f owns:
 * for each GSI, delete the old image's entry, put the new image's (an
 * unchanged key is just overwritten). */
static int gsi_apply(store *st, const table_schema *t, const apply_filter *f,
                     const change_record *r, gsi_scratch *s, db_batch *b, char *err, size_t errlen)
{
    int rv = 0;
    item *o = NULL, *nw = NULL;
    if ((r->old_image.data != NULL &&
         (rv = item_decode(r->old_image.data, r->old_image.len, &o))) ||
        (r->new_image.data != NULL &&
         (rv = item_decode(r->new_image.data, r->new_image.len, &nw)))) {
        goto out; /* change_decode checked them: only ENOMEM is possible */
    }
    for (uint32_t i = 0; i < t->ngsi; i++) {
        const index_def *g = &t->gsi[i];
        uint32_t po = 0, pn = 0;
        int ho = 0, hn = 0;
        if (o != NULL) {
            rv = itemkey_gsi_of(&s->ko, t, g, o, &po);
            ho = rv == 0;
        }
        if ((rv == 0 || rv == LAPSE_ENOTFOUND) && nw != NULL) {
            rv = itemkey_gsi_of(&s->kn, t, g, nw, &pn);
            hn = rv == 0;
        }
        if (rv != 0 && rv != LAPSE_ENOTFOUND) {
            goto out;
        }
        rv = 0;
        const int same = ho && hn && itemkey_cmp(s->ko.data, s->ko.len, s->kn.data, s->kn.len) == 0;
        if (ho && !same && f->owns_gsi(f->arg, i, po)) {
            db_batch_delete(b, st->db, CF_GSI, s->ko.data, s->ko.len);
        }
        if (hn && f->owns_gsi(f->arg, i, pn)) {
            buf_clear(&s->val);
            if (g->projection == INDEX_PROJECT_ALL) {
                rv = buf_append(&s->val, r->new_image.data, r->new_image.len);
            } else {
                rv = apply_project(t, i, nw, &s->val);
            }
            if (rv != 0) {
                goto out;
            }
            db_batch_put(b, st->db, CF_GSI, s->kn.data, s->kn.len, s->val.data, s->val.len);
        }
    }
out:
    item_free(o);
    item_free(nw);
    if (rv == LAPSE_EINVAL) {
        return errf(rv, err, errlen, "record %" PRIu64 ": an image lacks the table's keys", r->seq);
    }
    return rv == LAPSE_ENOMEM ? oom(err, errlen) : rv;
}

/* Whether image x (NULL: absent) has an entry in an owned partition of a
 * GSI. 0, LAPSE_EINVAL or LAPSE_ENOMEM. */
static int gsi_wanted(const table_schema *t, const apply_filter *f, const item *x, buf *k,
                      int *wanted)
{
    for (uint32_t i = 0; x != NULL && i < t->ngsi && !*wanted; i++) {
        uint32_t gpart = 0;
        int rv = itemkey_gsi_of(k, t, &t->gsi[i], x, &gpart);
        if (rv == 0) {
            *wanted = f->owns_gsi(f->arg, i, gpart);
        } else if (rv != LAPSE_ENOTFOUND) {
            return rv;
        }
    }
    return 0;
}

int apply_record_wanted(const table_schema *t, const void *data, size_t len, const apply_filter *f,
                        int *wanted)
{
    change_record r;
    int rv;
    *wanted = 0;
    if ((rv = change_decode(data, len, &r)) != 0) {
        return rv;
    }
    if (r.table_id != t->id) {
        return LAPSE_EINVAL;
    }
    if (f->host_stream && r.stream_seq != 0) {
        *wanted = 1;
        return 0;
    }
    if (t->ngsi == 0 || f->owns_gsi == NULL) {
        return 0;
    }
    item *o = NULL, *nw = NULL;
    buf k;
    buf_init(&k);
    if ((r.old_image.data == NULL ||
         (rv = item_decode(r.old_image.data, r.old_image.len, &o)) == 0) &&
        (r.new_image.data == NULL ||
         (rv = item_decode(r.new_image.data, r.new_image.len, &nw)) == 0) &&
        (rv = gsi_wanted(t, f, o, &k, wanted)) == 0) {
        rv = gsi_wanted(t, f, nw, &k, wanted);
    }
    item_free(o);
    item_free(nw);
    buf_fini(&k);
    return rv;
}

/* ======================================================================== */
/* Batches                                                                  */
/* ======================================================================== */

/* Whether stream seq is the first of a generation >= 1 (schema.h,
 * SCHEMA_STREAM_GEN_SHIFT): the source numbers each from its base. */
static int stream_gen_first(uint64_t stream_seq)
{
    return stream_seq != 0 && (stream_seq & ((UINT64_C(1) << SCHEMA_STREAM_GEN_SHIFT) - 1)) == 0;
}

/* Adds to b what records recs[0..n) carry for this node beyond applied. */
static int apply_records(store *st, const table_schema *t, uint32_t src_part, uint64_t from_seq,
                         uint64_t to_seq, uint64_t applied, const void *const *recs,
                         const size_t *lens, size_t n, const apply_filter *f, db_batch *b,
                         char *err, size_t errlen)
{
    int rv = 0;
    uint64_t prev = 0, last_stream = 0;
    const int gsi = t->ngsi > 0 && f->owns_gsi != NULL;
    gsi_scratch s;
    buf sk;
    buf_init(&s.ko);
    buf_init(&s.kn);
    buf_init(&s.val);
    buf_init(&sk);
    for (size_t i = 0; i < n; i++) {
        change_record r;
        if ((rv = change_decode(recs[i], lens[i], &r)) != 0) {
            rv = rv == LAPSE_ENOMEM ? oom(err, errlen)
                                    : errf(rv, err, errlen, "record %zu does not decode", i);
            goto out;
        }
        if (r.table_id != t->id || r.part != src_part || r.seq < from_seq || r.seq > to_seq ||
            r.seq <= prev) {
            rv = errf(LAPSE_EINVAL, err, errlen,
                      "record %zu (table %" PRIu32 " part %" PRIu32 " seq %" PRIu64
                      ") does not belong in batch %" PRIu64 "..%" PRIu64 " of table %" PRIu32
                      " part %" PRIu32,
                      i, r.table_id, r.part, r.seq, from_seq, to_seq, t->id, src_part);
            goto out;
        }
        prev = r.seq;
        if (r.seq <= applied) {
            continue; /* applied by an earlier batch */
        }
        if (gsi && (rv = gsi_apply(st, t, f, &r, &s, b, err, errlen)) != 0) {
            goto out;
        }
        if (f->host_stream && r.stream_seq != 0) {
            if ((rv = itemkey_seq_of(&sk, t->id, src_part, r.stream_seq)) != 0) {
                rv = oom(err, errlen);
                goto out;
            }
            db_batch_put(b, st->db, CF_STREAM, sk.data, sk.len, recs[i], lens[i]);
            last_stream = r.stream_seq;
            if (stream_gen_first(r.stream_seq)) {
                /* The first record of a stream turned on again: whatever
                 * this copy misses before it (outbox records trimmed before
                 * this node hosted the shard) is no record of this stream,
                 * so the copy is whole for it (apply_stream_gap). */
                uint64_t filled = 0;
                if ((rv = store_repl_u64(st, t->id, REPL_STREAM_FILLED, src_part, 0, 0, &filled,
                                         err, errlen)) != 0) {
                    goto out;
                }
                if (filled < r.seq - 1) {
                    store_repl_put_u64(st, b, t->id, REPL_STREAM_FILLED, src_part, r.seq - 1);
                }
            }
        }
    }
    if (last_stream != 0) {
        store_repl_put_u64(st, b, t->id, REPL_STREAM_LAST, src_part, last_stream);
    }
out:
    buf_fini(&s.ko);
    buf_fini(&s.kn);
    buf_fini(&s.val);
    buf_fini(&sk);
    return rv;
}

int apply_batch(store *st, const table_schema *t, uint32_t src_part, uint64_t from_seq,
                uint64_t to_seq, const void *const *recs, const size_t *lens, size_t n,
                const apply_filter *f, uint64_t *applied_out, char *err, size_t errlen)
{
    int rv;
    uint64_t applied = 0;
    if (applied_out != NULL) {
        *applied_out = 0;
    }
    if (f == NULL || src_part >= t->partitions || from_seq == 0 || from_seq > to_seq ||
        (n > 0 && (recs == NULL || lens == NULL)) || (uint64_t)n > to_seq - from_seq + 1) {
        return errf(LAPSE_EINVAL, err, errlen,
                    "apply_batch: bad arguments (partition %" PRIu32 ", seq %" PRIu64 "..%" PRIu64
                    ", %zu records)",
                    src_part, from_seq, to_seq, n);
    }
    db_batch *b = db_batch_new();
    if (b == NULL) {
        return oom(err, errlen);
    }
    pthread_mutex_t *mu = store_apply_lock(st, t->id, src_part);
    pthread_mutex_lock(mu);
    if ((rv = apply_applied_seq(st, t->id, src_part, &applied, err, errlen)) != 0) {
        goto unlock;
    }
    if (to_seq <= applied) {
        goto unlock; /* a resent batch: everything in it is applied */
    }
    if (from_seq > applied + 1) {
        rv = errf(LAPSE_ESTATE, err, errlen,
                  "batch starts at seq %" PRIu64 " but table %" PRIu32 " partition %" PRIu32
                  " is applied up to %" PRIu64 ": resend from %" PRIu64,
                  from_seq, t->id, src_part, applied, applied + 1);
        goto unlock;
    }
    if ((rv = apply_records(st, t, src_part, from_seq, to_seq, applied, recs, lens, n, f, b, err,
                            errlen)) != 0) {
        goto unlock;
    }
    store_repl_put_u64(st, b, t->id, REPL_APPLIED, src_part, to_seq);
    if ((rv = db_write(st->db, b, 0, err, errlen)) == 0) {
        applied = to_seq;
    }
unlock:
    pthread_mutex_unlock(mu);
    db_batch_free(b);
    if (applied_out != NULL) {
        *applied_out = applied;
    }
    return rv;
}
