/*
 * expiry_backfill.c: the backfill of the TTL expiry index (see expiry.h):
 * when TTL is enabled on a table that already holds items, each partition
 * is read in steps of a bounded number of items, and the entries of those
 * the TTL rule makes eligible are written with a progress record (the
 * resume point and the config version it was made for), in one WriteBatch
 * under the partition's lock. The sweep and dropping a table's index are in
 * expiry.c.
 */
#include "expiry.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/lapse_err.h"
#include "../common/ttl.h"
#include "itemkey.h"
#include "store_int.h"

static int oom(char *err, size_t errlen)
{
    return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
}

/* ======================================================================== */
/* Backfill                                                                 */
/* ======================================================================== */

/* Progress record, meta key "backfill/<table id>/<part>":
 *   u64be config_version | u8 done | the items key of the last item indexed
 * (empty: none yet). */
#define PROGRESS_HEAD 9

/* Reads the progress of (t, part) for t's current config version: *done,
 * and resume (cleared when none: start at the partition's first item). A
 * record of another config version counts as none. */
static int progress_read(store *st, const table_schema *t, uint32_t part, const buf *key, int *done,
                         buf *resume, char *err, size_t errlen)
{
    int found = 0, rv;
    buf v;
    buf_init(&v);
    *done = 0;
    buf_clear(resume);
    if ((rv = db_get(st->db, CF_META, key->data, key->len, &v, &found, err, errlen)) != 0) {
        goto out;
    }
    if (!found || v.len < PROGRESS_HEAD || buf_get_u64be(v.data) != t->ttl.config_version) {
        goto out; /* none, or a stale record of an earlier enable: start over */
    }
    *done = v.data[8] != 0;
    if ((rv = buf_append(resume, v.data + PROGRESS_HEAD, v.len - PROGRESS_HEAD)) != 0) {
        oom(err, errlen);
    }
    (void)part;
out:
    buf_fini(&v);
    return rv;
}

/*
 * The step's scan: reads the items of (t, part) after resume (none: from
 * the partition's first), adds to b the expiry entry of each the TTL rule
 * makes eligible, counts their verdicts into seen, and moves resume to the
 * last item read; *n is how many were read, *finished whether the
 * partition's end was reached. 0, or an error with err. REQUIRES: the
 * partition's stripe lock.
 *
 * Budget: max_items items read and judged, their entries and the new
 * resume point written in one WriteBatch, under the partition's lock so no
 * write interleaves. Stops at the budget or at the partition's end (then
 * the record says done). An item that does not decode is passed over
 * (counted as scanned, not indexed).
 */
static int index_items(store *st, const table_schema *t, uint32_t part, clock_wall now,
                       size_t max_items, db_batch *b, buf *resume, uint64_t *seen, uint64_t *n,
                       int *finished, char *err, size_t errlen)
{
    int rv;
    db_iter *it = NULL;
    buf lo, hi, ekey;
    buf_init(&lo);
    buf_init(&hi);
    buf_init(&ekey);
    if (itemkey_append_prefix(&hi, t->id, part) != 0) {
        rv = oom(err, errlen);
        goto out;
    }
    int hi_none = itemkey_successor(&hi);
    /* Resume just above the last item indexed (K | 00 is the next key). */
    rv = resume->len > 0 ? buf_append(&lo, resume->data, resume->len) || buf_append_byte(&lo, 0)
                         : itemkey_append_prefix(&lo, t->id, part);
    if (rv != 0 || (rv = db_iter_new(&it, st->db, CF_ITEMS, lo.data, lo.len,
                                     hi_none ? NULL : hi.data, hi.len)) != 0) {
        rv = oom(err, errlen);
        goto out;
    }
    for (db_iter_seek_first(it); db_iter_valid(it) && *n < max_items; db_iter_next(it)) {
        size_t klen = 0, vlen = 0;
        const uint8_t *k = db_iter_key(it, &klen);
        const uint8_t *v = db_iter_value(it, &vlen);
        /* The item is not decoded: ttl_eval_encoded reads the TTL value in
         * place and gives store_derived_expiry_due_s's answer for it. */
        ttl_verdict verdict = TTL_MISSING;
        int64_t due_ms = 0;
        int drv = ttl_eval_encoded(&t->ttl, v, vlen, now, &verdict, &due_ms);
        if (drv == LAPSE_ENOMEM) {
            rv = oom(err, errlen);
            goto out;
        }
        if (drv == 0 && (unsigned)verdict < TTL_VERDICT_COUNT) {
            seen[verdict]++;
        }
        if (drv == 0 && verdict == TTL_ELIGIBLE) {
            if (itemkey_expiry_of(&ekey, k, klen, due_ms / 1000) != 0) {
                rv = oom(err, errlen);
                goto out;
            }
            db_batch_put(b, st->db, CF_EXPIRY, ekey.data, ekey.len, "", 0);
            store_sweep_cursor_note(st, t->id, part, ekey.data, ekey.len);
        }
        buf_clear(resume);
        if (buf_append(resume, k, klen) != 0) {
            rv = oom(err, errlen);
            goto out;
        }
        (*n)++;
    }
    *finished = !db_iter_valid(it);
    rv = db_iter_status(it, err, errlen);
out:
    db_iter_free(it);
    buf_fini(&lo);
    buf_fini(&hi);
    buf_fini(&ekey);
    return rv;
}

