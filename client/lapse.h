/*
 * lapse.h: liblapse, the client library of the Lapse key-value cluster.
 *
 * A client connects to the coordinator, fetches and caches the partition map,
 * and sends each item call straight to the node that owns the item's
 * partition. On WRONG_NODE it refreshes the map and retries; get, query,
 * scan, put, delete and update (conditional or not) are also retried with
 * backoff on timeouts and unreachable nodes until the call's timeout. A
 * put, delete or update carries a request id, the same on every attempt,
 * so a retried write takes effect once, across a failover too (the
 * primary answers a repeated attempt from its record of the call;
 * docs/replication.md, "Retried writes"). Batch writes are retried as they
 * are.
 *
 * Items are DynamoDB items: build them with lapse_item_* or parse DynamoDB
 * JSON with lapse_item_from_json.
 *
 * Thread-safety: one lapse_client may be shared by any number of threads.
 * A lapse_item, lapse_update or lapse_page belongs to one thread at a time.
 *
 * Errors: every call returns 0 or a code from lapse_err.h, and fills *err
 * (when err is non-NULL) with the code and a message.
 *
 * Ownership: lapse_*_new / *_out results are the caller's, freed with the
 * matching lapse_*_free; strings returned as char * are freed with
 * lapse_free. Inputs are borrowed for the duration of the call.
 */
#ifndef LAPSE_H
#define LAPSE_H

#include <stddef.h>
#include <stdint.h>

#include "lapse_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LAPSE_DEFAULT_COORDINATOR "tcp://127.0.0.1:7400,tcp://127.0.0.1:7410"
#define LAPSE_BATCH_MAX 1000    /* writes per BatchWrite request */
#define LAPSE_BATCH_GET_MAX 100 /* keys per BatchGet request, as DynamoDB's BatchGetItem */

typedef struct lapse_client lapse_client;
typedef struct lapse_item lapse_item;
typedef struct lapse_update lapse_update;
typedef struct lapse_page lapse_page;

typedef struct lapse_error {
    int code;          /* LAPSE_OK or a code from lapse_err.h */
    char message[512]; /* NUL-terminated detail */
} lapse_error;

/* ---- connection ---- */

/* Connects to the coordinator at url (NULL: $LAPSE_COORDINATOR, else
 * LAPSE_DEFAULT_COORDINATOR) and fetches the partition map. */
int lapse_connect(lapse_client **out, const char *url, lapse_error *err);
/* As lapse_connect, with the client's timeout (also bounding the connect
 * itself) set from the start; timeout_ms <= 0: the default. */
int lapse_connect_timeout(lapse_client **out, const char *url, int timeout_ms, lapse_error *err);
/* How lapse_connect_opts connects. */
typedef struct lapse_connect_options {
    int timeout_ms;          /* as lapse_connect_timeout's; <= 0: the default */
    const char *map_cache;   /* NULL or "": none. Else a file where the client keeps the
                                last partition map it fetched: while no coordinator answers,
                                a client (even a new one, reading the file) asks the nodes
                                named there for their map, so item calls go on. The lapse
                                CLI keeps one per coordinator URL under ~/.cache/lapse. */
    struct lapse_loop *loop; /* NULL, or a loop (lapse_loop_open) whose thread reads the
                                client's connections and runs the asynchronous calls'
                                callbacks; else each connection has a thread of its own */
} lapse_connect_options;
/* As lapse_connect, with options (opts NULL: the defaults). */
int lapse_connect_opts(lapse_client **out, const char *url, const lapse_connect_options *opts,
                       lapse_error *err);
void lapse_close(lapse_client *c); /* accepts NULL */

/* ---- one thread for the client's connections and your own descriptors ----
 * A program that serves sockets of its own while it calls Lapse (the DynamoDB
 * gateway: HTTP in, asynchronous calls out) can run both on one thread: it
 * opens a loop, connects with it (lapse_connect_options.loop), and watches
 * its own descriptors on it. The replies and its own events are then taken
 * on that thread, with no hand-off from a thread to another. Callbacks run
 * on the loop's thread and must not block; a watched descriptor is
 * level-triggered (read it until it would block). Close the clients that use
 * a loop, and unwatch every descriptor, before the loop. lapse_loop_unwatch,
 * lapse_loop_close and lapse_close of a client on the loop must not be
 * called on the loop's thread (they wait for it); nor may any blocking call
 * of a client on the loop (it would wait for its own reply). */
typedef struct lapse_loop lapse_loop;
int lapse_loop_open(lapse_loop **out, lapse_error *err);
/* Runs fn(arg) on the loop's thread whenever fd is readable (or failed). */
int lapse_loop_watch(lapse_loop *l, int fd, void (*fn)(void *arg), void *arg, lapse_error *err);
/* Stops watching fd; on return no callback of its watch runs or will. */
void lapse_loop_unwatch(lapse_loop *l, int fd);
/* 1 when called on the loop's thread (in one of its callbacks), else 0. */
int lapse_loop_on_thread(const lapse_loop *l);
void lapse_loop_close(lapse_loop *l); /* accepts NULL */

/* Per-call timeout including retries (default 5000 ms). */
void lapse_set_timeout_ms(lapse_client *c, int timeout_ms);
/* Token sent with admin calls (create/delete table, TTL changes). Copied;
 * NULL clears it. Without a call to this, lapse_connect takes the token from
 * $LAPSE_ADMIN_TOKEN when that is set and non-empty. */
