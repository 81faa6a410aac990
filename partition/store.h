/*
 * store.h: a node's item store: the partitions of every table that the node
 * holds, in one RocksDB (storage/db.h) with one column family per kind of
 * data. Testable with no network.
 *
 * Column families (docs/storage-format.md, docs/replication.md):
 *   items  (table id u32be, partition u32be, enc(pk), enc(sk)) -> item_encode
 *   meta   node-local metadata by name (node id, cached partition map, ...)
 *   expiry the TTL expiry index (expiry.h), kept in the same WriteBatch as
 *          the item change it derives from when the table's TTL is enabled
 *   lsi    local secondary index entries, in the item's WriteBatch too
 *   outbox change records for other nodes (outbox.h), in the item's batch
 *   repl   replication counters (outbox.h, apply.h)
 *   gsi    global secondary index entries applied from outboxes (apply.h)
 *   stream stream records of the shards this node hosts (stream.h)
 *
 * Thread-safety: all functions may be called from many threads at once.
 * Writes to one partition are serialized by a per-partition lock (striped:
 * STORE_LOCK_STRIPES mutexes indexed by table id and partition), held across
 * the read-check-write of conditional operations, so every write to a
 * partition is one RocksDB WriteBatch applied in a single total order. Reads
 * take no lock.
 *
 * Invariants:
 *  1. An item is stored under the key computed from its own key attributes
 *     and partition = hash_partition(pk).
 *  2. Every acknowledged write is in the WAL (survives kill -9).
 *  3. A store call that fails leaves the stored data unchanged.
 *  4. For a table with LSIs, an item has exactly one entry in each LSI whose
 *     sort key attribute it carries with the declared type (non-empty for S
 *     and B), holding the whole item; for a table with an outbox
 *     (schema_has_outbox), every change of an item made one outbox record.
 *     Both hold after every WriteBatch: they are written in the item's.
 *
 * The store does not check partition ownership; the node does that.
 */
#ifndef LAPSE_STORE_H
#define LAPSE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/item.h"
#include "../common/schema.h"

#define STORE_LOCK_STRIPES 1024
#define STORE_PAGE_MAX_BYTES (1024 * 1024) /* a query/scan page stops after 1 MiB */
#define STORE_BATCH_MAX 1000               /* writes in one store_batch_write */

typedef struct store store;

typedef enum store_cond_kind {
    STORE_COND_NONE = 0,
    STORE_COND_NOT_EXISTS = 1, /* attribute_not_exists(attr) */
    STORE_COND_EXISTS = 2,     /* attribute_exists(attr) */
    STORE_COND_EQUALS = 3,     /* attr = value */
    STORE_COND_ITEM_EQUALS = 4 /* the item is exactly value, an M (attr unused) */
} store_cond_kind;

/* A write condition, evaluated against the current item (absent item: no
 * attribute exists). Borrowed pointers. */
typedef struct store_cond {
    store_cond_kind kind;
    const char *attr;
    const attr_value *value; /* STORE_COND_EQUALS and STORE_COND_ITEM_EQUALS only */
} store_cond;

typedef enum store_sk_op {
    STORE_SK_NONE = 0,
    STORE_SK_EQ,
    STORE_SK_LT,
    STORE_SK_LE,
    STORE_SK_GT,
    STORE_SK_GE,
    STORE_SK_BETWEEN, /* v1 <= sk <= v2 */
    STORE_SK_BEGINS_WITH
} store_sk_op;

typedef struct store_sk_cond {
    store_sk_op op;
    const attr_value *v1; /* borrowed */
    const attr_value *v2; /* BETWEEN only */
} store_sk_cond;

/* SET name = value, or REMOVE name when value is NULL. */
typedef struct store_update_action {
    const char *name;
    const attr_value *value;
} store_update_action;

/* One write of a batch: a put of item, or a delete of the item with key. */
typedef struct store_write {
    const item *put;
    const item *delete_key;
} store_write;

/* A page of query or scan results. */
typedef struct store_page {
    item **items; /* owned array of owned items */
    size_t n;
    item *last_key; /* owned; NULL when the range is exhausted */
} store_page;

/* Opens the store in directory path (created if missing). Returns 0 or
 * LAPSE_EIO with a reason; on success close with store_close. */
int store_open(store **out, const char *path, char *err, size_t errlen);
void store_close(store *st); /* accepts NULL */

/* Puts it (replacing any item with the same key) if cond holds.
 * Returns 0, LAPSE_ECONDITION, LAPSE_EINVAL/ETOOBIG (schema check) or LAPSE_EIO.
 * If old_out is non-NULL it receives the replaced item or NULL (caller frees). */
int store_put(store *st, const table_schema *t, const item *it, const store_cond *cond,
              item **old_out, char *err, size_t errlen);
