/*
 * expiry.c: the TTL expiry index (see expiry.h and docs/storage-format.md):
 * the sweep that deletes due items, the next due instant and the backlog,
 * and dropping a table's index (the backfill, in expiry_backfill.c). The write path that keeps the
 * index in step with every item change is in store.c and store_derived.c; the benchmark's naive
 * scan, which does without the index, in expiry_naive.c.
 *
 * A sweep's deletes are item changes like any other: for a table with LSIs
 * or an outbox, their LSI deletes and their outbox records (principal TTL,
 * old image = the stored value the sweep read) join the sweep's WriteBatch
 * (store_derived.c). Tables without either pay one test per sweep.
 *
 * A plain table's sweep reads no item: the entry proves the due instant
 * (expiry.h, invariant 2), which removes the MultiGet that was a third of
 * the sweep's CPU. Only sweeps that read items can find one corrupt. A long
 * run of its entries goes with one range tombstone (SWEEP_RANGE_MIN): half
 * the memtable inserts of a burst, and 2.4 times the single-store rate.
 *
 * Undeletable items: an item whose stored value does not decode cannot be
 * judged, so the sweep never deletes it. Its items key goes into the store's
 * keyset (st->undeletable) and every later sweep, next_due and backlog pass
 * over its entry, so it never blocks the rest nor makes a scanner spin on a
 * due instant in the past. Any write to the item removes it from the set
 * (store.c). When the set is full, the entry itself is deleted instead (the
 * item stays, unindexed, and was counted).
 *
 * Sweep cursor: a sweep deletes entries from the front of the partition's
 * range, leaving tombstones there until compaction; starting every sweep at
 * the front would step over all of them again (quadratic in a burst of a
 * million items due in one second). So each sweep records, in the store's
 * per-stripe sweep_cursor (store_int.h), the key below which everything is
 * deleted or skipped, and the next sweep seeks there. Writes that put an
 * entry below it, the backfill, and forgetting an undeletable item clear it.
 */
#include "expiry.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/lapse_err.h"
#include "itemkey.h"
#include "store_int.h"
#include "../common/ttl.h"

static int oom(char *err, size_t errlen)
{
    return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
}

/* The first due second that is not due at now: an entry is due when
 * due_s * 1000 < now.ms, i.e. due_s < ceil(now.ms / 1000). */
static uint64_t cutoff_s(clock_wall now)
{
    return now.ms <= 0 ? 0 : (uint64_t)((now.ms - 1) / 1000 + 1);
}

/* Whether the entry ekey belongs to an item the sweep skips. ikey is scratch.
 * Costs nothing while the set is empty. */
static int skipped(store *st, const uint8_t *ekey, size_t elen, buf *ikey)
{
    if (keyset_count(&st->undeletable) == 0) {
        return 0;
    }
    if (itemkey_of_expiry(ikey, ekey, elen) != 0) {
        return 0;
    }
    return keyset_has(&st->undeletable, ikey->data, ikey->len);
}

/* An iterator over the entries of (table_id, part) from key from (NULL: the
 * partition's first) on, below due second hi_s (UINT64_MAX: to the
 * partition's end). */
static int entries_iter(store *st, uint32_t table_id, uint32_t part, const buf *from, uint64_t hi_s,
                        db_iter **out)
{
    int rv;
    buf lo, hi;
    buf_init(&lo);
    buf_init(&hi);
    *out = NULL;
    if ((rv = from != NULL ? buf_append(&lo, from->data, from->len)
                           : itemkey_expiry_bound(&lo, table_id, part, 0)) != 0) {
        goto out;
    }
    int unbounded = 0;
    if (hi_s == UINT64_MAX) {
        if ((rv = itemkey_append_prefix(&hi, table_id, part)) != 0) {
            goto out;
        }
        unbounded = itemkey_successor(&hi);
    } else if ((rv = itemkey_expiry_bound(&hi, table_id, part, hi_s)) != 0) {
        goto out;
    }
    rv = db_iter_new(out, st->db, CF_EXPIRY, lo.data, lo.len, unbounded ? NULL : hi.data, hi.len);
out:
    buf_fini(&lo);
    buf_fini(&hi);
    return rv;
}

