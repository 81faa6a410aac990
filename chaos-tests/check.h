/*
 * check.h: settling the cluster after the faults, and checking the
 * invariants of docs/chaos.md against the model.
 *
 *   1  every acknowledged write is present (as written: its "ver"), unless
 *      deleted by the user or legitimately expired; an acknowledged delete
 *      stays deleted; an acknowledged CreateTable survives
 *   2  every item whose final TTL is eligible and due before the settle
 *      instant is gone (base table; in the LSI and GSI through 5)
 *   3  no item whose TTL was extended or removed before its deletion was
 *      deleted; items with TTLs over five years old or of a non-number type
 *      are untouched
 *   4  the stream of the indexed table holds one record per change of an
 *      item, in order (each record's old image is the previous record's
 *      new image): so exactly one REMOVE by lapse.ttl per TTL delete, of an
 *      item that was eligible and due, and none for any other; one record
 *      per acknowledged write, at most one per uncertain one; every shard
 *      gapless from 1 and in the item's base partition; replaying it gives
 *      the table (check_stream.c)
 *   5  the GSI equals the projection of the base table (no orphans, nothing
 *      missing, the same images) and so does the LSI (check_repl.c)
 *   6  no daemon exited except by our kills, each shuts down cleanly on
 *      SIGTERM, and no sanitizer report is in any daemon's log
 *
 * Thread-safety: main thread only, after the workload threads are joined.
 */
#ifndef LAPSE_CHAOS_CHECK_H
#define LAPSE_CHAOS_CHECK_H

#include "run.h"

#define CHECK_MIN_WRITES 100        /* acknowledged writes a run needs (check_activity) */
#define CHECK_MIN_REGISTER_CALLS 20 /* reads, and writes, of invariant 8's workload */
#define CHECK_MAX_DETAILS 50
#define CHECK_MAX_IDLE 16

typedef struct violation {
    int inv;
    char where[96]; /* table/key, table, or process */
    char expected[512];
    char found[256];
    char last_op[112];    /* the key's last call, "" for non-item findings */
    int64_t last_wall_ms; /* when it returned; 0 for non-item findings */
} violation;

/* What the checks of 4 and 5 read, for the report. */
typedef struct repl_stats {
    char table[48];   /* "" when no table was checked */
    long records;     /* stream records */
    long ttl_removes; /* of which REMOVEs by lapse.ttl */
    int shards;       /* stream shards */
    long base_items;  /* items in the table */
    long gsi_entries; /* GSI entries over every WL_GROUPS value */
    long lsi_entries; /* LSI entries */
    int attempts;     /* reads until everything matched (or the deadline) */
    int converge_ms;  /* from the first read until everything matched; -1: never */
} repl_stats;

/* What check_linear read, for the report and check_activity. */
typedef struct lin_stats {
    long calls;      /* in every history, final reads included */
    long reads;      /* successful gets */
    long writes;     /* acknowledged puts and conditional puts */
    long cas_ok;     /* conditional puts that took effect */
    long cas_failed; /* ... whose condition was false */
    long unknown;    /* puts whose outcome is unknown (errors, timeouts) */
    long steps;      /* search steps over every key */
    int keys;        /* histories judged */
    int undecided;   /* of which the search gave up on (not violations) */
} lin_stats;

typedef struct check_out {
    int violations[CHAOS_INVARIANTS + 1];
    int checked[CHAOS_INVARIANTS + 1];
    long items;              /* written keys read and judged */
    long unwritten;          /* keys never written, read and judged (must be absent): apart */
    long by_class[MC_COUNT]; /* judged keys per model_class, MC_UNWRITTEN included */
    long acked_writes;       /* acknowledged puts and updates in the model (check_activity) */
    long acked_deletes;      /* acknowledged user deletes */
    int idle;                /* minimum-activity requirements the run missed (check_activity) */
    char idle_why[CHECK_MAX_IDLE][120]; /* each of them */
    int nv;                             /* details kept, up to CHECK_MAX_DETAILS */
    violation v[CHECK_MAX_DETAILS];
    int planted_reported;
    int64_t settle_wall_ms; /* the settle instant */
    int settle_ms;          /* from it until settled; -1: deadline passed */
    repl_stats repl;        /* of the last check_repl */
    long sets_compared;     /* replicated partitions whose copies check_copies compared */
    lin_stats lin;          /* of check_linear */
} check_out;

/* Brings every process back, resolves TTL enables, takes the settle
 * instant, then waits (up to deadline_ms) until every node is UP, every
 * TTL table is ENABLED and no key due before the settle instant is still
 * present. Fills out->settle_*. */
void check_settle(run *r, int deadline_ms, check_out *out);

/* Invariants 1-3: reads every key of every table and judges it. */
void check_items(run *r, check_out *out);

/* Invariant 9, on a run with --replication above 1 (else not checked):
 * every copy of every partition of every replicated table is in the
 * in-sync set and identical (PartitionDigest: items, digest, log
 * position), read again until deadline_ms; what still differs then is
 * filed, once per partition (check_copies.c). */
void check_copies(run *r, check_out *out, int deadline_ms);

/* Invariant 8 (check_linear.c): every key's history of the register
 * workload (registers.h) is linearizable (linear.h); a history that is not
 * is filed with the call no order could place. A search that gave up is
 * counted in out->lin.undecided, not filed. Not checked without the
 * register workload. */
void check_linear(run *r, check_out *out);
/* Invariants 4 and 5 on the indexed table (check_repl.c): reads its
 * stream, scans it, queries the GSI for every value of WL_GROUPS and (once
 * those match) the LSI for every key, and compares them with each other and
 * with the model; a mismatch is read again every 500 ms (the outbox ships
 * after a restart, TTL deletes of items due after the settle instant still
 * happen) and becomes a violation only when it persists past deadline_ms.
 * May be called again (after a plant): violations add up. */
void check_repl(run *r, check_out *out, int deadline_ms);

/* Invariant 6: crashes during the run, clean SIGTERM shutdown of every
 * process (which stops the cluster), sanitizer reports in the logs.
 * before_sigterm (may be NULL) runs after the crash check and before the
 * first SIGTERM: --debug-plant-violation=daemon's plant_daemon_exit breaks
 * the last two there (plant.h). */
void check_daemons(run *r, check_out *out, void (*before_sigterm)(run *r));

/* The run's minimum activity (check_activity.c), once the checks above ran:
 * a run that passed them without it proved nothing. Each requirement it
 * missed goes to out->idle and out->idle_why:
 *  - at least CHECK_MIN_WRITES acknowledged writes (puts and updates) and
 *    one acknowledged user delete;
 *  - at least one judged key in each class an invariant judges: deleted
 *    (1), due and gone (2: so TTL deletions happened), due later (1),
 *    protected by an extension or removal (3), never eligible (3), no TTL
 *    (1);
 *  - on the indexed table: stream records, TTL REMOVEs among them (4), GSI
 *    and LSI entries (5);
 *  - CHECK_MIN_REGISTER_CALLS reads and acknowledged writes of the
 *    register workload, a conditional write taken and one refused, and no
 *    history the linearizability search gave up on (8);
 *  - a fault asked for (not --faults none), and at least one injected
 *    fault of every kind asked for (r->opt->faults once the unavailable
 *    ones are dropped). */
void check_activity(run *r, check_out *out);

#endif
