/*
 * lapse-ttl-bench: how fast Lapse deletes expired items, against Redis's
 * active expiry in the same run when redis-server is installed.
 *
 *   lapse-ttl-bench [--workloads steady,load,burst,propagation,backfill,naive-burst]
 *                   [--long-lived N] [--rate N] [--seconds S] [--load-rate N]
 *                   [--load-seconds S] [--put-rate N] [--burst N]
 *                   [--backfill N] [--reps N] [--bin-dir DIR] [--no-redis]
 *
 * Lag of an item = time its deletion became visible minus its due instant.
 * Lapse: a poller reads a sample of the due items with lapse_batch_get every
 * few milliseconds and notes when each is first gone; totals come from the
 * nodes' lapse_ttl_deleted_items_total. Redis: keys set with PEXPIREAT and
 * never read (a read would expire them lazily), lag from the keyspace
 * notification each active-expiry deletion publishes.
 *
 * Workloads (issue 3's benchmark list):
 *   steady       --rate items/s fall due for --seconds while --long-lived
 *                items with far-future TTLs sit in the table
 *   load         --load-rate items/s fall due for --load-seconds while one
 *                client thread puts --put-rate items/s (single lapse_put,
 *                long-lived items in another table): lag, and put latency
 *                with the expiry running and, first, without it
 *   burst        --burst items due in the same second: time to 50/99/100%
 *   propagation  update-ttl to ENABLED on an empty table, median of --reps
 *   backfill     enable TTL on a table of --backfill items: items/s per node
 *   naive-burst  the burst again on a second cluster started with
 *                --ttl-naive-scan (no index: full passes every second), last
 *   fair         the steady shape on a table with the stream; every due item
 *                observed on both sides the same way: Lapse's TTL REMOVEs read
 *                by a stream follower, Redis's expired events; then, the
 *                cluster stopped, Redis four times: only the due keys volatile
 *                or every key, active-expire-effort 1 and 10; the ratio to
 *                Redis's best case (not in the default list)
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "../client/lapse.h"
#include "../tests/cluster.h"
#include "../tests/scrape.h"
#include "resp.h"
#include "stream_follow.h"
#include "ttl_bench.h"

enum { FAIR_SHARDS = 16 }; /* the fair table's partitions: one stream reader each */

extern char **environ;

/* Prints p50/p99/max of n lags (ms), sorting them. */
void print_lags(const char *who, const char *what, int64_t *lag, size_t n, size_t expected)
{
    if (n == 0) {
        printf("%-6s %-8s no item deleted (of %zu)\n", who, what, expected);
        return;
    }
    qsort(lag, n, sizeof(*lag), cmp_i64);
    printf("%-6s %-8s lag p50=%lldms p99=%lldms max=%lldms  (%zu of %zu observed deleted)\n", who,
           what, (long long)lag[(n - 1) / 2], (long long)lag[(size_t)((double)(n - 1) * 0.99)],
           (long long)lag[n - 1], n, expected);
}

/* ======================================================================== */
/* Lapse                                                                    */
/* ======================================================================== */

static lapse_item *make_item(const char *prefix, long long i, int64_t ttl_s)
{
    char k[48];
    snprintf(k, sizeof(k), "%s%012lld", prefix, i);
    lapse_item *it = lapse_item_new();
    lapse_item_set_s(it, "Id", k);
    lapse_item_set_n_i64(it, "ExpirationTime", ttl_s);
    lapse_item_set_s(it, "Pad", "0123456789012345678901234567890123456789");
    return it;
}

typedef struct loader {
    lapse_client *c;
    const char *table;
    const char *prefix;
    long long from, to; /* item indexes [from, to) */
    int64_t (*ttl_of)(void *arg, long long i);
    void *arg;
    atomic_llong *done;
    int failed;
} loader;

static void *loader_main(void *p)
{
    loader *l = p;
    enum { B = 1000 };
    lapse_item *batch[B];
    lapse_error e;
    for (long long i = l->from; i < l->to;) {
        int n = 0;
        for (; n < B && i < l->to; n++, i++) {
            batch[n] = make_item(l->prefix, i, l->ttl_of(l->arg, i));
        }
        if (lapse_batch_write(l->c, l->table, batch, (size_t)n, NULL, 0, &e) != 0) {
            fprintf(stderr, "load: %s\n", e.message);
            l->failed = 1;
        }
        for (int k = 0; k < n; k++) {
            lapse_item_free(batch[k]);
        }
        atomic_fetch_add(l->done, n);
        if (l->failed) {
            break;
        }
    }
    return NULL;
}

