/*
 * ttl_bench_common.h: what lapse-ttl-bench's Lapse side (ttl_bench.c and its
 * workload files) and its Redis peer (ttl_bench_redis.c) share: the
 * configuration and the lag report (the plan of due instants and the clocks
 * are bench_util.h's).
 */
#ifndef LAPSE_TTL_BENCH_COMMON_H
#define LAPSE_TTL_BENCH_COMMON_H

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
    const char *replication; /* --replication: the copies to measure, "1,3" */
    int rf;                  /* the copies of every Lapse table of this pass */
    long long lead_rate; /* items/s the plans assume a load goes at, to set the first due
                            instant after it ends (lower with copies) */
} config;

/* Prints p50/p99/max of lag[0..n) (ms) and how many of expected were seen. */
void print_lags(const char *who, const char *what, int64_t *lag, size_t n, size_t expected);

#endif
