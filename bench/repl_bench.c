/*
 * lapse-repl-bench: how fast TTL deletes reach the change stream and leave
 * a global secondary index, and how many records per second replication
 * carries (docs/replication.md).
 *
 *   lapse-repl-bench [--workloads expiry,throughput,ceiling] [--rate N] [--seconds S]
 *                    [--items N] [--partitions P] [--bin-dir DIR]
 *                    [--node-args "FLAGS"]
 *
 * Three nodes on loopback, each table with a GSI (key Ref, unique per item)
 * and the stream on.
 *
 *   expiry      --rate items/s fall due for --seconds. A reader thread per
 *               shard long-polls it from the first record and notes when
 *               each TTL REMOVE first arrives: stream lag = that instant
 *               minus the item's due instant, for every item; split into
 *               the TTL delete (the record's deletedAt minus due) and the
 *               rest. Eight sampler threads query the GSI for 500 of the
 *               due items, each due and not yet gone sample every ~20 ms,
 *               and note when each entry is first gone: GSI lag, +- one
 *               sampling cycle. The nodes' CPU time (/proc) from the first
 *               due instant to the last REMOVE read is printed per item.
 *   throughput  --items items loaded as fast as batch puts go (four
 *               threads); the time from the first put until the stream
 *               holds all of them (the sum of the shards' newest sequence
 *               numbers, polled every 50 ms) gives the records/s that
 *               replication sustains while the writes go on; when it keeps
 *               up, the writes set the pace and this is a lower bound.
 *   ceiling     on a cluster of its own whose shippers hold back for a
 *               while after the start (--debug-repl-hold-ms), --items items
 *               are loaded while nothing ships, then the drain is timed
 *               from the first record in the stream to the last: what
 *               replication carries at full speed with a backlog.
 *
 * --node-args passes extra flags to every lapse-node (e.g. "--repl-workers
 * 4"). Progress goes to stderr, results to stdout. A workload whose records
 * or GSI entries do not all arrive within 60 s of the end says so and the
 * program exits 1.
 *
 * Each node has STREAMS_MAX_POLLERS (8) long-poll slots; with more than 24
 * shards some readers' long polls are answered at once and they poll every
 * 10 ms instead (--partitions 16 by default keeps every reader long-polling).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../client/lapse.h"
#include "../tests/cluster.h"
#include "bench_util.h"
#include "stream_follow.h"

typedef struct config {
    cluster *cl;        /* the running cluster (CPU accounting) */
    int64_t started_ms; /* when it was started (wall clock) */
    long long hold_ms;  /* ceiling: --debug-repl-hold-ms of its nodes */
    const char *bin_dir;
    const char *workloads;
    long long rate;  /* expiry: items/s falling due */
    int seconds;     /* expiry: for this long */
    long long items; /* throughput, ceiling: items loaded */
    unsigned partitions;
    const char *node_args; /* extra lapse-node flags, or NULL */
} config;

/* CPU seconds (user + system) the cluster's nodes used so far, from
 * /proc/PID/stat; -1 when unreadable. */
static double nodes_cpu_s(cluster *cl)
{
    double sum = 0;
    for (int i = 1; i <= cluster_nodes(cl); i++) {
        double s = cpu_of_pid_s((int)cluster_pid(cl, i));
        if (s < 0) {
            return -1;
        }
        sum += s;
    }
    return sum;
}

/* Prints p50/p99/max of lag[0..n) (ms, sorted here). */
static void print_lags(const char *what, int64_t *lag, size_t n, size_t expected)
{
    if (n == 0) {
        printf("repl   %-34s none observed (of %zu)\n", what, expected);
        return;
    }
    qsort(lag, n, sizeof(*lag), cmp_i64);
    printf("repl   %-34s p50=%lldms p99=%lldms max=%lldms  (%zu of %zu)\n", what,
           (long long)lag[(n - 1) / 2], (long long)lag[(size_t)((double)(n - 1) * 0.99)],
           (long long)lag[n - 1], n, expected);
}

/* ======================================================================== */
/* Tables and loading                                                       */
/* ======================================================================== */

static const lapse_index_def ref_gsi[] = {
    {.name = "ByRef", .partition_key = "Ref", .partition_key_type = 'S'}};