/* ======================================================================== */
/* Sweep                                                                    */
/* ======================================================================== */

#define SWEEP_RANGE_MIN 256 /* entries a plain table's sweep deletes with one range tombstone */

/*
 * Sweep scratch: the collected entries' keys and items keys back to back in
 * two arenas, the MultiGet arrays and values, and the WriteBatch. One block
 * sized for STORE_BATCH_MAX entries, kept in the store's pool between
 * sweeps (at most SCRATCH_POOL_MAX of them: one per concurrent sweeper), so
 * a sweep in the steady state allocates nothing: the arenas and value bufs
 * keep their capacity (a value buf over SCRATCH_VAL_KEEP bytes is released,
 * and a scratch whose key arenas grew past SCRATCH_KEYS_KEEP is freed, so
 * huge items or keys do not stay pinned).
 */
#define SCRATCH_POOL_MAX 8
#define SCRATCH_VAL_KEEP 4096
#define SCRATCH_KEYS_KEEP (256 * 1024)

struct sweep_scratch {
    struct sweep_scratch *next; /* in the store's pool */
    buf ekeys, ikeys, tmp;
    buf cursor;      /* where the next sweep may start */
    int keep_cursor; /* an entry below it must be seen again */
    db_batch *b;
    size_t eoff[STORE_BATCH_MAX + 1]; /* n + 1 offsets into ekeys */
    size_t ioff[STORE_BATCH_MAX + 1]; /* n + 1 offsets into ikeys */
    const void *kp[STORE_BATCH_MAX];
    size_t kl[STORE_BATCH_MAX];
    buf vals[STORE_BATCH_MAX];
    int found[STORE_BATCH_MAX];
};

static void scratch_free(sweep_scratch *s)
{
    if (s == NULL) {
        return;
    }
    buf_fini(&s->ekeys);
    buf_fini(&s->ikeys);
    buf_fini(&s->tmp);
    buf_fini(&s->cursor);
    for (size_t i = 0; i < STORE_BATCH_MAX; i++) {
        buf_fini(&s->vals[i]);
    }
    db_batch_free(s->b);
    free(s);
}

/* A scratch from the pool (or a new one), reset. NULL on OOM. */
static sweep_scratch *scratch_take(store *st)
{
    pthread_mutex_lock(&st->scratch_lock);
    sweep_scratch *s = st->scratch_pool;
    if (s != NULL) {
        st->scratch_pool = s->next;
        st->scratch_pooled--;
    }
    pthread_mutex_unlock(&st->scratch_lock);
    if (s == NULL) {
        if ((s = calloc(1, sizeof(*s))) == NULL) {
            return NULL;
        }
        /* calloc leaves every buf empty (buf_init's state) */
        if ((s->b = db_batch_new()) == NULL || buf_reserve(&s->ekeys, STORE_BATCH_MAX * 48) != 0 ||
            buf_reserve(&s->ikeys, STORE_BATCH_MAX * 40) != 0) {
            scratch_free(s);
            return NULL;
        }
    }
    buf_clear(&s->ekeys);
    buf_clear(&s->ikeys);
    buf_clear(&s->cursor);
    db_batch_clear(s->b);
    s->keep_cursor = 0;
    s->eoff[0] = s->ioff[0] = 0;
    s->next = NULL;
    return s;
}

/* Returns s (the n values it used) to the pool, or frees it when the pool
 * is full. Accepts NULL. */
static void scratch_give(store *st, sweep_scratch *s, size_t n)
{
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (s->vals[i].cap > SCRATCH_VAL_KEEP) {
            buf_fini(&s->vals[i]);
        }
    }
    if (s->ekeys.cap > SCRATCH_KEYS_KEEP || s->ikeys.cap > SCRATCH_KEYS_KEEP) {
        scratch_free(s); /* huge keys: do not keep their arenas */
        return;
    }
    pthread_mutex_lock(&st->scratch_lock);
    if (st->scratch_pooled < SCRATCH_POOL_MAX) {
        s->next = st->scratch_pool;
        st->scratch_pool = s;
        st->scratch_pooled++;
        s = NULL;
    }
    pthread_mutex_unlock(&st->scratch_lock);
    scratch_free(s);
}

