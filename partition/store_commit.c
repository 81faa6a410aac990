/*
 * store_commit.c: the commit of a partition's WriteBatch (store_commit.h):
 * for a replicated table the primary's side of the replication log
 * (replog.h: number the batch, store its record and the new position in
 * the same batch, ship it, wait for the replicas with the lock released),
 * else a plain write; and the log's position and records, which the
 * replica's apply (replog.c) writes through the same functions.
 *
 * Every write path (store_write.c, store_batch.c, expiry.c,
 * expiry_backfill.c, expiry_naive.c) calls down into this file, most
 * through store_commit; it calls only store_int.c, store_derived.c (to
 * settle a commit's derived writes) and storage/, never back into them.
 */
#include "store_commit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/lapse_err.h"
#include "itemkey.h"
#include "store_int.h"

void store_set_repl_hook(store *st, const store_repl_hook *h)
{
    if (h != NULL) {
        st->repl = *h;
    } else {
        memset(&st->repl, 0, sizeof(st->repl));
    }
}

void store_set_replog_retain(store *st, uint64_t retain)
{
    st->replog_retain = retain;
}

/* ======================================================================== */
/* The log's position and records                                           */
/* ======================================================================== */

int store_commit_pos_decode(const uint8_t *v, size_t len, uint32_t table_id, uint32_t part,
                            uint64_t *epoch, uint64_t *seq, char *err, size_t errlen)
{
    if (len != 16) {
        return errf(LAPSE_ECORRUPT, err, errlen,
                    "replication log position of table %u partition %u is %zu bytes",
                    (unsigned)table_id, (unsigned)part, len);
    }
    *epoch = buf_get_u64be(v);
    *seq = buf_get_u64be(v + 8);
    return 0;
}

int store_commit_pos_read(store *st, uint32_t table_id, uint32_t part, uint64_t *epoch,
                          uint64_t *seq, char *err, size_t errlen)
{
    uint8_t k[ITEMKEY_REPL_MAX];
    size_t klen = itemkey_repl(k, table_id, REPL_LOG_POS, part, 0, 0);
    buf v;
    buf_init(&v);
    int found = 0;
    int rv = db_get(st->db, CF_REPL, k, klen, &v, &found, err, errlen);
    *epoch = 0;
    *seq = 0;
    if (rv == 0 && found) {
        rv = store_commit_pos_decode(v.data, v.len, table_id, part, epoch, seq, err, errlen);
    }
    buf_fini(&v);
    return rv;
}

/* Adds to b the partition's position (epoch, seq). */
void store_commit_pos_put(store *st, db_batch *b, uint32_t table_id, uint32_t part, uint64_t epoch,
                          uint64_t seq)
{
    uint8_t k[ITEMKEY_REPL_MAX], v[16];
    size_t klen = itemkey_repl(k, table_id, REPL_LOG_POS, part, 0, 0);
    buf_put_u64be(v, epoch);
    buf_put_u64be(v + 8, seq);
    db_batch_put(b, st->db, CF_REPL, k, klen, v, sizeof(v));
}

/* Adds to b record seq (value rec); the caller adds the position. */
int store_commit_record_put(store *st, db_batch *b, uint32_t table_id, uint32_t part, uint64_t seq,
                            const uint8_t *rec, size_t len)
{
    buf k;
    buf_init(&k);
    if (itemkey_seq_of(&k, table_id, part, seq) != 0) {
        buf_fini(&k);
        return LAPSE_ENOMEM;
    }
    db_batch_put(b, st->db, CF_REPLOG, k.data, k.len, rec, len);
    buf_fini(&k);
    return 0;
}

/* ======================================================================== */
/* Trimming                                                                 */
/* ======================================================================== */

/* 1 when record seq is one that trims the log (replog.h, "Trimming"). */
int store_commit_trim_due(const store *st, uint64_t seq)
{
    uint64_t r = st->replog_retain;
    return r > 0 && seq > r && seq % (r / 4 + 1) == 0;
}

/* Adds to b the deletion of the partition's records up to seq - retain,
 * from its bare prefix on (STORE_HINT_BYTES).
 * REQUIRES: store_commit_trim_due(st, seq). 0 or LAPSE_ENOMEM. */
int store_commit_trim_add(store *st, db_batch *b, uint32_t table_id, uint32_t part, uint64_t seq)
{
    buf lo, hi;
    buf_init(&lo);
    buf_init(&hi);
    int rv = itemkey_append_prefix(&lo, table_id, part) != 0 ||
                     itemkey_seq_of(&hi, table_id, part, seq - st->replog_retain + 1) != 0
                 ? LAPSE_ENOMEM
                 : 0;
    if (rv == 0) {
        db_batch_delete_range(b, st->db, CF_REPLOG, lo.data, lo.len, hi.data, hi.len);
    }
    buf_fini(&lo);
    buf_fini(&hi);
    return rv;
}