static int create_table(lapse_client *c, const config *cfg, const char *name, int ttl)
{
    lapse_error e;
    lapse_table_def d = {.name = name,
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .partitions = cfg->partitions,
                         .gsi = ref_gsi,
                         .ngsi = 1,
                         .stream = 1};
    if (lapse_create_table(c, &d, &e) != 0) {
        fprintf(stderr, "create %s: %s\n", name, e.message);
        return -1;
    }
    if (!ttl) {
        return 0;
    }
    lapse_ttl_spec spec = {.action = LAPSE_TTL_ENABLE, .attribute = "ExpiresAt"};
    if (lapse_update_ttl(c, name, &spec, NULL, &e) != 0) {
        fprintf(stderr, "update-ttl %s: %s\n", name, e.message);
        return -1;
    }
    for (int64_t until = wall_ms() + 30000; wall_ms() < until; sleep_ms(100)) {
        char *js = NULL;
        if (lapse_describe_ttl(c, name, &js, &e) == 0 &&
            strstr(js, "\"TimeToLiveStatus\":\"ENABLED\"") != NULL) {
            lapse_free(js);
            return 0;
        }
        lapse_free(js);
    }
    fprintf(stderr, "update-ttl %s: not ENABLED within 30 s\n", name);
    return -1;
}

typedef struct loader {
    lapse_client *c;
    const char *table;
    long long from, to;
    const due_plan *plan; /* NULL: no TTL attribute */
    atomic_llong *done;
    int failed;
} loader;

static lapse_item *make_item(long long i, const due_plan *plan)
{
    char id[32], ref[32];
    snprintf(id, sizeof(id), "i%012lld", i);
    snprintf(ref, sizeof(ref), "r%012lld", i);
    lapse_item *it = lapse_item_new();
    lapse_item_set_s(it, "Id", id);
    lapse_item_set_s(it, "Ref", ref);
    lapse_item_set_s(it, "Pad", "0123456789012345678901234567890123456789");
    if (plan != NULL) {
        lapse_item_set_n_i64(it, "ExpiresAt", due_s_of(plan, i));
    }
    return it;
}

static void *loader_main(void *p)
{
    loader *l = p;
    enum { B = 1000 };
    lapse_item *batch[B];
    lapse_error e;
    for (long long i = l->from; i < l->to && !l->failed;) {
        int n = 0;
        for (; n < B && i < l->to; n++, i++) {
            batch[n] = make_item(i, l->plan);
        }
        if (lapse_batch_write(l->c, l->table, batch, (size_t)n, NULL, 0, &e) != 0) {
            fprintf(stderr, "\nload: %s\n", e.message);
            l->failed = 1;
        }
        for (int k = 0; k < n; k++) {
            lapse_item_free(batch[k]);
        }
        atomic_fetch_add(l->done, n);
    }
    return NULL;
}

/* Loads items [0, n) with 4 threads, progress on stderr. 0 or -1. */
static int load(lapse_client *c, const char *table, long long n, const due_plan *plan)
{
    enum { T = 4 };
    loader ls[T];
    pthread_t th[T];
    atomic_llong done = 0;
    int64_t t0 = wall_ms();
    for (int t = 0; t < T; t++) {
        ls[t] = (loader){c, table, n * t / T, n * (t + 1) / T, plan, &done, 0};
        pthread_create(&th[t], NULL, loader_main, &ls[t]);
    }
    int failed = 0;
    for (long long d = 0; d < n && !failed; sleep_ms(200)) {
        d = atomic_load(&done);
        fprintf(stderr, "\rloading %s: %lld/%lld", table, d, n);
        for (int t = 0; t < T; t++) {
            failed |= ls[t].failed;
        }
    }
    for (int t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        failed |= ls[t].failed;
    }
    fprintf(stderr, " (%.1f s)\n", (double)(wall_ms() - t0) / 1000);
    return failed ? -1 : 0;
}

/* ======================================================================== */
/* Expiry: stream and GSI lag                                               */
/* ======================================================================== */

typedef struct expiry_run {
    lapse_client *c;
    const char *table;
    const due_plan *plan;
    long long total;
} expiry_run;

