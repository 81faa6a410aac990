/*
 * db_int.h: what the RocksDB wrapper's files share (db.c: open, close,
 * reads, maintenance; db_batch.c: write batches, their log and writes;
 * db_iter.c: snapshots and iterators): the handles behind db.h's opaque
 * types and the error helpers. Included by storage/ only.
 */
#ifndef LAPSE_DB_INT_H
#define LAPSE_DB_INT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <rocksdb/c.h>

#include "../common/buf.h"
#include "db.h"

struct db {
    rocksdb_t *rdb;                              /* NULL until opened */
    rocksdb_cache_t *cache;                      /* our handle on the shared block cache */
    rocksdb_block_based_table_options_t *bbto;   /* owns the filter policy */
    rocksdb_options_t *opts;                     /* db and column-family options */
    rocksdb_options_t *expiring_opts;            /* opts plus expiring_filter, or NULL */
    rocksdb_compactionfilter_t *expiring_filter; /* db_options.expiring_cf's */
    int64_t expire_after_ms;
    rocksdb_options_t *hinted_opts[DB_MAX_CF]; /* cf's opts plus insert hints, or NULL
                                                  (not one of db_options.hinted_cfs) */
    size_t hint_prefix_len;
    rocksdb_readoptions_t *ropts;         /* point reads */
    rocksdb_writeoptions_t *wopts;        /* WAL on, no fsync */
    rocksdb_writeoptions_t *wopts_sync;   /* WAL on, fsync */
    rocksdb_column_family_handle_t **cfh; /* handles of every opened CF; the
                                             caller's cf i is cfh[i] */
    size_t ncfh;                          /* entries in cfh */
    size_t ncf;                           /* the caller's column families */
    atomic_int write_fault;               /* db_fault_write countdown; 0: off */
};

struct db_batch {
    rocksdb_writebatch_t *wb;
    int logging; /* db_batch_log_start: every op is also appended to log */
    int log_oom; /* an append to log failed: the log is incomplete */
    int refused; /* holds a range deletion the hinted family cannot take */
    buf log;     /* the ops in db_batch_replay's format */
};

/* Op codes of the batch log (db_batch_log). */
enum { LOG_PUT = 'P', LOG_DELETE = 'D', LOG_DELETE_RANGE = 'R' };

struct db_iter {
    rocksdb_iterator_t *it;    /* destroyed first */
    rocksdb_readoptions_t *ro; /* holds pointers into lower/upper */
    char *lower;               /* owned copy of the lower bound, or NULL */
    char *upper;               /* owned copy of the upper bound, or NULL */
};

/* Copies RocksDB's error text e into err, frees e and returns LAPSE_EIO. */
int db_rerr(char *e, const char *what, char *err, size_t errlen);
/* Copies msg into err (when err has room). */
void db_set_err(char *err, size_t errlen, const char *msg);
/* The handle of the caller's column family cf, or NULL when out of range. */
rocksdb_column_family_handle_t *db_cf_handle(const db *d, int cf);

#endif
