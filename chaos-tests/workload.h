/*
 * workload.h: the seeded client workload of a chaos run, and the single
 * calls it is made of (also used by the fault scenarios for their own keys).
 * Every call goes through liblapse and is recorded in the model with its
 * outcome (model.h).
 *
 * Thread-safety: wl_* calls on distinct keys may run in parallel; a key is
 * only ever written by one thread (its owner).
 *
 * Ownership of keys: in the workload tables (model tables 0 and 1), keys
 * [0, items) belong to thread idx % threads; in table 0 the
 * CHAOS_BURST_SLOTS ranges after them belong to the main thread (mass-expiry
 * bursts). The last wl_spare_keys() keys of both tables are a reserve:
 * mtable.spare_lo + j belongs to thread j % threads, which writes it only in
 * place of one of its keys that froze (model.h invariant 2), so the workload
 * keeps writing for the whole run however many calls fail. Scenario tables
 * belong to the main thread.
 *
 * Tables: every table has partition key Id (S) and WL_PARTITIONS
 * partitions. The indexed table (model table 0, chaos_ttl, mtable.indexed)
 * also has the sort key WL_SK (N, always 0: an LSI needs a sort key), the
 * LSI WL_LSI on "pay" (S), the GSI WL_GSI on "Grp" (S) with sort key "ver"
 * (N), projection all, WL_GSI_PARTITIONS partitions, and the stream with
 * TTL deletes. Items draw "Grp" from the WL_GROUPS values "g0".. or leave it
 * out, so the checker can query the GSI for every value there is.
 */
#ifndef LAPSE_CHAOS_WORKLOAD_H
#define LAPSE_CHAOS_WORKLOAD_H

#include <pthread.h>
#include <stdint.h>

#include "run.h"

#define WL_PARTITIONS 16
#define WL_SK "Sk"
#define WL_LSI "ByPay"
#define WL_GSI "ByGrp"
#define WL_GSI_PARTITIONS 8
#define WL_GROUPS 6

typedef enum wl_kind {
    WK_PUT,     /* put with a TTL of the given class */
    WK_DELETE,  /* user delete */
    WK_UPD_TTL, /* update setting "ver" and the TTL to the given class */
    WK_UPD_RM,  /* update setting "ver" and removing the TTL */
    WK_UPD_PAY, /* update setting "ver" and "pay", TTL untouched */
    WK_GET      /* read only */
} wl_kind;

/* The definition of model table t (name borrowed from t; the index
 * definitions are static). */
void wl_table_def(const mtable *t, lapse_table_def *d);
/* The key of key idx of t, and an item: ver, a payload, "Grp" = "g<grp>"
 * unless grp < 0 or grp >= WL_GROUPS, and the TTL attribute unless ttl_json
 * is "". Caller frees; a harness bug (bad JSON, OOM) aborts. */
lapse_item *wl_key(const mtable *t, int idx);
lapse_item *wl_item(const mtable *t, int idx, uint64_t ver, const char *ttl_json, int grp);
/* The base partition of the item with Id id (placement/hash.h). */
uint32_t wl_partition(const char *id);

/* One call on key idx of model table ti, recorded in the model. cls is a
 * ttl_class for WK_PUT and WK_UPD_TTL. Returns the call's status, or -1
 * when the key is frozen (nothing sent). */
int wl_call(run *r, lapse_client *c, int ti, int idx, wl_kind kind, int cls, uint64_t *rng);

/* Puts keys idx[0..n) of table ti with lapse_batch_write: with due_s > 0
 * every item's TTL is due_s, otherwise each draws a random class. Frozen
 * keys are skipped. Returns 0 or the first batch's error (those keys are
 * then uncertain). */
int wl_batch_put(run *r, lapse_client *c, int ti, const int *idx, int n, int64_t due_s,
                 uint64_t *rng);

/* A random TTL class for a put, weighted toward the interesting ones. */
int wl_random_class(uint64_t *rng);

/* Reserve keys per workload table (see above): the long profile fails
 * about 20 calls a second, each freezing a key. */
int wl_spare_keys(const chaos_opts *o);

/* Starts `n` workload threads on tables 0 and 1; they run until r->stop.
 * Returns 0 or an errno. */
int wl_start(run *r, pthread_t *threads, int n);
void wl_join(pthread_t *threads, int n);

#endif