void expiry_scratch_release(store *st)
{
    while (st->scratch_pool != NULL) {
        sweep_scratch *s = st->scratch_pool;
        st->scratch_pool = s->next;
        scratch_free(s);
    }
    st->scratch_pooled = 0;
}

/* Judges collected entry i of a table with LSIs or an outbox against its
 * item (read) and adds the outcome to b, with the LSI and outbox writes of a
 * delete through d. The item is not decoded: ttl_eval_encoded reads the TTL value in
 * place (and rejects exactly what item_decode would). 0, or an error with
 * err (LAPSE_ENOMEM; LAPSE_EIO or LAPSE_ECORRUPT from d). */
static int sweep_one(store *st, const table_schema *t, clock_wall now, sweep_scratch *s, size_t i,
                     store_derived *d, db_batch *b, expiry_sweep_result *res, char *err,
                     size_t errlen)
{
    const uint8_t *ek = s->ekeys.data + s->eoff[i];
    size_t elen = s->eoff[i + 1] - s->eoff[i];
    const uint8_t *ik = s->ikeys.data + s->ioff[i];
    size_t ilen = s->ioff[i + 1] - s->ioff[i];
    if (!s->found[i]) {
        db_batch_delete(b, st->db, CF_EXPIRY, ek, elen); /* the item is gone */
        res->stale++;
        return 0;
    }
    ttl_verdict verdict = TTL_MISSING;
    int64_t due_ms = 0;
    int rv = ttl_eval_encoded(&t->ttl, s->vals[i].data, s->vals[i].len, now, &verdict, &due_ms);
    if (rv == LAPSE_ENOMEM) {
        return oom(err, errlen);
    }
    if (rv != 0) {
        res->undeletable++;
        rv = keyset_add(&st->undeletable, ik, ilen);
        if (rv == LAPSE_ETOOBIG) {
            /* No room to remember it: drop the entry so it never blocks. */
            db_batch_delete(b, st->db, CF_EXPIRY, ek, elen);
        } else if (rv != 0) {
            s->keep_cursor = 1; /* not remembered: the next sweep retries it */
        }
        return 0;
    }
    /* Delete only by the entry that names the item's current due instant:
     * with invariant 1 that is the only entry; any other is stale. */
    int expired = verdict == TTL_ELIGIBLE && ttl_is_expired(due_ms, now) &&
                  (due_ms > 0 ? due_ms / 1000 : 0) == itemkey_expiry_due_s(ek, elen);
    db_batch_delete(b, st->db, CF_EXPIRY, ek, elen);
    if (!expired) {
        res->stale++; /* a guard against bugs: the item's entry is elsewhere */
        return 0;
    }
    db_batch_delete(b, st->db, CF_ITEMS, ik, ilen);
    /* The old image is the stored value as read; keys come from ik. */
    store_derived_expiry_delete td = {due_ms};
    if ((rv = store_derived_change(d, b, ik, ilen, s->vals[i].data, s->vals[i].len, NULL, 0, 0, &td,
                                   err, errlen)) != 0) {
        return rv;
    }
    if (res->due_ms != NULL) {
        res->due_ms[res->deleted] = due_ms;
    }
    res->deleted++;
    return 0;
}

/*
 * The sweep of a table without LSIs or an outbox, which reads no item: the
 * entry proves the item's current due instant, since every write that adds,
 * changes or removes an item's TTL value changes its entry in the same
 * WriteBatch, under the partition's lock the sweep holds (expiry.h,
 * invariant 1). Every collected entry is deleted: a run of SWEEP_RANGE_MIN
 * or more with one range tombstone (nothing else lies between the first and
 * the last: no entry was passed over, gap is 0, and none can be written
 * while we hold the lock), else one point tombstone each. Its item goes too,
 * unless the guard against too old values, which moves with now, rejects
 * the entry's due second: then the item stays, as in sweep_one. 0 or
 * LAPSE_ENOMEM.
 */