/* Reads the item with key (only key attributes allowed). *out is the item
 * (caller frees) or NULL. Returns 0, LAPSE_EINVAL, LAPSE_EIO or LAPSE_ECORRUPT. */
int store_get(store *st, const table_schema *t, const item *key, item **out, char *err,
              size_t errlen);
/* Reads n items by key with one RocksDB MultiGet. out[i] receives the item
 * with keys[i] (caller frees) or NULL. Every key is checked first: on error
 * (LAPSE_EINVAL naming the key's index, LAPSE_EIO, LAPSE_ECORRUPT) every
 * out[i] is NULL. REQUIRES: n <= STORE_BATCH_MAX. */
int store_get_many(store *st, const table_schema *t, const item *const *keys, size_t n, item **out,
                   char *err, size_t errlen);
/* Deletes the item with key if cond holds (deleting an absent item is not an
 * error). old_out as for store_put. */
int store_delete(store *st, const table_schema *t, const item *key, const store_cond *cond,
                 item **old_out, char *err, size_t errlen);
/* Applies actions to the item with key, creating it from the key when absent,
 * if cond holds. Key attributes cannot be SET or REMOVEd (LAPSE_EINVAL).
 * new_out, if non-NULL, receives the new item (caller frees). */
int store_update(store *st, const table_schema *t, const item *key,
                 const store_update_action *actions, size_t nactions, const store_cond *cond,
                 item **new_out, char *err, size_t errlen);
/* Retried writes (request.h): store_put, store_delete and store_update
 * with the call's request id rid (REQUEST_ID_BYTES; NULL: none, as the
 * plain calls without old_out). The
 * write's WriteBatch also records its outcome under rid, replicated with
 * it. A call whose rid names a record answers from it without applying
 * anything (an update's *new_out is the item the first attempt made), once
 * that earlier write is on every in-sync replica (its record is committed
 * again, behind it); its condition is not checked again. Nothing is
 * recorded when nothing is written: a failed condition, a delete of an
 * absent item. LAPSE_EINVAL when rid names a record of another kind of
 * write. */
int store_put_once(store *st, const table_schema *t, const item *it, const store_cond *cond,
                   const uint8_t *rid, char *err, size_t errlen);
int store_delete_once(store *st, const table_schema *t, const item *key, const store_cond *cond,
                      const uint8_t *rid, char *err, size_t errlen);
int store_update_once(store *st, const table_schema *t, const item *key,
                      const store_update_action *actions, size_t nactions, const store_cond *cond,
                      const uint8_t *rid, item **new_out, char *err, size_t errlen);
/* Applies up to STORE_BATCH_MAX puts and deletes, grouped by partition; each
 * partition's group is one atomic WriteBatch. Every write is validated before
 * anything is applied (LAPSE_EINVAL/LAPSE_ETOOBIG on the first bad one,
 * nothing applied; LAPSE_ETOOBIG for more than STORE_BATCH_MAX writes).
 * Two writes to one key: the later one in writes wins. On LAPSE_EIO the
 * groups of partitions written before the failure stay applied. */
int store_batch_write(store *st, const table_schema *t, const store_write *writes, size_t n,
                      char *err, size_t errlen);
/* store_batch_write with the call's request id rid (request.h; NULL: as
 * store_batch_write), one for all its partitions: each partition's group
 * also records a digest of every write it applied, replicated with them. A
 * retry applies only the writes whose digest its partition's record lacks
 * (no earlier attempt applied them), whatever requests the client grouped
 * them into; a group left with nothing to apply commits its record again,
 * so the call returns once the earlier writes are on every in-sync
 * replica. LAPSE_EINVAL when rid names a record of another kind of write. */
int store_batch_write_once(store *st, const table_schema *t, const store_write *writes, size_t n,
                           const uint8_t *rid, char *err, size_t errlen);

/* Items of partition key pk whose sort key satisfies sk (sk may be NULL),
 * ascending by sort key (descending when !forward), starting after
 * exclusive_start (a key item, may be NULL), at most limit items (0 = no
 * limit) and at most STORE_PAGE_MAX_BYTES. out->last_key is set when the page
 * stopped early (limit or size) with more items left in range, else NULL.
 * Caller frees with store_page_fini (also after an error: out is then empty).
 * Returns 0, LAPSE_EINVAL (wrong key types, begins_with on an N sort key,
 * BETWEEN with v1 > v2, a start key of another partition key, a sort-key
 * condition on a table without one), LAPSE_EIO or LAPSE_ECORRUPT. */
int store_query(store *st, const table_schema *t, const attr_value *pk, const store_sk_cond *sk,
                uint32_t limit, int forward, const item *exclusive_start, store_page *out,
                char *err, size_t errlen);
/* All items of one partition in key order, paged like store_query.
 * LAPSE_EINVAL when part >= t->partitions or exclusive_start hashes to
 * another partition. */