void lapse_set_admin_token(lapse_client *c, const char *token);
/* The client-wide default for hiding expired items (docs/ttl.md): with on
 * non-zero, lapse_get and lapse_batch_get ask the node to leave out items
 * whose TTL has passed but that are not deleted yet, and lapse_query and
 * lapse_scan do so whatever their opts say. Off by default (like DynamoDB,
 * expired items still show until deleted), unless the table was created
 * with hide_expired. */
void lapse_set_hide_expired(lapse_client *c, int on);
/* Fetches the partition map from a coordinator now (calls otherwise refresh
 * it only when a node or the cache says it is stale), so that tables
 * created, deleted or re-created since are seen. Returns 0 or a transport
 * error. */
int lapse_refresh_map(lapse_client *c, lapse_error *err);
void lapse_free(void *p);

/* ---- items ---- */

lapse_item *lapse_item_new(void); /* NULL on OOM */
void lapse_item_free(lapse_item *it);
lapse_item *lapse_item_dup(const lapse_item *it);
/* Set an attribute (replacing any value of that name). */
int lapse_item_set_s(lapse_item *it, const char *name, const char *value);
int lapse_item_set_n(lapse_item *it, const char *name, const char *number_text);
int lapse_item_set_n_i64(lapse_item *it, const char *name, int64_t value);
int lapse_item_set_b(lapse_item *it, const char *name, const void *p, size_t len);
int lapse_item_set_bool(lapse_item *it, const char *name, int value);
int lapse_item_set_null(lapse_item *it, const char *name);
/* Any typed value as DynamoDB JSON, e.g. {"L":[{"S":"a"}]}. */
int lapse_item_set_json(lapse_item *it, const char *name, const char *value_json, lapse_error *err);
int lapse_item_remove(lapse_item *it, const char *name);
/* Parses a whole item from DynamoDB JSON. */
int lapse_item_from_json(lapse_item **out, const char *json, lapse_error *err);
/* Formats as DynamoDB JSON; NULL on OOM. Free with lapse_free. */
char *lapse_item_to_json(const lapse_item *it);
/* The attribute as DynamoDB JSON, or NULL when absent. Free with lapse_free. */
char *lapse_item_get_json(const lapse_item *it, const char *name);
/* The S or N text of an attribute, borrowed until it changes; NULL when
 * absent or of another type. */
const char *lapse_item_get_s(const lapse_item *it, const char *name);
const char *lapse_item_get_n(const lapse_item *it, const char *name);
size_t lapse_item_count(const lapse_item *it);
/* The name of attribute i (0 <= i < lapse_item_count), borrowed until the
 * item changes; NULL when out of range. */
const char *lapse_item_name(const lapse_item *it, size_t i);
int lapse_item_equal(const lapse_item *a, const lapse_item *b);

/* ---- tables ---- */

/* What a secondary index entry carries besides its keys. */
typedef enum lapse_projection {
    LAPSE_PROJECT_ALL = 0, /* the whole item */
    LAPSE_PROJECT_KEYS = 1 /* the table's and the index's keys and the TTL attribute */
} lapse_projection;

/* A secondary index, declared with its table and never changed
 * (docs/replication.md). A local secondary index (LSI) keeps the table's
 * partition key and has its own sort key; a global secondary index (GSI) has
 * its own partition key, an optional sort key and its own partitions. */
typedef struct lapse_index_def {
    const char *name;          /* 3-255 of [A-Za-z0-9_.-], unique among the table's indexes */
    const char *partition_key; /* GSI: required; LSI: NULL (the table's) */
    char partition_key_type;   /* 'S', 'N' or 'B' */
    const char *sort_key;      /* LSI: required; GSI: NULL for none */
    char sort_key_type;
    lapse_projection projection;
    unsigned partitions; /* GSI: a power of two, 0: the table's; LSI: 0 */
} lapse_index_def;

/* A new table. Fields after hide_expired were added with indexes and
 * streams; a zero-initialized (or designated-initializer) definition gets
 * none, so existing callers compile unchanged. */
typedef struct lapse_table_def {
    const char *name;
    const char *partition_key; /* attribute name */
    char partition_key_type;   /* 'S', 'N' or 'B' */
    const char *sort_key;      /* NULL: none */
    char sort_key_type;
    unsigned partitions;        /* power of two; 0: 64 */
    int hide_expired;           /* non-zero: reads hide expired items by default */
    const lapse_index_def *lsi; /* nlsi LSIs (at most 5; the table needs a sort key) */
    size_t nlsi;
    const lapse_index_def *gsi; /* ngsi GSIs (at most 20) */
    size_t ngsi;
    int stream;                      /* non-zero: a change stream, one shard per partition */
    unsigned stream_retention_hours; /* with stream: 1 to 8760; 0: 24 */
    int stream_exclude_ttl_deletes;  /* with stream: TTL deletes stay out of it */
    unsigned replication; /* copies of each partition, 1 to 3 (at most the UP nodes); 0: 1 */
    int stream_view;      /* with stream: a lapse_stream_view (0: both images) */
} lapse_table_def;

int lapse_create_table(lapse_client *c, const lapse_table_def *def, lapse_error *err);
/* As lapse_create_table; *json_out (when json_out is non-NULL) receives the
 * new table's description, as lapse_describe_table's. */
int lapse_create_table_json(lapse_client *c, const lapse_table_def *def, char **json_out,
                            lapse_error *err);