static int sweep_unread(store *st, const table_schema *t, clock_wall now, sweep_scratch *s,
                        size_t n, int gap, db_batch *b, expiry_sweep_result *res)
{
    if (n >= SWEEP_RANGE_MIN && !gap) {
        buf_clear(&s->tmp);
        if (buf_append(&s->tmp, s->ekeys.data + s->eoff[n - 1], s->eoff[n] - s->eoff[n - 1]) != 0 ||
            buf_append_byte(&s->tmp, 0) != 0) {
            return LAPSE_ENOMEM;
        }
        db_batch_delete_range(b, st->db, CF_EXPIRY, s->ekeys.data, s->eoff[1], s->tmp.data,
                              s->tmp.len);
    } else {
        for (size_t i = 0; i < n; i++) {
            db_batch_delete(b, st->db, CF_EXPIRY, s->ekeys.data + s->eoff[i],
                            s->eoff[i + 1] - s->eoff[i]);
        }
    }
    const int64_t min_due_s = ttl_guard_min_due_s(&t->ttl, now);
    for (size_t i = 0; i < n; i++) {
        int64_t due_s =
            itemkey_expiry_due_s(s->ekeys.data + s->eoff[i], s->eoff[i + 1] - s->eoff[i]);
        if (due_s <= 0 || due_s < min_due_s) {
            res->stale++;
            continue;
        }
        db_batch_delete(b, st->db, CF_ITEMS, s->ikeys.data + s->ioff[i],
                        s->ioff[i + 1] - s->ioff[i]);
        if (res->due_ms != NULL) {
            res->due_ms[res->deleted] = due_s * 1000;
        }
        res->deleted++;
    }
    return 0;
}

/*
 * The sweep's first phase, collect: walks the partition's entries from its
 * cursor and gathers the due ones into s (keys in the arenas, *n of them),
 * setting res->more and s->cursor when the budget runs out first and
 * res->next_due_ms from the first entry left. *gap says whether an entry
 * between the first and the last collected was passed over. An entry whose
 * item key cannot be made is deleted into b at once. 0, or an error with
 * err (LAPSE_ENOMEM, or the iterator's). REQUIRES: the partition's stripe
 * lock.
 *
 * Budget: at most max_items due entries. Stops at the first entry not due
 * (entries sort by due second: all later ones are not due either), when
 * the budget is used up (then more = 1), or at the end of the partition's
 * entries. Entries of undeletable items are passed over without using the
 * budget; there are at most KEYSET_MAX of them. No heap allocation per
 * entry: keys go into two arenas.
 */
static int collect(store *st, const table_schema *t, uint32_t part, uint64_t cut, size_t max_items,
                   sweep_scratch *s, db_batch *b, size_t *n, int *gap, expiry_sweep_result *res,
                   char *err, size_t errlen)
{
    int rv;
    db_iter *it = NULL;
    const sweep_cursor *c = store_sweep_cursor(st, t->id, part);
    if ((rv = entries_iter(st, t->id, part, c != NULL ? &c->key : NULL, UINT64_MAX, &it)) != 0) {
        return oom(err, errlen);
    }
    for (db_iter_seek_first(it); db_iter_valid(it); db_iter_next(it)) {
        size_t elen = 0;
        const uint8_t *ek = db_iter_key(it, &elen);
        int64_t due_s = itemkey_expiry_due_s(ek, elen);
        if (due_s >= 0 && (uint64_t)due_s >= cut) {
            break;
        }
        if (skipped(st, ek, elen, &s->tmp)) {
            *gap |= *n > 0;
            continue;
        }
        if (*n == max_items) {
            res->more = 1;
            /* The next sweep starts here (the cursor), past the tombstones
             * this one leaves. */
            if (buf_append(&s->cursor, ek, elen) != 0) {
                rv = oom(err, errlen);
                goto out;
            }
            break;
        }
        if (itemkey_of_expiry(&s->tmp, ek, elen) != 0) {
            /* Cannot happen (the key layout is ours): drop the entry. */
            db_batch_delete(b, st->db, CF_EXPIRY, ek, elen);
            res->stale++;
            continue;
        }
        if (buf_append(&s->ekeys, ek, elen) != 0 ||
            buf_append(&s->ikeys, s->tmp.data, s->tmp.len) != 0) {
            rv = oom(err, errlen);
            goto out;
        }
        s->eoff[*n + 1] = s->ekeys.len;
        s->ioff[*n + 1] = s->ikeys.len;
        (*n)++;
    }
    /* The first entry left (not skipped) gives next_due. Bounded as above. */
    for (; db_iter_valid(it); db_iter_next(it)) {
        size_t elen = 0;
        const uint8_t *ek = db_iter_key(it, &elen);
        if (!skipped(st, ek, elen, &s->tmp)) {
            int64_t due_s = itemkey_expiry_due_s(ek, elen);
            res->next_due_ms = due_s < 0 ? 0 : due_s * 1000;
            break;
        }
    }
    rv = db_iter_status(it, err, errlen);
out:
    db_iter_free(it);
    return rv;
}