/* Adds to b the progress record under pkey: t's config version, finished,
 * resume. 0 or LAPSE_ENOMEM with err. */
static int progress_put(store *st, db_batch *b, const table_schema *t, const buf *pkey,
                        int finished, const buf *resume, char *err, size_t errlen)
{
    buf val;
    buf_init(&val);
    uint8_t flag = (uint8_t)finished;
    int rv = 0;
    if (buf_append_u64be(&val, t->ttl.config_version) != 0 || buf_append(&val, &flag, 1) != 0 ||
        buf_append(&val, resume->data, resume->len) != 0) {
        rv = oom(err, errlen);
    } else {
        db_batch_put(b, st->db, CF_META, pkey->data, pkey->len, val.data, val.len);
    }
    buf_fini(&val);
    return rv;
}

/*
 * One backfill step of one partition under its stripe lock: read the
 * progress (progress_read), index the next items (index_items), write the
 * new progress (progress_put) and commit it all in one WriteBatch
 * (store_commit); then, with the lock released, wait for the replicas.
 */
int expiry_backfill_step(store *st, const table_schema *t, uint32_t part, clock_wall now,
                         size_t max_items, uint64_t *scanned, uint64_t *ignored, int *done,
                         char *err, size_t errlen)
{
    uint64_t seen[TTL_VERDICT_COUNT] = {0};
    int rv;
    uint64_t n = 0;
    store_pending pend;
    memset(&pend, 0, sizeof(pend));
    db_batch *b = NULL;
    buf pkey, resume;
    buf_init(&pkey);
    buf_init(&resume);
    *scanned = 0;
    *done = 0;
    if (max_items == 0 || !t->ttl.enabled || part >= t->partitions) {
        return errf(LAPSE_EINVAL, err, errlen,
                    "expiry_backfill_step: bad arguments (max_items %zu, ttl %s, "
                    "partition %u)",
                    max_items, t->ttl.enabled ? "on" : "off", (unsigned)part);
    }
    if ((b = db_batch_new()) == NULL || expiry_progress_key(&pkey, t->id, part) != 0) {
        db_batch_free(b);
        buf_fini(&pkey);
        return oom(err, errlen);
    }
    store_commit_prepare(st, b, t);
    pthread_mutex_t *mu = store_stripe(st, t->id, part);
    pthread_mutex_lock(mu);
    int finished = 0;
    if ((rv = store_repl_prepare(st, t, part, err, errlen)) != 0 ||
        (rv = progress_read(st, t, part, &pkey, &finished, &resume, err, errlen)) != 0 ||
        finished) {
        goto unlock;
    }
    if ((rv = index_items(st, t, part, now, max_items, b, &resume, seen, &n, &finished, err,
                          errlen)) != 0 ||
        (rv = progress_put(st, b, t, &pkey, finished, &resume, err, errlen)) != 0) {
        goto unlock;
    }
    int written = 0;
    rv = store_commit(st, b, t, part, NULL, &written, &pend, err, errlen);
unlock:
    pthread_mutex_unlock(mu);
    /* The replicas are waited for with the partition unlocked (as the
     * sweep's, expiry_sweep). */
    if (rv == 0 && (rv = store_commit_finish(st, &pend, err, errlen)) == 0) {
        *scanned = n;
        for (int v = 0; ignored != NULL && v < TTL_VERDICT_COUNT; v++) {
            ignored[v] += v == TTL_ELIGIBLE ? 0 : seen[v];
        }
        *done = finished;
    }
    db_batch_free(b);
    buf_fini(&pkey);
    buf_fini(&resume);
    return rv;
}

int expiry_backfill_done(store *st, const table_schema *t, uint32_t part, int *done, char *err,
                         size_t errlen)
{
    buf pkey, resume;
    buf_init(&pkey);
    buf_init(&resume);
    *done = 0;
    int rv = expiry_progress_key(&pkey, t->id, part);
    if (rv != 0) {
        rv = oom(err, errlen);
    } else {
        rv = progress_read(st, t, part, &pkey, done, &resume, err, errlen);
    }
    buf_fini(&pkey);
    buf_fini(&resume);
    return rv;
}
