/*
 * ttl_bench_load.h: lapse-ttl-bench's "load" workload (benchmark 2):
 * --load-rate items/s fall due for --load-seconds while client threads put
 * --put-rate items/s; the puts run alone first as long, so their latency is
 * compared with and without the expiry.
 */
#ifndef LAPSE_BENCH_TTL_BENCH_LOAD_H
#define LAPSE_BENCH_TTL_BENCH_LOAD_H

#include "../client/lapse.h"
#include "../tests/cluster.h"
#include "ttl_bench_common.h"

/* Runs the workload on tables Load and LoadPuts of cl and prints its lines. */
void ttl_bench_load_run(cluster *cl, lapse_client *c, const config *cfg);

#endif