int lapse_delete_table(lapse_client *c, const char *table, lapse_error *err);
/* JSON descriptions (free with lapse_free). describe-table's carries
 * "HideExpired" and the TTL config as "TimeToLive":{"Enabled",
 * "AttributeName" (absent when never set),"OffsetSeconds",
 * "IgnoreOlderThanYears","Paused","ConfigVersion"}; the indexes, when the
 * table has any, as "LocalSecondaryIndexes":[{"IndexName","IndexId",
 * "KeySchema","Projection":{"ProjectionType":"ALL"|"KEYS_ONLY"}}] and
 * "GlobalSecondaryIndexes":[{...,"Partitions","PartitionsPerNode"}]; and
 * "StreamSpecification":{"StreamEnabled"} plus, with a stream,
 * "StreamViewType" (lapse_stream_view_name),"TtlDeletes","RetentionHours" and
 * "StreamShards":[{"Partition","NodeId","NodeIds"}] (the copies of each shard, NodeId the first,
 * which readers try first). Create-table fails with LAPSE_EINVAL and the coordinator's reason for a
 * bad index or stream declaration. */
int lapse_describe_table(lapse_client *c, const char *table, char **json_out, lapse_error *err);
int lapse_list_tables(lapse_client *c, char **json_out, lapse_error *err);
int lapse_cluster_status(lapse_client *c, char **json_out, lapse_error *err);
/* Marks node node_id draining (stop 0) or no longer (stop 1): the coordinator
 * leader moves the copies it holds of tables' base partitions (single-copy
 * tables' too), GSI partitions and stream shards to other nodes, a few at
 * a time, and places nothing new on it (docs/replication.md, "Draining a
 * node"). Returns at once with {"NodeId","Draining","BaseCopiesLeft",
 * "DerivedCopiesLeft","Moves","OtherCopies","PartitionMapVersion"}: call
 * again to follow the drain; it is done when BaseCopiesLeft and
 * DerivedCopiesLeft are 0. OtherCopies counts single-copy tables'
 * partitions on the node while it is down: they wait for it.
 * LAPSE_ENOTFOUND: no such node; LAPSE_EUNAVAILABLE: too few other nodes
 * for the tables' copies; LAPSE_ESTATE: the coordinators do not run on etcd
 * (only there does the leader move copies). An admin call: sends the
 * admin token. */
int lapse_node_drain(lapse_client *c, uint32_t node_id, int stop, char **json_out,
                     lapse_error *err);
/* lapse_node_remove's flags. */
#define LAPSE_REMOVE_LOSE_DATA 1u /* remove even if copies are lost with the node */

/* Removes dead node node_id (docs/replication.md, "Removing a dead
 * node"): the coordinator leader makes each copy it held of replicated
 * tables' base partitions, GSI partitions and stream shards anew on the
 * other nodes from the surviving copies, then drops it from its lists; the
 * node is refused if it comes back. Returns at once with
 * {"NodeId","Removed":true,"BaseCopiesLeft","DerivedCopiesLeft","Moves",
 * "OtherCopies","LostCopies","PartitionMapVersion"}: call again to follow
 * it; done when BaseCopiesLeft and DerivedCopiesLeft are 0. LostCopies
 * counts the copies lost with it: those of which it held the only copy
 * (one-copy tables), and the GSI and stream copies of a table that lost a
 * partition so, which no longer move. LAPSE_ENOTFOUND: no such node;
 * LAPSE_ESTATE: the coordinators do not run on etcd, the node is UP (drain
 * it instead), it holds the only copy known to have some set's
 * acknowledged writes, or, without LAPSE_REMOVE_LOSE_DATA in flags, the
 * only copy of a one-copy table's partition, GSI partition or stream
 * shard; LAPSE_EUNAVAILABLE: too few UP nodes left for the tables' copies.
 * An admin call: sends the admin token. */
int lapse_node_remove(lapse_client *c, uint32_t node_id, unsigned flags, char **json_out,
                      lapse_error *err);
/* The rebalancer's plan (docs/replication.md, "Rebalancing"): the moves of
 * base copies of replicated tables that would bring every node within one
 * of the others or, once they are and the coordinators balance primaries
 * (--balance-primaries, on by default), the handovers of primaryships that would bring
 * every node's count of primaries within one of the others, as
 * {"Moves":[{"Kind":"move"|"handover","Table","Partition","From","To"}],
 * "Moving":N,"PartitionMapVersion"}. The coordinator leader carries them
 * out on its own, a few at a time, while every node is UP and none drains;
 * an empty list means balanced. */
int lapse_rebalance_plan(lapse_client *c, char **json_out, lapse_error *err);

/* ---- item calls ---- */

typedef enum lapse_cond_kind {
    LAPSE_COND_NONE = 0,
    LAPSE_COND_NOT_EXISTS = 1, /* attribute_not_exists(attribute) */
    LAPSE_COND_EXISTS = 2,     /* attribute_exists(attribute) */
    LAPSE_COND_EQUALS = 3,     /* attribute = value_json */
    /* The whole item is exactly value_json, an item in DynamoDB JSON
     * (attribute unused): the guard of a read-modify-write, which holds only
     * when nothing changed the item since it was read. */
    LAPSE_COND_ITEM_EQUALS = 4
} lapse_cond_kind;

typedef struct lapse_condition {
    lapse_cond_kind kind;
    const char *attribute;
    const char *value_json; /* LAPSE_COND_EQUALS: a typed value, {"N":"5"};
                               LAPSE_COND_ITEM_EQUALS: an item, {"pk":{"S":"a"},...} */
} lapse_condition;

