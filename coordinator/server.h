/*
 * server.h: the coordinator's one global state struct and the operations that
 * change the durable part of it.
 *
 * The coordinator holds the authoritative partition map (placement/pmap.h):
 * the cluster's nodes, its tables and which node owns each partition. It is
 * on the control path only: nodes and clients cache the map and compare
 * versions, so no item call ever waits for the coordinator.
 *
 * Thread-safety: the RPC handlers run on the rpc server's worker threads and
 * the membership thread runs beside them. Every field under "guarded by
 * lock" is read and written only with server.lock held. ddl_lock serializes
 * CreateTable/DeleteTable/UpdateTimeToLive (with their pushes) so two
 * creates of one name cannot both succeed, a TTL change sees the status the
 * previous one left, and pushes of consecutive versions leave in order.
 * Lock order: ddl_lock before lock; never take ddl_lock while holding lock.
 *
 * Invariants:
 *  1. The map in memory (pm, next_table_id) equals what the catalog holds,
 *     except for node states: with a local catalog every node starts DOWN
 *     after a restart until it registers or heartbeats (server_open loads
 *     the map that way without bumping the version); a coordinator on etcd
 *     keeps the stored states when it takes over (leader.h). A change
 *     becomes visible to callers only after server_commit has made it
 *     durable. A coordinator on etcd that does not lead holds no state.
 *  2. pm->version increases by exactly one per committed change.
 *  3. live[] has at most one entry per node id, and only for ids in pm.
 *  4. Table ids are never reused: next_table_id > every id ever assigned.
 *  5. A table's TTL config is part of its schema in pm, so it is durable and
 *     versioned with the map; ttl (the nodes' progress) is not, and is
 *     rebuilt from heartbeats after a restart.
 *
 * Lifecycle (main.c):
 *
 *   server_open --> server_start --> [leader_start] --> (serving) -->
 *   catalog, state   rpc server,      with etcd:
 *                    membership       leader.h
 *   --> [leader_stop] --> server_close
 *       with etcd         stops threads and the rpc server, then frees
 */
#ifndef LAPSE_COORD_SERVER_H
#define LAPSE_COORD_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../etcd/etcd.h"
#include "../placement/pmap.h"
#include "../rpc/rpc.h"
#include "catalog.h"
#include "catalog_etcd.h"
#include "push.h"
#include "ttlprop.h"

/* A leader stops serving this long before its etcd lease could expire, so
 * the next leader never serves beside it (server_leads). */
#define SERVER_LEAD_MARGIN_MS 300

/* Liveness of one node, as last heard from it (not durable). */
/* One follower's lag as its primary last reported it (replstatus.h). */
typedef struct live_lag {
    uint32_t table_id, part, node;
    uint64_t lag; /* records */
    int known;    /* the primary has heard from the follower since it started */
    /* a snapshot under way to the follower (all 0: none): ReplicaLag's copy_* */
    uint64_t copy_bytes, copy_total, copy_keys, copy_ms;
} live_lag;

typedef struct node_live {
    uint32_t id;                    /* the node's id, as in pm */
    int64_t last_heartbeat_mono_ms; /* clock_mono of the last RegisterNode/Heartbeat; -1 never */
    uint64_t pmap_version;          /* map version the node reported last */
    int64_t clock_skew_ms;          /* node wall clock minus ours at its last heartbeat */
    int64_t reported_skew_ms;       /* the node's own skew estimate, from its heartbeat */
    int ttl_paused_for_clock;       /* its last heartbeat said its TTL scanners are paused */
    live_lag *lags;                 /* owned: its last heartbeat's replica_lag, the
                                       followers of the sets it leads */
    size_t nlags;
    /* Its last heartbeat's tables whose GSI or stream copies there are
     * filling, as of its map version filled_version (0: none reported):
     * a move's new copy is read once it is not (mover.c). */
    uint32_t *filling; /* owned */
    size_t nfilling;
    uint64_t filled_version;
} node_live;

typedef struct server_config {
    const char *listen_url;       /* rpc URL to listen on; borrowed */
    const char *data_dir;         /* directory of the local catalog; NULL with etcd */
    const char *etcd_endpoints;   /* NULL: local catalog; else the state lives in etcd */
    const char *cluster_name;     /* with etcd: the cluster's prefix /lapse/<name>/ */
    const char *import_dir;       /* with etcd: a local catalog to import once; NULL */
    int64_t heartbeat_timeout_ms; /* UP nodes silent longer than this go DOWN */
    unsigned default_replication; /* copies of a table that names none (0, 1: one) */
    unsigned max_moves;           /* sets moving at once (0: MOVER_MAX_CONCURRENT) */
    unsigned balance_primaries;   /* handovers the rebalancer makes per pass (0: none) */
    int push_timeout_ms;          /* per-node timeout of PushPartitionMap */
    const char *admin_token;      /* NULL: none required; else borrowed, non-empty */
} server_config;

