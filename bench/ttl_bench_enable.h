/*
 * ttl_bench_enable.h: lapse-ttl-bench's workloads of enabling TTL.
 */
#ifndef LAPSE_BENCH_TTL_BENCH_ENABLE_H
#define LAPSE_BENCH_TTL_BENCH_ENABLE_H

#include "../client/lapse.h"
#include "../tests/cluster.h"
#include "ttl_bench_common.h"

/* "propagation": update-ttl to ENABLED on --reps empty tables; prints the
 * median, min and max. */
void ttl_bench_enable_propagation(lapse_client *c, const config *cfg);
/* "backfill": enables TTL on a table of --backfill items and prints the
 * items/s until ENABLED, with the nodes' backfill counters. */
void ttl_bench_enable_backfill(cluster *cl, lapse_client *c, const config *cfg);

#endif
