/*
 * lapse-expiry-bench: the TTL sweep and backfill of one store, with no
 * network and no cluster, so their CPU cost can be measured and profiled in
 * isolation (perf record -g -e cpu-clock works on it).
 *
 *   lapse-expiry-bench [--workloads sweep,backfill] [--items N] [--threads T]
 *                      [--partitions P] [--dir DIR]
 *
 * Items have the shape lapse-ttl-bench writes (Id S, ExpirationTime N, a
 * 40-byte Pad S), in one table of P partitions (default 64).
 *
 *   sweep     N items (default 1M) due in the same second, already past,
 *             written with TTL enabled (so the writes index them); then T
 *             threads (default 2) sweep them, each owning the partitions
 *             p % T == t and taking one batch of EXPIRY_ENGINE_SWEEP_BATCH (1000)
 *             per partition per pass, as the node's scanner does:
 *             deletes/s in all and per thread.
 *   backfill  N items written with TTL disabled; then TTL is enabled and T
 *             threads run expiry_backfill_step (1000 items a step) over
 *             their partitions: items indexed/s in all and per thread.
 *
 * The store lives in a fresh directory under DIR (default /tmp), removed at
 * the end. WAL on, no sync, as the node writes.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/clock.h"
#include "../common/item.h"
#include "../common/lapse_err.h"
#include "../partition/expiry.h"
#include "../partition/store.h"
#include "bench_util.h"

#define BATCH 1000

typedef struct bench {
    store *st;
    table_schema t;
    long long items;
    int threads;
    clock_wall now;
} bench;

typedef struct worker {
    bench *b;
    int index;
    uint64_t done; /* items deleted or scanned */
    double secs;
    int failed;
} worker;

static void set_s(item *it, const char *name, const char *s)
{
    attr_value v;
    if (item_value_init_bytes(&v, ATTR_S, s, strlen(s)) != 0 || item_set(it, name, &v) != 0) {
        abort();
    }
}

static item *make_item(long long i, int64_t ttl_s)
{
    char k[48], n[32];
    snprintf(k, sizeof(k), "burst%012lld", i);
    snprintf(n, sizeof(n), "%" PRId64, ttl_s);
    item *it = item_new();
    attr_value v;
    if (it == NULL || item_value_init_bytes(&v, ATTR_N, n, strlen(n)) != 0 ||
        item_set(it, "ExpirationTime", &v) != 0) {
        abort();
    }
    set_s(it, "Id", k);
    set_s(it, "Pad", "0123456789012345678901234567890123456789");
    return it;
}

/* Writes items [0, n) due at due_s, BATCH at a time. */
static int load(bench *b, int64_t due_s)
{
    store_write w[BATCH];
    item *its[BATCH];
    char err[512];
    double t0 = mono_s();
    for (long long i = 0; i < b->items;) {
        size_t k = 0;
        for (; k < BATCH && i < b->items; k++, i++) {
            its[k] = make_item(i, due_s);
            memset(&w[k], 0, sizeof(w[k]));
            w[k].put = its[k];
        }
        int rv = store_batch_write(b->st, &b->t, w, k, err, sizeof(err));
        for (size_t j = 0; j < k; j++) {
            item_free(its[j]);
        }
        if (rv != 0) {
            fprintf(stderr, "load: %s: %s\n", lapse_strerror(rv), err);
            return -1;
        }
    }
    fprintf(stderr, "loaded %lld items in %.1f s\n", b->items, mono_s() - t0);
    return 0;
}

/* One scanner-like worker: passes over its partitions, one sweep each,
 * until none has more. */
static void *sweep_main(void *arg)
{
    worker *w = arg;
    bench *b = w->b;
    char err[512];
    int64_t *due = calloc(BATCH, sizeof(*due));
    double t0 = mono_s();
    for (int more = 1; more && !w->failed;) {
        more = 0;
        for (uint32_t p = (uint32_t)w->index; p < b->t.partitions; p += (uint32_t)b->threads) {
            expiry_sweep_result res;
            memset(&res, 0, sizeof(res));
            res.due_ms = due;
            int rv = expiry_sweep(b->st, &b->t, p, b->now, BATCH, &res, err, sizeof(err));
            if (rv != 0) {
                fprintf(stderr, "sweep: %s: %s\n", lapse_strerror(rv), err);
                w->failed = 1;
                break;
            }
            w->done += res.deleted;
            more |= res.more;
        }
    }
    w->secs = mono_s() - t0;
    free(due);
    return NULL;
}

