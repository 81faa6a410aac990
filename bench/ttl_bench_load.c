/*
 * ttl_bench_load.c: lapse-ttl-bench's "load" workload (benchmark 2): expiry
 * while a client puts at a fixed rate. Contract in ttl_bench_load.h.
 */
#include "ttl_bench_load.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "ttl_lapse.h"

/* The putter is PUTTERS client threads sharing --put-rate: one synchronous
 * thread cannot reach 5,000 puts/s when a round trip is ~0.3-0.8 ms (an idle
 * VM's vCPUs wake slowly), and a putter that falls behind its schedule
 * measures its own backlog rather than the puts. */
#define PUTTERS 4

typedef struct putter {
    lapse_client *c;
    double rate;      /* puts/s of this thread */
    int64_t until_ms; /* wall clock end */
    long long first;  /* item index of the first put (distinct keys per run) */
    long long stride; /* item index step: the threads interleave their keys */
    int64_t *lat_us;  /* room for cap service times: from the send to the reply */
    int64_t *co_us;   /* and as many latencies from the intended start (the slot), which
                         count the wait behind a slow call (coordinated omission) */
    size_t cap, n;    /* n: successful puts recorded */
    long long failed; /* failed puts: counted apart, in no percentile */
} putter;

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* One client thread, single lapse_put calls at a fixed rate (open loop: a
 * put is issued at its slot, or at once when behind), long-lived items in
 * table LoadPuts. Records each call's latency. */
static void *putter_main(void *arg)
{
    putter *p = arg;
    int64_t t0 = mono_us();
    for (long long i = 0; wall_ms() < p->until_ms && p->n < p->cap; i++) {
        int64_t slot = t0 + (int64_t)((double)i * 1e6 / p->rate);
        int64_t now = mono_us();
        if (slot > now) {
            struct timespec ts = {(slot - now) / 1000000, (long)((slot - now) % 1000000) * 1000};
            nanosleep(&ts, NULL);
        }
        lapse_item *it =
            ttl_lapse_item("put", p->first + i * p->stride, wall_ms() / 1000 + 30 * 86400);
        lapse_error e;
        int64_t a = mono_us();
        int rv = lapse_put(p->c, "LoadPuts", it, NULL, &e);
        int64_t b = mono_us();
        if (rv == 0) {
            p->lat_us[p->n] = b - a;
            p->co_us[p->n++] = b - slot;
        } else {
            p->failed++;
        }
        lapse_item_free(it);
    }
    return NULL;
}

/* Starts the PUTTERS threads until until_ms (wall clock), keys from first
 * on. */
static void putters_start(lapse_client *c, const config *cfg, long long first, int64_t until_ms,
                          pthread_t *th, putter *ps)
{
    int64_t secs = (until_ms - wall_ms()) / 1000 + 2;
    for (int k = 0; k < PUTTERS; k++) {
        putter *p = &ps[k];
        memset(p, 0, sizeof(*p));
        p->c = c;
        p->rate = (double)cfg->put_rate / PUTTERS;
        p->until_ms = until_ms;
        p->first = first + k;
        p->stride = PUTTERS;
        p->cap = (size_t)(p->rate * (double)(secs > 2 ? secs : 2)) + 1;
        p->lat_us = malloc(p->cap * sizeof(*p->lat_us));
        p->co_us = malloc(p->cap * sizeof(*p->co_us));
        pthread_create(&th[k], NULL, putter_main, p);
    }
}

