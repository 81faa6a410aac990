/*
 * logship_int.h: what the primary's commit path (logship_commit.c), the
 * replica-set helpers (logship.c), the replica's side (logserve.c) and
 * the resync thread (resync.c) share: the RPC clients to
 * replica nodes, ReplicateLog requests under construction, and the
 * per-partition replication state this node keeps in memory.
 *
 * Per-partition state (part_state), all under logship.lock:
 *  - fence: the highest epoch a primary announced to this node as a
 *    replica of the partition; records of an older one are refused;
 *  - reconciled: the epoch in which this node, as the partition's primary,
 *    has taken in whatever its in-sync replicas held beyond its own log
 *    (a new primary does that before its first write, logship.c);
 *  - joining: replicas this primary has caught up and asked the
 *    coordinator to put in the in-sync set, each with the set's changes
 *    count it was asked at (PartitionReplicas.changes): counted as in sync
 *    (writes wait for them too) while this node's map shows the set at
 *    that count, since the coordinator commits a join only at the count it
 *    was asked at; a map at another count says whether it landed;
 *  - dropped: followers the coordinator took out of the in-sync set on
 *    this primary's word (they did not confirm a record), counted out of
 *    it (writes no longer wait for them) until the map at drop_version or
 *    later says. Of a member both joining and dropped, the drop counts: the
 *    coordinator committed it, so the set's count moved past any join
 *    asked before;
 *  - heard: where each follower last said it stands, for the lag this
 *    primary reports (replstat.c);
 *  - lag_gen, lag_done: lag_gen counts this primary's failed ships (an
 *    in-sync member may then lack records of this log, never an
 *    acknowledged one); the resync thread sends them the log and, once
 *    each has all of it, sets lag_done to the lag_gen it started from, so
 *    copies end equal even when no write follows;
 *  - confirmed: the log seq up to which every member this primary waits
 *    for said it holds the log (a round they all confirmed, or the resync
 *    thread's send_lag); records up to it survive any failover;
 *  - ob_trimmed, copy_trimmed: how far the outbox is trimmed, as the
 *    primary (each round tells the replicas) and as a replica (its copy,
 *    trimmed as far when a round says so; logserve.c);
 *  - ob_safe, ob_mark_*: the outbox shipper's limit (logship_outbox_limit):
 *    outbox records up to ob_safe were written by confirmed log records;
 *    the mark is the latest (log seq, outbox last) pair read and not yet
 *    confirmed. A reset of the copy (a new history past confirmed) clears
 *    the three.
 * Nothing here is durable: a restarted node reconciles again and fences
 * by the map's epochs.
 */
#ifndef LAPSE_LOGSHIP_INT_H
#define LAPSE_LOGSHIP_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../partition/replog.h"
#include "../placement/pmap.h"
#include "../rpc/rpc_loop.h"
#include "logship.h"
#include "maps.h"

#define LOGSHIP_MAX_PEERS 64 /* distinct replicas a node ships to */
#define LOGSHIP_STATE_BUCKETS 256
#define LOGSHIP_ERR_MAX 1024 /* a failed round's message */

/* RPC clients to one replica node, opened on first use: client for every
 * call but the shipments, ship for those (on logship.ship_loop, driven by
 * the shipping thread: it reads the followers' answers itself). */
typedef struct logship_peer {
    uint32_t id;
    char url[PMAP_MAX_ADDR];
    rpc_client *client;
    char ship_url[PMAP_MAX_ADDR];
    rpc_client *ship;
} logship_peer;

/* A peer's client replaced when its node's URL changed, closed with the
 * logship (a call may still be using it). */
typedef struct retired_client {
    rpc_client *client;
    struct retired_client *next;
} retired_client;

/* A record queued for the next replication round (group commit,
 * logship.c), freed by the writer that waits for it. */
typedef struct ship_entry {
    uint64_t seq, prev_epoch;
    uint8_t *rec; /* len bytes, allocated with the entry */
    size_t len;
    struct part_state *owner;
    int done, rv; /* under logship.lock: shipped (rv 0) or failed (err) */
    char err[LOGSHIP_ERR_MAX];
    struct ship_entry *next;
} ship_entry;