/* One GSI sampler thread: samples idx[first], idx[first + step], ... */
typedef struct gsi_sampler {
    expiry_run *x;
    const long long *idx;
    size_t n, first, step;
    int64_t *lag; /* by sample; -1: not seen gone */
    int64_t give_up_ms;
    pthread_t th;
} gsi_sampler;

/* Queries its samples' GSI entries, those due and not yet seen gone, about
 * every 20 ms until each is gone: lag = the first reply finding it gone
 * minus the due instant. */
static void *gsi_sampler_main(void *p)
{
    gsi_sampler *g = p;
    expiry_run *x = g->x;
    size_t left = 0;
    for (size_t i = g->first; i < g->n; i += g->step) {
        left++;
    }
    while (left > 0 && wall_ms() < g->give_up_ms) {
        for (size_t i = g->first; i < g->n; i += g->step) {
            int64_t due = due_s_of(x->plan, g->idx[i]) * 1000;
            if (g->lag[i] >= 0 || due > wall_ms()) {
                continue;
            }
            char pk[48];
            snprintf(pk, sizeof(pk), "{\"S\":\"r%012lld\"}", g->idx[i]);
            lapse_query_opts q = {.partition_key_json = pk};
            lapse_page *p = NULL;
            lapse_error e;
            if (lapse_query_index(x->c, x->table, "ByRef", &q, &p, &e) != 0) {
                fprintf(stderr, "\nGSI query: %s\n", e.message);
                continue;
            }
            if (lapse_page_count(p) == 0) {
                g->lag[i] = wall_ms() - due;
                left--;
            }
            lapse_page_free(p);
        }
        sleep_ms(20);
    }
    return NULL;
}

/* Samples GSI entries idx[0..n) of due items until each is gone, with
 * GSI_SAMPLERS threads (one would query its due samples one after the
 * other, and the last of a second's samples would be found gone a whole
 * loop of synchronous queries late); lag[] as in the stream. Returns how
 * many were seen gone. */
static size_t gsi_lags(expiry_run *x, const long long *idx, size_t n, int64_t *lag,
                       int64_t give_up_ms)
{
    enum { GSI_SAMPLERS = 8 };
    gsi_sampler g[GSI_SAMPLERS];
    int64_t *by_sample = malloc(n * sizeof(*by_sample));
    for (size_t i = 0; i < n; i++) {
        by_sample[i] = -1;
    }
    for (size_t k = 0; k < GSI_SAMPLERS; k++) {
        g[k] = (gsi_sampler){x, idx, n, k, GSI_SAMPLERS, by_sample, give_up_ms, 0};
        pthread_create(&g[k].th, NULL, gsi_sampler_main, &g[k]);
    }
    for (size_t k = 0; k < GSI_SAMPLERS; k++) {
        pthread_join(g[k].th, NULL);
    }
    size_t ngone = 0;
    for (size_t i = 0; i < n; i++) {
        if (by_sample[i] >= 0) {
            lag[ngone++] = by_sample[i];
        }
    }
    free(by_sample);
    return ngone;
}

