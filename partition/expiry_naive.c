/*
 * expiry_naive.c: the naive scan of lapse-node --ttl-naive-scan (expiry.h,
 * expiry_naive_step), for benchmark 6 only: what a best-effort background
 * sweep without an index does, to show what the index (expiry.c) buys. It
 * reads every item, decodes it and judges it with ttl_eval; it deletes the
 * index entry of every item it deletes, so expiry.h invariant 1 holds and
 * the indexed scanners can take over at any time; its deletes carry their
 * LSI and outbox writes as the sweep's do (store_derived.c).
 *
 * Why benchmark-only code is linked into lapse-node (issue 15 weighed moving
 * it out): benchmark 6 is only fair if the naive scan runs in the real
 * daemon, with the same scanner threads and partition ownership, partition
 * locks, clock check, busy markers and outbox writes as the indexed sweep,
 * so that the index is the one difference measured. Out of the daemon it
 * would take a second node binary built from the same sources with the
 * scanner and the flag parser #ifdef'd, a choice of binary in the cluster
 * harness, and config files, docs and a deploy test that differ per binary.
 * That costs more than ~200 lines that stay dormant: nothing calls
 * expiry_naive_step unless lapse-node was started with --ttl-naive-scan,
 * which it logs as a benchmark flag. Move it out if it grows or anything
 * else starts to call it (docs/architecture.md, "Benchmark-only code").
 */
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/lapse_err.h"
#include "expiry.h"
#include "itemkey.h"
#include "store_int.h"
#include "../common/ttl.h"

static int oom(char *err, size_t errlen)
{
    return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
}

/* Judges the item at items key k (stored value v) with ttl_eval and, when
 * it has expired, adds to b its delete, its index entry's and, through d
 * (NULL: none), its derived writes, counting it in res. An item that does
 * not decode counts as undeletable. 0, or an error with err. */
static int judge_one(store *st, const table_schema *t, clock_wall now, const uint8_t *k,
                     size_t klen, const uint8_t *v, size_t vlen, store_derived *d, db_batch *b,
                     buf *ekey, expiry_sweep_result *res, char *err, size_t errlen)
{
    int rv = 0;
    item *x = NULL;
    int drv = item_decode(v, vlen, &x);
    if (drv == LAPSE_ENOMEM) {
        return oom(err, errlen);
    }
    int64_t due_ms = 0;
    if (drv != 0) {
        res->undeletable++;
    } else if (ttl_eval(&t->ttl, x, now, &due_ms) == TTL_ELIGIBLE && ttl_is_expired(due_ms, now)) {
        if (itemkey_expiry_of(ekey, k, klen, due_ms / 1000) != 0) {
            rv = oom(err, errlen);
            goto out;
        }
        db_batch_delete(b, st->db, CF_ITEMS, k, klen);
        db_batch_delete(b, st->db, CF_EXPIRY, ekey->data, ekey->len); /* invariant 1 */
        store_derived_expiry_delete td = {due_ms};
        if (d != NULL && (rv = store_derived_change(d, b, k, klen, v, vlen, NULL, 0, 0, &td, err,
                                                    errlen)) != 0) {
            goto out;
        }
        if (res->due_ms != NULL) {
            res->due_ms[res->deleted] = due_ms;
        }
        res->deleted++;
    }
out:
    item_free(x);
    return rv;
}

/*
 * The step's scan: reads items from it's position, judging each
 * (judge_one), with last the key of the last one read; *scanned counts
 * them, *finished says whether the partition's end was reached. 0, or an
 * error with err. REQUIRES: the partition's stripe lock.
 *
 * Budget: max_scan items read, each decoded and judged with ttl_eval (no
 * index: that is the point), and at most max_delete deletes (item and
 * index entry) in one WriteBatch, all under the partition's lock so each
 * check and its delete are atomic. Stops at either budget or at the
 * partition's end.
 */
