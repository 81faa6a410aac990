/*
 * node.h: the storage node daemon's one server struct and its lifecycle.
 *
 * A node holds the partitions the coordinator assigns to it in one item
 * store (partition/store.h), serves the item calls over RPC (handlers.h),
 * keeps the partition map current (maps.h) and reports to the coordinator
 * (membership.h). docs/node.md describes the daemon from the outside.
 *
 * Thread-safety: node_open and node_close run on the main thread. While the
 * node is open, RPC worker threads and the membership thread share the
 * struct: the fields marked "fixed" are written only by node_open; the
 * others say what guards them.
 *
 * Invariants:
 *  1. The data dir belongs to exactly one node id: store meta "node_id"
 *     equals id once node_open has succeeded. Its incarnation (store meta
 *     "incarnation", nonzero) is made once, with the dir, and never
 *     changes: a node back on an empty dir comes back under a new one, so
 *     the coordinators fail over the copies it lost (docs/replication.md,
 *     "A node back on an empty data dir").
 *  2. map is never NULL while the node is open; it is immutable and only
 *     replaced by maps_apply (under map_lock, as a whole).
 *  3. Every background thread is stopped before the state it uses is freed:
 *     node_close stops membership and the stream retention thread (ending
 *     long polls), then the RPC server (which waits for running handlers)
 *     and the metrics endpoint, then the expiry engine's threads (which wake
 *     the shipper), then the outbox shipper, then frees the map, the
 *     client, the metrics and the store.
 *
 * Lifecycle:
 *
 *          node_open                       node_close
 *   (none) ---------> SERVING ---------------------------------> (none)
 *                     | data dir locked, map loaded from meta,
 *                     | outbox shipper and stream retention running,
 *                     | expiry engine (backfill, scanners) running,
 *                     | RPC listening, membership thread running,
 *                     | GET /metrics served with --metrics-listen
 *                     | (serving never waits for the coordinator)
 */
#ifndef LAPSE_NODE_H
#define LAPSE_NODE_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../common/metrics.h"
#include "../etcd/etcd.h"
#include "../etcd/etcd_keys.h"
#include "../placement/pmap.h"
#include "../partition/store.h"
#include "../rpc/http.h"
#include "../rpc/rpc.h"
#include "expiry_engine.h"

#define NODE_MAX_URL PMAP_MAX_ADDR
#define NODE_MAX_TOKEN 255 /* --cluster-token-file: bytes of the token */
#define NODE_DEFAULT_COORDINATOR "tcp://127.0.0.1:7400,tcp://127.0.0.1:7410"
#define NODE_DEFAULT_WORKERS 4       /* --workers */
#define NODE_URGENT_WORKERS 2        /* RPC threads for peers' ReplicateLog only (node.c) */
#define NODE_RPC_CONTEXTS 256        /* requests received at once (the rest wait in the socket) */
#define NODE_DEFAULT_CLUSTER "lapse" /* --cluster-name, as the coordinator's */
#define NODE_META_ID "node_id"       /* store meta: the node id, decimal text */
#define NODE_META_PMAP "pmap"        /* store meta: pmap_encode (older: packed protobuf) */
#define NODE_META_INCARNATION "incarnation" /* store meta: the dir's random id, 16 hex digits */

typedef struct node_map node_map; /* maps.h */
typedef struct logship logship;   /* logship.h */
typedef struct shipper shipper;   /* shipper.h */
typedef struct streams streams;   /* streams.h */
typedef struct refill refill;     /* refill.h */
typedef struct newcopy newcopy;   /* newcopy.h */

#define NODE_REPL_LOCKS 64 /* replicate.c: stripes of the per-source-partition apply lock */