/* Loads [0, n) with 4 threads, printing progress. Returns 0 or -1. */
static int load(lapse_client *c, const char *table, const char *prefix, long long n,
                int64_t (*ttl_of)(void *, long long), void *arg, const char *what)
{
    enum { T = 4 };
    loader ls[T];
    pthread_t th[T];
    atomic_llong done = 0;
    int64_t t0 = wall_ms();
    for (int t = 0; t < T; t++) {
        ls[t] = (loader){c, table, prefix, n * t / T, n * (t + 1) / T, ttl_of, arg, &done, 0};
        pthread_create(&th[t], NULL, loader_main, &ls[t]);
    }
    for (;;) {
        long long d = atomic_load(&done);
        fprintf(stderr, "\rloading %s: %lld/%lld", what, d, n);
        if (d >= n) {
            break;
        }
        int failed = 0;
        for (int t = 0; t < T; t++) {
            failed |= ls[t].failed;
        }
        if (failed) {
            break;
        }
        sleep_ms(200);
    }
    int failed = 0;
    for (int t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        failed |= ls[t].failed;
    }
    fprintf(stderr, " (%.1f s)\n", (double)(wall_ms() - t0) / 1000);
    return failed ? -1 : 0;
}

static int64_t far_future(void *arg, long long i)
{
    (void)arg;
    (void)i;
    return wall_ms() / 1000 + 30 * 86400;
}

/* Due instants are whole seconds (TTL values are epoch seconds): item i is
 * due at the second its slot in the stream falls in. */
static int64_t planned_ttl(void *arg, long long i)
{
    return due_s_of(arg, i);
}

/* With stream: 16 partitions and the change stream (TTL deletes in it),
 * else 64 partitions. */
static int create_table_ttl(lapse_client *c, const char *name, int stream)
{
    lapse_error e;
    lapse_table_def d = {0};
    d.name = name;
    d.partition_key = "Id";
    d.partition_key_type = 'S';
    d.partitions = stream ? FAIR_SHARDS : 64;
    d.stream = stream;
    if (lapse_create_table(c, &d, &e) != 0) {
        fprintf(stderr, "create %s: %s\n", name, e.message);
        return -1;
    }
    lapse_ttl_spec spec = {0};
    spec.action = LAPSE_TTL_ENABLE;
    spec.attribute = "ExpirationTime";
    if (lapse_update_ttl(c, name, &spec, NULL, &e) != 0) {
        fprintf(stderr, "update-ttl %s: %s\n", name, e.message);
        return -1;
    }
    return 0;
}

static int create_ttl_table(lapse_client *c, const char *name)
{
    return create_table_ttl(c, name, 0);
}

/* lapse_ttl_deleted_items_total of table (only: other tables of the run
 * may still be expiring), summed over the nodes. */
static double deleted_total(cluster *cl, const char *table)
{
    char label[80];
    snprintf(label, sizeof(label), "table=\"%s\"", table);
    double sum = 0;
    for (int n = 1; n <= cluster_nodes(cl); n++) {
        char *text = scrape_get(cluster_metrics_addr(cl, n), 2000);
        if (text != NULL) {
            sum += scrape_sum(text, "lapse_ttl_deleted_items_total", label);
            free(text);
        }
    }
    return sum;
}

/* Waits (scraping every poll_ms, until give_up_ms on the wall clock) until
 * the table's deleted counter has grown by total since before, then reads
 * CONFIRM_SAMPLE of the due keys prefix<i>, i spread over [0, total), and
 * prints one line: how many were counted deleted, and when; that the wait
 * ended without all of them, when it did; and how many of the sample a
 * read still found. ref_what names the instant ref_ms (wall clock). Returns
 * the ms from ref_ms until the counter reached total, or -1 when the wait
 * ended first. */