static int scan_items(store *st, const table_schema *t, clock_wall now, size_t max_scan,
                      size_t max_delete, db_iter *it, store_derived *d, db_batch *b, buf *last,
                      size_t *scanned, int *finished, expiry_sweep_result *res, char *err,
                      size_t errlen)
{
    int rv;
    buf ekey;
    buf_init(&ekey);
    db_iter_seek_first(it);
    for (; db_iter_valid(it) && *scanned < max_scan && res->deleted < max_delete;
         db_iter_next(it)) {
        size_t klen = 0, vlen = 0;
        const uint8_t *k = db_iter_key(it, &klen);
        const uint8_t *v = db_iter_value(it, &vlen);
        if ((rv = judge_one(st, t, now, k, klen, v, vlen, d, b, &ekey, res, err, errlen)) != 0) {
            goto out;
        }
        buf_clear(last);
        if (buf_append(last, k, klen) != 0) {
            rv = oom(err, errlen);
            goto out;
        }
        (*scanned)++;
    }
    *finished = !db_iter_valid(it);
    rv = db_iter_status(it, err, errlen);
out:
    buf_fini(&ekey);
    return rv;
}

int expiry_naive_step(store *st, const table_schema *t, uint32_t part, clock_wall now,
                      size_t max_scan, size_t max_delete, buf *resume, int *done,
                      expiry_sweep_result *res, char *err, size_t errlen)
{
    int rv;
    int finished = 0;
    size_t scanned = 0;
    store_pending pend;
    memset(&pend, 0, sizeof(pend));
    db_iter *it = NULL;
    db_batch *b = NULL;
    const int derive = store_derived_wanted(t);
    store_derived d;
    memset(&d, 0, sizeof(d));
    buf lo, hi, last;
    buf_init(&lo);
    buf_init(&hi);
    buf_init(&last);
    expiry_result_clear(res);
    *done = 0;
    if (max_scan == 0 || max_delete == 0 || max_delete > STORE_BATCH_MAX || !t->ttl.enabled ||
        part >= t->partitions) {
        return errf(LAPSE_EINVAL, err, errlen,
                    "expiry_naive_step: bad arguments (max_scan %zu, max_delete %zu, "
                    "ttl %s, partition %u)",
                    max_scan, max_delete, t->ttl.enabled ? "on" : "off", (unsigned)part);
    }
    if ((b = db_batch_new()) == NULL || itemkey_append_prefix(&hi, t->id, part) != 0 ||
        (resume->len > 0
             ? buf_append(&lo, resume->data, resume->len) != 0 || buf_append_byte(&lo, 0) != 0
             : itemkey_append_prefix(&lo, t->id, part) != 0)) {
        rv = oom(err, errlen);
        goto out;
    }
    store_commit_prepare(st, b, t);
    int hi_none = itemkey_successor(&hi);
    /* The lock, the replication check and the derived writes opened as
     * expiry_sweep opens them: the same commit protocol, kept in line so
     * that each step reads top to bottom beside its sweep. */
    pthread_mutex_t *mu = store_stripe(st, t->id, part);
    pthread_mutex_lock(mu);
    if ((rv = store_repl_prepare(st, t, part, err, errlen)) != 0) {
        goto unlock;
    }
    if (derive) {
        store_derived_begin(&d, st, t, part);
    }
    if ((rv = db_iter_new(&it, st->db, CF_ITEMS, lo.data, lo.len, hi_none ? NULL : hi.data,
                          hi.len)) != 0) {
        rv = oom(err, errlen);
        goto unlock;
    }
    if ((rv = scan_items(st, t, now, max_scan, max_delete, it, derive ? &d : NULL, b, &last,
                         &scanned, &finished, res, err, errlen)) != 0) {
        goto unlock;
    }
    int written = 0;
    rv = store_commit(st, b, t, part, derive ? &d : NULL, &written, &pend, err, errlen);
unlock:
    db_iter_free(it);
    pthread_mutex_unlock(mu);
    /* The replicas are waited for with the partition unlocked (as the
     * sweep's, expiry_sweep). */
    if (rv == 0 && (rv = store_commit_finish(st, &pend, err, errlen)) == 0) {
        res->commit_ms = clock_wall_now().ms;
        res->more = !finished;
        *done = finished;
        if (scanned > 0) {
            buf swap = *resume; /* the last item read becomes the resume point */
            *resume = last;
            last = swap;
        }
    }
out:
    store_derived_end(&d);
    if (rv != 0) {
        expiry_result_clear(res); /* nothing was written */
    }
    db_batch_free(b);
    buf_fini(&lo);
    buf_fini(&hi);
    buf_fini(&last);
    return rv;
}