/*
 * The sweep's second phase, decide: adds to b what the n collected entries
 * call for. A table that derives nothing deletes them unread
 * (sweep_unread); else their items are read with one MultiGet (the outbox
 * records and LSI deletes need each old image) and judged one by one
 * (sweep_one), their derived writes going through d. 0, or an error with
 * err. REQUIRES: the partition's stripe lock; d begun when d is non-NULL.
 */
static int decide(store *st, const table_schema *t, clock_wall now, sweep_scratch *s, size_t n,
                  int gap, store_derived *d, db_batch *b, expiry_sweep_result *res, char *err,
                  size_t errlen)
{
    int rv;
    if (d == NULL) {
        return sweep_unread(st, t, now, s, n, gap, b, res) != 0 ? oom(err, errlen) : 0;
    }
    for (size_t i = 0; i < n; i++) {
        s->kp[i] = s->ikeys.data + s->ioff[i];
        s->kl[i] = s->ioff[i + 1] - s->ioff[i];
    }
    if ((rv = db_multi_get(st->db, CF_ITEMS, n, s->kp, s->kl, s->vals, s->found, err, errlen)) !=
        0) {
        return rv;
    }
    for (size_t i = 0; i < n; i++) {
        if ((rv = sweep_one(st, t, now, s, i, d, b, res, err, errlen)) != 0) {
            return rv;
        }
    }
    return 0;
}

void expiry_result_clear(expiry_sweep_result *res)
{
    int64_t *keep = res->due_ms;
    memset(res, 0, sizeof(*res));
    res->due_ms = keep;
    res->next_due_ms = EXPIRY_NONE;
}

/*
 * One sweep of one partition in three phases under its stripe lock:
 * collect the due entries (collect), decide what each calls for (decide),
 * commit them in one WriteBatch (store_commit) and move the cursor past
 * them; then, with the lock released, wait for the replicas.
 */
