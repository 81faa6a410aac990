/*
 * store_int.h: what the files of the store share: store_int.c (errors,
 * locks, sweep cursors, the item read, repl counters, sequence reads: the
 * bottom of the call order, calling none of its users), store_commit.c
 * (store_commit, the one commit of every write path, and the log's
 * position and records), store.c (open, close, tables, metadata),
 * store_write.c and store_batch.c (point and batch writes),
 * store_derived.c (the writes an item change derives: expiry index, LSI
 * entries, outbox record), store_query.c and store_index.c (range reads),
 * expiry.c, expiry_backfill.c and expiry_naive.c (the expiry sweep and
 * backfill), outbox.c, apply.c, stream.c, replog.c and snapshot.c
 * (replication). Not part of the store API: only those files and the
 * module's own tests (which read the families directly) include it.
 */
#ifndef LAPSE_STORE_INT_H
#define LAPSE_STORE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "../common/clock.h"
#include "../common/errf.h"
#include "../storage/db.h"
#include "../common/change.h"
#include "keyset.h"
#include "replog.h"
#include "request.h"
#include "store.h"
#include "store_commit.h"

/* Column families by index. New kinds of data are appended here and to the
 * name list in store.c; existing stores gain them at the next open (db_open
 * creates missing families). Layouts: itemkey.h. */
enum store_cf {
    CF_ITEMS = 0,
    CF_META = 1,
    CF_EXPIRY = 2,
    CF_LSI = 3,      /* local secondary index entries */
    CF_OUTBOX = 4,   /* change records to ship (source side) */
    CF_REPL = 5,     /* replication counters of both sides */
    CF_GSI = 6,      /* global secondary index entries (destination side) */
    CF_STREAM = 7,   /* stream records of the shards hosted here */
    CF_REPLOG = 8,   /* replication log of replicated partitions (replog.h) */
    CF_REQUESTS = 9, /* outcomes of writes with a request id (request.h) */
    CF_COUNT
};

/* The insert hints (db_options.hinted_cfs) of the log and the request
 * records: a partition's log records (table id, partition, u64be seq) go
 * in in order, and so, nearly, do its request records (table id,
 * partition, request id led by the client's wall-clock milliseconds,
 * client_request_id); one hint per table, partition and the next byte.
 * Every range deletion of either family begins at a key of at most
 * ITEMKEY_PREFIX_BYTES (a trim, a reset or a dropped table starts at the
 * partition's or the table's bare prefix; request records expire by
 * compaction), shorter than this, as RocksDB 7.8's hints require. */
#define STORE_HINT_BYTES (ITEMKEY_PREFIX_BYTES + 1)

/* Where the TTL sweep of one partition may start (expiry.c): every entry of
 * (table_id, part) below key is deleted or belongs to an undeletable item.
 * Without it every sweep would step again over the tombstones of the
 * entries earlier sweeps deleted (quadratic in a burst). One per lock
 * stripe, guarded by that stripe's lock, valid only for the partition it
 * names; any write that puts an entry below key, or forgets an undeletable
 * item, clears it (store_sweep_cursor_note). */
typedef struct sweep_cursor {
    int valid;
    uint32_t table_id, part;
    buf key; /* an expiry key or bound */
} sweep_cursor;

typedef struct sweep_scratch sweep_scratch; /* expiry.c */

/* The outbox counters of one partition (repl key REPL_SOURCE), cached so a
 * write need not read them: one per lock stripe, guarded by that stripe's
 * lock, valid only for the partition it names. Updated only after the
 * WriteBatch that persists the same values committed, so it always equals
 * the stored counters.
 *
 * The pub_* fields repeat (partition, next_seq) for readers that must not
 * wait for the stripe lock, which a TTL sweep holds for a whole batch
 * (outbox_last_seq, outbox_ack): a seqlock, written only by the lock holder
 * (pub_ver odd while it writes), read by anyone (outbox.c, peek_next). A
 * reader gets the published next_seq or nothing, never a torn one; since
 * next_seq only grows, a value read is a lower bound of the current one. */
typedef struct seq_cache {
    int valid;
    uint32_t table_id, part;
    uint64_t next_seq, next_stream_seq;
    _Atomic uint32_t pub_ver;  /* even: pub_key/pub_next consistent */
    _Atomic uint64_t pub_key;  /* table_id << 32 | part */
    _Atomic uint64_t pub_next; /* next_seq; 0: nothing published */
} seq_cache;

