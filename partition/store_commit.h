/*
 * store_commit.h: how a write commits the WriteBatch that holds the whole
 * change of one partition. For a table without a log (one copy, or no
 * replication hook installed) it is a plain db_write; for a replicated
 * table it is the primary's side of the replication log that replog.h
 * describes: store_commit_start numbers the batch under the partition's
 * stripe lock, adds its log record and the new log position to it,
 * writes it and hands the record to the node's ship hook;
 * store_commit_finish, with the lock released, returns once every in-sync
 * replica has it.
 *
 * Every write path of the store goes through here in the same order
 * (store_write.c, store_batch.c, the expiry sweep and backfill):
 *
 *   lock the partition's stripe
 *   store_repl_prepare         before anything of the partition is read
 *   store_commit_prepare(b)    before any op is added to b
 *   ... add the change and what it derives to b ...
 *   store_commit(b, derive)    store_commit_start, with the outbox
 *                              counters of the derived writes (store_int.h)
 *   unlock
 *   store_commit_finish        never under a stripe lock
 *
 * Thread-safety: as store.h; the caller holds the stripe lock from
 * store_repl_prepare to store_commit_start and releases it before
 * store_commit_finish. Invariants:
 *   1. Records are numbered, stored and shipped in commit order.
 *   2. A write is acknowledged only after store_commit_finish returned 0.
 *   3. No call here waits for another node while a stripe lock is held.
 */
#ifndef LAPSE_STORE_COMMIT_H
#define LAPSE_STORE_COMMIT_H

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
    /* Whether commits to partition part (STORE_ANY_PART: to any partition)
     * of table_id, a table of one copy, go through the log now: while a
     * move gives its set a second member, and where this node is not the
     * set's primary (begin then refuses them). Called under the stripe lock
     * for one partition, before it for STORE_ANY_PART (store_commit_prepare).
     * NULL: never (a table of more copies always does). */
    int (*logged)(void *arg, uint32_t table_id, uint32_t part);
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
     * with err; rvs (NULL, or n entries) gets each ticket's own outcome.
     * Frees the tickets. Called exactly once per ticket, never under a
     * stripe lock (store_commit_start). NULL when ship never queues. */
    int (*wait)(void *arg, void *const *tickets, size_t n, int *rvs, char *err, size_t errlen);
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

/* Sets how many records of each partition's log every copy keeps (replog.h,
 * "Trimming"; REPLOG_RETAIN_DEFAULT until set). 0 keeps the whole log.
 * Call before writes start. */
void store_set_replog_retain(store *st, uint64_t retain);

#define STORE_ANY_PART UINT32_MAX

/* Starts b's op log when t is replicated (or its partitions may be logged
 * now: the hook's logged) and a hook is installed, so
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

/* store_commit_finish of pends[0..n) at once (a batch's partitions, or
 * the writes of several calls: their rounds go out together). The first
 * failure, or 0; rvs (NULL, or n entries) gets each one's own outcome. */
int store_commit_finish_many(store *st, store_pending *pends, size_t n, int *rvs, char *err,
                             size_t errlen);

/* store_put_once and store_delete_once (store.h) that leave the wait for
 * the replicas to the caller, so that the writes of several calls ship in
 * one round: on 0, *pend is to be finished with store_commit_finish_many
 * (exactly once, never under a stripe lock), which gives the write's
 * outcome; on failure there is nothing to finish. */
int store_put_begin(store *st, const table_schema *t, const item *it, const store_cond *cond,
                    const uint8_t *rid, store_pending *pend, char *err, size_t errlen);
int store_delete_begin(store *st, const table_schema *t, const item *key, const store_cond *cond,
                       const uint8_t *rid, store_pending *pend, char *err, size_t errlen);

/* For a read of partition part of t on its primary, after it read:
 * returns once every write the read may have seen is on the replicas or
 * has failed, so a read never returns what a crash of the primary could
 * take back (at once when nothing is on its way). Takes the stripe lock
 * for a moment when something is: never call it holding it. */
void store_settle(store *st, const table_schema *t, uint32_t part);

#endif