/* Checks item against table's schema (key attributes present with their
 * types, sizes) without sending it; with key_only, that it is exactly a key.
 * Returns 0, LAPSE_EINVAL, LAPSE_ETOOBIG or LAPSE_ENOTFOUND (no table). */
int lapse_check_item(lapse_client *c, const char *table, const lapse_item *item, int key_only,
                     lapse_error *err);

/* cond may be NULL. A false condition returns LAPSE_ECONDITION. */
int lapse_put(lapse_client *c, const char *table, const lapse_item *item,
              const lapse_condition *cond, lapse_error *err);
/* *out is the item, or NULL when there is none (not an error). The read is
 * strongly consistent: the partition's primary answers. */
int lapse_get(lapse_client *c, const char *table, const lapse_item *key, lapse_item **out,
              lapse_error *err);
/* How a read is served. Zero-initialized: as lapse_get. */
typedef struct lapse_read_opts {
    int hide_expired; /* non-zero: leave out expired items (lapse_set_hide_expired) */
    /* Non-zero: any in-sync copy of the partition may answer (DynamoDB's
     * ConsistentRead=false), the client taking them in turn, which spreads
     * reads over the copies (docs/replication.md, "Reads"). Every write
     * acknowledged before the read started is on every in-sync copy, so a
     * copy that stays in sync shows it; one just taken out of the set may
     * answer from an older state until the client's map says so, and a
     * write not yet acknowledged may show. A copy that cannot answer sends
     * the call on to the primary. */
    int eventually_consistent;
} lapse_read_opts;
/* As lapse_get, with opts (NULL: as lapse_get). */
int lapse_get_opts(lapse_client *c, const char *table, const lapse_item *key,
                   const lapse_read_opts *opts, lapse_item **out, lapse_error *err);
int lapse_delete(lapse_client *c, const char *table, const lapse_item *key,
                 const lapse_condition *cond, lapse_error *err);

/* ---- asynchronous get, put and delete ----
 *
 * For servers that must not park a thread per call (the DynamoDB gateway):
 * the call is sent and the function returns; done runs once the node has
 * answered, on one of liblapse's I/O threads (or, rarely, on a thread of
 * this client finishing other calls), so it must not block: hand blocking
 * work to a thread of your own. An asynchronous call makes ONE attempt at
 * the node the client's map names: where lapse_get/lapse_put would retry (a
 * failover's WRONG_NODE, a time-out, a node down: lapse_retryable), it
 * reports the failure, and the caller retries with the blocking call, which
 * fetches the map again first. Calls that share a node share frames with the
 * client's blocking calls (docs/wire-protocol.md, "Coalesced calls").
 *
 * Each returns 0 when the call was sent: done is then called exactly once,
 * perhaps before the function returns. Any other return means it was not
 * sent (err says why; done is never called); the blocking call may still
 * succeed, e.g. after a map refresh (LAPSE_EWRONGNODE), or for a table the
 * client's map does not hold yet (LAPSE_ENOTFOUND: an asynchronous call
 * never fetches the map). Every call's done must have returned before
 * lapse_close is called. */

/* status and err as lapse_get_opts's; item the callee's to free (NULL when
 * there is none); err is borrowed for the call. */
typedef void (*lapse_get_done)(void *arg, int status, lapse_item *item, const lapse_error *err);
/* status and err as lapse_put's. */
typedef void (*lapse_done)(void *arg, int status, const lapse_error *err);
/* As lapse_get_opts (opts NULL: as lapse_get). */
int lapse_get_async(lapse_client *c, const char *table, const lapse_item *key,
                    const lapse_read_opts *opts, lapse_get_done done, void *arg, lapse_error *err);
/* As lapse_put without a condition (a conditional write is blocking only:
 * its retry must carry the same request id). */
int lapse_put_async(lapse_client *c, const char *table, const lapse_item *item, lapse_done done,
                    void *arg, lapse_error *err);
/* As lapse_delete without a condition. */
int lapse_delete_async(lapse_client *c, const char *table, const lapse_item *key, lapse_done done,
                       void *arg, lapse_error *err);
/* 1 when an asynchronous call's status is one its blocking form retries. */
int lapse_retryable(int status);

lapse_update *lapse_update_new(void);
void lapse_update_free(lapse_update *u);
int lapse_update_set(lapse_update *u, const char *name, const char *value_json, lapse_error *err);
int lapse_update_remove(lapse_update *u, const char *name);
/* new_out (may be NULL) receives the item after the update. */
int lapse_update_item(lapse_client *c, const char *table, const lapse_item *key,
                      const lapse_update *u, const lapse_condition *cond, lapse_item **new_out,
                      lapse_error *err);

/* Puts and deletes, any number; sent per owning node in batches of up to
 * LAPSE_BATCH_MAX, with the requests to all nodes in flight at once. Each
 * partition's share is applied atomically; on error some batches may have
 * been applied. */
int lapse_batch_write(lapse_client *c, const char *table, lapse_item *const *puts, size_t nputs,
                      lapse_item *const *delete_keys, size_t ndeletes, lapse_error *err);

/* Reads any number of keys: out[i] receives the item with keys[i] (caller
 * frees with lapse_item_free) or NULL when there is none. Keys are grouped
 * by owning node into requests of up to LAPSE_BATCH_GET_MAX keys, and the
 * requests to all nodes are in flight at once. On error every out[i] is
 * NULL. */