int store_scan(store *st, const table_schema *t, uint32_t part, uint32_t limit,
               const item *exclusive_start, store_page *out, char *err, size_t errlen);
void store_page_fini(store_page *p); /* accepts zeroed and NULL pages */

/* Query of LSI t->lsi[lsi]: the items of partition key pk whose LSI sort key
 * satisfies sk, in LSI sort key order (then table sort key), paged like
 * store_query. exclusive_start carries the table's keys and the LSI sort
 * key (the last_key of the previous page). Items without the LSI sort key
 * are not in the index. Returns as store_query, plus LAPSE_EINVAL for
 * lsi >= t->nlsi. */
int store_query_lsi(store *st, const table_schema *t, uint32_t lsi, const attr_value *pk,
                    const store_sk_cond *sk, uint32_t limit, int forward,
                    const item *exclusive_start, store_page *out, char *err, size_t errlen);
/* Query of GSI t->gsi[gsi] on this node: the entries of GSI partition key pk
 * (which must belong to GSI partition gsi_part, the partition the caller
 * checked it owns) whose GSI sort key satisfies sk, in GSI sort key order
 * (then table keys), paged like store_query. Each item is the projection the
 * entry holds; expired items are not hidden (the caller decides).
 * exclusive_start carries the table's keys and the GSI keys. Returns as
 * store_query, plus LAPSE_EINVAL for gsi >= t->ngsi or a pk of another GSI
 * partition. */
int store_query_gsi(store *st, const table_schema *t, uint32_t gsi, uint32_t gsi_part,
                    const attr_value *pk, const store_sk_cond *sk, uint32_t limit, int forward,
                    const item *exclusive_start, store_page *out, char *err, size_t errlen);

/* Deletes every item of table id and everything derived from them or
 * applied for the table (expiry index, LSI and GSI entries, outbox, stream
 * records, replication counters): range deletes. Idempotent. */
int store_drop_table(store *st, uint32_t table_id, char *err, size_t errlen);
/* The size of a partition's items: counted exactly by a walk of at most
 * max_items items, or past that budget estimated (estimated = 1). */
typedef struct store_size {
    uint64_t items;
    uint64_t bytes; /* the items' encoded values (every attribute, keys included) */
    int estimated;
} store_size;
/* Sizes partition part of table id into *out (DescribeTable's ItemCount and
 * TableSizeBytes). Walks at most max_items (>= 1) items of the partition,
 * summing their encoded sizes; when items remain, the bytes are RocksDB's
 * estimate of the partition's range in its files if larger than the walk's
 * (db_approx_size; recent writes still in memory count only as walked), and
 * the items the walk's count scaled by bytes per item walked. Returns 0,
 * LAPSE_EIO or LAPSE_ENOMEM (*out zero). */
int store_estimate(store *st, uint32_t table_id, uint32_t part, uint64_t max_items, store_size *out,
                   char *err, size_t errlen);
/* As store_estimate, of partition part's entries of LSI index_id (each
 * holds the whole item, so the bytes are those of the items in the index):
 * DescribeTable's ItemCount and IndexSizeBytes of an LSI. */
int store_estimate_lsi(store *st, uint32_t table_id, uint32_t part, uint32_t index_id,
                       uint64_t max_items, store_size *out, char *err, size_t errlen);
/* As store_estimate, of the entries this node holds of partition gsi_part of
 * GSI index_id (each the projected item). */
int store_estimate_gsi(store *st, uint32_t table_id, uint32_t index_id, uint32_t gsi_part,
                       uint64_t max_items, store_size *out, char *err, size_t errlen);
/* Counts the items of table id in partition part (tests, status). */
int store_count(store *st, uint32_t table_id, uint32_t part, uint64_t *out, char *err,
                size_t errlen);

/* Called after a write commits one or more new expiry index entries
 * (expiry.h) for partition part of table_id, with the earliest due instant
 * among them, so a sleeping TTL scanner can wake earlier. Runs on the writing
 * thread with no store lock held; it must be quick and must not call back
 * into the store. One hook per store (set before writes start; NULL clears). */
typedef void (*store_expiry_hook)(void *arg, uint32_t table_id, uint32_t part, int64_t due_ms);
void store_set_expiry_hook(store *st, store_expiry_hook fn, void *arg);

/* Node-local metadata, by name. store_meta_get clears val and sets *found. */
int store_meta_get(store *st, const char *name, buf *val, int *found, char *err, size_t errlen);
/* sync: 1 waits for the WAL to reach the disk (which also writes every
 * unsynced byte before it: after a bulk load, tens of MB), 0 survives kill -9
 * (the OS keeps the WAL) but not an OS crash. */
int store_meta_put(store *st, const char *name, const void *val, size_t len, int sync, char *err,
                   size_t errlen);

#endif
