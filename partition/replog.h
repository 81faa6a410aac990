/*
 * replog.h: the replication log of a partition of a replicated table
 * (schema_replication(t) > 1; docs/replication.md, "Replica sets").
 *
 * On the primary, every WriteBatch that changes the partition (a point
 * write, a batch, the TTL sweep, a backfill step) is committed by
 * store_commit_start (store_commit.h): under the partition's stripe lock it takes the next
 * sequence number, adds to the same batch the log record (the batch's own
 * ops in db_batch_log's portable form, with the epoch) and the partition's
 * new log position, writes it, and hands the record to the node's ship
 * hook, which queues it; with the lock released, store_commit_finish
 * returns once every in-sync replica has it durably. So records are
 * numbered, stored and shipped in commit order, and a write is
 * acknowledged to its caller only after its replicas have it.
 *
 * On a replica, store_replica_apply applies record seq of an epoch in one
 * WriteBatch with the record itself and the new position: a record of an
 * older epoch than the last applied one is refused (a deposed primary's),
 * a gap is refused (the sender resends from the position it is told), and
 * a record already applied is acknowledged again without effect (checked
 * against the record here, when not trimmed). The
 * replica's log is the primary's, so it can serve as the source of a
 * later catch-up.
 *
 * Keys (family replog): u32be table id | u32be partition | u64be seq ->
 * u64be epoch | ops. Position (family repl, kind REPL_LOG_POS): u64be
 * epoch | u64be seq of the last record, absent before the first.
 *
 * Thread-safety: as store.h; the calls take the partition's stripe lock
 * (store_commit_start's caller already holds it).
 */
#ifndef LAPSE_REPLOG_H
#define LAPSE_REPLOG_H

#include <stddef.h>
#include <stdint.h>

#include "../common/schema.h"
#include "../storage/db.h"
#include "store.h"
#include "store_commit.h"

/* The epoch and seq of the last record in the partition's log (0 and 0
 * before the first). 0, LAPSE_EIO or LAPSE_ECORRUPT. */
int replog_position(store *st, uint32_t table_id, uint32_t part, uint64_t *epoch, uint64_t *seq,
                    char *err, size_t errlen);

/* The partition's log position and its outbox's last record at one
 * moment (under the stripe lock): every outbox record up to *outbox_last
 * was written by a log record up to *log_seq, and none after it. Once
 * every in-sync replica holds the log up to *log_seq, those outbox records
 * can no longer be taken back by a failover, and may be shipped
 * (docs/replication.md, "The outbox on a replicated partition"). 0,
 * LAPSE_EIO or LAPSE_ECORRUPT. */
int replog_outbox_mark(store *st, uint32_t table_id, uint32_t part, uint64_t *log_seq,
                       uint64_t *outbox_last, char *err, size_t errlen);

/* Trimming. Each copy keeps the last retain records of each partition's
 * log: when a record's seq is a multiple of retain / 4 + 1, the records
 * up to seq - retain go (on a replica in the record's own batch; on the
 * primary in a write of its own once every in-sync replica confirmed the
 * record, so an in-sync replica never lacks a dropped record). A replica
 * further behind is rebuilt from a snapshot (snapshot.h). retain is set
 * with store_set_replog_retain (store_commit.h); 0 keeps the whole log. */
#define REPLOG_RETAIN_DEFAULT 4096

/* The seq of the first record the partition's log still holds: 1 for a
 * log never trimmed, the position's seq + 1 when it holds none (after a
 * snapshot install). 0, LAPSE_EIO or LAPSE_ECORRUPT. */
int replog_first(store *st, uint32_t table_id, uint32_t part, uint64_t *first, char *err,
                 size_t errlen);

/* Applies record seq (rec: as the ship hook received it) on a replica;
 * prev_epoch is the epoch of the sender's record seq - 1 (0 when seq is 1).
 * Sets *applied to the partition's last applied seq after the call, and
 * *diverged when this copy holds a record the sender's log does not (a
 * record under seq, or under seq - 1, of another epoch: a deposed primary's
 * unacknowledged suffix). Returns 0 (applied, or already applied),
 * LAPSE_ESTATE (a gap: resend from *applied + 1; or diverged: the copy must
 * be rebuilt, replog_reset), LAPSE_EPERM (an epoch older than the last
 * applied record's: a deposed primary), LAPSE_ECORRUPT (a malformed
 * record), LAPSE_EIO or LAPSE_ENOMEM, with err. */
int replog_apply(store *st, uint32_t table_id, uint32_t part, uint64_t seq, uint64_t prev_epoch,
                 const uint8_t *rec, size_t len, uint64_t *applied, int *diverged, char *err,
                 size_t errlen);

/* replog_apply with the partition's stripe lock already held (a new
 * primary taking in its replicas' records while it holds its writes). */