static int expiry(lapse_client *c, const config *cfg)
{
    const char *table = "ReplExpiry";
    if (create_table(c, cfg, table, 1) != 0) {
        return -1;
    }
    long long total = cfg->rate * cfg->seconds;
    due_plan plan = {(wall_ms() / 1000 + 4 + total / 50000) * 1000, (double)cfg->rate / 1000};
    expiry_run x = {.c = c, .table = table, .plan = &plan, .total = total};
    stream_follow *f = NULL;
    if (stream_follow_start(&f, c, table, "i", total, cfg->partitions, 0) != 0) {
        fprintf(stderr, "out of memory\n");
        return -1;
    }
    int rv = load(c, table, total, &plan);
    if (rv == 0 && wall_ms() > plan.t0_ms) {
        fprintf(stderr, "expiry: the load ended after the first due instant; lags of the first "
                        "items include the rest of the load\n");
    }
    int64_t end = due_s_of(&plan, total - 1) * 1000;
    double cpu0 = -1, self0 = 0;
    if (rv == 0) {
        /* The CPU spent from just before the first due instant until the
         * stream holds every REMOVE: what the expiry costs. */
        if (wall_ms() < plan.t0_ms - 100) {
            sleep_ms(plan.t0_ms - 100 - wall_ms());
        }
        cpu0 = nodes_cpu_s(cfg->cl);
        self0 = cpu_self_s();
    }
    if (rv == 0) {
        enum { SAMPLE = 500 };
        size_t n = total < SAMPLE ? (size_t)total : SAMPLE;
        long long *idx = malloc(n * sizeof(*idx));
        int64_t *lag = malloc((size_t)(total > (long long)n ? total : (long long)n) * sizeof(*lag));
        for (size_t i = 0; i < n; i++) {
            idx[i] = (long long)((double)i * (double)total / (double)n);
        }
        fprintf(stderr, "expiry: %lld items due over %d s from %lld; sampling the GSI\n", total,
                cfg->seconds, (long long)plan.t0_ms / 1000);
        size_t gsi_seen = gsi_lags(&x, idx, n, lag, end + 60000);
        print_lags("expiry -> GSI entry gone", lag, gsi_seen, n);
        while (atomic_load(&f->removes) < total && wall_ms() < end + 60000) {
            fprintf(stderr, "\rstream: %lld/%lld TTL REMOVEs read", atomic_load(&f->removes),
                    total);
            sleep_ms(200);
        }
        fprintf(stderr, "\n");
        double cpu1 = nodes_cpu_s(cfg->cl), self1 = cpu_self_s();
        stream_follow_stop(f);
        size_t m = 0;
        for (long long i = 0; i < total; i++) {
            if (f->seen_ms[i] != 0) {
                lag[m++] = f->seen_ms[i] - due_s_of(&plan, i) * 1000;
            }
        }
        print_lags("expiry -> stream REMOVE readable", lag, m, (size_t)total);
        /* The parts: the TTL sweep's own lag, and replication after it. */
        size_t k = 0;
        for (long long i = 0; i < total; i++) {
            if (f->seen_ms[i] != 0) {
                lag[k++] = f->deleted_ms[i] - due_s_of(&plan, i) * 1000;
            }
        }
        print_lags("  of which expiry -> deleted", lag, k, (size_t)total);
        k = 0;
        for (long long i = 0; i < total; i++) {
            if (f->seen_ms[i] != 0) {
                lag[k++] = f->seen_ms[i] - f->deleted_ms[i];
            }
        }
        print_lags("  and deleted -> readable", lag, k, (size_t)total);
        if (cpu0 >= 0 && cpu1 >= 0) {
            printf("repl   %-34s nodes %.2f s (%.0f us per item), this benchmark %.2f s\n",
                   "CPU, first due to last REMOVE read", cpu1 - cpu0,
                   (cpu1 - cpu0) * 1e6 / (double)total, self1 - self0);
        }
        if (m < (size_t)total || gsi_seen < n) {
            fprintf(stderr,
                    "expiry: within 60 s of the last due instant the stream had %zu of %lld TTL "
                    "REMOVEs and the GSI had dropped %zu of %zu sampled entries\n",
                    m, total, gsi_seen, n);
            rv = -1;
        }
        free(idx);
        free(lag);
    }
    stream_follow_free(f);
    return rv;
}

/* ======================================================================== */
/* Throughput                                                               */
/* ======================================================================== */

/* The records in table's stream now: the sum of the shards' newest
 * sequence numbers, or -1 on error. */
static long long stream_total(lapse_client *c, const char *table, unsigned parts)
{
    lapse_stream_request *q = calloc(parts, sizeof(*q));
    lapse_stream_batch **b = calloc(parts, sizeof(*b));
    lapse_error e;
    long long sum = -1;
    for (unsigned s = 0; s < parts; s++) {
        q[s] = (lapse_stream_request){.shard = s, .limit = 1};
    }
    if (lapse_stream_read_many(c, table, q, parts, b, &e) == 0) {
        sum = 0;
        for (unsigned s = 0; s < parts; s++) {
            sum += (long long)lapse_stream_batch_last_sequence(b[s]);
            lapse_stream_batch_free(b[s]);
        }
    } else {
        fprintf(stderr, "\nstream: %s\n", e.message);
    }
    free(q);
    free(b);
    return sum;
}