static void *backfill_main(void *arg)
{
    worker *w = arg;
    bench *b = w->b;
    char err[512];
    double t0 = mono_s();
    for (uint32_t p = (uint32_t)w->index; p < b->t.partitions && !w->failed;
         p += (uint32_t)b->threads) {
        for (int done = 0; !done;) {
            uint64_t scanned = 0;
            int rv = expiry_backfill_step(b->st, &b->t, p, b->now, BATCH, &scanned, NULL, &done,
                                          err, sizeof(err));
            if (rv != 0) {
                fprintf(stderr, "backfill: %s: %s\n", lapse_strerror(rv), err);
                w->failed = 1;
                break;
            }
            w->done += scanned;
        }
    }
    w->secs = mono_s() - t0;
    return NULL;
}

/* Runs T workers of fn and prints the rate. Returns 0 or -1. */
static int run(bench *b, void *(*fn)(void *), const char *what, const char *unit)
{
    worker *ws = calloc((size_t)b->threads, sizeof(*ws));
    pthread_t *th = calloc((size_t)b->threads, sizeof(*th));
    double t0 = mono_s();
    for (int i = 0; i < b->threads; i++) {
        ws[i] = (worker){b, i, 0, 0, 0};
        pthread_create(&th[i], NULL, fn, &ws[i]);
    }
    uint64_t total = 0;
    int failed = 0;
    double busy = 0;
    for (int i = 0; i < b->threads; i++) {
        pthread_join(th[i], NULL);
        total += ws[i].done;
        failed |= ws[i].failed;
        busy += ws[i].secs;
    }
    double secs = mono_s() - t0;
    printf("%-8s %" PRIu64 " %s in %.3f s with %d thread%s: %.0f/s in all, %.0f/s per thread\n",
           what, total, unit, secs, b->threads, b->threads == 1 ? "" : "s", (double)total / secs,
           (double)total / busy);
    free(ws);
    free(th);
    return failed || total != (uint64_t)b->items ? -1 : 0;
}

static int with_store(bench *b, const char *base, const char *name, int (*fn)(bench *))
{
    char dir[4096], err[512];
    snprintf(dir, sizeof(dir), "%s/lapse-expiry-bench-%s-XXXXXX", base, name);
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return -1;
    }
    int rv = store_open(&b->st, dir, err, sizeof(err));
    if (rv != 0) {
        fprintf(stderr, "store_open %s: %s\n", dir, err);
        return -1;
    }
    rv = fn(b);
    store_close(b->st);
    b->st = NULL;
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot remove %s\n", dir);
    }
    return rv;
}

static int sweep_workload(bench *b)
{
    b->t.ttl.enabled = 1;
    int64_t due_s = clock_wall_now().ms / 1000 + 1;
    if (load(b, due_s) != 0) {
        return -1;
    }
    b->now = (clock_wall){(due_s + 1) * 1000};
    return run(b, sweep_main, "sweep", "items deleted");
}

static int backfill_workload(bench *b)
{
    b->t.ttl.enabled = 0;
    int64_t due_s = clock_wall_now().ms / 1000 + 3600;
    if (load(b, due_s) != 0) {
        return -1;
    }
    b->t.ttl.enabled = 1;
    b->t.ttl.config_version = 1;
    b->now = clock_wall_now();
    return run(b, backfill_main, "backfill", "items indexed");
}

static void usage(FILE *f)
{
    fprintf(f, "usage: lapse-expiry-bench [--workloads sweep,backfill] [--items N] [--threads T] "
               "[--partitions P] [--dir DIR]\n");
}

int main(int argc, char **argv)
{
    const char *workloads = "sweep,backfill", *base = "/tmp";
    bench b;
    memset(&b, 0, sizeof(b));
    b.items = 1000000;
    b.threads = 2;
    uint32_t partitions = 64;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        if (strcmp(a, "--workloads") == 0) {
            workloads = v;
        } else if (strcmp(a, "--items") == 0) {
            b.items = atoll(v);
        } else if (strcmp(a, "--threads") == 0) {
            b.threads = atoi(v);
        } else if (strcmp(a, "--partitions") == 0) {
            partitions = (uint32_t)atoi(v);
        } else if (strcmp(a, "--dir") == 0) {
            base = v;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (b.items < 1 || b.threads < 1 || b.threads > 64 || partitions < 1 || partitions > 4096) {
        fprintf(stderr, "lapse-expiry-bench: an option is out of range\n");
        return 2;
    }
    b.t.id = 1;
    snprintf(b.t.name, sizeof(b.t.name), "Burst");
    snprintf(b.t.pk.name, sizeof(b.t.pk.name), "Id");
    b.t.pk.type = ATTR_S;
    b.t.partitions = partitions;
    snprintf(b.t.ttl.attribute, sizeof(b.t.ttl.attribute), "ExpirationTime");
    b.t.ttl.config_version = 1;
    int rv = 0;
    if (has_workload(workloads, "sweep")) {
        rv |= with_store(&b, base, "sweep", sweep_workload);
    }
    if (has_workload(workloads, "backfill")) {
        rv |= with_store(&b, base, "backfill", backfill_workload);
    }
    return rv != 0 ? 1 : 0;
}
