/*
 * ttl_lapse.c: lapse-ttl-bench's Lapse-side tools, shared by its workloads:
 * items and parallel loads, tables with TTL, the nodes' deleted counters, and
 * the two ways of observing deletions (a polled sample, the counters).
 * Contract in ttl_lapse.h.
 */
#include "ttl_lapse.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "../tests/scrape.h"
#include "bench_util.h"

lapse_item *ttl_lapse_item(const char *prefix, long long i, int64_t ttl_s)
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
            batch[n] = ttl_lapse_item(l->prefix, i, l->ttl_of(l->arg, i));
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
int ttl_lapse_load(lapse_client *c, const char *table, const char *prefix, long long n,
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

int64_t ttl_lapse_far_future(void *arg, long long i)
{
    (void)arg;
    (void)i;
    return wall_ms() / 1000 + 30 * 86400;
}

/* Due instants are whole seconds (TTL values are epoch seconds): item i is
 * due at the second its slot in the stream falls in. */
int64_t ttl_lapse_planned(void *arg, long long i)
{
    return due_s_of(arg, i);
}

/* With stream: 16 partitions and the change stream (TTL deletes in it),
 * else 64 partitions. */
int ttl_lapse_create_table(lapse_client *c, const char *name, int stream, int rf)
{
    lapse_error e;
    lapse_table_def d = {0};
    d.name = name;
    d.replication = (unsigned)rf;
    d.partition_key = "Id";
    d.partition_key_type = 'S';
    d.partitions = stream ? TTL_LAPSE_STREAM_SHARDS : 64;
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

int ttl_lapse_create_ttl_table(lapse_client *c, const char *name, int rf)
{
    return ttl_lapse_create_table(c, name, 0, rf);
}

/* lapse_ttl_deleted_items_total of table (only: other tables of the run
 * may still be expiring), summed over the nodes. */
double ttl_lapse_deleted_total(cluster *cl, const char *table)
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
int64_t ttl_lapse_wait_all_deleted(cluster *cl, lapse_client *c, const char *table,
                                   const char *prefix, double before, long long total,
                                   int64_t ref_ms, const char *ref_what, int64_t give_up_ms,
                                   int poll_ms, const char *line_head)
{
    enum { CONFIRM_SAMPLE = 10000 };
    double got = 0;
    int64_t done = -1;
    while ((got = ttl_lapse_deleted_total(cl, table) - before) < (double)total &&
           wall_ms() < give_up_ms) {
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
size_t ttl_lapse_sample_lags(lapse_client *c, const char *table, const char *prefix,
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
