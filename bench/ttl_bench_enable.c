/*
 * ttl_bench_enable.c: lapse-ttl-bench's workloads of enabling TTL: how fast
 * update-ttl reaches ENABLED on an empty table (propagation), and how fast
 * the nodes index a full one (backfill). Contract in ttl_bench_enable.h.
 */
#include "ttl_bench_enable.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "../tests/scrape.h"
#include "bench_util.h"
#include "ttl_lapse.h"

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

void ttl_bench_enable_propagation(lapse_client *c, const config *cfg)
{
    int64_t *us = calloc((size_t)cfg->reps, sizeof(*us));
    int n = 0;
    for (int r = 0; r < cfg->reps; r++) {
        char name[32];
        snprintf(name, sizeof(name), "Prop%d", r);
        lapse_table_def d = {0};
        d.name = name;
        d.replication = (unsigned)cfg->rf;
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

#define BACKFILL_SENTINELS 1000

/* ttl_of for the sentinels: *(int64_t *)arg for every item. */
static int64_t sentinel_ttl(void *arg, long long i)
{
    (void)i;
    return *(const int64_t *)arg;
}

/* How many sentinels are still there once all are gone or timeout_ms has
 * passed (read with gets every 500 ms). */
static int sentinels_left(lapse_client *c, int64_t timeout_ms)
{
    int64_t until = wall_ms() + timeout_ms;
    int left;
    for (;;) {
        left = 0;
        for (int i = 0; i < BACKFILL_SENTINELS; i++) {
            char k[48];
            snprintf(k, sizeof(k), "bfdue%012d", i);
            lapse_item *key = lapse_item_new(), *got = NULL;
            lapse_error e;
            lapse_item_set_s(key, "Id", k);
            if (lapse_get(c, "Backfill", key, &got, &e) != 0 || got != NULL) {
                left++; /* a failed read counts as still there */
            }
            lapse_item_free(got);
            lapse_item_free(key);
        }
        if (left == 0 || wall_ms() >= until) {
            return left;
        }
        sleep_ms(500);
    }
}

void ttl_bench_enable_backfill(cluster *cl, lapse_client *c, const config *cfg)
{
    lapse_table_def d = {0};
    d.name = "Backfill";
    d.replication = (unsigned)cfg->rf;
    d.partition_key = "Id";
    d.partition_key_type = 'S';
    d.partitions = 64;
    lapse_error e;
    if (lapse_create_table(c, &d, &e) != 0) {
        fprintf(stderr, "create: %s\n", e.message);
        return;
    }
    if (ttl_lapse_load(c, "Backfill", "bf", cfg->backfill, ttl_lapse_far_future, NULL,
                       "items to backfill") != 0) {
        return;
    }
    /* Sentinels: loaded with the rest before the enable, due 2 s into it.
     * Only a backfill that indexed them deletes them, so their going says
     * the backfill did its work, not only that it said so. */
    int64_t sentinel_due = wall_ms() / 1000 + 2;
    if (ttl_lapse_load(c, "Backfill", "bfdue", BACKFILL_SENTINELS, sentinel_ttl, &sentinel_due,
                       "backfill sentinels") != 0) {
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
           (double)cfg->backfill / s / cluster_nodes(cl), scanned,
           cfg->backfill + BACKFILL_SENTINELS,
           scanned < (double)(cfg->backfill + BACKFILL_SENTINELS) ? ": NOT all of them" : "");
    int left = sentinels_left(c, 30000);
    printf("lapse  backfill sentinels: %d of %d items loaded before the enable and due 2 s into it "
           "%s\n",
           BACKFILL_SENTINELS - left, BACKFILL_SENTINELS,
           left == 0 ? "were deleted: the backfill indexed them"
                     : "were deleted; the wait ended 30 s after ENABLED with the rest still there: "
                       "NOT all indexed");
}