static int64_t wait_all_deleted(cluster *cl, lapse_client *c, const char *table, const char *prefix,
                                double before, long long total, int64_t ref_ms,
                                const char *ref_what, int64_t give_up_ms, int poll_ms,
                                const char *line_head)
{
    enum { CONFIRM_SAMPLE = 10000 };
    double got = 0;
    int64_t done = -1;
    while ((got = deleted_total(cl, table) - before) < (double)total && wall_ms() < give_up_ms) {
        sleep_ms(poll_ms); /* a scrape makes each node count its backlog: not too often */
    }
    if (got >= (double)total) {
        done = wall_ms() - ref_ms;
    }
    long long n = total < CONFIRM_SAMPLE ? total : CONFIRM_SAMPLE, present = 0, unread = 0;
    lapse_item *keys[LAPSE_BATCH_GET_MAX], *found[LAPSE_BATCH_GET_MAX];
    for (long long at = 0; at < n; at += LAPSE_BATCH_GET_MAX) {
        long long m = n - at < LAPSE_BATCH_GET_MAX ? n - at : LAPSE_BATCH_GET_MAX;
        for (long long j = 0; j < m; j++) {
            char k[48];
            snprintf(k, sizeof(k), "%s%012lld", prefix,
                     (long long)((double)(at + j) * (double)total / (double)n));
            keys[j] = lapse_item_new();
            lapse_item_set_s(keys[j], "Id", k);
        }
        lapse_error e;
        int rv = lapse_batch_get(c, table, keys, (size_t)m, found, &e);
        for (long long j = 0; j < m; j++) {
            lapse_item_free(keys[j]);
            if (rv == 0) {
                present += found[j] != NULL;
                lapse_item_free(found[j]);
            }
        }
        unread += rv != 0 ? m : 0;
    }
    if (done >= 0) {
        printf("%s all %lld due items counted deleted (table %s) %.3f s after %s (scraped every "
               "%d ms)",
               line_head, total, table, (double)done / 1000, ref_what, poll_ms);
    } else {
        printf("%s the wait ended %.0f s after %s with %.0f of %lld due items counted deleted "
               "(table %s)",
               line_head, (double)(give_up_ms - ref_ms) / 1000, ref_what, got, total, table);
    }
    printf("; a read of %lld of them found %lld still present%s\n", n - unread, present,
           unread > 0 ? " (some reads failed)" : "");
    return done;
}

/* Polls a sample of due items until each is gone; lag[i] = first seen gone
 * - due. Returns how many were seen gone. */
static size_t sample_lags(lapse_client *c, const char *table, const char *prefix,
                          const long long *idx, const int64_t *due_ms, size_t n, int64_t *lag,
                          int64_t give_up_ms)
{
    char *gone = calloc(n, 1);
    size_t ngone = 0;
    lapse_item **keys = calloc(n, sizeof(*keys));
    lapse_item **got = calloc(n, sizeof(*got));
    size_t *which = calloc(n, sizeof(*which));
    while (ngone < n && wall_ms() < give_up_ms) {
        int64_t now = wall_ms();
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (!gone[i] && due_ms[i] <= now) {
                char ks[48];
                snprintf(ks, sizeof(ks), "%s%012lld", prefix, idx[i]);
                keys[k] = lapse_item_new();
                lapse_item_set_s(keys[k], "Id", ks);
                which[k++] = i;
            }
        }
        lapse_error e;
        if (k > 0 && lapse_batch_get(c, table, keys, k, got, &e) == 0) {
            int64_t at = wall_ms();
            for (size_t j = 0; j < k; j++) {
                if (got[j] == NULL) {
                    gone[which[j]] = 1;
                    lag[ngone++] = at - due_ms[which[j]];
                }
                lapse_item_free(got[j]);
            }
        }
        for (size_t j = 0; j < k; j++) {
            lapse_item_free(keys[j]);
        }
        /* 20 ms: fine enough for lag, light enough not to compete with the
         * deletes it measures. */
        sleep_ms(20);
    }
    free(gone);
    free(keys);
    free(got);
    free(which);
    return ngone;
}