int replog_apply_locked(store *st, uint32_t table_id, uint32_t part, uint64_t seq,
                        uint64_t prev_epoch, const uint8_t *rec, size_t len, uint64_t *applied,
                        int *diverged, char *err, size_t errlen);

/* The epoch a record's bytes (as stored and shipped) begin with; 0 for a
 * record too short to hold one. */
uint64_t replog_rec_epoch(const uint8_t *rec, size_t len);

/* The epoch of record seq (0 for seq 0; the position's epoch for the
 * position's seq, held or not). 0, LAPSE_ENOTFOUND (past the position, or
 * trimmed: see replog_first), LAPSE_EIO or LAPSE_ECORRUPT. */
int replog_record_epoch(store *st, uint32_t table_id, uint32_t part, uint64_t seq, uint64_t *epoch,
                        char *err, size_t errlen);

/* Drops this node's copy of the partition (items, LSI and expiry entries,
 * outbox, counters, backfill progress, log and position) in one synced
 * batch, so it can be rebuilt from its primary's log from the start. Takes
 * the stripe lock. 0, LAPSE_EIO or LAPSE_ENOMEM. */
int replog_reset(store *st, uint32_t table_id, uint32_t part, char *err, size_t errlen);

/* The partition's stripe lock, for a caller that must keep its writes out
 * for a while (the primary bringing a replica into the in-sync set). */
/* A run of consecutive records of one partition applied into one batch
 * (replog_apply_into): where the partition's log will stand once the batch
 * is written. Records of several partitions may share a batch, each
 * partition with its run (a follower applying a group-commit call in one
 * write). */
typedef struct replog_run {
    uint32_t table_id, part;
    uint64_t epoch, last; /* the position, as the batch leaves it */
    int loaded;           /* the stored position was read */
    size_t added;         /* records added to the batch */
} replog_run;

void replog_run_init(replog_run *run, uint32_t table_id, uint32_t part);

/* replog_apply's checks and effect for record seq of run's partition, with
 * its ops, the record and the new position added to b instead of written:
 * the caller writes b with replog_write, which adds the positions. The
 * checks read the stored position once, then follow run. Same returns as
 * replog_apply (0 with nothing added for a resend of a record held);
 * *applied is where run stands. On an error nothing of the record is in b,
 * and the records added before stay there, valid. REQUIRES: the
 * partition's stripe lock, held until b is written. */
int replog_apply_into(store *st, db_batch *b, replog_run *run, uint64_t seq, uint64_t prev_epoch,
                      const uint8_t *rec, size_t len, uint64_t *applied, int *diverged, char *err,
                      size_t errlen);

/* Writes b, a batch holding the records of runs[0..n) (replog_apply_into),
 * to st (not synced, as every write), with each run's new position (once
 * per run, not per record), then drops what the store caches about those
 * partitions' items and outbox. 0 or LAPSE_EIO with err (nothing written).
 * REQUIRES: the runs' stripe locks. */
int replog_write(store *st, db_batch *b, replog_run *const *runs, size_t n, char *err,
                 size_t errlen);

/* Takes the stripe locks of n partitions (tables[i], parts[i]) in a fixed
 * order, each once (partitions may share a stripe), for a batch spanning
 * them; replog_unlock_many releases them. Returns 0 or LAPSE_ENOMEM
 * (nothing locked). A thread holding them waits for nothing else. */
int replog_lock_many(store *st, const uint32_t *tables, const uint32_t *parts, size_t n);
void replog_unlock_many(store *st, const uint32_t *tables, const uint32_t *parts, size_t n);

void replog_lock(store *st, uint32_t table_id, uint32_t part);
void replog_unlock(store *st, uint32_t table_id, uint32_t part);

/* Reads the partition's records after after_seq, in order, at most max of
 * them and, past the first, at most max_bytes: calls fn for each (seq and
 * the stored value); stops early when fn returns non-zero (returned).
 * 0, LAPSE_EIO, or fn's value. For a catch-up of a replica behind. */
int replog_read(store *st, uint32_t table_id, uint32_t part, uint64_t after_seq, size_t max,
                size_t max_bytes,
                int (*fn)(void *arg, uint64_t seq, const uint8_t *rec, size_t len), void *arg,
                char *err, size_t errlen);

/* A digest of the partition's items (keys and values, in key order): the
 * count and an order-sensitive 64-bit hash. Replicas of a partition in sync
 * have equal digests. 0 or LAPSE_EIO. */
int replog_items_digest(store *st, uint32_t table_id, uint32_t part, uint64_t *count,
                        uint64_t *digest, char *err, size_t errlen);
/* The same digest of this node's copy of partition gpart of GSI index_id
 * (its entries: keys and projected items). Copies of a GSI partition that
 * applied the same outbox records have equal digests. 0 or LAPSE_EIO. */
int replog_gsi_digest(store *st, uint32_t table_id, uint32_t index_id, uint32_t gpart,
                      uint64_t *count, uint64_t *digest, char *err, size_t errlen);

#endif
