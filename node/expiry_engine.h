/*
 * expiry_engine.h: the node's expiry engine (docs/ttl.md "Expiry", docs/node.md "TTL"):
 * which tables have TTL configured and how far this node is with each
 * (expiry_engine.c), the backfill thread that indexes items written before TTL was
 * enabled (expiry_backfiller.c), the scanner threads that delete due items
 * (expiry_scanner.c), and the clock-safety verdict that pauses them. Named apart
 * from partition/expiry.h, the index and sweep it drives.
 *
 * The engine follows the current partition map: maps_apply calls
 * expiry_engine_sync with every new map, and the engine derives everything from the
 * TtlConfig of each table and the partitions this node owns. The expiry
 * index itself and the conditional deletes are partition/expiry.h's.
 *
 * Thread-safety: every function may be called from any thread, except
 * expiry_engine_open/expiry_engine_close (main thread, node_open/node_close). One mutex
 * (expiry_engine.lock) guards the engine's state; no store call is made
 * while holding it.
 *
 * Invariants:
 *  1. A table's index is dropped (expiry_drop_table) only after every
 *     backfill step and sweep of it that started under the old config has
 *     finished (the busy markers), and no new one starts for a disabled
 *     table: a disable leaves no entry written by the engine behind.
 *  2. Scanners delete nothing while the clock verdict is not OK: before the
 *     first heartbeat verdict (unknown) and while the skew is out of bounds.
 *  3. expiry_engine_sync calls are serialized by the caller (maps_apply's
 *     apply_lock), so a disable's drop completes before a later enable's
 *     backfill can start.
 *
 * A table's TTL, as this node sees it (expiry_engine_sync performs each edge):
 *
 *                enable (new config_version)
 *   DISABLED --------------------------------> BACKFILLING
 *   (index       ^   ^                            | expiry_backfiller.c: every owned
 *    dropped)    |   |                            | partition indexed
 *                |   |     disable                v
 *                |   +-------------------- ENABLED (scanners sweep it
 *                |        (drop index)       |   ^  unless paused)
 *                |                    pause  v   | resume
 *                +------------------------ PAUSED (index kept, no sweeps)
 *                          disable
 */
#ifndef LAPSE_EXPIRY_ENGINE_H
#define LAPSE_EXPIRY_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/arena.h"
#include "../common/item.h"
#include "../common/metrics.h"
#include "../common/schema.h"
#include "../placement/pmap.h"
#include "../partition/store.h"
#include "../rpc/wire.h"

#define EXPIRY_ENGINE_MAX_WORKERS 64
#define EXPIRY_ENGINE_DEFAULT_WORKERS 2
#define EXPIRY_ENGINE_DEFAULT_MAX_SKEW_MS 500
#define EXPIRY_ENGINE_SWEEP_BATCH 1000    /* items per expiry_sweep (one WriteBatch) */
#define EXPIRY_ENGINE_BACKFILL_CHUNK 1000 /* items per expiry_backfill_step */
#define EXPIRY_ENGINE_BACKFILL_THREADS 2  /* partitions backfilled at once (2 cores) */
#define EXPIRY_ENGINE_BACKFILL_LOG_MS 5000
#define EXPIRY_ENGINE_DEFAULT_NAIVE_INTERVAL_MS 1000 /* --ttl-naive-interval-ms */
#define EXPIRY_ENGINE_PUSH_WAIT_MS 50 /* PushPartitionMap waits this long for backfills */

typedef struct expiry_engine expiry_engine;

typedef struct expiry_engine_options {
    int workers;                   /* scanner threads, 1..EXPIRY_ENGINE_MAX_WORKERS */
    uint64_t max_deletes_per_sec;  /* 0: no limit (token bucket shared by workers) */
    uint64_t backfill_items_per_s; /* 0: no limit */
    int64_t max_clock_skew_ms;     /* pause scanners beyond this |skew| */
    int naive_scan;                /* benchmark only: full passes, no index (expiry_scanner.c) */
    int64_t naive_interval_ms;     /* sleep between naive passes */
} expiry_engine_options;