static int throughput(lapse_client *c, const config *cfg)
{
    const char *table = "ReplThroughput";
    if (create_table(c, cfg, table, 0) != 0) {
        return -1;
    }
    int64_t t0 = wall_ms();
    if (load(c, table, cfg->items, NULL) != 0) {
        return -1;
    }
    int64_t loaded = wall_ms();
    long long have = 0;
    while (have < cfg->items && wall_ms() < loaded + 60000) {
        long long t = stream_total(c, table, cfg->partitions);
        have = t > have ? t : have;
        fprintf(stderr, "\rstream: %lld/%lld records", have, cfg->items);
        if (have < cfg->items) {
            sleep_ms(50);
        }
    }
    fprintf(stderr, "\n");
    int64_t done = wall_ms();
    if (have < cfg->items) {
        fprintf(stderr,
                "throughput: the stream held %lld of %lld records 60 s after the load ended\n",
                have, cfg->items);
        return -1;
    }
    double load_s = (double)(loaded - t0) / 1000, all_s = (double)(done - t0) / 1000;
    /* Caught up within a poll or two of the load's end: the writes, not
     * replication, set the pace, and the ceiling is at least this. */
    int kept_up = done - loaded <= 150;
    printf("repl   %-34s %s%.0f records/s (%lld items: loaded in %.2f s at %.0f items/s, all in "
           "the stream %.2f s after the first put, %.2f s after the last%s)\n",
           "throughput while loading", kept_up ? ">= " : "", (double)cfg->items / all_s, cfg->items,
           load_s, (double)cfg->items / load_s, all_s, (double)(done - loaded) / 1000,
           kept_up ? "; replication kept up with the load" : "");
    return 0;
}

/* ======================================================================== */
/* Ceiling: draining a backlog                                              */
/* ======================================================================== */

/* On a cluster whose shippers hold back for cfg->hold_ms after the start
 * (--debug-repl-hold-ms): loads --items items while nothing ships, then
 * times the drain, from the first record in the stream (polled every
 * 20 ms) until all of them are: replication alone at full speed, without
 * writes competing for the two cores. */
static int ceiling(lapse_client *c, config *cfg)
{
    const char *table = "ReplCeiling";
    if (create_table(c, cfg, table, 0) != 0 || load(c, table, cfg->items, NULL) != 0) {
        return -1;
    }
    if (wall_ms() >= cfg->started_ms + cfg->hold_ms) {
        fprintf(stderr,
                "ceiling: the load ended after the hold (%lld ms from the start); "
                "nothing measured\n",
                cfg->hold_ms);
        return -1;
    }
    long long have = 0;
    int64_t first = 0, done = 0, give_up = cfg->started_ms + cfg->hold_ms + 120000;
    while (have < cfg->items && wall_ms() < give_up) {
        long long t = stream_total(c, table, cfg->partitions);
        int64_t now = wall_ms();
        have = t > have ? t : have;
        if (have > 0 && first == 0) {
            first = now;
        }
        fprintf(stderr, "\rceiling: %lld/%lld records in the stream", have, cfg->items);
        if (have < cfg->items) {
            sleep_ms(20);
        } else {
            done = now;
        }
    }
    fprintf(stderr, "\n");
    if (have < cfg->items) {
        fprintf(stderr, "ceiling: the stream held %lld of %lld records 120 s after the hold\n",
                have, cfg->items);
        return -1;
    }
    if (first == done) {
        fprintf(stderr, "ceiling: the backlog drained between two looks; use more --items\n");
        return -1;
    }
    double s = (double)(done - first) / 1000;
    printf("repl   %-34s %.0f records/s (a backlog of %lld records drained in %.2f s, GSI + "
           "stream, nothing else running)\n",
           "replication ceiling", (double)cfg->items / s, cfg->items, s);
    return 0;
}

/* The workloads of the main cluster. */
static int run_workloads(lapse_client *c, config *cfg)
{
    int rv = 0;
    if (has_workload(cfg->workloads, "expiry") && expiry(c, cfg) != 0) {
        rv = -1;
    }
    fflush(stdout);
    if (has_workload(cfg->workloads, "throughput") && throughput(c, cfg) != 0) {
        rv = -1;
    }
    fflush(stdout);
    return rv;
}

/* Starts three nodes (with extra flags node_args, may be NULL), runs fn on
 * them and stops them. Returns 0 when fn did and nothing crashed, else -1. */