/* The primary's trim after record seq was confirmed by every in-sync
 * replica. A trim that fails is no failure of the write: the next one
 * (from the log's start) covers it. */
static void trim_confirmed(store *st, uint32_t table_id, uint32_t part, uint64_t seq)
{
    db_batch *b = db_batch_new();
    char err[256];
    if (b != NULL && store_commit_trim_add(st, b, table_id, part, seq) == 0) {
        (void)db_write(st->db, b, 0, err, sizeof(err));
    }
    db_batch_free(b);
}

/* ======================================================================== */
/* Commit                                                                   */
/* ======================================================================== */

/* 1 when a replication hook is installed. */
static int hooked(const store *st)
{
    return st->repl.ship != NULL && st->repl.begin != NULL;
}

/* 1 when commits to partition part of t (STORE_ANY_PART: any) go through
 * the log: every commit of a replicated table, and a one-copy table's
 * while the hook says so (a move). */
static int logged(const store *st, const table_schema *t, uint32_t part)
{
    if (!hooked(st)) {
        return 0;
    }
    if (schema_replication(t) > 1) {
        return 1;
    }
    return st->repl.logged != NULL && st->repl.logged(st->repl.arg, t->id, part);
}

void store_commit_prepare(store *st, db_batch *b, const table_schema *t)
{
    if (logged(st, t, STORE_ANY_PART)) {
        db_batch_log_start(b);
    }
}

/* The count of commits on their way in the partition's lock stripe. */
static _Atomic uint32_t *unshipped_of(store *st, uint32_t table_id, uint32_t part)
{
    return &st->unshipped[store_stripe(st, table_id, part) - st->locks];
}

int store_repl_prepare(store *st, const table_schema *t, uint32_t part, char *err, size_t errlen)
{
    if (st->repl.prepare == NULL || !logged(st, t, part)) {
        return 0;
    }
    return st->repl.prepare(st->repl.arg, t->id, part, err, errlen);
}

int store_commit_start(store *st, db_batch *b, const table_schema *t, uint32_t part, int *written,
                       store_pending *pend, char *err, size_t errlen)
{
    int rv;
    *written = 0;
    memset(pend, 0, sizeof(*pend));
    if (db_batch_count(b) == 0) {
        return 0;
    }
    if (!logged(st, t, part)) {
        rv = db_write(st->db, b, 0, err, errlen);
        *written = rv == 0;
        return rv;
    }
    if (!db_batch_logging(b)) {
        /* A one-copy table's partition began a move between the batch's
         * preparing and its commit: it has no record to ship. */
        return errf(LAPSE_EUNAVAILABLE, err, errlen,
                    "table %s partition %u began a move while the write was prepared; nothing "
                    "was written: retry",
                    t->name, (unsigned)part);
    }
    uint64_t epoch = 0;
    int took_in = 0;
    if ((rv = st->repl.begin(st->repl.arg, t->id, part, &epoch, &took_in, err, errlen)) != 0) {
        return rv;
    }
    if (took_in) {
        /* The write was read and derived before these records came in: its
         * outbox and request records would take their numbers. */
        return errf(LAPSE_EUNAVAILABLE, err, errlen,
                    "table %s partition %u took in records of its replicas while the write "
                    "was prepared (a new primary); nothing was written: retry",
                    t->name, (unsigned)part);
    }
    if (epoch == 0) {
        return errf(LAPSE_EINTERNAL, err, errlen, "the replication hook gave epoch 0");
    }
    size_t oplen = 0;
    const uint8_t *ops = db_batch_log(b, &oplen);
    if (ops == NULL) {
        return errf(LAPSE_ENOMEM, err, errlen,
                    "the write's replication record could not be built (out of memory, "
                    "or the batch was not prepared)");
    }
    uint64_t last_epoch, seq;
    rv = store_commit_pos_read(st, t->id, part, &last_epoch, &seq, err, errlen);
    if (rv != 0) {
        return rv;
    }
    if (epoch < last_epoch) {
        return errf(LAPSE_EWRONGNODE, err, errlen,
                    "table %s partition %u is at epoch %llu, past this primary's %llu", t->name,
                    (unsigned)part, (unsigned long long)last_epoch, (unsigned long long)epoch);
    }
    seq++;
    buf rec;
    buf_init(&rec);
    if (buf_append_u64be(&rec, epoch) != 0 || buf_append(&rec, ops, oplen) != 0 ||
        store_commit_record_put(st, b, t->id, part, seq, rec.data, rec.len) != 0) {
        buf_fini(&rec);
        return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
    }
    store_commit_pos_put(st, b, t->id, part, epoch, seq);
    /* Counted before the write, so a reader that sees it also sees that
     * something is on its way (store_settle). */
    atomic_fetch_add(unshipped_of(st, t->id, part), 1);
    void *ticket = NULL;
    if ((rv = db_write(st->db, b, 0, err, errlen)) == 0) {
        *written = 1;
        rv = st->repl.ship(st->repl.arg, t->id, part, seq, last_epoch, rec.data, rec.len, &ticket,
                           err, errlen);
    }
    buf_fini(&rec);
    if (rv != 0) {
        atomic_fetch_sub(unshipped_of(st, t->id, part), 1);
        return rv;
    }
    *pend = (store_pending){.ticket = ticket, .table_id = t->id, .part = part, .seq = seq};
    return ticket == NULL ? store_commit_finish(st, pend, err, errlen) : 0; /* shipped already */
}

