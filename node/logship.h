/*
 * logship.h: replica sets on a node (docs/replication.md, "Replica sets"):
 * the primary's side of the replication log (the store's repl hook: who is
 * primary, and shipping each record to the in-sync replicas before the
 * write is acknowledged) and the replica's side (the ReplicateLog call), and
 * PartitionDigest, which compares replicas.
 *
 * The primary ships record seq of a partition to every in-sync replica of
 * the partition in the map it holds at that moment, all at once, and waits
 * (at most LOGSHIP_TIMEOUT_MS) until each has applied it: a replica that
 * answers with a gap gets the log from where it stands, up to and including
 * seq, in the same call budget. The hook runs under the partition's stripe
 * lock, so records of a partition are shipped in order; the write is
 * acknowledged to the client only after every in-sync replica has it.
 *
 * Thread-safety: any thread; the per-node RPC clients are created under a
 * lock and shared (rpc_call is thread-safe).
 */
#ifndef LAPSE_LOGSHIP_H
#define LAPSE_LOGSHIP_H

#include "../common/arena.h"
#include "../common/metrics.h"
#include "../placement/pmap.h"
#include "../rpc/rpc.h"
#include "node.h"

#define LOGSHIP_TIMEOUT_MS 2000       /* a replica's confirmation of one record */
#define LOGSHIP_CATCHUP_RECORDS 512   /* records per catch-up call */
#define LOGSHIP_GROUP_RECORDS 256     /* records per replication round at most (group commit) */
#define LOGSHIP_GROUP_BYTES (4 << 20) /* bytes per round at most (one record may be more) */
#define LOGSHIP_CALL_BYTES (8 << 20)  /* bytes of rounds taken into one shipment at most */
#define LOGSHIP_CALLS_IN_FLIGHT 1     /* shipments on the wire at once, node-wide (2: slower) */
#define LOGSHIP_CATCHUP_BYTES (4 << 20)
#define LOGSHIP_SHRINK_TIMEOUT_MS 2000 /* the coordinator's answer to a ReplicaShrink */
#define LOGSHIP_CONNECT_WAIT_MS 100    /* a replica with no connection after this is unreachable */
#define LOGSHIP_RECONCILE_ROUNDS 64    /* pull calls a new primary makes per replica */
#define LOGSHIP_RESYNC_PERIOD_MS 200   /* how often a primary looks for replicas to resync */
#define LOGSHIP_RESYNC_TAIL 64 /* records behind at most when the partition is held to join */

typedef struct logship logship;

/* Creates the shipper state and installs the store's repl hook. 0 or
 * LAPSE_ENOMEM. */
int logship_open(logship **out, node_server *ns);
/* Starts the thread that brings replicas outside the in-sync set back
 * (resync.c). 0 or LAPSE_ENOMEM. Needs the coordinator client. */
int logship_start(logship *ls);
/* Stops and joins that thread. No-op when it is not running. */
void logship_stop(logship *ls);
/* Removes the hook and frees it. REQUIRES: no write in flight (the RPC
 * server is closed) and the resync thread stopped (logship_stop). Accepts
 * NULL. */
void logship_close(logship *ls);

/* One call to serve: the request (borrowed), the reply being built and its
 * memory. The request dispatcher (handlers.c) fills it; nothing here calls
 * back into the dispatcher. */
typedef struct logship_call {
    node_server *ns;
    const Lapse__Request *req;
    Lapse__Response *resp;
    arena *a;
} logship_call;

/* One follower of a replicated partition this node leads (replstat.c):
 * how far behind this primary's log it is, as the primary last heard. */
typedef struct logship_lag {
    uint32_t table_id, part, node;
    uint64_t lag; /* records: this log's last seq minus the follower's last confirmed */
    int known;    /* 0: not heard from since this node started (lag is 0 then) */
    /* a snapshot under way to the follower (all 0: none): bytes and keys
     * sent, the partition's estimated item bytes, ms since it began */
    uint64_t copy_bytes, copy_total, copy_keys, copy_ms;
} logship_lag;