struct store {
    db *db;                                    /* owned; NULL until opened */
    pthread_mutex_t locks[STORE_LOCK_STRIPES]; /* per-partition write locks */
    int locks_inited;                          /* how many of locks are initialized */
    store_expiry_hook hook;                    /* store_set_expiry_hook; NULL: none */
    void *hook_arg;
    keyset undeletable; /* items keys the TTL sweep skips (expiry.h) */
    int undeletable_inited;
    sweep_cursor cursors[STORE_LOCK_STRIPES]; /* by stripe; see sweep_cursor */
    pthread_mutex_t scratch_lock;             /* guards the two fields below */
    int scratch_lock_inited;
    sweep_scratch *scratch_pool;                     /* expiry.c: idle sweep scratch, a list */
    int scratch_pooled;                              /* entries in scratch_pool */
    seq_cache seqs[STORE_LOCK_STRIPES];              /* by stripe; see seq_cache */
    pthread_mutex_t apply_locks[STORE_LOCK_STRIPES]; /* apply.c: per (table, source part) */
    int apply_locks_inited;                          /* how many are initialized */
    pthread_mutex_t ack_lock; /* outbox.c: serializes outbox_ack's read-modify-write */
    int ack_lock_inited;
    /* apply.c: 0 while no copy here is known to miss records (no
     * REPL_MISSING mark: read at open, set when apply_note_missing writes
     * one), so a GSI query or stream read skips the look at the marks */
    _Atomic int missing_marks;
    store_repl_hook repl; /* store_set_repl_hook; repl.ship NULL: none */
    /* by stripe: commits between store_commit_start's write and their
     * store_commit_finish (store_settle's fast path: 0, nothing to wait) */
    _Atomic uint32_t unshipped[STORE_LOCK_STRIPES];
    uint64_t replog_retain; /* store_set_replog_retain; 0: keep the whole log */
};

/* Retried writes (request.h), for store_write.c's single writes and
 * store_batch.c's groups (both defined in store_write.c). REQUIRES: the
 * partition's stripe lock.
 *
 * store_request_find: rid's record of (t, part) into val, its key into
 * key; *found says whether there is one, and *seen then what it says.
 * LAPSE_EINVAL for a record of another kind than kind.
 * store_request_confirm: the call was done by an earlier attempt: commits
 * its record (key, val) again, unchanged, so that finishing *pend returns
 * once the earlier write is on every in-sync replica. */
int store_request_find(store *st, const table_schema *t, uint32_t part, const uint8_t *rid,
                       request_kind kind, buf *key, buf *val, int *found, request_outcome *seen,
                       char *err, size_t errlen);
int store_request_confirm(store *st, const table_schema *t, uint32_t part, const buf *key,
                          const buf *val, store_pending *pend, char *err, size_t errlen);

/* ======================================================================== */
/* Shared internals (store_int.c)                                           */
/* ======================================================================== */

/* Reads and decodes the item under key (scratch holds its bytes); *out is
 * NULL when absent. 0, LAPSE_EIO or the decode error. */
int store_read_item(store *st, const buf *key, buf *scratch, item **out, char *err, size_t errlen);

/* The stripe lock of partition part of table_id. */
pthread_mutex_t *store_stripe(store *st, uint32_t table_id, uint32_t part);
/* The sweep cursor of partition part of table_id, or NULL when its stripe's
 * cursor is invalid or names another partition. REQUIRES: the stripe lock. */
sweep_cursor *store_sweep_cursor(store *st, uint32_t table_id, uint32_t part);
/* Clears the partition's sweep cursor when an entry ekey is put below it
 * (ekey NULL: unconditionally). REQUIRES: the stripe lock. */
void store_sweep_cursor_note(store *st, uint32_t table_id, uint32_t part, const uint8_t *ekey,
                             size_t elen);
/* Moves the partition's sweep cursor up to key (never down while it stays
 * valid); on ENOMEM the cursor is just cleared. REQUIRES: the stripe lock. */
void store_sweep_cursor_set(store *st, uint32_t table_id, uint32_t part, const uint8_t *key,
                            size_t len);

/* The apply lock of (table_id, source part part) (apply.c). */
pthread_mutex_t *store_apply_lock(store *st, uint32_t table_id, uint32_t part);

