/*
 * db.h: the RocksDB wrapper, the only place that includes <rocksdb/c.h>.
 *
 * One db is one RocksDB directory with a fixed list of column families, named
 * at open and afterwards addressed by their index in that list. Missing column
 * families are created. The WAL is always on; db_write(sync = 0) survives a
 * kill -9 of the process (the WAL reaches the OS before db_write returns),
 * sync = 1 also survives power loss.
 *
 * Thread-safety: a db and its iterators may be used from many threads at once
 * (RocksDB's own guarantee); a db_batch or a db_iter belongs to one thread.
 *
 * Invariants:
 *  1. Every RocksDB error string is copied into the caller's buffer and freed
 *     at once; none is reused or leaked.
 *  2. db_close is safe on a half-opened db and closes in reverse open order.
 *  3. An iterator must be freed before db_close.
 */
#ifndef LAPSE_DB_H
#define LAPSE_DB_H

#include <stddef.h>
#include <stdint.h>

#include "../common/buf.h"

#define DB_MAX_CF 16

typedef struct db db;
typedef struct db_batch db_batch;
typedef struct db_iter db_iter;
typedef struct db_snapshot db_snapshot;

typedef struct db_options {
    size_t block_cache_bytes; /* 0 = default (64 MiB) */
    int create_if_missing;    /* create the directory's database if absent */
    /* A family (one of cf_names; NULL: none) whose values start with the
     * u64be wall-clock millisecond (clock_wall_now) they were written at:
     * compactions drop its entries older than expire_after_ms, so it needs
     * no deletes of its own. An entry may outlive that until a compaction
     * reaches it; readers that care check the stamp. */
    const char *expiring_cf;
    int64_t expire_after_ms;
    /* Families (nhinted of cf_names) whose keys come in order within each
     * prefix of hint_prefix_len bytes, as a log's sequence numbers do: their
     * memtables keep where each prefix's last insert went (RocksDB's insert
     * hints), so an append costs no search from the top. RocksDB 7.8 keeps
     * those hints for its range deletions too and mixes the two up (fixed
     * upstream in 2024, facebook/rocksdb pull request 12558), so in these
     * families a range deletion must begin with a key shorter than
     * hint_prefix_len: db_write refuses a batch that holds another
     * (LAPSE_EINVAL). */
    const char *const *hinted_cfs;
    size_t nhinted;
    size_t hint_prefix_len;
} db_options;

/* Opens (creating when allowed) the database at path with the column
 * families cf_names[0..ncf) ("default" is added implicitly if not listed).
 * On success *out must be closed with db_close; on error *out is NULL. opt
 * may be NULL (defaults, create_if_missing = 1). Column families that exist
 * on disk but are not listed are opened too (RocksDB requires it) but are not
 * addressable. Returns 0, LAPSE_EIO (with RocksDB's message in err, e.g. a
 * lock held by another process), LAPSE_EINVAL (empty or duplicate names) or
 * LAPSE_ENOMEM. REQUIRES: ncf <= DB_MAX_CF. */
int db_open(db **out, const char *path, const db_options *opt, const char *const *cf_names,
            size_t ncf, char *err, size_t errlen);
/* Closes and frees. Accepts NULL and half-opened dbs. */
void db_close(db *d);

/* Reads key from column family cf. On success *found says whether it exists
 * and, when it does, val holds the value (val is cleared first). Returns 0
 * or LAPSE_EIO. */
int db_get(db *d, int cf, const void *key, size_t klen, buf *val, int *found, char *err,
           size_t errlen);

/* Reads n keys at once (RocksDB MultiGet). vals[i] receives key i's value and
 * found[i] whether it exists. Returns 0 or LAPSE_EIO. */
int db_multi_get(db *d, int cf, size_t n, const void *const *keys, const size_t *klens, buf *vals,
                 int *found, char *err, size_t errlen);

/* Write batches: built on one thread, applied atomically by db_write. */
db_batch *db_batch_new(void);    /* NULL on OOM */
void db_batch_free(db_batch *b); /* accepts NULL */
void db_batch_clear(db_batch *b);
/* This thread's own batch, empty (NULL on OOM): for a thread that builds
 * big batches call after call (a snapshot's parts), whose buffer then
 * stays allocated instead of growing anew, page by page, every time (its
 * page faults took about 9% of a node's CPU during a rebalance). Hand it back
 * with db_batch_thread_done, before the thread asks for it again; never
 * db_batch_free it. Freed when the thread exits. */
db_batch *db_batch_thread(void);
/* Empties b (db_batch_thread's), and frees it when it grew past
 * DB_BATCH_THREAD_KEEP bytes, so that one huge batch is not kept. */