/* The sets this node leads, counted (logship_lags). */
typedef struct logship_sets {
    size_t led;
    size_t under;                             /* with a member out of the in-sync set */
    size_t by_in_sync[PMAP_MAX_REPLICAS + 1]; /* [k]: with k copies in sync */
} logship_sets;

/* Every follower of the sets this node leads in its map, into *out (caller
 * frees; NULL with *n 0 when none), and those sets counted into *sets (may
 * be NULL). 0 or LAPSE_ENOMEM. */
int logship_lags(logship *ls, logship_lag **out, size_t *n, logship_sets *sets);
/* logship_lags as the Heartbeat's replica_lag, allocated from a. 0 or
 * LAPSE_ENOMEM. */
int logship_lag_pb(logship *ls, arena *a, Lapse__ReplicaLag ***out, size_t *n);
/* Sets the replica set gauges of /metrics (docs/operations.md). */
void logship_collect(logship *ls, metrics *m);

/* The outbox on a replicated partition (docs/replication.md, "The outbox
 * on a replicated partition"). A change record must not reach a GSI or
 * stream destination before every in-sync replica holds the write that
 * made it: a failover could take that write back, and the new primary
 * would then number another change with the same outbox seq, which the
 * destination would skip as applied.
 *
 * The last outbox record of partition part of t that the outbox shipper
 * may send: every one for a table of one copy (UINT64_MAX); else the last
 * written by a log record that every member this primary waits for
 * confirmed. A record written since is shippable after its round (at the
 * writer's shipper_notify, or the shipper's next look); when nothing is on
 * its way that would confirm it (a failed round, a new primary's first
 * look), the resync thread is asked to (its send_lag), and on_confirmed is
 * called then. last: the outbox's last record as the caller read it; only
 * when it lies past what is known shippable does this read a new mark,
 * taking the partition's stripe lock for a moment. */
uint64_t logship_outbox_limit(logship *ls, const table_schema *t, uint32_t part, uint64_t last);
/* Calls fn(arg, table_id, part) whenever confirmed records of a partition
 * may have made more of its outbox shippable (the node wakes the outbox
 * shipper: shipper_notify). Set before writes start. */
void logship_on_confirmed(logship *ls, void (*fn)(void *arg, uint32_t table_id, uint32_t part),
                          void *arg);
/* Forgets what this node had learned confirmed of (table_id, part): its
 * copy was reset and takes a new history. */
void logship_forget_confirmed(logship *ls, uint32_t table_id, uint32_t part);
/* Marks this node's copy of (table_id, part) dropped (copydrop.h): forgets
 * what was confirmed of it, and refuses the parts of a snapshot begun
 * before the drop until the next reset. */
void logship_copy_dropped(logship *ls, uint32_t table_id, uint32_t part);
/* Notes that this node, as the primary of (table_id, part), trimmed its
 * outbox through seq (every destination acked it; the shipper's acks thread):
 * its next rounds tell the replicas, which trim their copies as far
 * (docs/replication.md, "The outbox on a replicated partition"). */
void logship_outbox_trimmed(logship *ls, uint32_t table_id, uint32_t part, uint64_t seq);

/* The ReplicateLog call (a replica applying its primary's records). */
void logship_handle(const logship_call *c);
/* Whether ReplicateLog r (borrowed) may be served on the thread of the
 * connection that brought it (rpc_server_options.conn_thread): records to
 * apply (no pull, reset or snapshot), while no section of this node calls
 * a peer with a stripe lock held, for the apply takes a stripe lock and
 * must not hold the connection up behind such a call. Cheap. */
int logship_on_conn_thread(logship *ls, const Lapse__ReplicateLogRequest *r);
/* The PartitionDigest call. */
void logship_digest(const logship_call *c);
/* The PartitionItems call (itemserve.c): a page of a partition this node
 * leads, answered once every in-sync copy holds what it shows. */
void logship_items(const logship_call *c);

#endif