int expiry_sweep(store *st, const table_schema *t, uint32_t part, clock_wall now, size_t max_items,
                 expiry_sweep_result *res, char *err, size_t errlen)
{
    int rv;
    expiry_result_clear(res);
    if (max_items == 0 || max_items > STORE_BATCH_MAX || !t->ttl.enabled || part >= t->partitions) {
        return errf(LAPSE_EINVAL, err, errlen,
                    "expiry_sweep: bad arguments (max_items %zu, ttl %s, partition %u)", max_items,
                    t->ttl.enabled ? "on" : "off", (unsigned)part);
    }
    size_t n = 0;
    store_pending pend;
    memset(&pend, 0, sizeof(pend));
    int gap = 0; /* an entry between the first and the last collected was passed over */
    const int derive = store_derived_wanted(t);
    store_derived d;
    memset(&d, 0, sizeof(d));
    sweep_scratch *s = scratch_take(st);
    if (s == NULL) {
        return oom(err, errlen);
    }
    db_batch *const b = s->b;
    store_commit_prepare(st, b, t);
    const uint64_t cut = cutoff_s(now);
    pthread_mutex_t *mu = store_stripe(st, t->id, part);
    pthread_mutex_lock(mu);
    if ((rv = store_repl_prepare(st, t, part, err, errlen)) != 0) {
        goto unlock;
    }
    if (derive) {
        store_derived_begin(&d, st, t, part);
    }
    /* Budget: collect's (at most max_items entries, their items read with
     * one MultiGet where the table needs old images), deleted in one
     * WriteBatch, all under the partition's lock. */
    if ((rv = collect(st, t, part, cut, max_items, s, b, &n, &gap, res, err, errlen)) != 0 ||
        (rv = decide(st, t, now, s, n, gap, derive ? &d : NULL, b, res, err, errlen)) != 0) {
        goto unlock;
    }
    int written = 0;
    rv = store_commit(st, b, t, part, derive ? &d : NULL, &written, &pend, err, errlen);
    if (rv != 0) {
        goto unlock; /* deleted here but not replicated: the next sweep's record carries it */
    }
    /* Every entry below the cursor is now deleted here or skipped: below
     * the first one left when the budget ran out, else below the cutoff. */
    if (!s->keep_cursor && (res->more || itemkey_expiry_bound(&s->cursor, t->id, part, cut) == 0)) {
        store_sweep_cursor_set(st, t->id, part, s->cursor.data, s->cursor.len);
    }
unlock:
    pthread_mutex_unlock(mu);
    store_derived_end(&d);
    /* The replicas are waited for with the partition unlocked, as a write's
     * are: a follower applies a record under its own stripe lock, and a
     * sweep there waiting for this node under it would close a circle. */
    if (rv == 0 && (rv = store_commit_finish(st, &pend, err, errlen)) == 0) {
        res->commit_ms = clock_wall_now().ms;
    }
    if (rv != 0) {
        expiry_result_clear(res); /* nothing was written */
    }
    scratch_give(st, s, derive ? n : 0); /* the values it read */
    return rv;
}

/* ======================================================================== */
/* Next due instant and backlog                                             */
/* ======================================================================== */

int expiry_next_due(store *st, uint32_t table_id, uint32_t part, int64_t *due_ms, char *err,
                    size_t errlen)
{
    uint64_t count = 0;
    /* The oldest entry of all: a backlog at the end of time, capped at one. */
    clock_wall end = {INT64_MAX};
    return expiry_backlog(st, table_id, part, end, 1, &count, due_ms, err, errlen);
}

int expiry_backlog(store *st, uint32_t table_id, uint32_t part, clock_wall now, uint64_t max_count,
                   uint64_t *count, int64_t *oldest_due_ms, char *err, size_t errlen)
{
    int rv;
    db_iter *it = NULL;
    buf tmp;
    buf_init(&tmp);
    *count = 0;
    *oldest_due_ms = EXPIRY_NONE;
    uint64_t cut = now.ms == INT64_MAX ? UINT64_MAX : cutoff_s(now);
    /* Start at the sweep cursor: below it every entry is deleted or skipped,
     * so the count is the same without stepping over the tombstones the
     * sweeps left (a burst's million of them, at every scrape). A copy: an
     * entry written below it meanwhile may be missed by this point-in-time
     * view; for next_due the store's expiry hook reports it anyway. */
    buf from;
    buf_init(&from);
    pthread_mutex_t *mu = store_stripe(st, table_id, part);
    pthread_mutex_lock(mu);
    const sweep_cursor *c = store_sweep_cursor(st, table_id, part);
    int have_from = c != NULL && buf_append(&from, c->key.data, c->key.len) == 0;
    pthread_mutex_unlock(mu);
    rv = entries_iter(st, table_id, part, have_from ? &from : NULL, cut, &it);
    buf_fini(&from);
    if (rv != 0) {
        buf_fini(&tmp);
        return oom(err, errlen);
    }
    /* Budget: max_count entries counted (plus the undeletable ones passed
     * over, at most KEYSET_MAX). Stops at the first entry not due (the
     * iterator's upper bound) or at the budget. No lock: a point-in-time
     * view is all metrics need. */
    uint64_t n = 0;
    for (db_iter_seek_first(it); db_iter_valid(it) && n < max_count; db_iter_next(it)) {
        size_t elen = 0;
        const uint8_t *ek = db_iter_key(it, &elen);
        if (skipped(st, ek, elen, &tmp)) {
            continue;
        }
        if (n == 0) {
            int64_t due_s = itemkey_expiry_due_s(ek, elen);
            *oldest_due_ms = due_s < 0 ? 0 : due_s * 1000;
        }
        n++;
    }
    if ((rv = db_iter_status(it, err, errlen)) == 0) {
        *count = n;
    } else {
        *oldest_due_ms = EXPIRY_NONE;
    }
    db_iter_free(it);
    buf_fini(&tmp);
    return rv;
}

