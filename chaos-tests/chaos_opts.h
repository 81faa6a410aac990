/*
 * chaos_opts.h: the options and the result of a chaos run (chaos.h), and the
 * numbering of its fault scenarios and invariants: types only, so every part
 * of the harness can use them without reaching into chaos.c.
 */
#ifndef LAPSE_CHAOS_OPTS_H
#define LAPSE_CHAOS_OPTS_H

#include <stdint.h>

/* Fault scenarios (--faults). */
enum {
    CHAOS_FAULT_NODE_KILL = 1,        /* kill -9 a node during a mass expiry */
    CHAOS_FAULT_BACKFILL_KILL = 2,    /* kill -9 a node mid-backfill */
    CHAOS_FAULT_COORD_KILL = 4,       /* kill -9 the coordinator in create-table / TTL enable */
    CHAOS_FAULT_STOP_CONT = 8,        /* SIGSTOP a node for seconds, then SIGCONT */
    CHAOS_FAULT_PARTITION = 16,       /* cut a node's link for seconds (root: netns.h) */
    CHAOS_FAULT_DEST_KILL = 32,       /* kill -9 a GSI / stream destination while records ship */
    CHAOS_FAULT_LEADER_KILL = 64,     /* on etcd: kill -9 the leading coordinator in create-table /
                                         TTL enable */
    CHAOS_FAULT_ETCD_KILL = 128,      /* on etcd: kill -9 an etcd member during a create-table */
    CHAOS_FAULT_COORD_STOP = 256,     /* on etcd: SIGSTOP the leading coordinator past its lease */
    CHAOS_FAULT_ON_ETCD = 448,        /* the faults that run the cluster on etcd (2 coordinators) */
    CHAOS_FAULT_FAILOVER_TWICE = 512, /* kill -9 a primary, and its successor once promoted */
    CHAOS_FAULT_ETCD_CUT = 1024,      /* with copies: a primary cut off from etcd, not clients */
    CHAOS_FAULT_DIR_LOST = 2048,      /* with copies: kill -9 a node, remove its data dir */
    CHAOS_FAULT_ONEWAY_CUT = 4096,    /* with copies, root: a primary's packets to a follower
                                         dropped, not the follower's to it (netns.h) */
    CHAOS_FAULT_MOVE = 8192,          /* with copies, on loopback: a node drained (four nodes)
                                         and a process killed at a step of its moves */
    CHAOS_FAULT_ALL = 16383
};

#define CHAOS_FAULT_KINDS 14 /* the CHAOS_FAULT_* bits: 1 << 0 .. 1 << 13 */

#define CHAOS_INVARIANTS 9

/* --debug-idle: a run that must fail for lack of activity (chaos_plant_test). */
enum {
    CHAOS_IDLE_WRITES = 1, /* the workload threads only read */
    CHAOS_IDLE_FAULTS = 2  /* the scenarios asked for never run, so nothing is injected */
};

typedef struct chaos_opts {
    uint64_t seed;           /* the run's seed (chaos_parse draws one if not given) */
    int duration_s;          /* workload and fault phase */
    int items;               /* keys per workload table */
    unsigned faults;         /* CHAOS_FAULT_* mask; 0: none */
    int profile_long;        /* long: faults mixed at random, bigger backfills */
    int runs;                /* seeds seed, seed+1, ... each on a fresh cluster */
    int threads;             /* workload client threads */
    const char *report_path; /* NULL: no report file */
    const char *bin_dir;     /* NULL: cluster.h's default */
    int keep;                /* keep the run directory even when the run passed */
    int plant;               /* --debug-plant-violation[=delete|expire|pause|index|daemon]:
                                PLANT_* */
    int idle;                /* --debug-idle=writes|faults: CHAOS_IDLE_* */
    int quiet;               /* no progress line */
    unsigned replication;    /* --replication: copies of every table's partitions; 0: 1 */
    int balance_primaries;   /* --balance-primaries (0: off); -1: coordinators' default */
} chaos_opts;

/* What one run (or, summed, several) found. */
typedef struct chaos_result {
    int violations[CHAOS_INVARIANTS + 1]; /* per invariant, [1..9] */
    int checked[CHAOS_INVARIANTS + 1];    /* 1: the invariant was checked */
    long items_checked;                   /* written keys read and judged */
    long unwritten; /* keys never written (read, must be absent): apart from the above */
    int idle_runs;  /* runs that failed for lack of activity (they proved nothing) */
    long ops;
    int faults;
    int settle_ms;         /* of the last run; -1 when it never settled */
    char planted_key[400]; /* what was planted behind the model's back ("table/key, ..."), or "" */
    int planted_reported;  /* the checker named every planted key */
    int setup_failed;      /* the cluster or the tables could not be set up */
    int partition_skipped; /* partition was asked for but cannot run here (not root, ...) */
} chaos_result;

#endif
