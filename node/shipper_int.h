/*
 * shipper_int.h: the outbox shipper's state and figures, shared by
 * shipper.c (lanes from the map, workers, notify, metrics, life cycle),
 * shipper_round.c (one round to one destination), shipper_acks.c (the
 * acks thread: storing acks, trimming) and shipper_lanes.c (finding and marking
 * lanes, backoff). Contract in shipper.h. Nothing else includes it.
 *
 * Locking: every field of struct shipper below "lock", and every lane and
 * destination, is guarded by shipper.lock. A worker in a round holds the
 * claim of its destination (dest.claimed) instead: only it ships to that
 * destination, so each lane's batches go out one at a time, in order.
 */
#ifndef LAPSE_SHIPPER_INT_H
#define LAPSE_SHIPPER_INT_H

#include <pthread.h>
#include <stdint.h>

#include "../common/change.h"
#include "../placement/pmap.h"
#include "../rpc/rpc.h"
#include "shipper.h"

/* The figures shipper.h names. */
#define SHIPPER_BATCH_RECORDS 1000            /* records per ReplicateRequest */
#define SHIPPER_BATCH_BYTES (1024 * 1024)     /* record bytes per request (past the first) */
#define SHIPPER_ROUND_BYTES (8 * 1024 * 1024) /* record bytes per round to one destination */
#define SHIPPER_ROUND_LANES 64                /* batches per round to one destination */
#define SHIPPER_CALL_TIMEOUT_MS 2000          /* a round to a destination that is up */
#define SHIPPER_PROBE_TIMEOUT_MS 1000         /* a round to a destination that is down */
#define SHIPPER_BACKOFF_MIN_MS 50
#define SHIPPER_BACKOFF_MAX_MS 1000
#define SHIPPER_RESCAN_MS 1000        /* every lane is marked dirty this often */
#define SHIPPER_ACKS_MS 100           /* the acks thread stores the acks this often */
#define SHIPPER_TRIM_INTERVAL_MS 1000 /* a source's outbox is trimmed at most this often */

/* One (source partition, destination) lane. */
typedef struct lane {
    uint32_t dest;       /* destination node id */
    size_t di;           /* its entry in shipper.dests (stable: never removed) */
    uint64_t acked;      /* cached acked seq, valid when acked_known (invariant 2) */
    int acked_known;     /* acked was read from the store or learnt from a reply */
    uint64_t persisted;  /* the stored ack, as far as known (acks thread: stores acked above it) */
    int dirty;           /* records may be waiting */
    int failing;         /* the last batch failed (logged once per episode) */
    int64_t retry_at_ms; /* monotonic: not before (lane backoff); 0 = now */
    int64_t backoff_ms;
    int64_t lease; /* the destination's etcd lease in the map (its incarnation) */
    int check;     /* it restarted since acked was learnt: ask where it stands */
} lane;

/* A base partition this node owns, of a table with an outbox. */
typedef struct source {
    uint32_t table_id, part;
    lane *lanes; /* owned; ascending destination id */
    size_t nlanes;
    uint64_t trimmed;   /* the outbox is trimmed through here (0: not yet) */
    int64_t trim_at_ms; /* monotonic: not trimmed again before (SHIPPER_TRIM_INTERVAL_MS) */
} source;

/* A destination node. Entries are never removed, so indexes stay valid. */
typedef struct dest {
    uint32_t id;
    char url[PMAP_MAX_ADDR];        /* its address in the current map */
    rpc_client *client;             /* owned; NULL for this node itself */
    char client_url[PMAP_MAX_ADDR]; /* the address client dials */
    int in_map;                     /* some lane ships to it */
    int has_dirty;                  /* some lane to it is dirty */
    int claimed;                    /* a worker is in a round to it */
    int down;                       /* its last round reached nothing */
    int64_t retry_at_ms;            /* monotonic: dest backoff or lane backoffs */
    int64_t backoff_ms;
    size_t lane_cursor; /* where the next collection starts (in sources) */
    int reported;       /* has a lapse_outbox_pending_records series */
} dest;

struct shipper {
    /* ---- fixed ---- */
    node_server *ns;    /* borrowed: store, map, metrics, replicate_apply */
    store *st;          /* borrowed: ns->st */
    uint32_t self;      /* this node's id */
    int nworkers;       /* --repl-workers */
    int max_probes;     /* workers allowed in rounds to down destinations */
    pthread_t *threads; /* owned array of nworkers */
    int nstarted;       /* threads started */

    pthread_mutex_t lock; /* guards everything below */
    pthread_cond_t cond;  /* notify, a released destination, stop */
    int stopping;
    uint64_t map_version; /* the lanes follow this map */
    source *sources;      /* owned; sorted by (table_id, part) */
    size_t nsources;
    dest *dests; /* owned; grows only */
    size_t ndests, dcap;
    size_t cursor;         /* round-robin start in dests */
    int probing;           /* workers in a round to a down destination */
    int64_t rescan_at_ms;  /* monotonic: next time every lane is marked dirty */
    int64_t batches_ok;    /* batches other nodes applied (the test fault point) */
    int64_t start_at_ms;   /* monotonic: no round before (--debug-repl-hold-ms) */
    pthread_t acks_thread; /* shipper_acks_run */
    int acks_started;
    int acks_stopping;        /* the workers are gone: one last step, then exit */
    pthread_cond_t acks_cond; /* wakes the acks thread to stop */
};

/* One batch of a round. */
typedef struct job {
    uint32_t table_id, part;
    uint64_t after;              /* the lane's acked seq: the batch covers (after, to] */
    uint64_t first_kept;         /* non-zero: records (after, first_kept) were trimmed */
    int check;                   /* the lane's check: a batch of none if nothing is new */
    uint64_t to;                 /* 0: nothing to send */
    uint64_t applied;            /* from the reply */
    int read_ack;                /* the lane's ack is not known: read it first */
    int ack_read;                /* ... and it was */
    change_list recs;            /* read from the outbox */
    ProtobufCBinaryData *wanted; /* the records the destination keeps */
    size_t nwanted;
    int rv;      /* outcome */
    int reached; /* the destination answered */
    char err[256];
    Lapse__ReplicateRequest body;
    Lapse__Request req;
} job;

/* ---- shipper_lanes.c ---- */
/* The source of (table_id, part), or NULL. REQUIRES: lock held. */
source *shipper_source(shipper *s, uint32_t table_id, uint32_t part);
/* src's lane to dest_id, or NULL (src may be NULL). REQUIRES: lock held. */
lane *shipper_lane(source *src, uint32_t dest_id);
/* Marks l dirty and its destination as having work. REQUIRES: lock held. */
void shipper_mark_dirty(shipper *s, lane *l);
/* The next backoff after cur (0: none yet): MIN doubling to MAX. */
int64_t shipper_next_backoff(int64_t cur);

/* ---- shipper_acks.c ---- */
/* The acks thread (arg: the shipper): every SHIPPER_ACKS_MS stores the
 * acks the rounds learnt and trims the outboxes due; one last step when
 * acks_stopping is set. */
void *shipper_acks_run(void *arg);

/* ---- shipper_round.c ---- */
/* Collects up to SHIPPER_ROUND_LANES ready dirty lanes of destination di
 * into jobs (clearing their dirty flags) and returns how many.
 * REQUIRES: lock held. */
size_t shipper_collect_jobs(shipper *s, size_t di, job *jobs, int64_t now);
/* Runs one round of the n collected jobs to destination di, claimed by the
 * caller. Enters and leaves with the lock held (dropped for the store and
 * the network). */
void shipper_round(shipper *s, size_t di, job *jobs, size_t n);

#endif
