/*
 * node_repl_testutil.h: the helpers of node_repl_test.c (node_repl_testutil.c): the
 * table it replicates (an LSI, a keys-only GSI and a stream), its nodes,
 * item calls routed by the map, and whole views of the table: the base
 * items (scan of every partition), the GSI entries (query of every GSI
 * partition key on the owner of its partition) and the stream (every shard
 * from its host, checked gapless). Builds on node_testutil.h (state nt) and
 * node_ttl_testutil.h (TTL calls, /metrics).
 *
 * Not thread-safe, except get_records (the long-poll test calls it from a
 * second thread).
 */
#ifndef LAPSE_NODE_REPL_TESTUTIL_H
#define LAPSE_NODE_REPL_TESTUTIL_H

#include "node_ttl_testutil.h"

#define RT "repl.items" /* pk S "pk", sk N "sk"; TTL attribute "exp" */
#define RT_PARTS 4
#define RT_LSI "by_lv" /* sort key N "lv", projection all */
#define RT_GSI "by_g"  /* pk S "g", sk N "gs", keys only, RT_GSI_PARTS partitions */
#define RT_GSI_PARTS 4
#define RT_G_VALUES 8 /* items carry g = "g0".."g7" (or none) */

/* An item of RT as the tests write it. */
typedef struct ritem {
    char pk[32];
    int sk;
    int lv;      /* the LSI sort key; < 0: absent */
    int g;       /* "g<g>"; < 0: absent (not in the GSI) */
    int gs;      /* the GSI sort key */
    int64_t exp; /* TTL, epoch seconds; 0: absent */
    char v[16];
} ritem;

/* One stream record, flattened. */
typedef struct stream_ev {
    uint32_t shard;
    uint64_t seq;
    int event;    /* Lapse__StreamRecord__EventName */
    char key[48]; /* "pk|sk" */
    int ttl;      /* a TTL delete */
    int64_t expires_ms, deleted_ms, created_ms;
    char ttl_attr[16];
    char old_v[16], new_v[16]; /* "-": no image */
} stream_ev;

extern const pmap_table *rt; /* RT in nt.map */
extern int repl_started;     /* the cluster and the table are up */

void need_repl(void);
/* Starts node i with metrics on metrics_port[i] and extra flags
 * (NULL-terminated, may be empty). */
void start_repl_node(int i, char *const extra[]);
/* The cluster token every node of node_repl_test runs with
 * (--cluster-token-file). */
#define REPL_TOKEN "node-repl-test-token"
/* Sends node a Replicate of (from, to] with records recs, carrying token
 * (NULL: none). Returns the call's status; *applied: the reply's
 * applied_seq (0 without one). */
int repl_call(int node, uint32_t table_id, uint32_t part, uint64_t from, uint64_t to,
              ProtobufCBinaryData *recs, size_t n, const char *token, uint64_t *applied, char *err);
/* The node index of node id. */
int node_index(uint32_t id);
/* Refreshes nt.map from the coordinator and rt from it. */
void refresh_rt(void);
/* Creates RT through the coordinator (indexes and a 1 h stream) and
 * enables TTL on "exp". */
void create_repl_table(void);
uint32_t part_of(const char *s, uint32_t parts);

/* Item calls on RT, each on the owner of the item's partition; return the
 * status with a reason in err. */
int rput(const ritem *r, char *err);
int rdelete(const char *pk, int sk, char *err);
/* UpdateItem SET v = v. */
int rupdate_v(const char *pk, int sk, const char *v, char *err);
/* Puts n items with BatchWrite, grouped by owner (node index last_node's
 * last), fails the test on error. */
void rbatch_put(const ritem *items, size_t n, int last_node);

/* Views. Each row is "pk|sk|g|gs|exp" (exp "" when absent) of the items
 * whose pk starts with prefix; *rows sorted, caller frees with free_rows. */
size_t base_gsi_rows(const char *prefix, char ***rows);
size_t gsi_rows(const char *prefix, char ***rows);
/* gsi_rows with QueryRequest.hide_expired. */
size_t gsi_rows_hide(const char *prefix, int hide_expired, char ***rows);
/* Items of prefix in the base table (all, GSI or not). */
size_t base_count(const char *prefix);
void free_rows(char **rows, size_t n);
/* Waits up to timeout_ms until the GSI rows of prefix equal the base's
 * projection; fails with both counts. */
void wait_gsi_equals_base(const char *prefix, int timeout_ms);

/* GetStreamRecords of shard on node (any thread). */
int get_records(int node, uint32_t shard, uint64_t after, uint32_t limit, uint32_t wait_ms,
                Lapse__Response **resp, char *err);
/* Every record of every shard of RT whose key starts with prefix (NULL:
 * all), in shard then seq order; fails the test unless every shard is
 * gapless from its oldest retained record to its last. Caller frees. */
size_t stream_all(const char *prefix, stream_ev **evs);
/* Counts the events of key with event (and ttl when ttl >= 0). */
size_t count_events(const stream_ev *evs, size_t n, const char *key, int event, int ttl);
/* Orders events by key, then seq (qsort). */
int cmp_ev(const void *a, const void *b);
/* Checks the events of the keys pk "<prefix><i>" sk 0, i < n, written[i]
 * (written NULL: all): exactly one INSERT each and exactly one TTL REMOVE
 * for those removed[i] (removed NULL: none), none for the others, nothing
 * else. */
void check_once(const char *prefix, const int *removed, const int *written, int n);
/* Waits until the stream holds at least want events of prefix. */
void wait_stream_events(const char *prefix, size_t want, int timeout_ms);

/* The first sample of series on node i, 0 when absent. */
double metric0(int i, const char *series);
/* Waits until node i serves and made its first clock check (TTL runs). */
void wait_up(int i);
/* Waits until no node has outbox records pending for any node. */
void wait_pending_zero(int timeout_ms);

#endif
