/*
 * ttl_bench.h: what lapse-ttl-bench's Lapse side (ttl_bench.c) and its Redis
 * peer (ttl_bench_redis.c) share: the configuration, the plan of due
 * instants, clocks and the lag report.
 */
#ifndef LAPSE_TTL_BENCH_H
#define LAPSE_TTL_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "bench_util.h"

typedef struct config {
    const char *bin_dir;
    const char *workloads;
    long long long_lived;
    long long rate;
    int seconds;
    long long burst;
    long long backfill;
    int reps;
    int redis;
    long long load_rate; /* "load": items/s falling due */
    int load_seconds;    /* "load": for this long */
    long long put_rate;  /* "load": single puts/s of the foreground client */
} config;

/* Prints p50/p99/max of lag[0..n) (ms) and how many of expected were seen. */
void print_lags(const char *who, const char *what, int64_t *lag, size_t n, size_t expected);

/* Prints "# redis: " and what `redis-server --version` says (the version
 * every Redis figure of the run is from). */
void redis_print_version(void);

/* The Redis peer of the steady and burst workloads (redis-server required). */
void redis_steady(const config *cfg);
void redis_burst(const config *cfg);
/* The fair comparison's Redis side (run with the Lapse cluster stopped):
 * the steady shape four times, only the due keys or every key volatile, at
 * active-expire-effort 1 and 10, every due key observed by its expired
 * event; then the ratio of Redis's best p99 to lapse_p99 (Lapse's, from
 * its stream follower; -1: not every item was observed). */
void redis_fair_all(const config *cfg, int64_t lapse_p99);

#endif