typedef struct server {
    /* ---- configuration, fixed after server_open ---- */
    char listen_url[PMAP_MAX_ADDR]; /* where the rpc server listens */
    int64_t heartbeat_timeout_ms;   /* see server_config */
    unsigned default_replication;   /* see server_config */
    unsigned max_moves;             /* see server_config */
    unsigned balance_primaries;     /* see server_config */
    int push_timeout_ms;            /* see server_config */
    char *admin_token;              /* owned copy; NULL when admin calls need none */
    size_t admin_token_len;         /* strlen(admin_token) */

    /* ---- resources, owned ---- */
    catalog *cat;    /* the durable state (own RocksDB); NULL with etcd */
    push *pusher;    /* rpc clients of nodes (pushes) and leaders (forwards); thread-safe */
    rpc_server *rpc; /* serves the coordinator calls; NULL until started */

    /* ---- serialization ---- */
    pthread_mutex_t ddl_lock; /* held across a whole CreateTable/DeleteTable/UpdateTimeToLive */
    pthread_mutex_t lock;     /* guards everything below */

    /* ---- state, guarded by lock ---- */
    pmap *pm;               /* the authoritative partition map; owned */
    uint32_t next_table_id; /* id the next CreateTable assigns */
    node_live *live;        /* owned array of nlive entries (cap live_cap) */
    size_t nlive;
    size_t live_cap;
    ttlprop ttl; /* latest TTL progress per (node, table); not durable (ttlprop.h) */

    /* ---- etcd (leader.h); all NULL/0 with a local catalog ---- */
    etcd *ec;                     /* the cluster's etcd client; thread-safe */
    catalog_etcd *ecat;           /* the durable state in etcd; under lock */
    etcd_keeper *keeper;          /* this coordinator's lease; set and cleared under keeper_lock */
    pthread_rwlock_t keeper_lock; /* server_leads reads keeper while leader_stop clears it */
    etcd_keys keys;               /* the cluster's keys in etcd */
    atomic_int leading;           /* leader.h invariant 1 */
    atomic_llong lead_lease;      /* the lease this coordinator won the election with */
    atomic_int leader_stop;       /* asks the leader thread to exit */
    pthread_t leader_thread;      /* valid when leader_running */
    int leader_running;

    /* ---- the membership thread (membership.c) ---- */
    pthread_t member_thread;    /* valid when member_running */
    int member_running;         /* 1 between membership_start and membership_stop */
    int member_stop;            /* guarded by lock: asks the thread to exit */
    pthread_cond_t member_cond; /* with lock: wakes the thread early to stop */
} server;

/* Opens the catalog in cfg->data_dir (creating it), loads the map with every
 * node DOWN, and prepares the locks and the push clients. With
 * cfg->etcd_endpoints it opens the etcd client instead (importing
 * cfg->import_dir first when set) and holds an empty map until it leads. Returns 0 with
 * *out set (free with server_close), or LAPSE_EIO (data dir unusable or
 * locked by another process), LAPSE_ECORRUPT or LAPSE_ENOMEM with a reason in
 * err; on error *out is NULL and nothing stays open. */
int server_open(server **out, const server_config *cfg, char *err, size_t errlen);

/* Starts the rpc server on listen_url and the membership thread. Returns 0,
 * LAPSE_EUNAVAILABLE (address in use) or LAPSE_EINVAL (bad URL) with a reason
 * in err; on error nothing was started. */
int server_start(server *s, char *err, size_t errlen);

/* Stops the rpc server (waiting for running handlers), then the membership
 * thread, then closes the catalog and frees s. Accepts NULL and a server
 * that was never started. */
void server_close(server *s);

/*
 * Makes next the current map: sets next->version to the current version + 1,
 * writes next and next_table_id to the catalog in one synced batch (with
 * etcd: one fenced transaction; a failure there also ends this
 * coordinator's leadership, leader.h), then swaps them in and frees the old
 * map. Ownership of next moves to s only on
 * success. Returns 0, or LAPSE_EIO with a reason in err; on error the
 * current state is unchanged and the caller still owns next.
 * REQUIRES: s->lock held; pmap_check(next).
 */
int server_commit(server *s, pmap *next, uint32_t next_table_id, char *err, size_t errlen);

/* Tells whether the current state is still the cluster's, as server_commit
 * would for a change: 0 at once with a local catalog; with etcd, 0 when a
 * transaction that writes nothing confirms the fence and the map's revision
 * (catalog_etcd_confirm). Else LAPSE_ESTATE or an etcd error with a reason
 * in err, and leadership ends as for a failed commit. For answers that
 * decide something without changing the state. REQUIRES: s->lock held. */
int server_confirm(server *s, char *err, size_t errlen);

/* Whether this coordinator may change the state: always with a local
 * catalog; with etcd, while it leads and the lease it won with is certain
 * to live for more than SERVER_LEAD_MARGIN_MS. A leader stalled past its
 * lease (its process stopped, say) thus forwards what it is asked from
 * the instant it resumes, before its leader thread learns it lost. */
int server_leads(server *s);

/* Returns the liveness entry of node id, creating it (never heard from)
 * when create is set; NULL when absent or on OOM. Borrowed until s->live
 * next grows. REQUIRES: s->lock held. */
node_live *server_live(server *s, uint32_t id, int create);

#endif