int lapse_batch_get(lapse_client *c, const char *table, lapse_item *const *keys, size_t n,
                    lapse_item **out, lapse_error *err);
/* As lapse_batch_get, with opts (NULL: as lapse_batch_get). */
int lapse_batch_get_opts(lapse_client *c, const char *table, lapse_item *const *keys, size_t n,
                         const lapse_read_opts *opts, lapse_item **out, lapse_error *err);

/* ---- query and scan ---- */

typedef enum lapse_sk_op {
    LAPSE_SK_NONE = 0,
    LAPSE_SK_EQ,
    LAPSE_SK_LT,
    LAPSE_SK_LE,
    LAPSE_SK_GT,
    LAPSE_SK_GE,
    LAPSE_SK_BETWEEN,
    LAPSE_SK_BEGINS_WITH
} lapse_sk_op;

typedef struct lapse_query_opts {
    const char *partition_key_json; /* the typed value, {"S":"user1"} */
    lapse_sk_op sk_op;
    const char *sk_json;  /* typed value for sk_op */
    const char *sk2_json; /* BETWEEN's upper bound */
    unsigned limit;       /* 0: no limit (a page still stops at 1 MiB) */
    int reverse;
    const lapse_item *exclusive_start_key; /* a previous page's last key */
    const char *partition_key_name;        /* optional: checked against the schema */
    int hide_expired;          /* non-zero: leave out expired items (lapse_set_hide_expired) */
    int eventually_consistent; /* non-zero: as lapse_read_opts' (base and LSI queries;
                                  a GSI query is eventually consistent anyway) */
} lapse_query_opts;

typedef struct lapse_scan_opts {
    unsigned limit;                        /* 0: no limit */
    unsigned segment, total_segments;      /* parallel scan; 0, 0 = whole table */
    const lapse_item *exclusive_start_key; /* a previous page's last key */
    int hide_expired;          /* non-zero: leave out expired items (lapse_set_hide_expired) */
    int eventually_consistent; /* non-zero: as lapse_read_opts' */
} lapse_scan_opts;

/* One page. Continue with exclusive_start_key = lapse_page_last_key(page)
 * until it returns NULL. */
int lapse_query(lapse_client *c, const char *table, const lapse_query_opts *opts, lapse_page **out,
                lapse_error *err);
int lapse_scan(lapse_client *c, const char *table, const lapse_scan_opts *opts, lapse_page **out,
               lapse_error *err);
/* A table's size (DynamoDB's ItemCount and TableSizeBytes). */
typedef struct lapse_table_size_info {
    uint64_t items;
    uint64_t bytes; /* the items' encoded values, keys included */
    int estimated;  /* some partition was too large to count: scaled from RocksDB's estimate */
} lapse_table_size_info;
/* Asks every primary of table's partitions for their items and bytes
 * (TableStats: each walks at most 10,000 items of a partition, and scales
 * the rest from RocksDB's size of the partition's files) and sums them into
 * *out. A cost of up to 10,000 item reads per partition: callers cache it
 * (the DynamoDB gateway caches lapse_table_sizes for DDB_SIZE_CACHE_MS). Returns 0,
 * LAPSE_ENOTFOUND, LAPSE_EINVAL or a transport error; *out is zero then. */
int lapse_table_size(lapse_client *c, const char *table, lapse_table_size_info *out,
                     lapse_error *err);
/* One secondary index's size (DynamoDB's index ItemCount and
 * IndexSizeBytes). */
typedef struct lapse_index_size_info {
    char name[256];             /* the index's */
    int global;                 /* 1: a GSI; 0: an LSI */
    lapse_table_size_info size; /* its entries; an LSI entry holds the whole item, a GSI
                                   entry the projected one */
} lapse_index_size_info;
/* As lapse_table_size, and the size of each of table's indexes: *indexes
 * (caller frees with lapse_free) receives *n entries, the LSIs then the
 * GSIs in the order the table was created with. An LSI is sized by the
 * primaries of the base partitions beside their items (one more walk of at
 * most 10,000 entries per partition and LSI), a GSI by one copy of each of
 * its partitions (a walk each). Returns as lapse_table_size; on error
 * *indexes is NULL and *n 0. */
int lapse_table_sizes(lapse_client *c, const char *table, lapse_table_size_info *out,
                      lapse_index_size_info **indexes, size_t *n, lapse_error *err);
/* The node owning each of table's partitions in the client's cached map
 * (fetched once when the table is unknown): *owners (caller frees with
 * lapse_free) receives *n node ids, one per partition in partition order,
 * so a scan can go partition by partition (lapse_scan_opts with segment
 * p of total_segments *n reads exactly partition p). Returns 0,
 * LAPSE_ENOTFOUND, LAPSE_EINVAL or LAPSE_ENOMEM; on error *owners is NULL
 * and *n 0. */
int lapse_partition_owners(lapse_client *c, const char *table, uint32_t **owners, size_t *n,
                           lapse_error *err);
