/*
 * replog.h: the replication log of a partition of a replicated table
 * (schema_replication(t) > 1; docs/replication.md, "Replica sets").
 *
 * On the primary, every WriteBatch that changes the partition (a point
 * write, a batch, the TTL sweep, a backfill step) is committed by
 * store_commit_start: under the partition's stripe lock it takes the next
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

/* The node's side of replication, called by store_repl_prepare (prepare),
 * store_commit_start (begin, ship) and store_commit_finish (wait). */
typedef struct store_repl_hook {
    /* Called by every write right after it takes the partition's stripe
     * lock, before it reads anything of the partition: a new primary takes
     * in here what its in-sync replicas hold beyond its log (records of the
     * old primary that no one acknowledged), so the write reads, and
     * derives its outbox records and request records from, the partition
     * it will commit on. 0, or an error (the write does nothing). NULL:
     * nothing to do. */
    int (*prepare)(void *arg, uint32_t table_id, uint32_t part, char *err, size_t errlen);
    /* Before anything is written: sets *epoch to the epoch in which this
     * node is the primary of (table_id, part) and returns 0, or refuses the
     * write with an error and err (LAPSE_EWRONGNODE: not the primary;
     * LAPSE_EUNAVAILABLE: fewer copies in sync than the minimum); nothing
     * is written then. Sets *took_in when it took records into the
     * partition's log in this call (what prepare does, if prepare did not:
     * a newer epoch came meanwhile): what the write read is stale, and
     * store_commit_start refuses it. */
    int (*begin)(void *arg, uint32_t table_id, uint32_t part, uint64_t *epoch, int *took_in,
                 char *err, size_t errlen);
    /* Hands record seq (rec[0..len): the stored value, epoch first; the
     * record before it is of prev_epoch) to the partition's in-sync
     * replicas. Called under the partition's stripe lock, in seq order; it
     * must not write to the partition. Either ships it there and then,
     * returning 0 once each replica has it durably (*ticket left NULL), or
     * queues it and sets *ticket: wait then gives the outcome (group commit:
     * the records queued while a round is on the wire go in the next round
     * together). An error: the write stays in this node's log and is
     * reported failed to its caller. */
    int (*ship)(void *arg, uint32_t table_id, uint32_t part, uint64_t seq, uint64_t prev_epoch,
                const uint8_t *rec, size_t len, void **ticket, char *err, size_t errlen);
    /* Returns 0 once the records of tickets[0..n) (of one partition or
     * several) are on every in-sync replica of theirs, or the first failure
     * with err; frees the tickets. Called exactly once per ticket, never
     * under a stripe lock (store_commit_start). NULL when ship never
     * queues. */
    int (*wait)(void *arg, void *const *tickets, size_t n, char *err, size_t errlen);
    /* Returns once every queued record of the partition up to seq is
     * shipped or has failed: what a read saw is then on the replicas, not
     * in a queue that a crash would lose. Called with every record up to
     * seq already handed to ship. NULL when ship never queues. */
    void (*settle)(void *arg, uint32_t table_id, uint32_t part, uint64_t seq);
    void *arg;
} store_repl_hook;

/* Installs the hook (copied; NULL removes it). Without one, writes to a
 * replicated table commit with no log, as for one copy: a store used by a
 * partition-level test or tool. Call before writes start. */
void store_set_repl_hook(store *st, const store_repl_hook *h);

/* Starts b's op log when t is replicated and a hook is installed, so
 * store_commit_start can ship b. Call right after creating or clearing b, before
 * adding ops. */
void store_commit_prepare(store *st, db_batch *b, const table_schema *t);

/* A commit whose record is still on its way to the replicas. */
typedef struct store_pending {
    void *ticket; /* the ship hook's; NULL: nothing to wait for */
    uint32_t table_id, part;
    uint64_t seq;
} store_pending;

/* The first step of every write of partition part of t, right after it
 * takes the partition's stripe lock: the hook's prepare (above). 0 for a
 * table without a log. REQUIRES: the stripe lock. */
int store_repl_prepare(store *st, const table_schema *t, uint32_t part, char *err, size_t errlen);

/* Commits b, the whole change of partition part of t, up to the ship
 * hook's queueing: for a replicated table (with a hook), as the header
 * says; else a plain db_write. Sets *written when b was written here,
 * which the caller's bookkeeping (cached counters, cursors) must then
 * follow even on error. Returns 0 with *pend to finish (also when nothing
 * is pending), or begin's refusal (nothing written), LAPSE_EIO,
 * LAPSE_ENOMEM, or the ship hook's error (b written here; its replicas may
 * lack it: the caller's write is not acknowledged), with nothing pending.
 * An empty b is not written. REQUIRES: the stripe lock of (t->id, part);
 * b prepared by store_commit_prepare.
 *
 * The caller releases the stripe lock and then calls store_commit_finish,
 * so concurrent writes to the partition share a replication round; until
 * then the write is not acknowledged. There is no call that commits and
 * waits under the lock: a follower applies a record under its own stripe
 * lock, so a node waiting for its replicas while holding one could wait
 * on a node that waits for it. */
int store_commit_start(store *st, db_batch *b, const table_schema *t, uint32_t part, int *written,
                       store_pending *pend, char *err, size_t errlen);

/* Waits for pend's record to be on every in-sync replica: 0, or the ship
 * hook's error (as store_commit_start). Once per store_commit_start that
 * returned 0, with the partition's stripe lock released. */
int store_commit_finish(store *st, store_pending *pend, char *err, size_t errlen);

/* store_commit_finish of pends[0..n) at once (a batch's partitions: their
 * rounds go out together). The first failure, or 0. */
int store_commit_finish_many(store *st, store_pending *pends, size_t n, char *err, size_t errlen);

/* For a read of partition part of t on its primary, after it read:
 * returns once every write the read may have seen is on the replicas or
 * has failed, so a read never returns what a crash of the primary could
 * take back (at once when nothing is on its way). Takes the stripe lock
 * for a moment when something is: never call it holding it. */
void store_settle(store *st, const table_schema *t, uint32_t part);

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
 * further behind is rebuilt from a snapshot (snapshot.h). 0 keeps the
 * whole log. Call before writes start. */
#define REPLOG_RETAIN_DEFAULT 4096
void store_set_replog_retain(store *st, uint64_t retain);

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