/* Reads the records of a (table, part)-and-sequence keyed family (outbox,
 * stream) after after_seq into out: at most max_records, and past the first
 * at most max_bytes (0: no byte budget). what names the caller in errors.
 * Returns 0, LAPSE_EINVAL, LAPSE_ENOMEM or LAPSE_EIO (out is then empty). */
int store_seq_read(store *st, int cf, uint32_t table_id, uint32_t part, uint64_t after_seq,
                   size_t max_records, size_t max_bytes, change_list *out, const char *what,
                   char *err, size_t errlen);

/* Adds to b the deletion of every key of table_id in the families
 * cfs[0..n) (one range tombstone each: a dropped table, a stream turned
 * off). */
void store_table_delete(store *st, db_batch *b, uint32_t table_id, const int *cfs, size_t n);
/* Compacts the key range of table_id in the families cfs[0..n), in order,
 * so what store_table_delete hid is reclaimed. Returns 0 or the first
 * error (the rest are not compacted). */
int store_table_compact(store *st, uint32_t table_id, const int *cfs, size_t n);

/* Reads the u64 counter under the repl key (table_id, kind, part[, node when
 * has_node]) into *out; 0 when absent. Returns 0, LAPSE_EIO or
 * LAPSE_ECORRUPT (a value that is not 8 bytes). */
int store_repl_u64(store *st, uint32_t table_id, uint8_t kind, uint32_t part, int has_node,
                   uint32_t node, uint64_t *out, char *err, size_t errlen);
/* Adds to b the u64 counter val under the repl key (table_id, kind, part). */
void store_repl_put_u64(store *st, db_batch *b, uint32_t table_id, uint8_t kind, uint32_t part,
                        uint64_t val);

/* ======================================================================== */
/* The log's position and records (store_commit.c)                          */
/* ======================================================================== */

/* Written by the primary's commit and by the replica's apply (replog.c)
 * alike; layouts in replog.h ("Keys"). */

/* Decodes a stored log position (a snapshot reads it too). 0 or
 * LAPSE_ECORRUPT with err. */
int store_commit_pos_decode(const uint8_t *v, size_t len, uint32_t table_id, uint32_t part,
                            uint64_t *epoch, uint64_t *seq, char *err, size_t errlen);
/* The partition's log position: 0 and 0 before its first record. 0,
 * LAPSE_EIO or LAPSE_ECORRUPT with err. */
int store_commit_pos_read(store *st, uint32_t table_id, uint32_t part, uint64_t *epoch,
                          uint64_t *seq, char *err, size_t errlen);
/* Adds to b the partition's position (epoch, seq). */
void store_commit_pos_put(store *st, db_batch *b, uint32_t table_id, uint32_t part, uint64_t epoch,
                          uint64_t seq);
/* Adds to b log record seq (value rec); the caller adds the position. 0 or
 * LAPSE_ENOMEM. */
int store_commit_record_put(store *st, db_batch *b, uint32_t table_id, uint32_t part, uint64_t seq,
                            const uint8_t *rec, size_t len);
/* 1 when record seq is one that trims the log (replog.h, "Trimming"). */
int store_commit_trim_due(const store *st, uint64_t seq);
/* Adds to b the deletion of the partition's records up to seq - retain.
 * REQUIRES: store_commit_trim_due(st, seq). 0 or LAPSE_ENOMEM. */
int store_commit_trim_add(store *st, db_batch *b, uint32_t table_id, uint32_t part, uint64_t seq);

/* ======================================================================== */
/* Derived writes (store_derived.c)                                         */
/* ======================================================================== */

#define STORE_NO_DUE INT64_MAX /* expiry.h's EXPIRY_NONE */

/* The expiry index entry one version of an item calls for. */
typedef struct expiry_entry {
    int has;       /* eligible: one entry due at due_s */
    int64_t due_s; /* valid when has */
} expiry_entry;

/* The index entry an item version calls for: *due_s is set and 1 returned
 * when ttl_eval(&t->ttl, it, now) is TTL_ELIGIBLE, else 0 (also for NULL). */
int store_derived_expiry_due_s(const table_schema *t, const item *it, clock_wall now,
                               int64_t *due_s);
/* The same as an expiry_entry. */
expiry_entry store_derived_expiry_entry(const table_schema *t, const item *it, clock_wall now);
/* Adds to b the expiry index change of the item at ikey going from entry o
 * to entry n: delete the old entry and put the new one when they differ.
 * Lowers *min_due_ms to a new entry's due instant. 0 or LAPSE_ENOMEM (b may
 * then hold part of the change: the caller discards it).
 * REQUIRES: the partition's stripe lock. */
