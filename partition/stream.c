/*
 * stream.c: reading and trimming the stream shards a node hosts (see
 * stream.h). apply.c writes them.
 */
#include "stream.h"

#include <string.h>

#include "../common/lapse_err.h"
#include "itemkey.h"
#include "store_int.h"

static int oom(char *err, size_t errlen)
{
    return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
}

int stream_read(store *st, uint32_t table_id, uint32_t shard, uint64_t after, size_t max_records,
                size_t max_bytes, change_list *out, char *err, size_t errlen)
{
    return store_seq_read(st, CF_STREAM, table_id, shard, after, max_records, max_bytes, out,
                          "stream_read", err, errlen);
}

int stream_last_seq(store *st, uint32_t table_id, uint32_t shard, uint64_t *last, char *err,
                    size_t errlen)
{
    return store_repl_u64(st, table_id, REPL_STREAM_LAST, shard, 0, 0, last, err, errlen);
}

/* The pending trim of one shard: [shard's first key, last old key | 00). */
typedef struct shard_trim {
    int active;
    uint32_t shard;
    buf last; /* the last old record's key */
    size_t n;
} shard_trim;

/* Adds the range delete of the pending shard's old prefix to b and its
 * record count to *deleted. 0 or LAPSE_ENOMEM. */
static int flush(store *st, uint32_t table_id, shard_trim *p, db_batch *b, buf *lo, size_t *deleted)
{
    if (!p->active) {
        return 0;
    }
    int rv;
    buf_clear(lo);
    if ((rv = itemkey_append_prefix(lo, table_id, p->shard)) != 0 ||
        (rv = buf_append_byte(&p->last, 0)) != 0) {
        return rv;
    }
    db_batch_delete_range(b, st->db, CF_STREAM, lo->data, lo->len, p->last.data, p->last.len);
    *deleted += p->n;
    p->active = 0;
    return 0;
}

/*
 * The trim's walk: steps through table_id's stream records from where it
 * is positioned, adding each shard's prefix of records committed before
 * cutoff to b as one range delete (flush; *deleted counts the records).
 * Sets *more when the budget ran out first. The last shard's prefix is
 * left in p for the caller's flush. 0, or an error with err.
 *
 * Budget: max_records records looked at (each decoded up to its commit
 * time only). Per shard, the records older than the cutoff are a prefix
 * (stream.h invariant 2): at the first younger one the shard is done and
 * the iterator seeks to the next shard. Each shard's prefix becomes one
 * range delete ending just past the last old record seen, so records
 * applied meanwhile (all later) are never in it.
 */
static int walk_shards(store *st, uint32_t table_id, int64_t cutoff, size_t max_records,
                       db_iter *it, shard_trim *p, db_batch *b, buf *lo, size_t *deleted, int *more,
                       char *err, size_t errlen)
{
    int rv = 0;
    size_t seen = 0;
    buf seek;
    buf_init(&seek);
    db_iter_seek_first(it);
    while (db_iter_valid(it)) {
        if (seen == max_records) {
            *more = 1;
            break;
        }
        size_t klen = 0, vlen = 0;
        const uint8_t *k = db_iter_key(it, &klen);
        const uint8_t *v = db_iter_value(it, &vlen);
        uint32_t shard = klen >= 8 ? buf_get_u32be(k + 4) : 0;
        seen++;
        if (p->active && p->shard != shard) {
            if ((rv = flush(st, table_id, p, b, lo, deleted)) != 0) {
                rv = oom(err, errlen);
                goto out;
            }
        }
        change_record r;
        int old = change_decode_head(v, vlen, &r) != 0 || r.commit_ms < cutoff;
        if (old) {
            if (!p->active) {
                p->active = 1;
                p->shard = shard;
                p->n = 0;
            }
            buf_clear(&p->last);
            if (buf_append(&p->last, k, klen) != 0) {
                rv = oom(err, errlen);
                goto out;
            }
            p->n++;
            db_iter_next(it);
            continue;
        }
        /* This shard is done: on to the next one. */
        if ((rv = flush(st, table_id, p, b, lo, deleted)) != 0) {
            rv = oom(err, errlen);
            goto out;
        }
        if (shard == UINT32_MAX) {
            break;
        }
        buf_clear(&seek);
        if (itemkey_append_prefix(&seek, table_id, shard + 1) != 0) {
            rv = oom(err, errlen);
            goto out;
        }
        db_iter_seek(it, seek.data, seek.len);
    }
    rv = db_iter_status(it, err, errlen);
out:
    buf_fini(&seek);
    return rv;
}

int stream_trim(store *st, uint32_t table_id, clock_wall now, int64_t retention_ms,
                size_t max_records, size_t *trimmed, int *more, char *err, size_t errlen)
{
    int rv = 0;
    db_iter *it = NULL;
    db_batch *b = NULL;
    shard_trim p = {0, 0, {NULL, 0, 0}, 0};
    buf lo;
    buf_init(&lo);
    *trimmed = 0;
    *more = 0;
    if (max_records == 0 || retention_ms < 0) {
        return errf(LAPSE_EINVAL, err, errlen, "stream_trim: bad arguments");
    }
    const int64_t cutoff = now.ms - retention_ms;
    uint8_t tlo[4], thi[9];
    size_t thlen = 0;
    itemkey_table_range(table_id, tlo, thi, &thlen);
    if ((b = db_batch_new()) == NULL ||
        db_iter_new(&it, st->db, CF_STREAM, tlo, sizeof(tlo), thi, thlen) != 0) {
        rv = oom(err, errlen);
        goto out;
    }
    size_t deleted = 0;
    if ((rv = walk_shards(st, table_id, cutoff, max_records, it, &p, b, &lo, &deleted, more, err,
                          errlen)) != 0) {
        goto out;
    }
    if ((rv = flush(st, table_id, &p, b, &lo, &deleted)) != 0) {
        rv = oom(err, errlen);
        goto out;
    }
    if (db_batch_count(b) > 0 && (rv = db_write(st->db, b, 0, err, errlen)) != 0) {
        goto out;
    }
    *trimmed = deleted;
out:
    if (rv != 0) {
        *more = 0;
    }
    db_iter_free(it);
    db_batch_free(b);
    buf_fini(&p.last);
    buf_fini(&lo);
    return rv;
}

int stream_drop(store *st, uint32_t table_id, char *err, size_t errlen)
{
    static const int cfs[] = {CF_STREAM};
    db_batch *b = db_batch_new();
    if (b == NULL) {
        return oom(err, errlen);
    }
    store_table_delete(st, b, table_id, cfs, 1);
    int rv = db_write(st->db, b, 0, err, errlen);
    db_batch_free(b);
    if (rv == 0) {
        /* The range tombstone hides the records at once; this reclaims them. */
        rv = store_table_compact(st, table_id, cfs, 1);
    }
    return rv;
}
