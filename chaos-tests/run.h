/*
 * run.h: the state of one chaos run shared by its parts (model.c, workload.c,
 * faults.c, check.c, chaos.c), the seeded random numbers, and the fault log
 * and progress phase (run.c, which uses no other part of the harness).
 * Clocks are common/clock.h's: monotonic for scheduling, wall-clock epoch
 * for TTL values.
 *
 * Thread-safety: `cl` (the cluster) is driven by the main thread only. The
 * fault log is guarded by its mutex. Counters are atomics. Each model key
 * has exactly one writer (the workload thread that owns it, or the main
 * thread for scenario keys); the checker reads the model after every writer
 * has been joined.
 */
#ifndef LAPSE_CHAOS_RUN_H
#define LAPSE_CHAOS_RUN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../client/lapse.h"
#include "../tests/cluster.h"
#include "chaos_opts.h"
#include "model.h"
#include "netns.h"

/* ---- seeded random numbers (splitmix64) ---- */

static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. REQUIRES: lo <= hi. */
static inline int64_t rng_range(uint64_t *s, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

/* ---- the fault log ---- */

#define FAULTLOG_MAX 1024

typedef struct fault_entry {
    int64_t wall_ms; /* when it happened */
    char text[120];
} fault_entry;

typedef struct faultlog {
    pthread_mutex_t mu;
    int n;
    int dropped;
    fault_entry e[FAULTLOG_MAX];
} faultlog;

/* ---- counters ---- */

enum { OP_PUT, OP_UPDATE, OP_DELETE, OP_GET, OP_BATCH, OP_ADMIN, OP_KINDS };

#define RUN_MAX_PLANTS 4

typedef struct run {
    const chaos_opts *opt;
    uint64_t seed;
    cluster *cl;
    chaos_netns *netns;   /* the namespace mode, or NULL on loopback */
    lapse_client *client; /* the workload's, shared by its threads */
    lapse_client *admin;  /* the main thread's: scenarios and checks */
    model m;
    struct registers *regs; /* invariant 8's workload (registers.h), or NULL */
    faultlog flog;
    int64_t start_mono_ms;
    int64_t start_wall_ms; /* times in logs and reports are relative to it */
    int64_t end_mono_ms;   /* the workload stops here */
    int64_t end_wall_ms;   /* the same instant on the wall clock */
    atomic_int stop;
    atomic_ullong next_ver;
    atomic_long ops[OP_KINDS];
    atomic_long errors;
    atomic_long uncertain;
    atomic_long replaced;        /* workload keys frozen and replaced by reserve keys */
    atomic_llong reserve_out_ms; /* when a workload thread first found no key to write
                                    (frozen, reserve used up), from the start; 0: never */
    atomic_int faults;           /* faults injected */
    atomic_int kind_faults[CHAOS_FAULT_KINDS]; /* of which per kind asked (bit i of
                                                 CHAOS_FAULT_*); repeated kills count in none */
    unsigned fault_kind; /* CHAOS_FAULT_* bits the running scenario's faults count for; set by
                            faults_run before the scenario starts any thread */
    atomic_int crashes;  /* daemon exits we did not cause */
    int crashes_seen[CLUSTER_MAX_NODES + CLUSTER_MAX_COORDINATORS]; /* per process, noted by
                                                                      procs_check_crashes */
    atomic_int progress_stop;
    char plants[RUN_MAX_PLANTS][96]; /* "table/key" of each planted violation (plant.h) */
    char fault_dir[512];             /* the nodes' --debug-fault-dir (the copies plant), or "" */
    int dir_lost[CLUSTER_MAX_NODES + 1]; /* node ids whose data dir the dir-lost fault removed */
    int move_node;         /* a drain the move fault left running (faults_move.h); 0: none */
    int64_t move_since_ms; /* clock_mono when it began */
    int nplants;
    char phase[96]; /* what the main thread is doing, for the progress line */
    pthread_mutex_t phase_mu;
} run;

/* Appends to the fault log with the current wall time, and echoes it to
 * stderr unless quiet. printf-style. */
void flog_add(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sets the progress line's phase text. */
void run_phase(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A fresh version number for an item's "ver" attribute. */
static inline uint64_t run_ver(run *r)
{
    return atomic_fetch_add(&r->next_ver, 1) + 1;
}

#endif
