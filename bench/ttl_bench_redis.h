/*
 * ttl_bench_redis.h: lapse-ttl-bench's Redis peer (redis-server required):
 * Redis's active expiry under the same workloads as the Lapse side.
 */
#ifndef LAPSE_TTL_BENCH_REDIS_H
#define LAPSE_TTL_BENCH_REDIS_H

#include <stdint.h>

#include "redis_peer.h"
#include "ttl_bench_common.h"

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