static void lapse_steady(cluster *cl, lapse_client *c, const config *cfg)
{
    if (create_ttl_table(c, "Steady") != 0) {
        return;
    }
    if (load(c, "Steady", "long", cfg->long_lived, far_future, NULL, "long-lived items") != 0) {
        return;
    }
    long long total = cfg->rate * cfg->seconds;
    /* The due stream starts after the load of the due items can finish. */
    due_plan plan = {(wall_ms() / 1000 + 3 + total / 100000) * 1000, (double)cfg->rate / 1000};
    double before = deleted_total(cl, "Steady");
    if (load(c, "Steady", "due", total, planned_ttl, &plan, "due items") != 0) {
        return;
    }
    if (wall_ms() > plan.t0_ms) {
        fprintf(stderr, "steady: the load ended after the first due instant\n");
    }
    enum { SAMPLE = 1000 };
    size_t n = total < SAMPLE ? (size_t)total : SAMPLE;
    long long *idx = malloc(n * sizeof(*idx));
    int64_t *due = malloc(n * sizeof(*due));
    int64_t *lag = malloc(n * sizeof(*lag));
    for (size_t i = 0; i < n; i++) {
        idx[i] = (long long)((double)i * (double)total / (double)n);
        due[i] = due_s_of(&plan, idx[i]) * 1000;
    }
    /* Due instants are whole seconds: the last item's is the stream's end. */
    int64_t end = due_s_of(&plan, total - 1) * 1000;
    size_t seen = sample_lags(c, "Steady", "due", idx, due, n, lag, end + 60000);
    print_lags("lapse", "steady", lag, seen, n);
    /* Everything due was deleted: the table's counter says how long it
     * took, a read of a sample confirms it. */
    wait_all_deleted(cl, c, "Steady", "due", before, total, end, "the last due instant",
                     end + 60000, 200, "lapse  steady  ");
    free(idx);
    free(due);
    free(lag);
}

/* label: "burst" (the indexed scanners) or "naive" (--ttl-naive-scan). */
static void lapse_burst(cluster *cl, lapse_client *c, const config *cfg, const char *label)
{
    if (create_ttl_table(c, "Burst") != 0) {
        return;
    }
    due_plan plan = {(wall_ms() / 1000 + 4 + cfg->burst / 100000) * 1000, 1e12};
    double before = deleted_total(cl, "Burst");
    if (load(c, "Burst", "burst", cfg->burst, planned_ttl, &plan, "burst items") != 0) {
        return;
    }
    /* Due at plan.t0_ms (all in the same second); expired from t0 + 1 ms.
     * 50% and 99% from a sample of the keys (the time each is first seen
     * gone), 100% from the table's deleted counter on the nodes, scraped
     * every 200 ms because a scrape makes each node count its backlog, and
     * confirmed by a read of a sample. */
    enum { SAMPLE = 1000 };
    size_t n = cfg->burst < SAMPLE ? (size_t)cfg->burst : SAMPLE;
    long long *idx = malloc(n * sizeof(*idx));
    int64_t *due = malloc(n * sizeof(*due));
    int64_t *lag = malloc(n * sizeof(*lag));
    for (size_t i = 0; i < n; i++) {
        idx[i] = (long long)((double)i * (double)cfg->burst / (double)n);
        due[i] = plan.t0_ms;
    }
    size_t seen = sample_lags(c, "Burst", "burst", idx, due, n, lag, plan.t0_ms + 120000);
    qsort(lag, seen, sizeof(*lag), cmp_i64);
    int64_t t50 = seen == n ? lag[(n - 1) / 2] : -1;
    int64_t t99 = seen == n ? lag[(size_t)((double)(n - 1) * 0.99)] : -1;
    free(idx);
    free(due);
    free(lag);
    if (seen == n) {
        printf("lapse  %-8s %lld items due in one second: 50%% after %lld ms, 99%% after %lld ms "
               "(a sample of %zu)\n",
               label, cfg->burst, (long long)t50, (long long)t99, n);
    } else {
        printf("lapse  %-8s %lld items due in one second: the wait ended 120 s after the due "
               "instant with %zu of a sample of %zu seen gone: no 50%%/99%% figure\n",
               label, cfg->burst, seen, n);
    }
    char head[32];
    snprintf(head, sizeof(head), "lapse  %-8s", label);
    wait_all_deleted(cl, c, "Burst", "burst", before, cfg->burst, plan.t0_ms, "the due instant",
                     plan.t0_ms + 120000, 200, head);
}
/* Benchmark 6: the same burst on a second cluster whose nodes run
 * --ttl-naive-scan (full passes over the items each --ttl-naive-interval-ms,
 * no index), to show what the index buys. */
static void lapse_naive_burst(const config *cfg)
{
    cluster_options o = {0};
    o.nodes = 3;
    o.bin_dir = cfg->bin_dir;
    o.quiet = 1;
    o.metrics = 1;
    o.node_args = "--ttl-naive-scan";
    cluster *cl = NULL;
    char err[512];
    if (cluster_start(&cl, &o, err, sizeof(err)) != 0) {
        fprintf(stderr, "naive-burst: %s\n", err);
        return;
    }
    lapse_client *c = NULL;
    lapse_error e;
    if (lapse_connect(&c, cluster_coordinator_url(cl), &e) != 0) {
        fprintf(stderr, "naive-burst: %s\n", e.message);
        cluster_free(cl, 1);
        return;
    }
    lapse_set_timeout_ms(c, 30000);
    lapse_burst(cl, c, cfg, "naive");
    lapse_close(c);
    cluster_free(cl, 1);
}