typedef struct part_state {
    uint32_t table_id, part;
    uint64_t fence;
    uint64_t reconciled;
    uint32_t joining[PMAP_MAX_REPLICAS];      /* node ids; 0: free slot */
    uint64_t join_changes[PMAP_MAX_REPLICAS]; /* the set's changes count each was asked at */
    uint8_t join_unknown[PMAP_MAX_REPLICAS];  /* that ask had no answer: asked again (resync.c) */
    int64_t join_retry_ms;                    /* monotonic: when the unanswered are asked again */
    uint32_t dropped[PMAP_MAX_REPLICAS];      /* node ids; 0: free slot */
    uint64_t drop_version;                    /* the map version that settles them */
    uint64_t lag_gen, lag_done;
    uint64_t confirmed;
    uint64_t ob_safe, ob_mark_log, ob_mark_last;
    uint64_t
        ob_trimmed; /* as the primary: its outbox trimmed through (the shipper's acks thread) */
    uint64_t copy_trimmed;    /* as a replica: its copy of the outbox trimmed through */
    int64_t resync_warned_ms; /* when the resync thread last warned about it */
    int copy_dropped; /* as a replica: its copy was dropped (copydrop.c) since the last reset */
    /* as the primary: the snapshot under way to follower copy_id[i] (0:
     * free slot), as resync.c last noted it (logship_lag's copy fields) */
    uint32_t copy_id[PMAP_MAX_REPLICAS];
    /* as the primary of a one-copy table's set being moved: the member
     * this process last rebuilt from a snapshot, and the set's changes
     * then; any other member out of sync is rebuilt from a snapshot too,
     * since the log misses the writes committed while the set had one copy
     * (resync.c) */
    uint32_t single_rebuilt_id;
    uint64_t single_rebuilt_changes;
    uint64_t copy_bytes[PMAP_MAX_REPLICAS], copy_total[PMAP_MAX_REPLICAS];
    uint64_t copy_keys[PMAP_MAX_REPLICAS];
    int64_t copy_start_ms[PMAP_MAX_REPLICAS]; /* monotonic */
    /* heard_seq[i]: the last record follower heard_id[i] (0: free slot)
     * confirmed holding, as this primary last heard (logship_heard) */
    uint32_t heard_id[PMAP_MAX_REPLICAS];
    uint64_t heard_seq[PMAP_MAX_REPLICAS];
    /* group commit (logship.c): records queued for the next round, whether
     * a round is on the wire, and the last record through (shipped or
     * failed) */
    ship_entry *q_head, *q_tail;
    int shipping;
    uint64_t done_seq;
    /* in logship.pend_head's list (records queued, or a round on the wire
     * with more queued behind it) */
    int pending;
    struct part_state *pend_next;
    struct part_state *next;
} part_state;

struct logship {
    node_server *ns;
    void (*on_confirmed)(void *arg, uint32_t table_id, uint32_t part); /* logship_on_confirmed */
    void *on_confirmed_arg;
    pthread_mutex_t lock; /* guards peers and states */
    logship_peer peers[LOGSHIP_MAX_PEERS];
    size_t npeers;
    rpc_loop *ship_loop;     /* driven (rpc_loop.h): the peers' ship clients' */
    retired_client *retired; /* peers' clients replaced, closed at the end */
    part_state *states[LOGSHIP_STATE_BUCKETS];
    _Atomic uint64_t rounds, round_records; /* replication rounds and the records they took */
    /* Sections that call peers with a stripe lock held (a reconcile's
     * pulls, a member's catch-up before it joins): while any runs, a
     * peer's ReplicateLog goes to the workers (logship_on_conn_thread). */
    atomic_int calls_under_stripe;
    _Atomic uint64_t calls; /* the calls that carried them (node-level group commit) */
    pthread_cond_t shipped; /* broadcast (under lock) whenever rounds end */
    /* node-level group commit (logship_commit.c): the partitions with
     * records queued, in the order they queued, and the shipments on the
     * wire (at most LOGSHIP_CALLS_IN_FLIGHT) */
    part_state *pend_head, *pend_tail;
    int calls_out;
    /* the resync thread (resync.c) */
    pthread_t thread;
    int running;
    int stop; /* under lock */
    pthread_cond_t wake;
};

/* The client for node id at url (reopened when its URL changed), or NULL. */
rpc_client *logship_peer_client(logship *ls, uint32_t id, const char *url);
/* As logship_peer_client, the client that carries the shipments
 * (ship_rounds), or NULL: the caller of its calls reads their answers. */
rpc_client *logship_ship_client(logship *ls, uint32_t id, const char *url);

/* The state of (table_id, part), created when missing (NULL on OOM).
 * REQUIRES: ls->lock held. */
part_state *logship_state(logship *ls, uint32_t table_id, uint32_t part);

/* Adds id to the dropped list of a partition (ids, with
 * *version the map version that settles the list), which the map at
 * settles settles; a list the map at map_version already settled is
 * emptied first. REQUIRES: ls->lock held. */
void logship_pending_add(uint32_t ids[PMAP_MAX_REPLICAS], uint64_t *version, uint64_t map_version,
                         uint32_t id, uint64_t settles);

/* Notes that every member this primary waits for holds p's log up to
 * seq (logship_outbox.c); returns 1 when that made more of the outbox
 * shippable, and the caller then calls logship_tell_shipper after
 * releasing the lock. REQUIRES: ls->lock. */
int logship_confirmed_locked(part_state *p, uint64_t seq);
/* Wakes the outbox shipper for (table_id, part) (logship_on_confirmed's
 * callback). REQUIRES: ls->lock not held. */
void logship_tell_shipper(logship *ls, uint32_t table_id, uint32_t part);

/* Notes that followers ids[0..n) of (table_id, part) hold this log up to
 * seq, as they just said. Takes ls->lock once. */
void logship_heard(logship *ls, uint32_t table_id, uint32_t part, const uint32_t *ids, size_t n,
                   uint64_t seq);