/* A query of one of table's secondary indexes (docs/replication.md): index
 * names an LSI or a GSI (NULL or "": the table itself, as lapse_query).
 * opts is as for lapse_query, on the index's keys: partition_key_json is the
 * value of the index's partition key (an LSI's is the table's),
 * partition_key_name is checked against it, and the sort key condition is
 * on the index's sort key. Items come in index sort key order, then table
 * key order; a page's last key carries the table's and the index's keys and
 * is passed back as exclusive_start_key. An LSI query is strongly
 * consistent, like a base query. A GSI query is sent to the first copy of
 * the GSI partition of the value that the map holds UP (the next one after
 * a copy fails to answer; a table's GSI partitions have as many copies as
 * the table) and is eventually consistent: a write shows there shortly
 * after it is acknowledged. A keys-only GSI returns the
 * table's keys, the index's keys and the TTL attribute; hide_expired works
 * on either kind. Returns as lapse_query, plus LAPSE_ENOTFOUND for an index
 * table does not have. */
int lapse_query_index(lapse_client *c, const char *table, const char *index,
                      const lapse_query_opts *opts, lapse_page **out, lapse_error *err);
/* The key attribute names of table (index NULL or "") or of one of its
 * indexes, from the client's cached map (fetched once when the table is
 * unknown; no coordinator call otherwise): the partition key's name into
 * pk and the sort key's into sk ("" when there is none; an LSI's partition
 * key is the table's). pk and sk hold LAPSE_KEY_NAME_MAX + 1 bytes each.
 * *is_gsi (may be NULL) is 1 when index names a GSI, else 0. Returns 0, or
 * LAPSE_ENOTFOUND (no such table or index) with pk and sk "". */
#define LAPSE_KEY_NAME_MAX 255
int lapse_key_schema(lapse_client *c, const char *table, const char *index, char *pk, char *sk,
                     int *is_gsi, lapse_error *err);
/* One secondary index of a table as the client's cached map has it (no
 * coordinator call once the table is known, like lapse_key_schema): the
 * table's key names, the index's key names and types (an LSI's partition
 * key is the table's; sk "" when there is none), whether it is a GSI, its
 * projection, and the table's creation time (CreatedAtMs; 0 for tables
 * made before it was kept). */
typedef struct lapse_index_info {
    char table_pk[LAPSE_KEY_NAME_MAX + 1], table_sk[LAPSE_KEY_NAME_MAX + 1];
    char pk[LAPSE_KEY_NAME_MAX + 1], sk[LAPSE_KEY_NAME_MAX + 1];
    char pk_type, sk_type; /* 'S', 'N' or 'B'; sk_type 0 without sk */
    int is_gsi;
    lapse_projection projection;
    int64_t table_created_ms;
} lapse_index_info;
/* Fills *out for index of table. Returns 0, LAPSE_EINVAL (NULL argument)
 * or LAPSE_ENOTFOUND (no such table or index); *out is zeroed on error. */
int lapse_index_describe(lapse_client *c, const char *table, const char *index,
                         lapse_index_info *out, lapse_error *err);
size_t lapse_page_count(const lapse_page *p);
const lapse_item *lapse_page_item(const lapse_page *p, size_t i); /* borrowed */
const lapse_item *lapse_page_last_key(const lapse_page *p);       /* NULL: no more */
void lapse_page_free(lapse_page *p);

/* ---- the change stream (docs/replication.md) ---- */

/*
 * A table with a stream records every change of an item (put, update,
 * delete, batch write, TTL delete) as one record in the shard of the item's
 * base partition, numbered 1, 2, ... without gaps per shard (a stream
 * turned on again by lapse_update_stream: from its first_sequence), kept
 * for the table's retention. Each shard lives on one node (usually not the
 * partition's owner) and fills shortly after the write is acknowledged.
 */

/* What a record shows of the item (DynamoDB's StreamViewType), chosen at
 * create-table. Reads leave out the images the view does not show. */
typedef enum lapse_stream_view {
    LAPSE_STREAM_NEW_AND_OLD_IMAGES = 0,
    LAPSE_STREAM_KEYS_ONLY = 1,
    LAPSE_STREAM_NEW_IMAGE = 2,
    LAPSE_STREAM_OLD_IMAGE = 3
} lapse_stream_view;

/* The view's DynamoDB name ("NEW_AND_OLD_IMAGES", ...), or NULL when v is
 * none. */
const char *lapse_stream_view_name(int v);
/* The view named name, or -1 when it names none. */
int lapse_stream_view_parse(const char *name);

typedef enum lapse_stream_event {
    LAPSE_STREAM_INSERT = 0, /* a new item: new image only */
    LAPSE_STREAM_MODIFY = 1, /* an item replaced or updated: both images */
    LAPSE_STREAM_REMOVE = 2  /* an item deleted: old image only */
} lapse_stream_event;

/* One stream record. Pointers are borrowed from the lapse_stream_batch it
 * came from, valid until lapse_stream_batch_free. */
typedef struct lapse_stream_record {
    uint32_t shard;
    uint64_t sequence_number; /* 1.., gapless within the shard */
    lapse_stream_event event;
    int64_t approximate_creation_ms; /* commit wall-clock time, epoch ms */
    const lapse_item *keys;          /* the item's key attributes; never NULL */
    const lapse_item *old_image;     /* NULL: none (INSERT, or a REMOVE of an undecodable item) */
    const lapse_item *new_image;     /* NULL: none (REMOVE) */
    uint64_t size_bytes;
    int ttl_delete;            /* non-zero: deleted by TTL (principal lapse.ttl) */
    const char *ttl_attribute; /* TTL deletes: the TTL attribute; otherwise "" */
    int64_t ttl_expires_at_ms; /* TTL deletes: the item's due instant, epoch ms */
    int64_t ttl_deleted_at_ms; /* TTL deletes: when it was deleted, epoch ms */
    lapse_stream_view view;    /* the table's: old_image / new_image are NULL where it hides them */
} lapse_stream_record;