/* ======================================================================== */
/* Steady with foreground load (benchmark 2)                                */
/* ======================================================================== */

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
        lapse_item *it = make_item("put", p->first + i * p->stride, wall_ms() / 1000 + 30 * 86400);
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
static void lapse_load(cluster *cl, lapse_client *c, const config *cfg)
{
    if (create_ttl_table(c, "Load") != 0 || create_ttl_table(c, "LoadPuts") != 0) {
        return;
    }
    pthread_t th[PUTTERS];
    putter p[PUTTERS];
    int64_t t0 = wall_ms();
    putters_start(c, cfg, 0, t0 + cfg->load_seconds * 1000LL, th, p);
    putters_report(th, p, "alone (no expiry)", t0);
    long long total = cfg->load_rate * cfg->load_seconds;
    due_plan plan = {(wall_ms() / 1000 + 3 + total / 100000) * 1000, (double)cfg->load_rate / 1000};
    double before = deleted_total(cl, "Load");
    if (load(c, "Load", "load", total, planned_ttl, &plan, "due items") != 0) {
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
    size_t seen = sample_lags(c, "Load", "load", idx, due, n, lag, end + 60000);
    putters_report(th, p, "with expiry", t0);
    print_lags("lapse", "load", lag, seen, n);
    wait_all_deleted(cl, c, "Load", "load", before, total, end, "the last due instant", end + 60000,
                     200, "lapse  load    ");
    free(idx);
    free(due);
    free(lag);
}

/* The fair comparison's Lapse side (issue 18): the steady workload's shape
 * (--rate items/s due for --seconds among --long-lived far-future items) on
 * a table with the change stream, every due item observed as a subscriber
 * would: lag = the instant a stream follower (one long-polling reader per
 * shard) reads its TTL REMOVE minus its due instant, the same observation as
 * Redis's expired keyspace event. Returns the p99 lag in ms, or -1 when not
 * every due item was seen within 60 s of the last due instant. */
static int64_t lapse_fair(lapse_client *c, const config *cfg)
{
    if (create_table_ttl(c, "Fair", 1) != 0) {
        return -1;
    }
    if (load(c, "Fair", "long", cfg->long_lived, far_future, NULL, "long-lived items") != 0) {
        return -1;
    }
    long long total = cfg->rate * cfg->seconds;
    due_plan plan = {(wall_ms() / 1000 + 3 + total / 100000) * 1000, (double)cfg->rate / 1000};
    if (load(c, "Fair", "due", total, planned_ttl, &plan, "due items") != 0) {
        return -1;
    }
    /* The follower starts past the loads' INSERTs (as a subscriber that
     * keeps up would be), before the first due instant. */
    if (wall_ms() > plan.t0_ms - 200) {
        fprintf(stderr, "fair: the load ended too close to the first due instant\n");
        return -1;
    }
    stream_follow *f = NULL;
    if (stream_follow_start(&f, c, "Fair", "due", total, FAIR_SHARDS, 1) != 0) {
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

static char *ttl_status(lapse_client *c, const char *table)
{
    char *js = NULL;
    lapse_error e;
    if (lapse_describe_ttl(c, table, &js, &e) != 0) {
        return NULL;
    }
    json_error_t jerr;
    json_t *root = json_loads(js, 0, &jerr);
    lapse_free(js);
    const char *st = json_string_value(
        json_object_get(json_object_get(root, "TimeToLiveDescription"), "TimeToLiveStatus"));
    char *out = st ? strdup(st) : NULL;
    json_decref(root);
    return out;
}

static int64_t enable_and_wait(lapse_client *c, const char *table, int64_t timeout_ms)
{
    lapse_ttl_spec spec = {0};
    spec.action = LAPSE_TTL_ENABLE;
    spec.attribute = "ExpirationTime";
    lapse_error e;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (lapse_update_ttl(c, table, &spec, NULL, &e) != 0) {
        fprintf(stderr, "update-ttl: %s\n", e.message);
        return -1;
    }
    int64_t deadline = wall_ms() + timeout_ms;
    while (wall_ms() < deadline) {
        char *st = ttl_status(c, table);
        int enabled = st != NULL && strcmp(st, "ENABLED") == 0;
        free(st);
        if (enabled) {
            clock_gettime(CLOCK_MONOTONIC, &b);
            return (b.tv_sec - a.tv_sec) * 1000000LL + (b.tv_nsec - a.tv_nsec) / 1000;
        }
        sleep_ms(1);
    }
    return -1;
}

static void lapse_propagation(lapse_client *c, const config *cfg)
{
    int64_t *us = calloc((size_t)cfg->reps, sizeof(*us));
    int n = 0;
    for (int r = 0; r < cfg->reps; r++) {
        char name[32];
        snprintf(name, sizeof(name), "Prop%d", r);
        lapse_table_def d = {0};
        d.name = name;
        d.partition_key = "Id";
        d.partition_key_type = 'S';
        lapse_error e;
        if (lapse_create_table(c, &d, &e) != 0) {
            fprintf(stderr, "create: %s\n", e.message);
            continue;
        }
        int64_t t = enable_and_wait(c, name, 10000);
        if (t >= 0) {
            us[n++] = t;
        }
        fprintf(stderr, "\rpropagation %d/%d", r + 1, cfg->reps);
    }
    fprintf(stderr, "\n");
    qsort(us, (size_t)n, sizeof(*us), cmp_i64);
    if (n > 0) {
        printf("lapse  propagation update-ttl to ENABLED on an empty 64-partition table: "
               "median %.1f ms, min %.1f ms, max %.1f ms (%d runs)\n",
               (double)us[(n - 1) / 2] / 1000, (double)us[0] / 1000, (double)us[n - 1] / 1000, n);
    }
    free(us);
}

static void lapse_backfill(cluster *cl, lapse_client *c, const config *cfg)
{
    lapse_table_def d = {0};
    d.name = "Backfill";
    d.partition_key = "Id";
    d.partition_key_type = 'S';
    d.partitions = 64;
    lapse_error e;
    if (lapse_create_table(c, &d, &e) != 0) {
        fprintf(stderr, "create: %s\n", e.message);
        return;
    }
    if (load(c, "Backfill", "bf", cfg->backfill, far_future, NULL, "items to backfill") != 0) {
        return;
    }
    int64_t us = enable_and_wait(c, "Backfill", 600000);
    if (us <= 0) {
        printf("lapse  backfill did not finish\n");
        return;
    }
    double s = (double)us / 1e6;
    /* ENABLED says every node reported its backfill done; the nodes' own
     * counters of the table say how many items the backfills went through. */
    double scanned = 0;
    for (int n = 1; n <= cluster_nodes(cl); n++) {
        char *text = scrape_get(cluster_metrics_addr(cl, n), 2000);
        if (text != NULL) {
            scanned += scrape_sum(text, "lapse_ttl_backfill_items_total", "table=\"Backfill\"");
            free(text);
        }
    }
    printf("lapse  backfill %lld items, ENABLED after %.2f s: %.0f items/s cluster-wide, %.0f "
           "items/s per node; the nodes' backfill counters (table Backfill) count %.0f of %lld "
           "items scanned%s\n",
           cfg->backfill, s, (double)cfg->backfill / s,
           (double)cfg->backfill / s / cluster_nodes(cl), scanned, cfg->backfill,
           scanned < (double)cfg->backfill ? ": NOT all of them" : "");
}

/* ======================================================================== */
/* Main                                                                     */
/* ======================================================================== */

static void usage(void)
{
    fprintf(stderr, "usage: lapse-ttl-bench "
                    "[--workloads steady,load,burst,propagation,backfill,naive-burst,fair] "
                    "[--long-lived N] [--rate N] [--seconds S] [--load-rate N] "
                    "[--load-seconds S] [--put-rate N] [--burst N] [--backfill N] "
                    "[--reps N] [--bin-dir DIR] [--no-redis]\n");
}

int main(int argc, char **argv)
{
    config cfg = {"./build/bin",
                  "steady,load,burst,propagation,backfill,naive-burst",
                  1000000,
                  50000,
                  10,
                  1000000,
                  1000000,
                  20,
                  1,
                  20000,
                  30,
                  5000};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0) {
            usage();
            return 0;
        }
        if (strcmp(a, "--no-redis") == 0) {
            cfg.redis = 0;
            continue;
        }
        if (i + 1 >= argc) {
            usage();
            return 2;
        }
        const char *v = argv[++i];
        if (strcmp(a, "--workloads") == 0) {
            cfg.workloads = v;
        } else if (strcmp(a, "--bin-dir") == 0) {
            cfg.bin_dir = v;
        } else if (strcmp(a, "--long-lived") == 0) {
            cfg.long_lived = atoll(v);
        } else if (strcmp(a, "--rate") == 0) {
            cfg.rate = atoll(v);
        } else if (strcmp(a, "--seconds") == 0) {
            cfg.seconds = atoi(v);
        } else if (strcmp(a, "--burst") == 0) {
            cfg.burst = atoll(v);
        } else if (strcmp(a, "--backfill") == 0) {
            cfg.backfill = atoll(v);
        } else if (strcmp(a, "--reps") == 0) {
            cfg.reps = atoi(v);
        } else if (strcmp(a, "--load-rate") == 0) {
            cfg.load_rate = atoll(v);
        } else if (strcmp(a, "--load-seconds") == 0) {
            cfg.load_seconds = atoi(v);
        } else if (strcmp(a, "--put-rate") == 0) {
            cfg.put_rate = atoll(v);
        } else {
            usage();
            return 2;
        }
    }
    if (cfg.long_lived < 0 || cfg.rate < 1 || cfg.seconds < 1 || cfg.burst < 1 ||
        cfg.backfill < 1 || cfg.reps < 1 || cfg.load_rate < 1 || cfg.load_seconds < 1 ||
        cfg.put_rate < 1) {
        fprintf(stderr, "lapse-ttl-bench: an option is out of range\n");
        return 2;
    }
    if (cfg.redis && system("command -v redis-server >/dev/null 2>&1") != 0) {
        fprintf(stderr,
                "redis-server not installed: Lapse only (bench/install-redis.sh adds it)\n");
        cfg.redis = 0;
    }
    cluster_options o = {0};
    o.nodes = 3;
    o.bin_dir = cfg.bin_dir;
    o.quiet = 1;
    o.metrics = 1;
    cluster *cl = NULL;
    char err[512];
    if (cluster_start(&cl, &o, err, sizeof(err)) != 0) {
        fprintf(stderr, "lapse-ttl-bench: %s\n", err);
        return 1;
    }
    lapse_client *c = NULL;
    lapse_error e;
    if (lapse_connect(&c, cluster_coordinator_url(cl), &e) != 0) {
        fprintf(stderr, "lapse-ttl-bench: %s\n", e.message);
        cluster_free(cl, 1);
        return 1;
    }
    lapse_set_timeout_ms(c, 30000);
    printf("# lapse-ttl-bench: 3 nodes on loopback; steady %lld items/s for %d s with %lld "
           "long-lived; load %lld items/s for %d s with %lld puts/s; burst %lld; backfill %lld\n",
           cfg.rate, cfg.seconds, cfg.long_lived, cfg.load_rate, cfg.load_seconds, cfg.put_rate,
           cfg.burst, cfg.backfill);
    if (cfg.redis) {
        redis_print_version();
    }
    if (has_workload(cfg.workloads, "propagation")) {
        lapse_propagation(c, &cfg);
    }
    if (has_workload(cfg.workloads, "steady")) {
        lapse_steady(cl, c, &cfg);
        if (cfg.redis) {
            redis_steady(&cfg);
        }
    }
    if (has_workload(cfg.workloads, "load")) {
        lapse_load(cl, c, &cfg);
    }
    if (has_workload(cfg.workloads, "burst")) {
        lapse_burst(cl, c, &cfg, "burst");
        if (cfg.redis) {
            redis_burst(&cfg);
        }
    }
    if (has_workload(cfg.workloads, "backfill")) {
        lapse_backfill(cl, c, &cfg);
    }
    int64_t fair_p99 = -1;
    if (has_workload(cfg.workloads, "fair")) {
        fair_p99 = lapse_fair(c, &cfg);
    }
    lapse_close(c);
    cluster_free(cl, 1);
    /* Redis alone on the machine: the cluster is stopped. */
    if (has_workload(cfg.workloads, "fair") && cfg.redis) {
        redis_fair_all(&cfg, fair_p99);
    }
    /* Last, on its own cluster once the first one is gone (same cores). */
    if (has_workload(cfg.workloads, "naive-burst")) {
        lapse_naive_burst(&cfg);
    }
    return 0;
}