int store_derived_expiry_change(store *st, db_batch *b, const uint8_t *ikey, size_t ilen,
                                expiry_entry o, expiry_entry n, buf *scratch, int64_t *min_due_ms);
/* Runs the expiry hook for new entries due at min_due_ms (STORE_NO_DUE:
 * none). REQUIRES: no stripe lock held. */
void store_derived_notify(store *st, uint32_t table_id, uint32_t part, int64_t min_due_ms);

/* Whether item changes of t derive LSI entries or outbox records. Tables
 * without either pay nothing more than this test. */
static inline int store_derived_wanted(const table_schema *t)
{
    return t->nlsi > 0 || schema_has_outbox(t);
}

/*
 * The LSI entries and outbox records of the item changes that go into one
 * WriteBatch of one partition:
 *
 *   store_derived_begin        under the partition's stripe lock
 *   store_derived_change       once per changed item, adds to the batch
 *   store_commit              store_derived_finish (the new outbox counters),
 *                             the write (store_commit_start), then
 *                             store_derived_committed if it was written
 *   store_derived_end          always (frees scratch)
 *
 * The stripe lock is held from begin to committed, so sequence numbers are
 * handed out in commit order.
 */
typedef struct store_derived {
    store *st;
    const table_schema *t;
    uint32_t part;
    int outbox;        /* schema_has_outbox(t) */
    int loaded;        /* next_seq and next_stream_seq read */
    uint64_t next_seq; /* pending counters: the stored ones plus records added */
    uint64_t next_stream_seq;
    size_t records;       /* outbox records added */
    int64_t commit_ms;    /* one wall-clock snapshot for every record */
    buf k, k2, rec, keys; /* scratch */
} store_derived;

/* What a TTL delete's record says beyond the images. */
typedef struct store_derived_expiry_delete {
    int64_t expires_at_ms; /* the item's due instant */
} store_derived_expiry_delete;

/* REQUIRES: the stripe lock of (t->id, part); store_derived_wanted(t). */
void store_derived_begin(store_derived *d, store *st, const table_schema *t, uint32_t part);
/* Adds to b the derived writes of the item at items key ikey going from the
 * stored value old (NULL: absent) to nw (NULL: deleted); both are
 * item_encode()d, nw trusted. An old value that does not decode counts as
 * absent for the LSI and the images (its LSI entries cannot be named). ttl
 * is non-NULL for the TTL sweep's deletes. same says whether nw is the item
 * old was (1 or 0, from a caller that holds both decoded or knows how the
 * bytes were made), or STORE_SAME_UNKNOWN: compared here from the bytes.
 * Makes no outbox record when both old and nw are NULL, or when nw is old
 * (as DynamoDB Streams: a write that changes nothing). Returns 0, LAPSE_ENOMEM, LAPSE_EIO (reading
 * the counters) or LAPSE_ECORRUPT (ikey is not a key of t, or stored counters are malformed), with
 * err; the caller then discards b. */
#define STORE_SAME_UNKNOWN (-1)
int store_derived_change(store_derived *d, db_batch *b, const uint8_t *ikey, size_t ilen,
                         const uint8_t *old, size_t olen, const uint8_t *nw, size_t nlen, int same,
                         const store_derived_expiry_delete *ttl, char *err, size_t errlen);
/* Adds the outbox counters to b when records were added. 0 or ENOMEM. */
int store_derived_finish(store_derived *d, db_batch *b, char *err, size_t errlen);
/* Publishes the counters to the cache. REQUIRES: b was written. */
void store_derived_committed(store_derived *d);
void store_derived_end(store_derived *d); /* accepts a zeroed d */

/* ======================================================================== */
/* The commit of a write path (store_commit.c)                              */
/* ======================================================================== */

/* The one commit of every write path (single writes, batch groups, the
 * expiry sweep): adds d's outbox counters to b (store_derived_finish; d NULL
 * when the change derives nothing), commits b (store_commit_start, whose
 * *written and *pend it sets), and publishes d's counters when b was
 * written or was empty (store_derived_committed). Returns 0 or the error of
 * either step; on a store_derived_finish error nothing is written. The
 * caller still ends d (store_derived_end) and finishes *pend with the lock
 * released. REQUIRES: as store_commit_start; d begun under the same lock. */