int store_commit(store *st, db_batch *b, const table_schema *t, uint32_t part, store_derived *d,
                 int *written, store_pending *pend, char *err, size_t errlen)
{
    int rv;
    *written = 0;
    memset(pend, 0, sizeof(*pend));
    if (d != NULL && (rv = store_derived_finish(d, b, err, errlen)) != 0) {
        return rv;
    }
    const int empty = db_batch_count(b) == 0;
    rv = store_commit_start(st, b, t, part, written, pend, err, errlen);
    /* The counters follow what is stored, even when shipping failed after
     * the write; an empty batch added no record, so the cache stays true. */
    if (d != NULL && (*written || empty)) {
        store_derived_committed(d);
    }
    return rv;
}

int store_commit_finish_many(store *st, store_pending *pends, size_t n, int *rvs, char *err,
                             size_t errlen)
{
    void *one[1], **tickets = n > 1 ? calloc(n, sizeof(*tickets)) : one;
    int one_rv[1], *trv = n > 1 ? calloc(n, sizeof(*trv)) : one_rv; /* per ticket */
    size_t nt = 0;
    int rv = 0;
    if (tickets == NULL || trv == NULL) {
        rv = errf(LAPSE_ENOMEM, err, errlen, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        if (rvs != NULL) {
            rvs[i] = 0;
        }
        if (pends[i].ticket == NULL) {
            continue;
        }
        if (tickets != NULL && trv != NULL) {
            tickets[nt++] = pends[i].ticket;
        } else {
            int r = st->repl.wait(st->repl.arg, &pends[i].ticket, 1, NULL, NULL, 0); /* freed */
            if (rvs != NULL) {
                rvs[i] = r != 0 ? r : rv;
            }
        }
    }
    if (nt > 0) {
        rv = st->repl.wait(st->repl.arg, tickets, nt, trv, err, errlen);
        for (size_t i = 0, k = 0; rvs != NULL && i < n; i++) {
            if (pends[i].ticket != NULL) {
                rvs[i] = trv[k++];
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (pends[i].seq == 0) {
            continue; /* not logged, or nothing written */
        }
        int own = rvs != NULL ? rvs[i] : rv;
        if (own == 0 && store_commit_trim_due(st, pends[i].seq)) {
            trim_confirmed(st, pends[i].table_id, pends[i].part, pends[i].seq);
        }
        atomic_fetch_sub(unshipped_of(st, pends[i].table_id, pends[i].part), 1);
        memset(&pends[i], 0, sizeof(pends[i]));
    }
    if (tickets != one) {
        free(tickets);
    }
    if (trv != one_rv) {
        free(trv);
    }
    return rv;
}

int store_commit_finish(store *st, store_pending *pend, char *err, size_t errlen)
{
    return store_commit_finish_many(st, pend, 1, NULL, err, errlen);
}

void store_settle(store *st, const table_schema *t, uint32_t part)
{
    if (!hooked(st) || st->repl.settle == NULL || atomic_load(unshipped_of(st, t->id, part)) == 0) {
        return;
    }
    /* Under the stripe lock no commit is between its write and its
     * queueing: every record up to the position is queued (or through, or
     * was never this node's to ship: applied as a replica, or before a
     * restart), so settle need only wait for the queue. */
    uint64_t epoch = 0, seq = 0;
    char err[256];
    pthread_mutex_t *mu = store_stripe(st, t->id, part);
    pthread_mutex_lock(mu);
    int rv = store_commit_pos_read(st, t->id, part, &epoch, &seq, err, sizeof(err));
    pthread_mutex_unlock(mu);
    if (rv == 0 && seq > 0) {
        st->repl.settle(st->repl.arg, t->id, part, seq);
    }
}