/* What main() parsed from the flags. Borrowed by node_open (copied). */
typedef struct node_options {
    uint32_t id;                           /* 1..65535 */
    const char *listen_url;                /* where the RPC server listens */
    const char *advertise_url;             /* registered with the coordinator; NULL = listen_url */
    const char *coordinator_url;           /* NULL = NODE_DEFAULT_COORDINATOR */
    const char *data_dir;                  /* created if missing */
    int workers;                           /* RPC handler threads; 0 = rpc default */
    expiry_engine_options ttl;             /* --ttl-workers, --ttl-max-deletes-per-sec,
                                       --ttl-backfill-rate, --max-clock-skew-ms */
    const char *metrics_listen;            /* HOST:PORT for GET /metrics; NULL = none */
    int repl_workers;                      /* outbox shipper threads; 0 = default */
    int64_t stream_trim_interval_ms;       /* stream retention period; 0 = default (tests) */
    int64_t debug_repl_kill_after_batches; /* fault point (tests); 0 = off */
    int64_t debug_repl_hold_ms;            /* no shipping this long after the start (benchmarks) */
    const char *debug_fault_dir;           /* fault switches (tests, logserve.c); NULL = none */
    const char *cluster_token;             /* --cluster-token-file's token; NULL = none */
    const char *etcd_endpoints;            /* --etcd; NULL = no lease, liveness by heartbeat */
    const char *cluster_name;              /* --cluster-name; NULL = NODE_DEFAULT_CLUSTER */
    int lease_ttl_s;                       /* --lease-ttl; 0 = REGISTRY_LEASE_TTL_S */
    uint64_t replog_retain;                /* --replog-retain; 0 = REPLOG_RETAIN_DEFAULT */
    int snapshot_rate_mb; /* --snapshot-rate-mb: MB/s per snapshot sent; 0 = no cap */
    int snapshot_nice;    /* --snapshot-nice: 0..19, the nice value snapshots are sent at */
    const char *zone;     /* --zone (pmap_zone_valid); NULL = none */
} node_options;