void db_batch_thread_done(db_batch *b);
#define DB_BATCH_THREAD_KEEP (16u << 20)
void db_batch_put(db_batch *b, db *d, int cf, const void *key, size_t klen, const void *val,
                  size_t vlen);
void db_batch_delete(db_batch *b, db *d, int cf, const void *key, size_t klen);
/* Deletes [start, end) in cf. In a family of db_options.hinted_cfs, start
 * must be shorter than hint_prefix_len, or the batch is refused (db_write). */
void db_batch_delete_range(db_batch *b, db *d, int cf, const void *start, size_t slen,
                           const void *end, size_t elen);
size_t db_batch_count(const db_batch *b);

/* The batch log, for shipping a batch to a replica: after
 * db_batch_log_start (which empties it), every put, delete and range delete
 * added to b is also recorded in a portable form (family by index, not by
 * RocksDB's handle). db_batch_log returns it (valid until b changes) with
 * its length, or NULL when logging is off or a record failed for want of
 * memory (the caller must then not ship b). db_batch_clear empties it and
 * turns logging off.
 * db_batch_replay adds the ops of a log to b (another batch, usually of
 * another store) and counts them into *ops (may be NULL): 0, or
 * LAPSE_ECORRUPT for a malformed log or an unknown family, with b left as
 * it was (the log is read through once before any op is added: a batch
 * shared by several logs stays whole). */
void db_batch_log_start(db_batch *b);
const uint8_t *db_batch_log(const db_batch *b, size_t *len);
/* Whether b's log was started (db_batch_log_start) and not cleared since. */
int db_batch_logging(const db_batch *b);
int db_batch_replay(db_batch *b, db *d, const uint8_t *log, size_t len, size_t *ops);
/* Applies b atomically. Returns 0, LAPSE_EIO, or LAPSE_EINVAL for a batch
 * with a range deletion the hinted family cannot take (db_options); on
 * error nothing was applied. */
int db_write(db *d, db_batch *b, int sync, char *err, size_t errlen);

/* Fault point for tests: the after-th db_write from now (1: the next one)
 * fails with LAPSE_EIO and writes nothing; 0 disables. Any thread. */
void db_fault_write(db *d, int after);

/* Iterators over cf restricted to [lower, upper) (either may be NULL for
 * unbounded; the bounds are copied). The iterator is unpositioned until a
 * seek. Returns 0 or LAPSE_ENOMEM; free with db_iter_free. */
int db_iter_new(db_iter **out, db *d, int cf, const void *lower, size_t llen, const void *upper,
                size_t ulen);
/* db_iter_new reading at snapshot snap (NULL: the latest state). */
int db_iter_new_at(db_iter **out, db *d, const db_snapshot *snap, int cf, const void *lower,
                   size_t llen, const void *upper, size_t ulen);
void db_iter_free(db_iter *it);                                        /* accepts NULL */
void db_iter_seek(db_iter *it, const void *key, size_t klen);          /* first >= key */
void db_iter_seek_for_prev(db_iter *it, const void *key, size_t klen); /* last <= key */
void db_iter_seek_first(db_iter *it);
void db_iter_seek_last(db_iter *it);
int db_iter_valid(const db_iter *it);
void db_iter_next(db_iter *it);
void db_iter_prev(db_iter *it);
/* Borrowed until the iterator next moves or is freed. */
const uint8_t *db_iter_key(const db_iter *it, size_t *len);
const uint8_t *db_iter_value(const db_iter *it, size_t *len);
/* After the loop ends: 0, or LAPSE_EIO with the iterator's error in err. */
int db_iter_status(const db_iter *it, char *err, size_t errlen);

/* A consistent view of every column family as of the call: iterators made
 * with db_iter_new_at on it see no later write. Holds RocksDB's snapshot
 * (old versions are kept until it is released): free it soon. NULL on OOM.
 * db_snapshot_free accepts NULL; free every iterator on it first. */
db_snapshot *db_snapshot_new(db *d);
void db_snapshot_free(db_snapshot *s);

/* RocksDB's estimate of the bytes [start, end) of cf takes in its files
 * (memtables not included: recent writes may not count yet) into *bytes.
 * Returns 0, LAPSE_EINVAL (a bad cf) or LAPSE_EIO. */
int db_approx_size(db *d, int cf, const void *start, size_t slen, const void *end, size_t elen,
                   uint64_t *bytes, char *err, size_t errlen);

/* Compacts [start, end) of cf (either NULL = unbounded), to reclaim space
 * after a large range delete. Blocks until done. Returns 0 (LAPSE_EINVAL for
 * a bad cf). */
int db_compact_range(db *d, int cf, const void *start, size_t slen, const void *end, size_t elen);

#endif
