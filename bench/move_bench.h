/*
 * move_bench.h: what lapse-move-bench's files share (move_bench.c the
 * phases and the foreground, move_watch.c what the cluster says of its
 * moves, move_ttl.c the TTL deletes falling due meanwhile).
 */
#ifndef LAPSE_MOVE_BENCH_H
#define LAPSE_MOVE_BENCH_H

#include <stdatomic.h>
#include <stdint.h>

#include "../client/lapse.h"
#include "../tests/cluster.h"

#define TABLE "MoveBench"
#define TTL_TABLE "MoveBenchTtl"
#define TTL_EVERY_MS 10   /* one TTL item per 10 ms: 100 a second fall due */
#define TTL_AHEAD_S 3     /* each due 3 s (whole seconds) after its put */
#define TTL_MAX (1 << 18) /* TTL items over the run */

/* Phases of the writers' samples; settle (between join and drain, while the
 * joined node's former copies are dropped) is not reported. */
enum { PH_IDLE, PH_JOIN, PH_SETTLE, PH_DRAIN, PH_N };
#define SETTLE_MS 5000 /* more than the nodes' COPYDROP_DELAY_MS */

typedef struct config {
    const char *bin_dir;
    long items;
    int value_bytes, partitions, writers, idle_s, timeout_s;
    int replication; /* --replication: the loaded table's copies (1 to 3) */
    const char *url;
    const char *node_args; /* --node-args: extra flags for every node */
    int max_moves;         /* --max-concurrent-moves: the coordinator's (default 4, its own) */
} config;

/* ---- move_ttl.c: TTL deletes falling due throughout ---- */

typedef struct ttl_writer {
    const config *cfg;
    atomic_int *phase; /* PH_N: stop */
    int64_t *due_ms;   /* [TTL_MAX]: item t<i>'s due instant */
    long n, failed;
} ttl_writer;

/* The TTL writer thread (arg: a ttl_writer): puts TTL_TABLE items due
 * TTL_AHEAD_S later, one every TTL_EVERY_MS, until its phase is PH_N. */
void *move_ttl_main(void *arg);
/* Reads TTL_TABLE's stream until it holds a TTL delete of each of t's items
 * or 30 s pass; prints each phase's deletion lag (deleted - due, from the
 * records: items due within [bounds[ph], bounds[ph + 1]) count for ph). */
void move_ttl_report(lapse_client *c, const ttl_writer *t, const int64_t bounds[PH_N + 1]);

/* ---- move_watch.c: what the cluster says of its moves ---- */

/* The rebalancer's plan: moves of TABLE left (*moves), sets moving
 * (*moving). -1 when it cannot be read. */
int watch_plan(lapse_client *c, long *moves, long *moving);
/* Node id's copies (replicas, from cluster-status), -1 on error; with
 * progress, a line on the moves under way. */
long watch_copies_on_progress(lapse_client *c, uint32_t id, char *progress, size_t plen);
long watch_copies_on(lapse_client *c, uint32_t id);
/* Node id's copies of table's partitions (the coordinator's map: tables
 * of one copy too), -1 on error. */
long watch_table_copies_on(const cluster *cl, const char *table, uint32_t id);
/* TABLE's bytes (describe-table's TableSizeBytes), or the items' raw size
 * when it reports none. */
double watch_table_bytes(lapse_client *c, const config *cfg);
/* Which of TABLE's sets were moving when: every WATCH_SETS_MS the
 * coordinator's map, a set counted moving while it has a copy over the
 * table's count, a member out of sync or a handover under way. */
#define WATCH_SETS_MS 50
#define WATCH_SETS_MAX (1 << 16) /* samples: 54 minutes */
typedef struct set_watch {
    const cluster *cl;
    atomic_int *phase; /* PH_N: stop */
    double t0;         /* mono_s at the start: the samples' times are since then */
    float *at;         /* [WATCH_SETS_MAX] */
    uint64_t *moving;  /* [WATCH_SETS_MAX]: bit p, partition p of TABLE (p < 64) */
    atomic_long n;
} set_watch;
/* The watcher thread (arg: a set_watch) until its phase is PH_N. */
void *watch_sets_main(void *arg);
/* 1 when partition p was moving in the sample just before time t (mono_s)
 * or the one just after. */
int watch_sets_moving(const set_watch *w, double t, uint32_t p);
/* The nodes' log sizes now, to read what a phase logged (snapshots). */
void watch_log_marks(cluster *cl, long marks[5]);
/* The snapshots the primaries logged since marks: their count, bytes and
 * each one's rate (median and lowest). */
void watch_report_snapshots(cluster *cl, const long marks[5]);

#endif