/* Where one shard lives: shard = the base partition. */
typedef struct lapse_stream_shard {
    uint32_t shard;
    uint32_t node_id;  /* the host, from the cached partition map */
    char address[256]; /* its RPC URL */
} lapse_stream_shard;

/* The shards of table's stream, in shard order, from the cached partition
 * map (refreshed once when the table or a host is unknown). *out (caller
 * frees with lapse_free) receives *n entries, one per base partition.
 * Returns 0, LAPSE_ENOTFOUND, LAPSE_EINVAL (the table has no stream) or
 * LAPSE_ENOMEM; on error *out is NULL and *n 0. */
int lapse_stream_shards(lapse_client *c, const char *table, lapse_stream_shard **out, size_t *n,
                        lapse_error *err);

/* What identifies a table's stream, from the cached partition map. */
typedef struct lapse_stream_info {
    uint32_t table_id;      /* never reused: a re-created table has another */
    int64_t created_ms;     /* the table's creation, epoch ms (0: an older table) */
    lapse_stream_view view; /* what its records show */
    uint32_t shards;        /* one per base partition: 0 .. shards-1 */
    unsigned retention_hours;
    /* 0: the stream CreateTable made; then one more each time
     * lapse_update_stream turns it on again (a new stream: its records are
     * numbered from first_sequence, readers see no earlier generation's) */
    uint32_t generation;
    uint64_t first_sequence; /* the first sequence number of this generation (1 for 0) */
    int64_t since_ms;        /* when this generation was turned on, epoch ms (created_ms for 0) */
} lapse_stream_info;

/* Turns table's stream on (enable non-zero: a new stream, showing view)
 * or off (enable 0: its records are no longer read; view ignored) on the
 * coordinator, then refreshes the cached map. A stream turned on again is a
 * new one (lapse_stream_info's generation), whose readers never see the
 * records of an earlier one. Returns 0, LAPSE_ENOTFOUND, LAPSE_EEXISTS (it
 * is on), LAPSE_ESTATE (it is off), LAPSE_EINVAL (a bad view) or a
 * transport error. Not retried: a lost reply leaves the change made or not
 * (lapse_stream_info_get tells). */
int lapse_update_stream(lapse_client *c, const char *table, int enable, lapse_stream_view view,
                        lapse_error *err);

/* table's stream as the cached map has it (fetched once when the table is
 * unknown; lapse_refresh_map first to see a re-created table). Returns 0,
 * LAPSE_ENOTFOUND, LAPSE_EINVAL (the table has no stream) or a transport
 * error. */
int lapse_stream_info_get(lapse_client *c, const char *table, lapse_stream_info *out,
                          lapse_error *err);

/* Records read from one shard. */
typedef struct lapse_stream_batch lapse_stream_batch;

/* One read of one shard. */
typedef struct lapse_stream_request {
    uint32_t shard;
    uint64_t after_seq; /* records with a greater sequence number; 0: from the oldest kept */
    unsigned limit;     /* at most this many records; 0: the node's default (1000) */
    unsigned wait_ms;   /* long poll: with none after after_seq, the host answers when
                           one arrives or after wait_ms (0: at once) */
    /* Non-zero: read only the stream of this generation
     * (lapse_stream_info.generation): once it was turned off (or another
     * turned on) the host answers LAPSE_ENOTFOUND, whatever this client's
     * map says. 0: whichever stream the table has. */
    int pin_generation;
    uint32_t generation;
} lapse_stream_request;

/* Reads one shard of table's stream from its host (retried like a read,
 * with the map refreshed on WRONG_NODE). *out (caller frees with
 * lapse_stream_batch_free) holds the records after req->after_seq in
 * sequence order (none when the wait passed first) and the shard's newest
 * and oldest kept sequence numbers. Returns 0, LAPSE_ENOTFOUND,
 * LAPSE_EINVAL (no stream, or shard out of range) or a transport error; on
 * error *out is NULL. */
int lapse_stream_read(lapse_client *c, const char *table, const lapse_stream_request *req,
                      lapse_stream_batch **out, lapse_error *err);
/* Reads n shards at once (all requests in flight together, so the call
 * takes about the longest of them): out[i] receives the batch of reqs[i].
 * Returns 0, or the first failure (the message names the shard), and then
 * every out[i] is NULL. */
int lapse_stream_read_many(lapse_client *c, const char *table, const lapse_stream_request *reqs,
                           size_t n, lapse_stream_batch **out, lapse_error *err);
size_t lapse_stream_batch_count(const lapse_stream_batch *b);
/* Record i (borrowed), or NULL when out of range. */
const lapse_stream_record *lapse_stream_batch_record(const lapse_stream_batch *b, size_t i);
/* The shard's newest sequence number on its host (0: none yet). */
uint64_t lapse_stream_batch_last_sequence(const lapse_stream_batch *b);
/* The shard's oldest kept sequence number (0: empty). Greater than the
 * request's after_seq + 1: records in between were trimmed (retention)
 * before they were read. */
uint64_t lapse_stream_batch_oldest_sequence(const lapse_stream_batch *b);
void lapse_stream_batch_free(lapse_stream_batch *b); /* accepts NULL */

