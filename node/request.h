/*
 * request.h: the steps every item call shares: the node's request
 * plumbing, used by the calls (writes.c, reads.c, reads_index.c, preview.c,
 * replserve.c, streams.c) and by the dispatcher (handlers.c); it calls none
 * of them.
 *
 * Every item call runs the same pipeline, each step answering the request
 * with an error when it fails:
 *
 *   request_find_table    the table by name in the current map; refresh the
 *                         map first when it is missing or the request's
 *                         pmap_version is newer (ENOTFOUND)
 *   request_item_from_pb  convert and check against the schema (EINVAL,
 *                         ETOOBIG)
 *   request_route         partition of the key, owned by us? (EWRONGNODE)
 *   store_*               the write or read (request_store_error maps it)
 *
 * Thread-safety: the calls run on RPC worker threads, many at once; a
 * request_ctx belongs to one call.
 *
 * Invariants:
 *  1. Every response carries resp->pmap_version: the version of the map the
 *     call was routed by (or the current one when it was not routed).
 *  2. All response memory comes from the call's arena; items from the store
 *     are freed before the call returns.
 *  3. A call holds one map reference from request_find_table until
 *     handlers_serve returns, so its routing decision and reply use one map.
 */
#ifndef LAPSE_NODE_REQUEST_H
#define LAPSE_NODE_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "../common/arena.h"
#include "../common/item.h"
#include "../partition/store.h"
#include "../rpc/rpc.h"
#include "maps.h"
#include "node.h"

#define REQUEST_BATCH_MAX STORE_BATCH_MAX /* writes in one BatchWrite call */

/* One call's state. */
typedef struct request_ctx {
    node_server *ns;
    const Lapse__Request *req; /* borrowed for the call */
    Lapse__Response *resp;     /* the reply being built */
    arena *a;                  /* the reply's memory */
    int64_t deadline_mono_ms;  /* the request's deadline */
    node_map *map;             /* held reference once the table is found */
    const pmap_table *table;   /* borrowed from map */
    int fenced;                /* table replicated and this node may not lead now
                                  (registry_may_lead), judged once with the table */
    int eventual;              /* an eventually consistent read: any in-sync copy
                                  may answer (request_owns); set by the read calls */
} request_ctx;

/* Returns 0 when body (the request's body sub-message) is set, else sets
 * EPROTO on the reply and returns it. */
int request_need_body(request_ctx *c, const void *body);
/* Looks name up (refreshing the map as the pipeline above says), taking a
 * map reference into c. Returns 0, or an error already set on the reply. */
int request_find_table(request_ctx *c, const char *name);
/* As request_find_table, by table id (Replicate: node to node). */
int request_find_table_id(request_ctx *c, uint32_t table_id);
/* Converts pb into *out (caller item_free) and checks it against the table
 * schema (key_only: a key, nothing else). what names it in messages ("item",
 * "key"). Returns 0, or an error (EINVAL, ETOOBIG, ENOMEM) set on the reply.
 * REQUIRES: request_find_table succeeded. */
int request_item_from_pb(request_ctx *c, const Lapse__Item *pb, int key_only, const char *what,
                         item **out);
/* Computes the partition of it (which carries the partition key) into *part.
 * Returns 0 or an error set on the reply. */
int request_partition_of(request_ctx *c, const item *it, uint32_t *part);
/* Returns 1 when this node may answer for partition part of the table: it
 * is the primary and not fenced; or, for an eventually consistent read
 * (c->eventual), the map holds it in the in-sync set and its copy has
 * applied records (a copy with none may be new or wiped: the primary
 * answers instead). */
int request_owns(const request_ctx *c, uint32_t part);
/* Sets EWRONGNODE ("partition P of table T is owned by node K") on the
 * reply and returns it. */
int request_wrong_node(request_ctx *c, uint32_t part);
/* Partition of it, and EWRONGNODE ("partition P of table T is owned by node
 * K") when another node owns it. Returns 0 or the error set on the reply. */
int request_route(request_ctx *c, const item *it, uint32_t *part);
/* As request_route, for a bare partition key value (Query). REQUIRES: pk
 * has the schema's partition key type. */
int request_route_pk(request_ctx *c, const attr_value *pk, uint32_t *part);
/* Converts an optional Condition. *value_out must be initialized by the
 * caller with item_value_init_null and is item_value_fini'd by the caller;
 * cond->value points into it. Returns 0 or EINVAL set on the reply. */
int request_cond_from_pb(request_ctx *c, const Lapse__Condition *pb, store_cond *cond,
                         attr_value *value_out);
/* Sets the reply for a failed store call (the store's code and message). */
void request_store_error(request_ctx *c, int rv, const char *err);

#endif
