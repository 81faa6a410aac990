/*
 * lapse-ttl-bench: how fast Lapse deletes expired items, against Redis's
 * active expiry in the same run when redis-server is installed.
 *
 *   lapse-ttl-bench [--workloads steady,load,burst,propagation,backfill,naive-burst]
 *                   [--long-lived N] [--rate N] [--seconds S] [--load-rate N]
 *                   [--load-seconds S] [--put-rate N] [--burst N]
 *                   [--backfill N] [--reps N] [--replication 1,3]
 *                   [--bin-dir DIR] [--no-redis]
 *
 * --replication lists the copies per partition to measure (default 1): each
 * count runs the Lapse workloads on a fresh three-node cluster (on etcd when
 * any count is above 1, for every pass alike); Redis, fair and naive-burst
 * run once, with the first.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../client/lapse.h"
#include "../tests/cluster.h"
#include "bench_util.h"
#include "ttl_bench_common.h"
#include "ttl_bench_enable.h"
#include "ttl_bench_fair.h"
#include "ttl_bench_load.h"
#include "ttl_bench_redis.h"
#include "ttl_lapse.h"

/* ======================================================================== */
/* Steady and burst                                                         */
/* ======================================================================== */

static void lapse_steady(cluster *cl, lapse_client *c, const config *cfg)
{
    if (ttl_lapse_create_ttl_table(c, "Steady", cfg->rf) != 0) {
        return;
    }
    if (ttl_lapse_load(c, "Steady", "long", cfg->long_lived, ttl_lapse_far_future, NULL,
                       "long-lived items") != 0) {
        return;
    }
    long long total = cfg->rate * cfg->seconds;
    /* The due stream starts after the load of the due items can finish. */
    due_plan plan = {(wall_ms() / 1000 + 3 + total / cfg->lead_rate) * 1000,
                     (double)cfg->rate / 1000};
    double before = ttl_lapse_deleted_total(cl, "Steady");
    if (ttl_lapse_load(c, "Steady", "due", total, ttl_lapse_planned, &plan, "due items") != 0) {
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
    size_t seen = ttl_lapse_sample_lags(c, "Steady", "due", idx, due, n, lag, end + 60000);
    print_lags("lapse", "steady", lag, seen, n);
    /* Everything due was deleted: the table's counter says how long it
     * took, a read of a sample confirms it. */
    ttl_lapse_wait_all_deleted(cl, c, "Steady", "due", before, total, end, "the last due instant",
                               end + 60000, 200, "lapse  steady  ");
    free(idx);
    free(due);
    free(lag);
}

/* label: "burst" (the indexed scanners) or "naive" (--ttl-naive-scan). */
static void lapse_burst(cluster *cl, lapse_client *c, const config *cfg, const char *label)
{
    if (ttl_lapse_create_ttl_table(c, "Burst", cfg->rf) != 0) {
        return;
    }
    due_plan plan = {(wall_ms() / 1000 + 4 + cfg->burst / cfg->lead_rate) * 1000, 1e12};
    double before = ttl_lapse_deleted_total(cl, "Burst");
    if (ttl_lapse_load(c, "Burst", "burst", cfg->burst, ttl_lapse_planned, &plan, "burst items") !=
        0) {
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
    size_t seen = ttl_lapse_sample_lags(c, "Burst", "burst", idx, due, n, lag, plan.t0_ms + 120000);
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
    ttl_lapse_wait_all_deleted(cl, c, "Burst", "burst", before, cfg->burst, plan.t0_ms,
                               "the due instant", plan.t0_ms + 120000, 200, head);
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
    config one = *cfg; /* a cluster without etcd: tables of one copy */
    one.rf = 1;
    one.lead_rate = 100000;
    lapse_burst(cl, c, &one, "naive");
    lapse_close(c);
    cluster_free(cl, 1);
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
                    "[--reps N] [--replication 1,3] [--bin-dir DIR] [--no-redis]\n");
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
                  5000,
                  "1",
                  1,
                  100000};
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
        } else if (strcmp(a, "--replication") == 0) {
            cfg.replication = v;
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
    int rfs[4], nrf = 0, etcd = 0;
    for (const char *r = cfg.replication; *r != '\0' && nrf < 4;) {
        char *endp;
        long v = strtol(r, &endp, 10);
        if (endp == r || v < 1 || v > 3 || (*endp != ',' && *endp != '\0')) {
            fprintf(stderr, "lapse-ttl-bench: --replication wants copies 1, 2 or 3, comma-separated\n");
            return 2;
        }
        rfs[nrf++] = (int)v;
        etcd |= v > 1;
        r = *endp == ',' ? endp + 1 : endp;
    }
    if (nrf == 0) {
        fprintf(stderr, "lapse-ttl-bench: --replication wants copies 1, 2 or 3, comma-separated\n");
        return 2;
    }
    printf("# lapse-ttl-bench: 3 nodes on loopback%s; steady %lld items/s for %d s with %lld "
           "long-lived; load %lld items/s for %d s with %lld puts/s; burst %lld; backfill %lld\n",
           etcd ? " on etcd (leases fence the primaries)" : "", cfg.rate, cfg.seconds,
           cfg.long_lived, cfg.load_rate, cfg.load_seconds, cfg.put_rate, cfg.burst,
           cfg.backfill);
    if (cfg.redis) {
        redis_print_version();
    }
    int64_t fair_p99 = -1;
    for (int k = 0; k < nrf; k++) {
        /* Each count of copies on a cluster of its own, alike (on etcd when
         * any pass has copies), so no pass inherits another's items. */
        cfg.rf = rfs[k];
        cfg.lead_rate = cfg.rf > 1 ? 20000 : 100000;
        int first = k == 0;
        if (nrf > 1 || cfg.rf > 1) {
            printf("## RF %d: every Lapse table keeps %d cop%s of each partition\n", cfg.rf, cfg.rf,
                   cfg.rf == 1 ? "y" : "ies");
            fflush(stdout);
        }
        cluster_options o = {0};
        o.nodes = 3;
        o.bin_dir = cfg.bin_dir;
        o.quiet = 1;
        o.metrics = 1;
        o.etcd = etcd;
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
        if (has_workload(cfg.workloads, "propagation")) {
            ttl_bench_enable_propagation(c, &cfg);
        }
        if (has_workload(cfg.workloads, "steady")) {
            lapse_steady(cl, c, &cfg);
            if (cfg.redis && first) {
                redis_steady(&cfg);
            }
        }
        if (has_workload(cfg.workloads, "load")) {
            ttl_bench_load_run(cl, c, &cfg);
        }
        if (has_workload(cfg.workloads, "burst")) {
            lapse_burst(cl, c, &cfg, "burst");
            if (cfg.redis && first) {
                redis_burst(&cfg);
            }
        }
        if (has_workload(cfg.workloads, "backfill")) {
            ttl_bench_enable_backfill(cl, c, &cfg);
        }
        if (has_workload(cfg.workloads, "fair") && first) {
            fair_p99 = ttl_bench_fair_run(c, &cfg);
        }
        lapse_close(c);
        cluster_free(cl, 1);
    }
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
