/*
 * handlers.h: the node's RPC handler: the dispatcher of each request to its
 * call (writes.h: PutItem, DeleteItem, UpdateItem, BatchWrite; reads.h:
 * GetItem, Query, Scan, BatchGet; preview.h: TtlPreview; replserve.h:
 * Replicate; streams.h: GetStreamRecords; logship.h: ReplicateLog,
 * PartitionDigest, PartitionItems; here: PushPartitionMap, whose reply
 * carries the TTL progress, GetPartitionMap and a peer's Heartbeat). The
 * steps the item calls share are request.h's.
 *
 * Thread-safety: handlers_serve runs on RPC worker threads, many at once,
 * and for quick calls (handlers_quick) and, alone in their frames, the
 * calls handlers_conn_thread names, on the connections' own threads.
 *
 * Invariants:
 *  1. Every response carries resp->pmap_version: the version of the map the
 *     call was routed by (or the current one when it was not routed).
 *  2. The map reference a call took (request_find_table) is released here,
 *     after the call returns, so its routing decision and reply use one map.
 *  3. Every answered call is counted (telemetry_count_rpc).
 */
#ifndef LAPSE_HANDLERS_H
#define LAPSE_HANDLERS_H

#include <stdint.h>

#include "../common/arena.h"
#include "../rpc/rpc.h"

/* The rpc_handler for the node's server; arg is the node_server. */
void handlers_serve(void *arg, const Lapse__Request *req, Lapse__Response *resp, arena *a,
                    int64_t deadline_mono_ms);

/* The rpc_quick_fn for the node's server: 1 for the single-item calls
 * (GetItem, PutItem, DeleteItem, UpdateItem) that cannot wait: on a table
 * of one copy that this node's map holds at the caller's version or newer.
 * They are served on the thread that received them, with no hand-off. */
int handlers_quick(void *arg, const Lapse__Request *req);
/* The rpc_server_options.conn_thread for the node's server: 1 for the
 * single-item calls that are not quick (a write waiting for its round, a
 * read for the writes before it, a table this map lacks) and for a peer's
 * ReplicateLog of records (logship_on_conn_thread). Alone in a frame, or
 * in a coalesced frame and not served with its other writes
 * (handlers_batchable), such a call is served on its connection's thread:
 * a hand-off less each. */
int handlers_conn_thread(void *arg, const Lapse__Request *req);
/* The rpc_batchable_fn and rpc_serve_many_fn: a coalesced frame's PutItem
 * and DeleteItem calls (that are not quick) are served together
 * (writes_many): their records go to the replicas in one round. */
int handlers_batchable(void *arg, const Lapse__Request *req);
void handlers_serve_many(void *arg, const Lapse__Request *const *reqs, Lapse__Response **resps,
                         arena **as, const int64_t *deadlines, size_t n);

#endif
