/*
 * ddl.h: one change of the map by a table call of the coordinator
 * (CreateTable, DeleteTable, UpdateStream, UpdateTimeToLive), the steps
 * they share in the one order they must run in:
 *
 *   ddl_begin    takes ddl_lock, then lock (server.h's order)
 *   ddl_find     the table the call names (ENOTFOUND without it)
 *   ddl_dup      a copy of the map for the call to change
 *   ddl_commit   the copy made durable and current (server_commit), and
 *                what to push: the map and the UP nodes
 *   ddl_push     releases lock, then pushes the map to every UP node
 *   ddl_end      releases ddl_lock
 *
 * A call changes x->next between ddl_dup and ddl_commit and may stop after
 * any step that fails (the step has set the error on the reply): it then
 * goes on with ddl_push and ddl_end, which free what is left and push
 * nothing.
 *
 * Thread-safety: rpc worker threads; a ddl_txn belongs to one call.
 *
 * Invariants:
 *  1. Between ddl_begin and ddl_end the call holds ddl_lock, so no other
 *     table change interleaves, and its pushes leave before the next
 *     change's.
 *  2. A map is pushed only once it is durable (x->committed), and outside
 *     lock: the nodes' replies take it (ttlcalls_record_push_reply).
 */
#ifndef LAPSE_COORD_DDL_H
#define LAPSE_COORD_DDL_H

#include <stddef.h>
#include <stdint.h>

#include "../common/arena.h"
#include "../rpc/rpc.h"
#include "push.h"
#include "server.h"

/* The arg of a push's on_reply: reply i came from node ids[i]. */
typedef struct ddl_push_ctx {
    server *s;
    const uint32_t *ids; /* borrowed for the broadcast (the txn's plan.ids) */
} ddl_push_ctx;

/* One table call's change of the map. */
typedef struct ddl_txn {
    server *s;
    pmap *next;     /* the copy being changed: owned until committed */
    int committed;  /* next was made durable and is s->pm now */
    push_plan plan; /* the committed map and its UP nodes, from the call's arena */
} ddl_txn;

/* Starts a change: takes s->ddl_lock, then s->lock, and sets
 * resp->pmap_version to the current version. REQUIRES: neither lock held. */
void ddl_begin(ddl_txn *x, server *s, Lapse__Response *resp);

/* The table called name in the current map (borrowed while lock is held),
 * or NULL with ENOTFOUND set on resp. */
const pmap_table *ddl_find(ddl_txn *x, const char *name, Lapse__Response *resp, arena *a);

/* Copies the current map into x->next for the call to change. 0, or
 * LAPSE_ENOMEM set on resp. */
int ddl_dup(ddl_txn *x, Lapse__Response *resp, arena *a);

/* Commits x->next (server_commit, with next_table_id) and sets
 * resp->pmap_version and x->plan (push_plan_copy: when out of memory
 * nothing is pushed, nodes pull the version on their heartbeat).
 * 0, or the error of server_commit set on resp (nothing changed, x->next
 * still owned). REQUIRES: ddl_dup succeeded. */
int ddl_commit(ddl_txn *x, uint32_t next_table_id, Lapse__Response *resp, arena *a);

/* Releases s->lock, frees an uncommitted x->next and pushes a committed
 * map to the UP nodes, on_reply (with a ddl_push_ctx) seeing each node's
 * reply. Still holds ddl_lock: ddl_end releases it. */
void ddl_push(ddl_txn *x, push_reply_fn on_reply);

/* Releases s->ddl_lock. */
void ddl_end(ddl_txn *x);

#endif