typedef struct node_server {
    /* ---- identity and configuration (fixed) ---- */
    uint32_t id;                        /* this node's id, 1..65535 */
    uint64_t incarnation;               /* its data dir's, made with the dir (invariant 1) */
    char listen_url[NODE_MAX_URL];      /* RPC listen address */
    char advertise_url[NODE_MAX_URL];   /* address the coordinator hands out */
    char coordinator_url[NODE_MAX_URL]; /* where membership and refreshes go */
    char data_dir[PATH_MAX];            /* the store's directory (holds LOCK) */
    int workers;                        /* RPC handler threads */
    int snapshot_rate_mb;               /* cap on each snapshot sent, MB/s; 0 = none (resync.c) */
    int snapshot_nice;                  /* nice value of a snapshot's sending threads; 0: as the
                                         * daemon's (resync_snapshot.c) */
    char zone[PMAP_MAX_ZONE];           /* --zone, registered with the coordinator; "": none */

    /* ---- storage (fixed pointer; the store is thread-safe) ---- */
    store *st; /* owned: items and meta ("node_id", "pmap") */

    /* ---- partition map (maps.c) ---- */
    int maps_inited;            /* maps_init ran (its locks exist) */
    pthread_rwlock_t map_lock;  /* guards the map pointer, not the map */
    node_map *map;              /* current map; readers take a reference */
    pthread_mutex_t apply_lock; /* serializes maps_apply: drop, persist, swap */
    atomic_ullong rpc_seen[4];  /* the RPC server's counts at the last collect
                                   (telemetry.c: frames, coalesced, calls, quick) */
    atomic_int single_moved;    /* 1 once a map held a one-copy table's set with a
                                   second member (a move): from then on such
                                   tables' commits ask the map whether they are
                                   logged (maps_logged); 0: none ever, never */
    atomic_ullong promotions;   /* sets this node became primary of by failover
                                   (pmap_promotions over the maps it applied), not
                                   yet added to the metrics (telemetry.c takes them) */

    /* ---- copies out of their sets, dropped a little later (copydrop.c) ---- */
    pthread_mutex_t drops_lock;   /* guards the three fields below */
    struct copydrop_entry *drops; /* noted copies: table, partition, when due */
    size_t ndrops, drops_cap;
    atomic_ullong copies_dropped; /* dropped, not yet added to the metrics */

    /* ---- on-demand refresh, single flight and rate-limited (maps.c) ---- */
    pthread_mutex_t refresh_lock; /* guards the three fields below */
    pthread_cond_t refresh_done;  /* broadcast when a fetch finishes */
    int refresh_in_flight;        /* a GetPartitionMap call is under way */
    int64_t refresh_last_mono_ms; /* when the last fetch finished; 0 = never */

    /* ---- coordinator link ---- */
    rpc_client *coord; /* owned; shared by membership and refreshes */

    /* ---- membership thread (membership.c) ---- */
    pthread_t membership_thread; /* valid when membership_started */
    int membership_started;      /* fixed after membership_start */
    pthread_mutex_t stop_lock;   /* guards stopping, heartbeat_soon; lives as long as ns */
    pthread_cond_t stop_cond;    /* wakes the membership thread (monotonic clock) */
    int stopping;                /* set once by node_close */
    int heartbeat_soon;          /* membership_heartbeat_soon was called */
    atomic_int registered;       /* the coordinator knows us (last call ok) */
    atomic_llong clock_skew_ms;  /* our wall clock minus the coordinator's,
                                    from the last heartbeat (ttl pauses its
                                    scanners when it is out of bounds) */

    /* ---- etcd (registry.h); NULL without --etcd ---- */
    etcd *ec;               /* owned; thread-safe */
    etcd_keys keys;         /* fixed: the cluster's keys */
    etcd_keeper *keeper;    /* owned: this node's lease */
    etcd_watch *map_watch;  /* owned: the catalog's map key (registry.c) */
    atomic_llong key_lease; /* the lease our key was last put with; 0: none */

    /* ---- RPC server ---- */
    rpc_server *srv; /* owned; handlers.c serves it */

    /* ---- TTL (expiry_engine.h: registry, backfill and scanner threads) ---- */
    expiry_engine_options ttl_opt; /* fixed: the TTL flags */
    expiry_engine *ttl;            /* owned; thread-safe; started after maps_init */

    /* ---- metrics (telemetry.h) ---- */
    metrics *metrics;                  /* owned; thread-safe registry, always present */
    char metrics_listen[NODE_MAX_URL]; /* fixed: --metrics-listen, "" = no endpoint */
    http_server *http;                 /* owned; GET /metrics, NULL without the flag */

    /* ---- replication (shipper.h, replicate.h, streams.h) ---- */
    int repl_workers;                      /* fixed: --repl-workers */
    int64_t stream_trim_interval_ms;       /* fixed: stream retention period */
    int64_t debug_repl_kill_after_batches; /* fixed: fault point (shipper.h); 0 = off */
    int64_t debug_repl_hold_ms;            /* fixed: shipping starts this late (benchmarks) */
    char debug_fault_dir[PATH_MAX];        /* fixed: fault switches (tests); "" = none */
    int debug_etcd_cut;                    /* the membership thread's: its cut-etcd switch was on */
    char cluster_token[NODE_MAX_TOKEN + 1];      /* fixed: sent with and required of node-to-node
                                                    calls (Replicate); "" = none */
    size_t cluster_token_len;                    /* fixed */
    pthread_mutex_t repl_locks[NODE_REPL_LOCKS]; /* replicate.c: one apply of a (table,
                                                    source partition) at a time here */
    _Atomic uint64_t repl_paused; /* replicate_pause: table id << 32 | source part; 0: none */
    int repl_locks_inited;        /* repl_locks exist */
    shipper *shipper;             /* owned; thread-safe; the outbox shipper */
    streams *streams;             /* owned; thread-safe; long polls and stream retention */
    refill *refill;               /* owned; the thread filling copies that lost records */
    newcopy *newcopy; /* owned; thread-safe; GSI and stream copies new here (newcopy.h) */
    logship *logship; /* owned; thread-safe; replica sets (logship.h), the store's repl hook */
} node_server;

/*
 * Opens the data dir (creating it), checks or records the node id, loads the
 * persisted partition map, starts listening and starts the membership
 * thread. Returns 0, or on failure a code with a reason in err and nothing
 * left running or open: LAPSE_EIO (data dir unusable: cannot create, LOCK
 * held by another process), LAPSE_ESTATE (data dir belongs to another node
 * id), LAPSE_EUNAVAILABLE (address in use), LAPSE_EINVAL (bad URL),
 * LAPSE_ECORRUPT (persisted map undecodable) or LAPSE_ENOMEM.
 * On success the caller closes *out with node_close.
 * REQUIRES: opt->id in 1..65535, opt->listen_url and opt->data_dir set.
 */
int node_open(node_server **out, const node_options *opt, char *err, size_t errlen);
/* Stops the membership thread and the server, then frees everything.
 * Accepts NULL and half-opened servers. */
void node_close(node_server *ns);
/* The step node_close is in ("not closing" before it starts): for a
 * watchdog that names a step that hangs. Any thread. */
const char *node_close_step(void);

#endif