/* Joins the threads and prints their puts' rate and latencies together. */
static void putters_report(pthread_t *th, putter *ps, const char *what, int64_t t0_ms)
{
    size_t n = 0;
    long long failed = 0;
    for (int k = 0; k < PUTTERS; k++) {
        pthread_join(th[k], NULL);
        n += ps[k].n;
        failed += ps[k].failed;
    }
    double seconds = (double)(wall_ms() - t0_ms) / 1000;
    int64_t *lat = malloc((n > 0 ? n : 1) * sizeof(*lat));
    int64_t *co = malloc((n > 0 ? n : 1) * sizeof(*co));
    size_t at = 0;
    for (int k = 0; k < PUTTERS; k++) {
        memcpy(lat + at, ps[k].lat_us, ps[k].n * sizeof(*lat));
        memcpy(co + at, ps[k].co_us, ps[k].n * sizeof(*co));
        at += ps[k].n;
        free(ps[k].lat_us);
        free(ps[k].co_us);
    }
    if (n == 0) {
        printf("lapse  load     puts %s: none succeeded (%lld failed)\n", what, failed);
        free(lat);
        free(co);
        return;
    }
    qsort(lat, n, sizeof(*lat), cmp_i64);
    qsort(co, n, sizeof(*co), cmp_i64);
#define P_MS(a, p) ((double)(a)[(size_t)((double)(n - 1) * (p))] / 1000)
    printf("lapse  load     puts %s: %zu succeeded by %d threads (%.0f/s; %lld failed, in no "
           "percentile); service time (send to reply) p50=%.2fms p99=%.2fms max=%.2fms; latency "
           "from the intended start p50=%.2fms p99=%.2fms max=%.2fms\n",
           what, n, PUTTERS, (double)n / seconds, failed, P_MS(lat, 0.5), P_MS(lat, 0.99),
           P_MS(lat, 1.0), P_MS(co, 0.5), P_MS(co, 0.99), P_MS(co, 1.0));
#undef P_MS
    free(lat);
    free(co);
}

/* Benchmark 2: --load-rate items/s due for --load-seconds while a client
 * puts --put-rate items/s (PUTTERS threads); the putter first runs alone as long, so its
 * latency is compared with and without the expiry. */
void ttl_bench_load_run(cluster *cl, lapse_client *c, const config *cfg)
{
    if (ttl_lapse_create_ttl_table(c, "Load", cfg->rf) != 0 ||
        ttl_lapse_create_ttl_table(c, "LoadPuts", cfg->rf) != 0) {
        return;
    }
    pthread_t th[PUTTERS];
    putter p[PUTTERS];
    int64_t t0 = wall_ms();
    putters_start(c, cfg, 0, t0 + cfg->load_seconds * 1000LL, th, p);
    putters_report(th, p, "alone (no expiry)", t0);
    long long total = cfg->load_rate * cfg->load_seconds;
    due_plan plan = {(wall_ms() / 1000 + 3 + total / cfg->lead_rate) * 1000,
                     (double)cfg->load_rate / 1000};
    double before = ttl_lapse_deleted_total(cl, "Load");
    if (ttl_lapse_load(c, "Load", "load", total, ttl_lapse_planned, &plan, "due items") != 0) {
        return;
    }
    if (wall_ms() > plan.t0_ms) {
        fprintf(stderr, "load: the load ended after the first due instant\n");
    }
    int64_t end = due_s_of(&plan, total - 1) * 1000;
    sleep_ms(plan.t0_ms - wall_ms());
    t0 = wall_ms();
    putters_start(c, cfg, 1000000000LL, end, th, p);
    enum { SAMPLE = 2000 };
    size_t n = total < SAMPLE ? (size_t)total : SAMPLE;
    long long *idx = malloc(n * sizeof(*idx));
    int64_t *due = malloc(n * sizeof(*due));
    int64_t *lag = malloc(n * sizeof(*lag));
    for (size_t i = 0; i < n; i++) {
        idx[i] = (long long)((double)i * (double)total / (double)n);
        due[i] = due_s_of(&plan, idx[i]) * 1000;
    }
    size_t seen = ttl_lapse_sample_lags(c, "Load", "load", idx, due, n, lag, end + 60000);
    putters_report(th, p, "with expiry", t0);
    print_lags("lapse", "load", lag, seen, n);
    ttl_lapse_wait_all_deleted(cl, c, "Load", "load", before, total, end, "the last due instant",
                               end + 60000, 200, "lapse  load    ");
    free(idx);
    free(due);
    free(lag);
}