/* Which members of r this primary ships to and waits for: bit i for
 * ids[i] (i >= 1), in sync in m or joining. Sets *reconciled (may be
 * NULL) when this node has reconciled r's epoch. One look at the state. */
uint32_t logship_required(logship *ls, const node_map *m, const pmap_replicas *r, uint32_t table_id,
                          uint32_t part, int *reconciled);

/* Applies recs[0..n) in order (the record before recs[0] of prev_epoch),
 * as replog_apply_locked does each, in one write, under run (set up by
 * replog_run_init for the partition). REQUIRES: the partition's stripe
 * lock. 0 or the first error, with *applied and *diverged as it left them
 * (the records before a refused one are written). Then, while run->loaded,
 * run->epoch and run->last are the stored position (logship_run_position). */
int logship_apply_run(store *st, replog_run *run, uint64_t prev_epoch,
                      Lapse__LogRecord *const *recs, size_t n, uint64_t *applied, int *diverged,
                      char *err, size_t errlen);
/* logship_apply_run's records added to b under run (replog_apply_into),
 * not written: the caller writes b, with every partition's stripe lock of
 * b held (a group-commit call's parts, logserve.c). */
int logship_apply_into(store *st, db_batch *b, replog_run *run, uint64_t prev_epoch,
                       Lapse__LogRecord *const *recs, size_t n, uint64_t *applied, int *diverged,
                       char *err, size_t errlen);

/* A ReplicateLog request under construction (records point into recs). */
typedef struct shipment {
    Lapse__Request req;
    Lapse__ReplicateLogRequest body;
    Lapse__LogRecord *recs;
    Lapse__LogRecord **ptrs;
    size_t n, cap;
    uint8_t **copies; /* owned copies of records read from the log */
    size_t bytes;
} shipment;

/* A request of this node, the primary of (table_id, part) at epoch. */
void shipment_init(shipment *s, logship *ls, uint32_t table_id, uint32_t part, uint64_t epoch);
void shipment_fini(shipment *s);
/* Adds record seq; copies its bytes when copy. 0 or LAPSE_ENOMEM. */
int shipment_add(shipment *s, uint64_t seq, const uint8_t *rec, size_t len, int copy);

/* The ReplicateLog reply's body, or NULL. */
const Lapse__ReplicateLogResponse *logship_reply(const Lapse__Response *resp);
/* The applied seq a ReplicateLog reply reports, or 0. */
uint64_t logship_applied_of(const Lapse__Response *resp);
/* 1 when a ReplicateLog reply says the replica holds records this log has not. */
int logship_diverged_of(const Lapse__Response *resp);

/* The checks of a node-to-node call (logserve.c): the cluster token and a
 * body. 0, or -1 with the error reply set. */
int logship_check_call(const logship_call *c, const void *body, const char *call);

/* The replica set of (table_id, part) in m when this node leads it there
 * under its lease (registry_may_lead), else NULL with *rv
 * (LAPSE_EWRONGNODE) and err. *tb (tb may be NULL) gets the set's table. */
const pmap_replicas *logship_led(logship *ls, const node_map *m, uint32_t table_id, uint32_t part,
                                 const pmap_table **tb, int *rv, char *err, size_t errlen);

/* The replica set of (table_id, part) in m, or NULL (with err); *tb (tb
 * may be NULL) gets its table. */
const pmap_replicas *logship_set_of(const node_map *m, uint32_t table_id, uint32_t part,
                                    const pmap_table **tb, char *err, size_t errlen);

/* Asks the coordinator to take follower id out of r's in-sync set (it did
 * not confirm a record: why); on yes, counts it out (part_state.dropped)
 * and returns 0. Else the refusal or failure with err. */
int logship_shrink(logship *ls, const node_map *m, const pmap_replicas *r, uint32_t table_id,
                   uint32_t part, uint32_t id, const char *why, char *err, size_t errlen);

/* Sends replica id (client c) this node's log after *applied, at most
 * LOGSHIP_CATCHUP_RECORDS/_BYTES, and sets *applied to where it stands
 * then. 0, or an error with err (*diverged set when the replica holds
 * records this log has not). */
int logship_send_after(logship *ls, rpc_client *c, uint32_t id, uint32_t table_id, uint32_t part,
                       uint64_t epoch, uint64_t *applied, int *diverged, char *err, size_t errlen);

/* As the primary of (table_id, part) at epoch in map m: takes in the
 * in-sync replicas' records beyond this log, once per epoch (above);
 * sets *took_in (may be NULL) when it took any.
 * REQUIRES: the partition's stripe lock. 0, or LAPSE_EUNAVAILABLE with err
 * (an in-sync replica cannot be reached: no write until it can, or the
 * coordinator drops it). */
int logship_reconcile(logship *ls, const node_map *m, const pmap_replicas *r, uint32_t table_id,
                      uint32_t part, int *took_in, char *err, size_t errlen);

/* Observe into this node's /metrics, in microseconds (replstat.c): how
 * long a shipment took, from sending its rounds to the last follower's
 * answer (the primary's side); how long a follower's apply of one
 * ReplicateLog call of records took. */
void logship_time_round(logship *ls, int64_t us);
void logship_time_apply(logship *ls, int64_t us);

#endif
