/*
 * expiry.h: the expiry index and the work that drives TTL deletes, against
 * the store (store.h) with no network: sweeping the due entries of one
 * partition, the next due instant, backfilling the index when TTL is enabled
 * on a table that has items, dropping it when TTL is disabled, and counting
 * the backlog. The node's scanner and backfill threads call these.
 *
 * The index is the store's column family "expiry" (docs/storage-format.md):
 *
 *   key   = table id u32be | partition u32be | due second u64be | enc(pk) enc(sk)
 *   value = empty
 *
 * where due second = (TTL value, truncated) + offset (ttl.h), so entries of a
 * partition sort by due instant and a sweep reads a prefix of them.
 *
 * Thread-safety: every function may be called from any thread. Functions that
 * write take the partition's write lock (the store's striped lock), so they
 * are serialized with puts, updates and deletes of the same partition.
 *
 * Invariants:
 *  1. For a table whose t->ttl.enabled is set, every write (store_put,
 *     store_update, store_delete, store_batch_write) keeps the index in the
 *     same WriteBatch as the item: after it, the item has exactly one entry
 *     if ttl_eval(&t->ttl, item, now) is TTL_ELIGIBLE (with that due second),
 *     and none otherwise. The backfill establishes the same for items written
 *     before TTL was enabled.
 *  2. Hence an entry that exists under the partition's lock names the item's
 *     current due instant: the sweep's conditional delete needs no more than
 *     the entry. For a table without LSIs or an outbox the sweep reads
 *     nothing else (only the guard against too old values, which moves with
 *     now, is judged again, from the entry's due second); a table with them
 *     reads each item anyway (the old image its LSI deletes and outbox record
 *     need) and re-checks it as a guard against bugs.
 *  3. A sweep deletes an item only if, under the lock, the item exists and
 *     ttl_eval of its current value says it is expired at the sweep's now
 *     (by 1 and 2, for a plain table: its entry is there and due). An update
 *     that extended or removed the TTL after the item fell due is therefore
 *     honoured.
 */
#ifndef LAPSE_EXPIRY_H
#define LAPSE_EXPIRY_H

#include <stddef.h>
#include <stdint.h>

#include "../common/buf.h"
#include "../common/clock.h"
#include "../common/schema.h"
#include "store.h"

#define EXPIRY_NONE INT64_MAX /* "no entry": a due instant later than any */

typedef struct expiry_sweep_result {
    size_t deleted;      /* items deleted, each with its index entry */
    size_t stale;        /* entries whose item was gone or not expired: entry fixed */
    size_t undeletable;  /* items that could not be decoded: skipped and counted */
    int64_t next_due_ms; /* due instant of the first entry left, or EXPIRY_NONE */
    int more;            /* due entries remain (the budget ran out) */
    int64_t commit_ms;   /* wall clock right after the WriteBatch committed */
    /* Optional, caller-owned, room for max_items: due instant (epoch ms) of
     * each deleted item, so the caller can record lag = commit_ms - due. */
    int64_t *due_ms;
} expiry_sweep_result;

/* Empties res (nothing written, no next due instant), keeping its due_ms
 * array: what a sweep or naive step reports before it starts and after it
 * failed. */
void expiry_result_clear(expiry_sweep_result *res);

/*
 * Deletes up to max_items (1..STORE_BATCH_MAX) expired items of partition
 * part of table t, in one WriteBatch, under the partition's write lock:
 * reads the index entries due before now (due instant < now.ms), checks
 * each (invariants 2 and 3; for a table with LSIs or an outbox, its item
 * read with one MultiGet for all), and deletes item and entry together.
 * Entries whose item is gone or not expired, or whose value fell behind the
 * guard, are deleted (stale); items read that fail to decode are skipped,
 * counted, and not retried by later sweeps of this store instance (they
 * never block the rest).
 * Returns 0 or LAPSE_EIO/LAPSE_ENOMEM with err; on error nothing is written.
 * REQUIRES: t->ttl.enabled.
 */
int expiry_sweep(store *st, const table_schema *t, uint32_t part, clock_wall now, size_t max_items,
                 expiry_sweep_result *res, char *err, size_t errlen);

/* The due instant of partition part's earliest entry, or EXPIRY_NONE. */
int expiry_next_due(store *st, uint32_t table_id, uint32_t part, int64_t *due_ms, char *err,
                    size_t errlen);

/* Counts the partition's entries due before now (expired, not yet deleted),
 * stopping after max_count, and the due instant of the oldest (EXPIRY_NONE
 * when none). For metrics: lapse_ttl_expired_backlog_items and
 * lapse_ttl_oldest_undeleted_age_seconds. */
int expiry_backlog(store *st, uint32_t table_id, uint32_t part, clock_wall now, uint64_t max_count,
                   uint64_t *count, int64_t *oldest_due_ms, char *err, size_t errlen);

/*
 * One bounded step of the backfill of partition part: under the partition's
 * lock, reads up to max_items items after the stored resume point, writes the
 * index entries of the eligible ones and the new resume point (meta key
 * "backfill/<table id>/<part>", with t->ttl.config_version) in one
 * WriteBatch, so a crash at any instant resumes exactly where the last step
 * committed. A stored resume point of another config version is discarded
 * (a new enable starts over). *scanned gets the items read, *done whether
 * the partition is now fully indexed (then further steps return at once).
 * ignored (TTL_VERDICT_COUNT counters, or NULL) has each item read that the
 * rule ignores added under its verdict (TTL_MISSING, ...), for
 * lapse_ttl_ignored_items; only after a successful write.
 * REQUIRES: t->ttl.enabled.
 */
int expiry_backfill_step(store *st, const table_schema *t, uint32_t part, clock_wall now,
                         size_t max_items, uint64_t *scanned, uint64_t *ignored, int *done,
                         char *err, size_t errlen);

/* Whether partition part's backfill for t->ttl.config_version completed. */
int expiry_backfill_done(store *st, const table_schema *t, uint32_t part, int *done, char *err,
                         size_t errlen);

/*
 * The naive scan, for benchmark 6 only (lapse-node --ttl-naive-scan): what a
 * best-effort background sweep without an index does. One bounded step of a
 * full pass over partition part's items: under the partition's lock, reads
 * up to max_scan items after *resume (empty: from the partition's first),
 * decodes each and judges it with ttl_eval at now, and deletes the expired
 * ones with their index entries (invariant 1 holds) in one WriteBatch, at
 * most max_delete (1..STORE_BATCH_MAX) of them, stopping there. *resume gets
 * the last item read (caller-owned; a pass starts with it empty), *done is
 * set at the partition's end. res: deleted (with due_ms when given),
 * undeletable (items that do not decode, passed over), commit_ms, more (the
 * pass is not done). Returns 0 or LAPSE_EIO/LAPSE_ENOMEM with err; on error
 * nothing is written and *resume is unchanged.
 * REQUIRES: t->ttl.enabled.
 */
int expiry_naive_step(store *st, const table_schema *t, uint32_t part, clock_wall now,
                      size_t max_scan, size_t max_delete, buf *resume, int *done,
                      expiry_sweep_result *res, char *err, size_t errlen);

/* Drops table_id's whole index and backfill progress (a range delete): TTL
 * disabled, or the table deleted. Idempotent. */
int expiry_drop_table(store *st, uint32_t table_id, char *err, size_t errlen);

#endif