/* ======================================================================== */
/* Dropping a table's index                                                 */
/* ======================================================================== */

/* The meta key of the backfill progress of (table_id, part), or with
 * whole_table the prefix of every such key of table_id (expiry_backfill.c
 * writes the records; dropping them is here). */
static int progress_key(buf *k, uint32_t table_id, uint32_t part, int whole_table)
{
    buf_clear(k);
    if (whole_table) {
        return buf_printf(k, "backfill/%" PRIu32 "/", table_id);
    }
    return buf_printf(k, "backfill/%" PRIu32 "/%" PRIu32, table_id, part);
}

int expiry_progress_key(buf *k, uint32_t table_id, uint32_t part)
{
    return progress_key(k, table_id, part, 0);
}

int expiry_forget_progress(store *st, db_batch *b, uint32_t table_id, uint32_t part)
{
    buf k, pre;
    buf_init(&k);
    buf_init(&pre);
    int rv =
        progress_key(&k, table_id, part, 0) != 0 || itemkey_append_prefix(&pre, table_id, part) != 0
            ? LAPSE_ENOMEM
            : 0;
    if (rv == 0) {
        db_batch_delete(b, st->db, CF_META, k.data, k.len);
        keyset_remove_prefix(&st->undeletable, pre.data, pre.len);
    }
    buf_fini(&k);
    buf_fini(&pre);
    return rv;
}

int expiry_drop_into(store *st, db_batch *b, uint32_t table_id)
{
    uint8_t lo[4], hi[9];
    size_t hlen = 0;
    buf plo, phi;
    buf_init(&plo);
    buf_init(&phi);
    itemkey_table_range(table_id, lo, hi, &hlen);
    if (progress_key(&plo, table_id, 0, 1) != 0 || buf_append(&phi, plo.data, plo.len) != 0) {
        buf_fini(&plo);
        buf_fini(&phi);
        return LAPSE_ENOMEM;
    }
    itemkey_successor(&phi); /* "backfill/<id>/" ends in '/': never all 0xFF */
    db_batch_delete_range(b, st->db, CF_EXPIRY, lo, sizeof(lo), hi, hlen);
    db_batch_delete_range(b, st->db, CF_META, plo.data, plo.len, phi.data, phi.len);
    buf_fini(&plo);
    buf_fini(&phi);
    keyset_remove_prefix(&st->undeletable, lo, sizeof(lo));
    return 0;
}

void expiry_compact_table(store *st, uint32_t table_id)
{
    uint8_t lo[4], hi[9];
    size_t hlen = 0;
    itemkey_table_range(table_id, lo, hi, &hlen);
    db_compact_range(st->db, CF_EXPIRY, lo, sizeof(lo), hi, hlen);
}

int expiry_drop_table(store *st, uint32_t table_id, char *err, size_t errlen)
{
    db_batch *b = db_batch_new();
    if (b == NULL || expiry_drop_into(st, b, table_id) != 0) {
        db_batch_free(b);
        return oom(err, errlen);
    }
    int rv = db_write(st->db, b, 0, err, errlen);
    db_batch_free(b);
    if (rv == 0) {
        expiry_compact_table(st, table_id);
    }
    return rv;
}
