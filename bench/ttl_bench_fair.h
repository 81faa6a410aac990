/*
 * ttl_bench_fair.h: lapse-ttl-bench's "fair" workload, Lapse's side: the
 * steady shape on a table with the change stream, every due item observed by
 * a stream follower as Redis's are by their expired events (the Redis side is
 * redis_fair_all, ttl_bench_redis.h).
 */
#ifndef LAPSE_BENCH_TTL_BENCH_FAIR_H
#define LAPSE_BENCH_TTL_BENCH_FAIR_H

#include <stdint.h>

#include "../client/lapse.h"
#include "ttl_bench_common.h"

/* Runs it on table Fair and prints its lines. Returns the p99 lag in ms, or
 * -1 when not every due item was seen within 60 s of the last due instant. */
int64_t ttl_bench_fair_run(lapse_client *c, const config *cfg);

#endif