int store_commit(store *st, db_batch *b, const table_schema *t, uint32_t part, store_derived *d,
                 int *written, store_pending *pend, char *err, size_t errlen);

/* ======================================================================== */
/* Outbox counters (outbox.c)                                               */
/* ======================================================================== */

/* Decodes the stored outbox counters of (table_id, part), v of len bytes
 * (outbox.c; a snapshot reads them too). 0 or LAPSE_ECORRUPT with err. */
int outbox_counters_decode(const uint8_t *v, size_t len, uint32_t table_id, uint32_t part,
                           uint64_t *next_seq, uint64_t *next_stream_seq, char *err, size_t errlen);
/* The stored (or cached) counters of (table_id, part): 1 and 1 when none.
 * REQUIRES: the stripe lock. 0, LAPSE_EIO or LAPSE_ECORRUPT with err. */
int outbox_counters_get(store *st, uint32_t table_id, uint32_t part, uint64_t *next_seq,
                        uint64_t *next_stream_seq, char *err, size_t errlen);
/* Caches committed counters. REQUIRES: the stripe lock. */
void outbox_counters_cache(store *st, uint32_t table_id, uint32_t part, uint64_t next_seq,
                           uint64_t next_stream_seq);
/* Forgets the cached counters of table_id (store_drop_table); takes every
 * stripe lock in turn. */
void outbox_forget_table(store *st, uint32_t table_id);
/* Forgets the cached counters of one partition, whose stored ones changed
 * under the cache (a replica applying its primary's log, or dropping its
 * copy). REQUIRES: the stripe lock. */
void outbox_forget_part(store *st, uint32_t table_id, uint32_t part);

/* ======================================================================== */
/* Range reads (store_query.c)                                              */
/* ======================================================================== */

/* Fills out with the values of family cf whose keys lie in [lo, hi) (hi
 * NULL: unbounded), decoded as items, in key order or reverse, up to limit
 * items (0: none) and STORE_PAGE_MAX_BYTES. When the page stops with more
 * left, last_key is the key of the last item: the table's key attributes,
 * plus ix's key attributes when ix is non-NULL (an index query). */
int store_collect(store *st, const table_schema *t, int cf, const index_def *ix, const buf *lo,
                  const buf *hi, int forward, uint32_t limit, store_page *out, char *err,
                  size_t errlen);
/* Appends to lo and hi (both holding the prefix P on entry) the bounds of
 * sort-key condition sk on key skd (skd->name "" : no sort key; owner names
 * the table or index in errors). suffixed: keys go on after enc(sk) (index
 * keys end with the table's keys). *hi_none is set when hi is unbounded. */
int store_sk_bounds(const key_def *skd, const char *owner, const store_sk_cond *sk, int suffixed,
                    buf *lo, buf *hi, int *hi_none, char *err, size_t errlen);
/* Narrows [lo, hi) to after (forward) or before (backward) the exclusive
 * start key k. */
int store_apply_start(buf *k, int forward, buf *lo, buf *hi, int *hi_none);

/* Adds to b the range deletes of table_id's expiry index and backfill
 * progress, and forgets its undeletable items (expiry.c; store_drop_table and
 * expiry_drop_table share it). 0 or LAPSE_ENOMEM. */
int expiry_drop_into(store *st, db_batch *b, uint32_t table_id);
/* Adds to b the deletion of partition part's backfill progress, and forgets
 * its undeletable expiry entries (a replica dropping its copy). 0 or
 * LAPSE_ENOMEM. */
int expiry_forget_progress(store *st, db_batch *b, uint32_t table_id, uint32_t part);
/* Sets the partition's log position to (epoch, seq) in a synced write, and
 * notes that its items changed (replog.c; a snapshot install ends with it).
 * REQUIRES: the stripe lock. 0, LAPSE_EIO or LAPSE_ENOMEM. */
int replog_set_position_locked(store *st, uint32_t table_id, uint32_t part, uint64_t epoch,
                               uint64_t seq, char *err, size_t errlen);
/* Clears k and writes the meta key of partition part's backfill progress
 * (a snapshot copies it). 0 or LAPSE_ENOMEM. */
int expiry_progress_key(buf *k, uint32_t table_id, uint32_t part);
/* Frees the pooled sweep scratch (store_close). REQUIRES: no sweep runs. */
void expiry_scratch_release(store *st);
/* Compacts the ranges expiry_drop_into deleted (reclaims their space). */
void expiry_compact_table(store *st, uint32_t table_id);

#endif