/* What expiry_engine_clock_report decided. */
typedef enum expiry_engine_clock_state {
    EXPIRY_ENGINE_CLOCK_UNKNOWN = 0, /* no heartbeat answered yet: scanners wait */
    EXPIRY_ENGINE_CLOCK_OK = 1,
    EXPIRY_ENGINE_CLOCK_SKEWED = 2 /* |skew| > max: scanners paused */
} expiry_engine_clock_state;

/* Called by a scanner after a sweep deleted items of (table_id, part), with
 * no engine lock held (the deletes made outbox records: the node wakes its
 * shipper). Must be quick. */
typedef void (*expiry_engine_delete_hook)(void *arg, uint32_t table_id, uint32_t part);

/* Called by the backfill thread when a table's backfill completes on this
 * node (its progress, which the heartbeat reports, just changed), with the
 * engine lock held: must be quick and must not call into the engine. */
typedef void (*expiry_engine_backfilled_hook)(void *arg);

/* What the engine tells its node. Any member may be NULL; arg outlives the
 * engine. */
typedef struct expiry_engine_hooks {
    expiry_engine_delete_hook on_delete;
    expiry_engine_backfilled_hook on_backfilled;
    void *arg;
} expiry_engine_hooks;

/*
 * Starts the engine for node node_id on store st: syncs with pm (the map
 * loaded at start; borrowed), registers the store's expiry hook, starts the
 * backfill thread and the scanner threads. m (borrowed, outlives the
 * engine) receives the TTL metrics; hooks (may be NULL) hear of every sweep
 * that deleted something and of every completed backfill. Returns 0, or
 * LAPSE_ENOMEM with a reason (nothing left running).
 */
int expiry_engine_open(expiry_engine **out, store *st, uint32_t node_id, const pmap *pm,
                       const expiry_engine_options *opt, metrics *m,
                       const expiry_engine_hooks *hooks, char *err, size_t errlen);
/* Stops the threads (each finishes its current bounded step), clears the
 * hook and frees the engine. Accepts NULL. */
void expiry_engine_close(expiry_engine *e);

/*
 * Follows a newly applied map (borrowed): a table newly enabled (or enabled
 * with a new config_version) starts its backfill; a disabled one stops its
 * scanners and has its index dropped before this returns; pause/resume
 * makes the scanners skip/resume it; ownership changes move partitions in or
 * out of the scanners. Tables no longer in pm are forgotten (maps.c drops
 * their index with their items). Drop failures are logged and retried at
 * the next sync. REQUIRES: calls serialized (invariant 3).
 */
void expiry_engine_sync(expiry_engine *e, const pmap *pm);

/* Waits up to timeout_ms for every enabled table's backfill to complete
 * (PushPartitionMap: an enable on a small table is reported done at once). */
void expiry_engine_wait_backfilled(expiry_engine *e, int timeout_ms);

/* Fills *out with one TtlProgress per table with TTL configured, allocated
 * from a; *n gets the count. Returns 0 or LAPSE_ENOMEM. */
int expiry_engine_progress_pb(expiry_engine *e, arena *a, Lapse__TtlProgress ***out, size_t *n);

/* The clock check of one heartbeat round trip: skew_ms = node clock -
 * (coordinator clock + RTT/2). Pauses or resumes the scanners, logging the
 * transition once with the numbers. */
void expiry_engine_clock_report(expiry_engine *e, int64_t skew_ms, int64_t rtt_ms);
/* The current verdict and the skew it was made on. */
expiry_engine_clock_state expiry_engine_clock(expiry_engine *e, int64_t *skew_ms);

/* Called by writes after a put or update committed it (the new item) to a
 * table: counts TTL values the enabled rule ignores, per reason
 * (lapse_ttl_ignored_items). Cheap when TTL is off. */
void expiry_engine_note_write(expiry_engine *e, const table_schema *t, const item *it);

/* For the metrics collector: refreshes the per-table gauges
 * (lapse_ttl_expired_backlog_items, lapse_ttl_oldest_undeleted_age_seconds,
 * lapse_ttl_config_version, lapse_ttl_ignored_items, clock gauges). */
void expiry_engine_collect(expiry_engine *e, metrics *m);

#endif
