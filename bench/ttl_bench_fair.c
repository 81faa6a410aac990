/*
 * ttl_bench_fair.c: lapse-ttl-bench's "fair" workload, Lapse's side (issue
 * 18). Contract in ttl_bench_fair.h.
 */
#include "ttl_bench_fair.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "stream_follow.h"
#include "ttl_lapse.h"

/* The fair comparison's Lapse side (issue 18): the steady workload's shape
 * (--rate items/s due for --seconds among --long-lived far-future items) on
 * a table with the change stream, every due item observed as a subscriber
 * would: lag = the instant a stream follower (one long-polling reader per
 * shard) reads its TTL REMOVE minus its due instant, the same observation as
 * Redis's expired keyspace event. Returns the p99 lag in ms, or -1 when not
 * every due item was seen within 60 s of the last due instant. */
int64_t ttl_bench_fair_run(lapse_client *c, const config *cfg)
{
    if (ttl_lapse_create_table(c, "Fair", 1, cfg->rf) != 0) {
        return -1;
    }
    if (ttl_lapse_load(c, "Fair", "long", cfg->long_lived, ttl_lapse_far_future, NULL,
                       "long-lived items") != 0) {
        return -1;
    }
    long long total = cfg->rate * cfg->seconds;
    due_plan plan = {(wall_ms() / 1000 + 3 + total / 100000) * 1000, (double)cfg->rate / 1000};
    if (ttl_lapse_load(c, "Fair", "due", total, ttl_lapse_planned, &plan, "due items") != 0) {
        return -1;
    }
    /* The follower starts past the loads' INSERTs (as a subscriber that
     * keeps up would be), before the first due instant. */
    if (wall_ms() > plan.t0_ms - 200) {
        fprintf(stderr, "fair: the load ended too close to the first due instant\n");
        return -1;
    }
    stream_follow *f = NULL;
    if (stream_follow_start(&f, c, "Fair", "due", total, TTL_LAPSE_STREAM_SHARDS, 1) != 0) {
        fprintf(stderr, "fair: cannot start the stream follower\n");
        return -1;
    }
    int64_t end = due_s_of(&plan, total - 1) * 1000;
    while (atomic_load(&f->removes) < total && wall_ms() < end + 60000) {
        sleep_ms(100);
    }
    stream_follow_stop(f);
    int64_t *lag = malloc((size_t)total * sizeof(*lag));
    size_t m = 0;
    for (long long i = 0; i < total; i++) {
        if (f->seen_ms[i] != 0) {
            lag[m++] = f->seen_ms[i] - due_s_of(&plan, i) * 1000;
        }
    }
    print_lags("lapse", "fair", lag, m, (size_t)total);
    int64_t p99 = m > 0 ? lag[(size_t)((double)(m - 1) * 0.99)] : -1;
    if (m < (size_t)total) {
        printf("lapse  fair     the wait ended 60 s after the last due instant with %zu of %lld "
               "TTL REMOVEs read\n",
               m, total);
        p99 = -1;
    }
    free(lag);
    stream_follow_free(f);
    return p99;
}
