/*
 * client.h: liblapse internals shared by the files of client/: the client
 * handle (coordinator connection, cached partition map, pool of node
 * connections), routing of one call to the owner of a partition, and the
 * retry policy. Not installed; callers use lapse.h.
 *
 * Thread-safety: every client_* function may be called from any thread. The
 * cached map and the connection pool are guarded by lapse_client.mu; no lock
 * is held across an RPC.
 *
 * Invariants:
 *  1. c->map is replaced as a whole on refresh (never modified in place), so a
 *     route computed under the lock is one consistent snapshot.
 *  2. A node connection, once in c->conns, lives until lapse_close; rpc
 *     clients are shared by all threads (rpc_call is thread-safe).
 *  3. Every request sent to a node carries the version of the map its route
 *     was computed from.
 *
 * Retry policy (client_call_part, client_call_coord):
 *
 *   send --OK / other error-----------------------------> return
 *     |--EWRONGNODE----------> refresh map, back off, send again
 *     |--ETIMEDOUT/EUNAVAILABLE, idempotent ---> back off, refresh, send again
 *     |--ETIMEDOUT/EUNAVAILABLE, not idempotent ---------> return the error
 *   ...until the client's timeout (lapse_set_timeout_ms) has passed.
 *   Backoff: CLIENT_BACKOFF_MIN_MS doubling to CLIENT_BACKOFF_MAX_MS.
 *
 * Put, delete and update count as idempotent: each call carries a request
 * id (client_request_id), the same on every attempt, and the primary
 * answers a second attempt of a call it has done from its record of it
 * (docs/replication.md, "Retried writes"). Batch writes carry none: their
 * puts and deletes are retried as they are.
 */
#ifndef LAPSE_CLIENT_H
#define LAPSE_CLIENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/clock.h"
#include "../common/item.h"
#include "../common/schema.h"
#include "../placement/pmap.h"
#include "../rpc/rpc.h"
#include "../rpc/wire.h"
#include "lapse.h"

#define CLIENT_BACKOFF_MIN_MS 20
#define CLIENT_BACKOFF_MAX_MS 500
#define CLIENT_DEFAULT_TIMEOUT_MS 5000

/* The public opaque types. */
struct lapse_item {
    item *it; /* owned; never NULL for a live lapse_item */
};

typedef struct update_action {
    char *name;       /* owned */
    int is_set;       /* 1: SET name = value; 0: REMOVE name */
    attr_value value; /* owned; ATTR_NULL for REMOVE */
} update_action;

struct lapse_update {
    update_action *v; /* owned array of n used slots out of cap */
    size_t n, cap;
};

struct lapse_page {
    struct lapse_item *items; /* owned array of n wrappers out of cap */
    size_t n, cap;
    struct lapse_item *last_key; /* owned; NULL when the range is done */
};

/* A map with the count of its holders (the client while it is current,
 * and every call reading a schema in it: client_table_pin); freed by the
 * last one. */
typedef struct client_map client_map;

typedef struct node_conn {
    char url[PMAP_MAX_ADDR];
    rpc_client *rpc; /* owned */
} node_conn;

struct lapse_client {
    char url[PMAP_MAX_ADDR]; /* the coordinator's URL */
    rpc_client *coord;       /* owned; RPCs to the coordinator */
    atomic_int timeout_ms;   /* per call, retries included */
    atomic_int hide_expired; /* lapse_set_hide_expired: reads hide expired items */
    atomic_uint read_turn;   /* spreads eventually consistent reads (client_route_of) */
    atomic_int map_suspect;  /* a call gave up on a node that did not answer (client_map_suspect) */
    pthread_mutex_t mu;      /* guards the fields below */
    pmap *map;               /* cached map; replaced whole on refresh */
    client_map *map_pin;     /* owned reference to map's holder (NULL with map) */
    int64_t map_mono_ms;     /* when map was installed (clock_mono) */
    char *map_cache;         /* owned; fixed: the map cache file (mapsrc.c), NULL: none */
    _Atomic uint64_t cache_version; /* the map version last written there */
    node_conn *conns;               /* owned array: one shared rpc client per node URL */
    size_t nconns, capconns;
    char *admin_token;     /* owned; NULL: none */
    struct rpc_loop *loop; /* borrowed; fixed: the loop reading the connections, or NULL */
};

/* Where one partition's calls go, copied out of the map under the lock. */
typedef struct client_route {
    uint32_t node_id;
    char addr[PMAP_MAX_ADDR];
    uint64_t pmap_version;
    int down;           /* the map says the node is DOWN (route_of failed) */
    int64_t map_age_ms; /* how old that map is */
} client_route;