static int with_cluster(config *cfg, const char *node_args, int (*fn)(lapse_client *, config *))
{
    cluster_options o = {
        .nodes = 3, .bin_dir = cfg->bin_dir, .node_args = node_args, .quiet = 1, .metrics = 1};
    cluster *cl = NULL;
    char err[512];
    cfg->started_ms = wall_ms();
    if (cluster_start(&cl, &o, err, sizeof(err)) != 0) {
        fprintf(stderr, "lapse-repl-bench: %s\n", err);
        return -1;
    }
    lapse_client *c = NULL;
    lapse_error e;
    if (lapse_connect(&c, cluster_coordinator_url(cl), &e) != 0) {
        fprintf(stderr, "lapse-repl-bench: %s\n", e.message);
        cluster_free(cl, 1);
        return -1;
    }
    lapse_set_timeout_ms(c, 30000);
    cfg->cl = cl;
    int rv = fn(c, cfg);
    lapse_close(c);
    int crashed = cluster_crashed(cl, NULL);
    if (crashed >= 0) {
        fprintf(stderr, "lapse-repl-bench: process %d crashed; logs in %s\n", crashed,
                cluster_run_dir(cl));
        rv = -1;
    }
    cluster_free(cl, crashed < 0);
    cfg->cl = NULL;
    return rv;
}

/* ======================================================================== */
/* main                                                                     */
/* ======================================================================== */

static void usage(void)
{
    fprintf(stderr, "usage: lapse-repl-bench [--workloads expiry,throughput,ceiling] [--rate N] "
                    "[--seconds S]\n"
                    "                        [--items N] [--partitions P] [--bin-dir DIR]\n"
                    "                        [--node-args \"FLAGS\"]\n"
                    "  defaults: --rate 20000 --seconds 10 --items 200000 --partitions 16\n");
}

int main(int argc, char **argv)
{
    config cfg = {.bin_dir = "./build/bin",
                  .workloads = "expiry,throughput,ceiling",
                  .rate = 20000,
                  .seconds = 10,
                  .items = 200000,
                  .partitions = 16};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0) {
            usage();
            return 0;
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
        } else if (strcmp(a, "--rate") == 0) {
            cfg.rate = atoll(v);
        } else if (strcmp(a, "--seconds") == 0) {
            cfg.seconds = atoi(v);
        } else if (strcmp(a, "--items") == 0) {
            cfg.items = atoll(v);
        } else if (strcmp(a, "--partitions") == 0) {
            cfg.partitions = (unsigned)atoi(v);
        } else if (strcmp(a, "--node-args") == 0) {
            cfg.node_args = v;
        } else {
            usage();
            return 2;
        }
    }
    if (cfg.rate < 1 || cfg.seconds < 1 || cfg.items < 1 || cfg.partitions < 1 ||
        cfg.partitions > 4096 || (cfg.partitions & (cfg.partitions - 1)) != 0) {
        fprintf(stderr, "lapse-repl-bench: an option is out of range (partitions: a power of "
                        "two up to 4096)\n");
        return 2;
    }
    printf("# lapse-repl-bench: 3 nodes on loopback, %u partitions, a GSI and the stream; "
           "workloads %s: expiry %lld items/s for %d s, throughput and ceiling %lld items%s%s\n",
           cfg.partitions, cfg.workloads, cfg.rate, cfg.seconds, cfg.items,
           cfg.node_args != NULL ? "; node args: " : "",
           cfg.node_args != NULL ? cfg.node_args : "");
    fflush(stdout);
    int rv = 0;
    if ((has_workload(cfg.workloads, "expiry") || has_workload(cfg.workloads, "throughput")) &&
        with_cluster(&cfg, cfg.node_args, run_workloads) != 0) {
        rv = 1;
    }
    if (has_workload(cfg.workloads, "ceiling")) {
        /* The hold: from the nodes' start, time for the cluster to come
         * up, the table to be created and the load (assumed faster than
         * 15,000 items/s; the workload checks it was). */
        char args[512];
        cfg.hold_ms = 5000 + cfg.items / 15;
        snprintf(args, sizeof(args), "--debug-repl-hold-ms %lld%s%s", cfg.hold_ms,
                 cfg.node_args != NULL ? " " : "", cfg.node_args != NULL ? cfg.node_args : "");
        if (with_cluster(&cfg, args, ceiling) != 0) {
            rv = 1;
        }
    }
    return rv;
}
