/*
 * expiry_engine_int.h: the expiry engine's state, shared by expiry_engine.c (registry, sync,
 * progress, clock verdict, metrics), expiry_backfiller.c and expiry_scanner.c. Contract and
 * state diagram in expiry_engine.h. Nothing outside those three files includes it.
 *
 * Locking: every field below marked "lock" is guarded by expiry_engine.lock;
 * fields marked "fixed" are set by expiry_engine_open. Store calls are made with
 * the lock released; a thread that works on a table with the lock released
 * first sets its busy marker to the table id (invariant 1 of expiry_engine.h).
 */
#ifndef LAPSE_EXPIRY_ENGINE_INT_H
#define LAPSE_EXPIRY_ENGINE_INT_H

#include <pthread.h>
#include <stdint.h>

#include "../common/ttl.h"
#include "expiry_engine.h"

/* One table with TTL configured, as of the last expiry_engine_sync. */
typedef struct expiry_engine_table {
    table_schema schema;     /* copy from the map (ttl, name, partitions) */
    uint32_t *parts;         /* owned partitions, ascending; owned array */
    uint32_t nparts;         /* entries in parts */
    uint8_t *backfilled;     /* backfilled[i]: parts[i] indexed for this config_version */
    uint32_t parts_done;     /* count of set backfilled[] */
    uint64_t backfill_items; /* items scanned for this config_version (this process) */
    int dropped;             /* disabled: index dropped */
    int64_t bf_started_mono; /* first backfill step of this config version; 0 = none */
    int64_t bf_logged_mono;  /* last progress log line */
    int bf_complete_logged;  /* the completion line was logged */
    uint64_t ignored[TTL_VERDICT_COUNT]; /* ineligible values written, per verdict */
    int64_t backlog_at_mono;             /* when backlog/backlog_oldest were counted; 0 = never */
    uint64_t backlog;                    /* expired items not yet deleted, at backlog_at_mono */
    int64_t backlog_oldest;              /* earliest due instant among them (EXPIRY_NONE: none) */
} expiry_engine_table;

/* One (table, partition) a scanner worker owns. */
typedef struct expiry_engine_slot {
    uint32_t table_id;
    uint32_t part;
    int64_t next_due_ms; /* earliest index entry known (EXPIRY_NONE: none); lock */
    int refresh;         /* next_due_ms must be re-read (expiry_next_due); lock */
} expiry_engine_slot;

typedef struct expiry_engine_worker {
    struct expiry_engine *e;   /* fixed */
    int index;                 /* fixed: worker w owns pairs with hash % n == w */
    pthread_t thread;          /* fixed once started */
    int started;               /* fixed */
    pthread_cond_t cond;       /* wakes the worker: hook, config, clock, stop */
    expiry_engine_slot *slots; /* lock; sorted by (table_id, part); rebuilt on gen change */
    size_t nslots;             /* lock */
    uint64_t gen;              /* lock: engine gen the slots were built from */
    int64_t wake_at_ms;        /* lock: planned wake-up (wall ms), INT64_MAX = none */
    uint32_t busy_table;       /* lock: table id being swept, 0 = none */
    int64_t *due_ms;           /* EXPIRY_ENGINE_SWEEP_BATCH due instants (worker only) */
} expiry_engine_worker;

/* One backfill thread. */
typedef struct expiry_engine_backfiller {
    struct expiry_engine *e; /* fixed */
    pthread_t thread;        /* fixed once started */
    int started;             /* fixed */
    uint32_t busy_table;     /* lock: table id being stepped, 0 = none */
    uint32_t busy_part;      /* lock: its partition */
} expiry_engine_backfiller;

struct expiry_engine {
    /* ---- fixed ---- */
    store *st;                                   /* borrowed: the node's store */
    uint32_t node_id;                            /* partitions with this owner are ours */
    expiry_engine_options opt;                   /* flags */
    metrics *m;                                  /* borrowed: the node's registry */
    expiry_engine_delete_hook on_delete;         /* may be NULL */
    void *on_delete_arg;                         /* the hooks' arg */
    expiry_engine_backfilled_hook on_backfilled; /* may be NULL */

    pthread_mutex_t lock;    /* guards everything marked "lock" */
    pthread_cond_t idle;     /* broadcast when a busy marker clears */
    pthread_cond_t progress; /* broadcast when a backfill partition completes */
    int stopping;            /* lock: expiry_engine_close began */

    /* ---- registry (expiry_engine.c) ---- */
    expiry_engine_table *tables; /* lock: owned array of tables with TTL configured */
    size_t ntables;              /* lock */
    uint64_t gen;                /* lock: bumped by every expiry_engine_sync */

    /* ---- clock safety (expiry_engine.c) ---- */
    expiry_engine_clock_state clock; /* lock */
    int64_t skew_ms;                 /* lock: the last skew measured */

    /* ---- backfill threads (expiry_backfiller.c) ---- */
    expiry_engine_backfiller bf[EXPIRY_ENGINE_BACKFILL_THREADS]; /* each steps its own partition */
    pthread_cond_t bf_cond;                                      /* wakes the backfill threads */
    size_t bf_next;     /* lock: round-robin position in tables */
    double bf_paced_ms; /* lock: monotonic ms when the next step may start
                           (--ttl-backfill-rate, shared by the threads) */

    /* ---- scanners (expiry_scanner.c) ---- */
    expiry_engine_worker *workers; /* fixed array of opt.workers */
    double tokens;                 /* lock: delete token bucket (max_deletes_per_sec) */
    int64_t tokens_mono_ms;        /* lock: last refill */
};

/* ---- expiry_engine.c ---- */
/* The table with id, or NULL. REQUIRES: lock held. */
expiry_engine_table *expiry_engine_find(expiry_engine *e, uint32_t table_id);
/* The worker owning (table_id, part). */
size_t expiry_engine_worker_of(const expiry_engine *e, uint32_t table_id, uint32_t part);
/* Marks (table_id, part) for a next-due refresh and wakes its worker.
 * REQUIRES: lock held. */
void expiry_engine_slot_touch(expiry_engine *e, uint32_t table_id, uint32_t part);

/* ---- expiry_backfiller.c ---- */
void *expiry_engine_backfiller_run(void *arg); /* a thread; arg is its expiry_engine_backfiller */

/* ---- expiry_scanner.c ---- */
void *expiry_engine_scanner_run(void *arg); /* the thread; arg is its expiry_engine_worker */

#endif