/* A route to a DOWN node fails at once, unless the map is older than this:
 * then the client refreshes it once first. */
#define CLIENT_DOWN_RECHECK_MS 1000

/* The rpc loop behind a public lapse_loop (loop.c). */
struct rpc_loop *client_loop_rpc(lapse_loop *l);

/* Fills err (when non-NULL) with code and a printf-style message; returns
 * code, so error paths read `return client_err(err, rv, "...")`. */
int client_err(lapse_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sets err to LAPSE_OK with an empty message; returns 0. */
int client_ok(lapse_error *err);

/* Fetches the partition map: from the coordinators, one attempt
 * of at most timeout_ms; when none answers, from the nodes of the map the
 * client has or, lacking one, of the map cache file; the newest wins, and
 * is written to the cache file. Replaces the client's map unless that is
 * newer. Returns 0 or the coordinator call's error (the map is unchanged on
 * error). */
int client_refresh(lapse_client *c, int timeout_ms, lapse_error *err);
/* A call is giving up after rv (a node did not answer: ETIMEDOUT or
 * EUNAVAILABLE) with no time left to refresh the map: the next call
 * refreshes it first (client_refresh_suspect). Without this, a client whose
 * timeout fits one attempt would send every call to a dead primary for as
 * long as it lives, never learning of the failover. */
void client_map_suspect(lapse_client *c, int rv);
/* At the start of a call with left_ms of its time: refreshes the map when
 * a call gave up since the last refresh (one caller does), spending at
 * most two thirds of left_ms on it. */
void client_refresh_suspect(lapse_client *c, int64_t left_ms);

/* Copies the schema of table name into *out. A table missing from the cached
 * map triggers one refresh; still missing: LAPSE_ENOTFOUND
 * "table \"X\" does not exist". */
int client_table(lapse_client *c, const char *name, table_schema *out, lapse_error *err);
/* client_table without the copy (a schema is ~20 KB): *out points into the
 * client's map, which stays valid, even if a newer one replaces it, until
 * client_map_release(*pin). */
int client_table_pin(lapse_client *c, const char *name, const table_schema **out, client_map **pin,
                     lapse_error *err);
/* As client_table_pin, but with may_fetch 0 a table the cached map lacks is
 * LAPSE_ENOTFOUND at once: nothing blocks (the asynchronous calls). */
int client_table_pin_opt(lapse_client *c, const char *name, int may_fetch, const table_schema **out,
                         client_map **pin, lapse_error *err);
void client_map_release(client_map *pin); /* accepts NULL */

/* The partition of key (an item carrying at least t's partition key). Returns
 * 0 or LAPSE_EINVAL when the partition key is missing or of the wrong type. */
int client_partition_of(const table_schema *t, const item *key, uint32_t *part, lapse_error *err);

/* Which node of a table a call goes to (docs/replication.md). */
typedef enum client_route_kind {
    CLIENT_ROUTE_BASE = 0,  /* the owner of base partition part (pmap_owner) */
    CLIENT_ROUTE_GSI = 1,   /* the owner of partition part of GSI gsi (pmap_gsi_owner) */
    CLIENT_ROUTE_STREAM = 2 /* the host of base partition part's shard (pmap_stream_host) */
} client_route_kind;

/* What a call is routed by. The partition was computed from the schema with
 * id table_id; when the cached map holds a re-created table of the same name
 * (another id), a base call with a key is re-routed by hashing key again,
 * and any other call (a scan of one partition, a GSI query, a stream read)
 * fails with LAPSE_ENOTFOUND. Zero-initialized fields after key mean a base
 * call, so designated initializers of base calls need not name them. */
typedef struct client_target {
    const char *table;
    uint32_t table_id;
    uint32_t part;
    const item *key; /* borrowed; NULL: the partition is fixed */
    client_route_kind kind;
    uint32_t gsi; /* CLIENT_ROUTE_GSI: the GSI's position in schema.gsi */
    /* A base call that any in-sync copy may answer (an eventually consistent
     * read): routed to the in-sync members the map holds UP, in turn. A copy
     * that refused it (WRONG_NODE: out of the set, or holding no record)
     * clears it, so the retry goes to the primary (client_target_failed). */
    int eventual;
    uint32_t avoid; /* with eventual: a copy that did not answer (id + 1; 0: none) */
} client_target;

/* Notes that tg's attempt at node_id failed with rv, so an eventually
 * consistent read's retry goes elsewhere (see eventual above). */
void client_target_failed(client_target *tg, uint32_t node_id, int rv);

/* The node tg goes to, from the cached map (tg may be updated as above).
 * Returns 0, LAPSE_ENOTFOUND (table gone) or LAPSE_EUNAVAILABLE (no owner or
 * host known). */
int client_route_of(lapse_client *c, client_target *tg, client_route *r, lapse_error *err);

/* The keys a query is on: the table's, or one of its indexes'
 * (client_query_route). Pointers are borrowed from the schema. */
typedef struct client_query_keys {
    const char *what;  /* "table" or "index", for messages */
    const char *name;  /* the table's or the index's name */
    const key_def *pk; /* the partition key (an LSI's is the table's) */
    const key_def *sk; /* the sort key; sk->name[0] == 0: none */
    const char *index; /* the index's name for the wire; "" for the table */
    int is_gsi;
} client_query_keys;

/* Routes a query of t with partition key value pk: index NULL or "" is the
 * table itself, else the name of one of t's LSIs or GSIs. Sets *keys and
 * tg's kind, gsi and part: for the table and an LSI the base partition of
 * pk (the LSI lives beside its items); for a GSI the GSI partition
 * hash_partition(pk, its partitions), the function partition/itemkey.c
 * places entries with, and CLIENT_ROUTE_GSI. tg's table, table_id and key
 * are left to the caller. Pure. Returns 0, LAPSE_ENOTFOUND (no such index,
 * message naming it) or LAPSE_EINVAL (pk not of the key's type). */
int client_query_route(const table_schema *t, const char *index, const attr_value *pk,
                       client_target *tg, client_query_keys *keys, lapse_error *err);

/* The shared rpc client for url, created on first use. *out is borrowed until
 * lapse_close. Returns 0, LAPSE_EINVAL or LAPSE_ENOMEM. */
int client_conn(lapse_client *c, const char *url, rpc_client **out, lapse_error *err);

/* Sends req to the node tg routes to with the retry policy above. On 0,
 * *resp is the reply (caller rpc_response_free). On error *resp is NULL and
 * err names the node and the failure. */
int client_call_part(lapse_client *c, client_target *tg, Lapse__Request *req, int idempotent,
                     Lapse__Response **resp, lapse_error *err);

/* One attempt of client_call_part without waiting: routes tg into *r, sends
 * req to that node and returns 0, done then being called exactly once with
 * the outcome (rpc_call_async; *timeout_ms is the attempt's budget). Returns
 * an error with err set, done never called, when it cannot go at once:
 * LAPSE_EWRONGNODE while the map is suspect (a blocking call refreshes it
 * first), or the failures of client_route_of and client_conn. */
int client_call_part_start(lapse_client *c, client_target *tg, Lapse__Request *req,
                           rpc_done_fn done, void *arg, client_route *r, int *timeout_ms,
                           lapse_error *err);

/* Notes that an attempt of client_call_part_start failed with rv, so the
 * blocking call that retries it fetches the map first when the map is why. */
void client_call_part_failed(lapse_client *c, int rv);

/* Sends req to the coordinator with the retry policy above (no map refresh).
 * Sets req's admin token. Same returns as client_call_part. */
int client_call_coord(lapse_client *c, Lapse__Request *req, int idempotent, Lapse__Response **resp,
                      lapse_error *err);

/* Formats the error of a failed call to node r into err; msg is the detail
 * rpc_call returned (may be empty). Returns code. */
int client_node_err(lapse_error *err, int code, const client_route *r, const char *msg,
                    int timeout_ms);

/* Draws a write call's request id, the same for every attempt of the
 * call: the wall clock's milliseconds in CLIENT_REQUEST_ID_CLOCK_BYTES
 * (big-endian), then random bytes. */
#define CLIENT_REQUEST_ID_CLOCK_BYTES 6
void client_request_id(uint8_t id[WIRE_REQUEST_ID_BYTES]);

/* Sleeps the backoff (bounded by deadline) and doubles *backoff_ms. */
void client_backoff(int64_t *backoff_ms, clock_mono deadline);

/* Per-call timeout of c in ms. */
int client_timeout_ms(lapse_client *c);

/* Whether reads ask to hide expired items: the client's default
 * (lapse_set_hide_expired) or a call's own flag. */
int client_hide_expired(lapse_client *c, int call_flag);

/* Wraps it (taking ownership on success) in a new lapse_item, or NULL on OOM
 * (it is then still the caller's). */
lapse_item *client_item_wrap(item *it);

#endif