/* r as one line of DynamoDB Streams JSON (free with lapse_free; NULL on
 * OOM), keys in this order:
 *
 *   {"eventID":"<shard>-<seq>","eventName":"INSERT"|"MODIFY"|"REMOVE",
 *    "eventSource":"lapse",
 *    "dynamodb":{"Keys":{..},"OldImage":{..},"NewImage":{..},
 *                "SequenceNumber":"<seq>","ApproximateCreationDateTime":<s>,
 *                "SizeBytes":<n>,"StreamViewType":"NEW_AND_OLD_IMAGES"},
 *    "userIdentity":{"type":"Service","principalId":"lapse.ttl"},
 *    "ttl":{"attribute":"<name>","expiresAt":<ms>,"deletedAt":<ms>},
 *    "shard":"<shard>"}
 *
 * Images are DynamoDB JSON and absent when the record has none.
 * ApproximateCreationDateTime is whole epoch seconds (DynamoDB's default
 * precision). userIdentity and ttl are present only for TTL deletes, as
 * DynamoDB marks them; ttl's times are epoch milliseconds. */
char *lapse_stream_record_to_json(const lapse_stream_record *r);

/* ---- time to live (docs/ttl.md) ---- */

/*
 * A table's TTL status, as the coordinator reports it:
 *
 *              ENABLE                 every holder applied it
 *   DISABLED ----------> ENABLING ---------------------------> ENABLED
 *      ^                 and finished the backfill              |
 *      |                                                        | DISABLE
 *      +---------------------- DISABLING <----------------------+
 *        every holder dropped the table's expiry index
 *
 * PAUSE and RESUME keep the status ENABLED and only stop or restart
 * deletion. Enabling an enabled table, disabling a disabled one, pausing or
 * resuming a table without TTL enabled, and changing the attribute while
 * enabled fail with LAPSE_ESTATE and the coordinator's reason.
 */
typedef enum lapse_ttl_action {
    LAPSE_TTL_ENABLE = 0,
    LAPSE_TTL_DISABLE = 1,
    LAPSE_TTL_PAUSE = 2,
    LAPSE_TTL_RESUME = 3
} lapse_ttl_action;

typedef struct lapse_ttl_spec {
    lapse_ttl_action action;
    const char *attribute;       /* ENABLE: the top-level N attribute of epoch seconds */
    int64_t offset_seconds;      /* ENABLE: >= 0; items expire at attribute + offset */
    int ignore_older_than_years; /* ENABLE: the guard; 0: 5 (DynamoDB's rule) */
} lapse_ttl_spec;

/* Changes table's TTL config (an admin call: the token is sent). On success
 * *json_out (when json_out is non-NULL; caller frees with lapse_free)
 * receives the new description as lapse_describe_ttl's. Returns 0,
 * LAPSE_EINVAL (bad spec: ENABLE without an attribute, a negative offset,
 * a negative guard), LAPSE_ENOTFOUND, LAPSE_EPERM (token missing or wrong),
 * LAPSE_ESTATE (see above) or a transport error. Not retried after a
 * timeout: the change may have been applied. On error *json_out is NULL. */
int lapse_update_ttl(lapse_client *c, const char *table, const lapse_ttl_spec *spec,
                     char **json_out, lapse_error *err);

/* table's TTL description as JSON in DynamoDB's shape plus propagation
 * (caller frees *json_out with lapse_free):
 *
 *   {"TimeToLiveDescription":{"TimeToLiveStatus":"ENABLED",
 *                             "AttributeName":"ExpirationTime"},
 *    "OffsetSeconds":0,"IgnoreOlderThanYears":5,"Paused":false,
 *    "Propagation":{"ConfigVersion":N,"Nodes":[{"NodeId":1,"Reported":true,
 *      "AppliedVersion":N,"BackfillDone":true,"BackfillItems":123,
 *      "PartitionsDone":21,"PartitionsTotal":21}]}}
 *
 * AttributeName is absent when no attribute was ever set. Nodes lists the
 * nodes holding the table's partitions; Reported false: the coordinator has
 * heard nothing from that node about this table yet. On error *json_out is
 * NULL. */
int lapse_describe_ttl(lapse_client *c, const char *table, char **json_out, lapse_error *err);

/* What a TTL rule would do to a table right now (lapse_ttl_preview). */
typedef struct lapse_ttl_preview_counts {
    uint64_t items;            /* items looked at */
    uint64_t due_now;          /* eligible and already expired */
    uint64_t due_within_hour;  /* eligible, expiring within the next hour */
    uint64_t due_within_day;   /* eligible, within the next day (after the hour) */
    uint64_t due_later;        /* eligible, later than a day */
    uint64_t missing;          /* ignored: no such attribute */
    uint64_t not_a_number;     /* ignored: not of type N */
    uint64_t older_than_guard; /* ignored: more than the guard before now */
    uint64_t out_of_range;     /* ignored: too large for epoch seconds */
} lapse_ttl_preview_counts;

/* A dry run of the rule (attribute, offset_seconds >= 0, guard_years; 0: 5)
 * over every item of table: each node holding the table's partitions counts
 * its own, all asked at once, and *out receives the sums. Deletes nothing and
 * takes no write lock, so it is safe on a live table; the rule need not be
 * the table's configured one. Returns 0, LAPSE_EINVAL, LAPSE_ENOTFOUND or
 * the failure of a node that did not answer (the message names it); on
 * error *out is all zero. */
int lapse_ttl_preview(lapse_client *c, const char *table, const char *attribute,
                      int64_t offset_seconds, int guard_years, lapse_ttl_preview_counts *out,
                      lapse_error *err);

#ifdef __cplusplus
}
#endif

#endif
