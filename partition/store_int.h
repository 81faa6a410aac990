/*
 * store_int.h: what store.c (point writes, batches, tables, metadata),
 * store_query.c (queries, scans, counts), expiry.c (the TTL expiry index)
 * and expiry_naive.c (the benchmark's naive scan) share. Not part of the store API: only those files and the module's own
 * tests (expiry_test.c, which reads the index directly) include it.
 */
#ifndef LAPSE_STORE_INT_H
#define LAPSE_STORE_INT_H

#include <pthread.h>
#include <stddef.h>

#include "../common/clock.h"
#include "../storage/db.h"
#include "keyset.h"
#include "store.h"

/* Column families by index. New kinds of data (the TTL expiry index, the
 * outbox) are appended here and to the name list in store.c; existing
 * stores gain them at the next open (db_open creates missing families). */
enum store_cf { CF_ITEMS = 0, CF_META = 1, CF_EXPIRY = 2, CF_COUNT };

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
    sweep_scratch *scratch_pool; /* expiry.c: idle sweep scratch, a list */
    int scratch_pooled;          /* entries in scratch_pool */
};

/* Writes a reason into err (when given) and returns code. */
int store_errf(int code, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

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

/* The index entry an item version calls for: *due_s is set and 1 returned
 * when ttl_eval(&t->ttl, it, now) is TTL_ELIGIBLE, else 0 (also for NULL). */
int store_ttl_due_s(const table_schema *t, const item *it, clock_wall now, int64_t *due_s);

/* Adds to b the range deletes of table_id's expiry index and backfill
 * progress, and forgets its undeletable items (expiry.c; store_drop_table and
 * expiry_drop_table share it). 0 or LAPSE_ENOMEM. */
int expiry_drop_into(store *st, db_batch *b, uint32_t table_id);
/* Frees the pooled sweep scratch (store_close). REQUIRES: no sweep runs. */
void expiry_scratch_release(store *st);
/* Compacts the ranges expiry_drop_into deleted (reclaims their space). */
void expiry_compact_table(store *st, uint32_t table_id);

#endif
