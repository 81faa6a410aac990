/*
 * lapse-bench: throughput and latency of put, batched put, get and query
 * through liblapse against a three-node cluster on loopback.
 *
 *   lapse-bench [--coordinator URL] [--threads N] [--seconds S] [--warmup S]
 *               [--batch N] [--value-bytes N] [--bin-dir DIR]
 *               [--workloads put,batch-put,get,batch-get,query]
 *               [--replication 1,3] [--etcd N] [--partitions N] [--vs-redis]
 *               [--async]
 *
 * Without --coordinator it starts its own cluster (tests/cluster.h) from
 * --bin-dir (default ./build/bin) and stops it at the end. Each workload runs
 * --warmup seconds (default 1) whose calls count for nothing, then --seconds
 * with --threads client threads sharing one lapse_client, prints a progress
 * line each second on stderr, then on stdout calls/s, items/s (what an item
 * is: the row says) and latency percentiles of the calls that succeeded (per
 * call; a batched call's latency is per batch). Failed calls are counted
 * apart and are in no percentile.
 *
 * --replication lists the copies per partition to measure (default 1):
 * every workload runs on tables of each, one after the other in the same
 * run and on the same cluster, each row saying its rf (RF 3 against RF 1:
 * docs/benchmarks.md). --etcd N starts N etcd members and runs the
 * coordinator and nodes on them, as in production (node leases fence the
 * primaries); 0 (the default) keeps the catalog in the coordinator.
 * --vs-redis (what `make bench` runs) first measures Redis alone on the
 * machine with redis-benchmark, at the same concurrency (-c threads) and
 * value size, in two configurations: AOF with fsync every second (what a
 * durable put is compared with) and Redis's defaults (RDB snapshots, no
 * AOF: its fastest that keeps data), each on a free loopback port, stopped
 * before the Lapse cluster starts; then the Lapse workloads, then the
 * ratios (issue 16's bar: single gets >= 0.5x Redis's GET, single puts >=
 * 0.35x its SET with AOF everysec, p99 <= 2 ms).
 * --async drives put and get as redis-benchmark drives Redis: no thread per
 * call, but --threads calls kept in flight from callbacks (liblapse's
 * lapse_put_async and lapse_get_async; each call's callback sends its
 * slot's next), rows saying in-flight=N instead of threads=N; the other
 * workloads keep their threads.
 * With put at --replication 1 and 3 and get at 1, it ends with the
 * replication hop: what three copies add to a put's median, in medians of
 * a get (issue 16: a round trip, not a multiple; run with --threads 1).
 * --partitions sets the tables' partitions (default 64; 1 puts every
 * write on one partition: concurrent writes then share replication
 * rounds, group commit).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../client/lapse.h"
#include "../tests/cluster.h"
#include "bench_util.h"
#include "redis_peer.h"

/* Latency samples a thread keeps: 100k calls/s for 10 s. Calls past it are
 * still counted (worker.calls), only not in the percentiles. */
enum { MAX_THREADS = 64, MAX_SAMPLES_PER_THREAD = 1 << 20 };

typedef enum { W_PUT, W_BATCH, W_GET, W_BATCH_GET, W_QUERY } workload;

typedef struct config {
    const char *coordinator;
    const char *bin_dir;
    int threads;
    int seconds;
    int warmup_s; /* seconds of each workload before anything is counted */
    int batch;
    int value_bytes;
    int keys_loaded;    /* keys 0..keys_loaded-1 exist in table (set by put/batch) */
    int rf;             /* copies per partition of the tables measured now */
    int partitions;     /* of each table */
    int async;          /* --async: one thread keeps `threads` calls in flight */
    int pids[3];        /* the nodes' processes when the bench started them, else 0 */
    double rate[4][5];  /* calls/s of each workload at rf 1..3 (0: not run) */
    uint32_t p50[4][5]; /* and its p50, µs */
    uint32_t p99[4][5]; /* and its p99, µs */
    char table[32], qtable[32];
} config;

typedef struct worker {
    pthread_t th;
    int id;
    workload w;
    const config *cfg;
    lapse_client *client;
    atomic_long ops; /* items written, read or returned by calls that succeeded */
    long errors;     /* failed calls: in no percentile */
    char first_error[512];
    long calls;       /* calls that succeeded */
    uint32_t *lat_us; /* one sample per call that succeeded, the first MAX_SAMPLES_PER_THREAD */
    size_t nlat;
    long next_key; /* put: this thread's next key */
    atomic_int *stop;
    atomic_int *measuring; /* 0 during the warm-up: nothing is counted */
    char *pad;             /* put: the value, value_bytes of 'v' */
    uint64_t seed;         /* get: the random keys' state */
    /* --async: the slot's call in flight */
    double t0;
    lapse_error err;
    atomic_int *slots_done; /* slots whose last call has come back */
} worker;

/* The key {Id: ks} of item key; ks (32 bytes) gets its name. */
static lapse_item *key_item(long key, char *ks)
{
    lapse_item *it = lapse_item_new();
    snprintf(ks, 32, "user%010ld", key);
    lapse_item_set_s(it, "Id", ks);
    return it;
}

/* The key of one of the items loaded, at random (w's seed); ks as
 * key_item's. */
static lapse_item *random_key(worker *w, char *ks)
{
    return key_item((long)(bench_rng(&w->seed) % (uint64_t)w->cfg->keys_loaded), ks);
}

static lapse_item *make_item(long key, const char *pad)
{
    char ks[32];
    lapse_item *it = key_item(key, ks);
    lapse_item_set_n_i64(it, "Seq", key % 10);
    lapse_item_set_s(it, "Pad", pad);
    return it;
}

/* Counts a failed call, keeping the first one's message. */
static void count_failure(worker *w, const char *message)
{
    if (w->errors++ == 0) {
        snprintf(w->first_error, sizeof(w->first_error), "%s", message);
    }
}

static void record(worker *w, double t0, int rv, lapse_error *e, long items)
{
    double dt = mono_s() - t0;
    if (!atomic_load(w->measuring)) {
        return;
    }
    if (rv != 0) {
        count_failure(w, e->message);
        return;
    }
    w->calls++;
    if (w->nlat < MAX_SAMPLES_PER_THREAD) {
        w->lat_us[w->nlat++] = (uint32_t)(dt * 1e6);
    }
    atomic_fetch_add(&w->ops, items);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    const config *cfg = w->cfg;
    lapse_item **batch = calloc((size_t)cfg->batch, sizeof(*batch));
    lapse_error e;

    while (!atomic_load(w->stop)) {
        double t0 = mono_s();
        int rv = 0;
        if (w->w == W_PUT) {
            lapse_item *it = make_item(w->next_key, w->pad);
            w->next_key += cfg->threads;
            rv = lapse_put(w->client, cfg->table, it, NULL, &e);
            lapse_item_free(it);
            record(w, t0, rv, &e, 1);
        } else if (w->w == W_BATCH) {
            for (int i = 0; i < cfg->batch; i++) {
                batch[i] = make_item(w->next_key, w->pad);
                w->next_key += cfg->threads;
            }
            t0 = mono_s();
            rv = lapse_batch_write(w->client, cfg->table, batch, (size_t)cfg->batch, NULL, 0, &e);
            for (int i = 0; i < cfg->batch; i++) {
                lapse_item_free(batch[i]);
            }
            record(w, t0, rv, &e, cfg->batch);
        } else if (w->w == W_GET) {
            char ks[32];
            lapse_item *key = random_key(w, ks);
            lapse_item *got = NULL;
            t0 = mono_s();
            rv = lapse_get(w->client, cfg->table, key, &got, &e);
            if (rv == 0 && got == NULL) {
                rv = LAPSE_EINTERNAL;
                snprintf(e.message, sizeof(e.message), "key %s missing", ks);
            }
            lapse_item_free(got);
            lapse_item_free(key);
            record(w, t0, rv, &e, 1);
        } else if (w->w == W_BATCH_GET) {
            lapse_item **keys = batch;
            lapse_item **got = calloc((size_t)cfg->batch, sizeof(*got));
            for (int i = 0; i < cfg->batch; i++) {
                char ks[32];
                keys[i] = random_key(w, ks);
            }
            t0 = mono_s();
            rv = lapse_batch_get(w->client, cfg->table, keys, (size_t)cfg->batch, got, &e);
            long hits = 0;
            for (int i = 0; i < cfg->batch; i++) {
                hits += got[i] != NULL;
                lapse_item_free(got[i]);
                lapse_item_free(keys[i]);
            }
            if (rv == 0 && hits != cfg->batch) {
                rv = LAPSE_EINTERNAL;
                snprintf(e.message, sizeof(e.message), "%ld of %d keys missing", cfg->batch - hits,
                         cfg->batch);
            }
            free(got);
            record(w, t0, rv, &e, cfg->batch);
        } else {
            char pk[64];
            snprintf(pk, sizeof(pk), "{\"S\":\"dev%ld\"}", (long)(bench_rng(&w->seed) % 1000));
            lapse_query_opts q = {0};
            q.partition_key_json = pk;
            lapse_page *pg = NULL;
            rv = lapse_query(w->client, cfg->qtable, &q, &pg, &e);
            long n = rv == 0 ? (long)lapse_page_count(pg) : 0;
            lapse_page_free(pg);
            record(w, t0, rv, &e, n);
        }
    }
    free(batch);
    return NULL;
}

/* --async: as redis-benchmark drives Redis (one thread, -c connections
 * each with one request out), each slot keeps one call in flight with
 * liblapse's asynchronous calls; a call's callback, on liblapse's I/O
 * thread, records it and sends the slot's next. */
static void slot_next(worker *w);

static void slot_back(worker *w, int rv, const lapse_error *err)
{
    if (rv != 0 && err != NULL && err != &w->err) {
        w->err = *err;
    }
    record(w, w->t0, rv, &w->err, 1);
    slot_next(w);
}

static void slot_got(void *arg, int status, lapse_item *item, const lapse_error *err)
{
    worker *w = arg;
    if (status == 0 && item == NULL) {
        status = LAPSE_EINTERNAL;
        snprintf(w->err.message, sizeof(w->err.message), "a key missing");
        err = &w->err;
    }
    lapse_item_free(item);
    slot_back(w, status, err);
}

static void slot_put(void *arg, int status, const lapse_error *err)
{
    slot_back(arg, status, err);
}

/* Sends w's next call, or ends the slot once stop is set. A call that
 * cannot be sent counts as failed and ends the slot (so a dead cluster
 * cannot recurse through here). */
static void slot_next(worker *w)
{
    const config *cfg = w->cfg;
    if (atomic_load(w->stop)) {
        atomic_fetch_add(w->slots_done, 1);
        return;
    }
    lapse_item *it;
    if (w->w == W_PUT) {
        it = make_item(w->next_key, w->pad);
        w->next_key += cfg->threads;
    } else {
        char ks[32];
        it = random_key(w, ks);
    }
    w->t0 = mono_s();
    int rv = w->w == W_PUT ? lapse_put_async(w->client, cfg->table, it, slot_put, w, &w->err)
                           : lapse_get_async(w->client, cfg->table, it, NULL, slot_got, w, &w->err);
    lapse_item_free(it);
    if (rv != 0) {
        count_failure(w, w->err.message); /* warm-up or not */
        atomic_fetch_add(w->slots_done, 1);
    }
}

static const char *wname(workload w)
{
    static const char *names[] = {"put", "batch-put", "get", "batch-get", "query"};
    return names[w];
}

/* What the row's items are. */
static const char *witems(workload w)
{
    static const char *items[] = {"items written", "items written", "items read", "items read",
                                  "items returned (10 per partition key)"};
    return items[w];
}

/* Measures Redis alone: redis-benchmark at the run's concurrency and value
 * size, with AOF everysec ([0]) and with Redis's defaults ([1]). */
static int redis_peer(const config *cfg, redis_rate set[2], redis_rate get[2])
{
    static const char *const names[] = {"aof-everysec", "default"};
    redis_print_version();
    for (int k = 0; k < 2; k++) {
        char dir[] = "/tmp/lapse-bench-redis-XXXXXX";
        if (mkdtemp(dir) == NULL) {
            fprintf(stderr, "lapse-bench: mkdtemp: cannot make Redis's directory\n");
            return -1;
        }
        const char *aof[] = {"--dir",         dir,        "--save", "", "--appendonly", "yes",
                             "--appendfsync", "everysec", NULL};
        const char *dflt[] = {"--dir", dir, NULL};
        int port = cluster_free_port();
        fprintf(stderr, "redis (%s): redis-benchmark -c %d -d %d on port %d\n", names[k],
                cfg->threads, cfg->value_bytes, port);
        pid_t pid = redis_spawn(port, k == 0 ? aof : dflt);
        int rv = pid > 0 && redis_wait(port, 5000) == 0
                     ? redis_bench(port, cfg->threads, cfg->value_bytes, 120000L * cfg->seconds,
                                   1000000L, &set[k], &get[k])
                     : -1;
        if (pid > 0) {
            kill(pid, SIGTERM);
            waitpid(pid, NULL, 0);
        }
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd) != 0) {
            fprintf(stderr, "lapse-bench: could not remove %s\n", dir);
        }
        if (rv != 0) {
            fprintf(stderr,
                    "lapse-bench: Redis (%s) could not be measured: are redis-server "
                    "and redis-benchmark installed (bench/install-redis.sh)?\n",
                    names[k]);
            return -1;
        }
        for (int g = 0; g < 2; g++) {
            const redis_rate *r = g ? &get[k] : &set[k];
            printf(
                "redis     %-3s config=%-12s clients=%-3d calls/s=%-8.0f p50=%.0fus p99=%.0fus\n",
                g ? "GET" : "SET", names[k], cfg->threads, r->rps, r->p50_ms * 1000,
                r->p99_ms * 1000);
        }
        fflush(stdout);
    }
    return 0;
}

/* One line of the verdict: Lapse's rate against Redis's, and the bar. */
static void ratio_line(const char *what, double lapse, uint32_t p99_us, double redis,
                       const char *against, double bar)
{
    double x = redis > 0 ? lapse / redis : 0;
    printf("# vs redis: %-15s %8.0f/s against %-28s %8.0f/s = %.2fx (bar %.2fx: %s), "
           "p99 %.2f ms (bar 2 ms: %s)\n",
           what, lapse, against, redis, x, bar, x >= bar ? "met" : "NOT met",
           (double)p99_us / 1000.0, p99_us <= 2000 ? "met" : "NOT met");
}

static void print_ratios(const config *cfg, const redis_rate set[2], const redis_rate get[2],
                         const int *rfs, int nrf)
{
    double best_get = get[0].rps > get[1].rps ? get[0].rps : get[1].rps;
    for (int r = 0; r < nrf; r++) {
        int rf = rfs[r];
        char what[32];
        if (rf < 1 || rf > 3) {
            continue;
        }
        if (cfg->rate[rf][W_GET] > 0) {
            snprintf(what, sizeof(what), "get rf=%d%s", rf, cfg->async ? " async" : "");
            ratio_line(what, cfg->rate[rf][W_GET], cfg->p99[rf][W_GET], best_get,
                       "GET (the faster config)", 0.5);
        }
        if (cfg->rate[rf][W_PUT] > 0) {
            snprintf(what, sizeof(what), "put rf=%d%s", rf, cfg->async ? " async" : "");
            ratio_line(what, cfg->rate[rf][W_PUT], cfg->p99[rf][W_PUT], set[0].rps,
                       "SET (AOF everysec)", 0.35);
            ratio_line(what, cfg->rate[rf][W_PUT], cfg->p99[rf][W_PUT], set[1].rps,
                       "SET (Redis's defaults)", 0.35);
        }
    }
    fflush(stdout);
}

/* Issue 16's bar on the replication hop, when put ran at RF 1 and 3 and
 * get at RF 1: what three copies add to a put's median, in medians of a
 * get (a whole round trip with its read). One round trip, not a multiple:
 * under 1.5 is met. Meaningful with one client thread, where nothing
 * queues (`make bench` runs it so). */
static void print_hop(const config *cfg)
{
    uint32_t put1 = cfg->p50[1][W_PUT], put3 = cfg->p50[3][W_PUT], get1 = cfg->p50[1][W_GET];
    if (cfg->rate[1][W_PUT] <= 0 || cfg->rate[3][W_PUT] <= 0 || cfg->rate[1][W_GET] <= 0 ||
        get1 == 0) {
        return;
    }
    double hop = (double)put3 - (double)put1;
    double trips = hop / (double)get1;
    printf("# replication hop (%s=%d): put p50 %u us at rf=3 - %u us at rf=1 = %.0f us, "
           "%.1f round trips of a get at rf=1 (p50 %u us) (bar: one, not a multiple, under "
           "1.5: %s)\n",
           cfg->async ? "in-flight" : "threads", cfg->threads, put3, put1, hop, trips, get1,
           trips < 1.5 ? "met" : "NOT met");
    fflush(stdout);
}

/* CPU seconds used by this process and the nodes; -1 when the nodes are
 * not ours (--coordinator) or one cannot be read. */
static double cpu_all_s(const config *cfg)
{
    double sum = cpu_self_s();
    for (int i = 0; i < 3; i++) {
        double n = cfg->pids[i] > 0 ? cpu_of_pid_s(cfg->pids[i]) : -1;
        if (n < 0) {
            return -1;
        }
        sum += n;
    }
    return sum;
}

static void run(workload wl, config *cfg, lapse_client *client, long *next_key_base)
{
    worker ws[MAX_THREADS];
    atomic_int stop = 0, measuring = 0, slots_done = 0;
    int async = cfg->async && (wl == W_PUT || wl == W_GET);
    memset(ws, 0, sizeof(ws));
    for (int i = 0; i < cfg->threads; i++) {
        ws[i].id = i;
        ws[i].w = wl;
        ws[i].cfg = cfg;
        ws[i].client = client;
        ws[i].stop = &stop;
        ws[i].measuring = &measuring;
        ws[i].lat_us = malloc(sizeof(uint32_t) * MAX_SAMPLES_PER_THREAD);
        ws[i].next_key = *next_key_base + i;
        ws[i].seed = 0x9e3779b97f4a7c15ULL ^ (uint64_t)(i + 1);
        ws[i].pad = malloc((size_t)cfg->value_bytes + 1);
        memset(ws[i].pad, 'v', (size_t)cfg->value_bytes);
        ws[i].pad[cfg->value_bytes] = '\0';
        ws[i].slots_done = &slots_done;
        if (!async) {
            pthread_create(&ws[i].th, NULL, worker_main, &ws[i]);
        }
    }
    for (int i = 0; async && i < cfg->threads; i++) {
        slot_next(&ws[i]);
    }
    /* The warm-up: connections, the client's map, RocksDB's caches. */
    for (double w0 = mono_s(); mono_s() < w0 + cfg->warmup_s;) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    atomic_store(&measuring, 1);
    double cpu0 = cpu_all_s(cfg);
    double t0 = mono_s();
    long last = 0;
    for (int s = 1; s <= cfg->seconds; s++) {
        while (mono_s() < t0 + s) {
            struct timespec ts = {0, 20 * 1000000L};
            nanosleep(&ts, NULL);
        }
        long ops = 0;
        for (int i = 0; i < cfg->threads; i++) {
            ops += atomic_load(&ws[i].ops);
        }
        fprintf(stderr, "\r%-9s %3d/%ds  %8ld ops/s  %10ld total", wname(wl), s, cfg->seconds,
                ops - last, ops);
        last = ops;
    }
    atomic_store(&stop, 1);
    double cpu1 = cpu_all_s(cfg);
    double elapsed = 0;
    long ops = 0, errors = 0, calls = 0;
    size_t nlat = 0;
    /* The slots' last calls: each ends within its call's time-out. */
    for (double w0 = mono_s(); async && atomic_load(&slots_done) < cfg->threads;) {
        if (mono_s() > w0 + 60) {
            fprintf(stderr, "\nlapse-bench: %d of %d asynchronous calls never came back in 60 s\n",
                    cfg->threads - atomic_load(&slots_done), cfg->threads);
            exit(1);
        }
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < cfg->threads; i++) {
        if (!async) {
            pthread_join(ws[i].th, NULL);
        }
        free(ws[i].pad);
        ops += atomic_load(&ws[i].ops);
        errors += ws[i].errors;
        calls += ws[i].calls;
        nlat += ws[i].nlat;
    }
    elapsed = mono_s() - t0;
    fprintf(stderr, "\n");
    uint32_t *all = malloc(sizeof(uint32_t) * (nlat ? nlat : 1));
    size_t k = 0;
    for (int i = 0; i < cfg->threads; i++) {
        memcpy(all + k, ws[i].lat_us, ws[i].nlat * sizeof(uint32_t));
        k += ws[i].nlat;
    }
    qsort(all, nlat, sizeof(uint32_t), cmp_u32);
#define PCT(p) (nlat ? all[(size_t)((double)(nlat - 1) * (p))] : 0)
    printf("%-9s rf=%d %s=%-3d calls/s=%-8.0f items/s=%-9.0f (%s) calls=%-8zu p50=%uus "
           "p90=%uus p99=%uus p99.9=%uus max=%uus failed=%ld (in no percentile)\n",
           wname(wl), cfg->rf, async ? "in-flight" : "threads", cfg->threads,
           (double)calls / elapsed, (double)ops / elapsed, witems(wl), (size_t)calls, PCT(0.5),
           PCT(0.9), PCT(0.99), PCT(0.999), nlat ? all[nlat - 1] : 0, errors);
    if (nlat < (size_t)calls) {
        printf("%-9s rf=%d percentiles from the first %zu calls of each thread (%zu of %ld)\n",
               wname(wl), cfg->rf, (size_t)MAX_SAMPLES_PER_THREAD, nlat, calls);
    }
    if (cfg->rf >= 1 && cfg->rf <= 3 && errors == 0) {
        cfg->rate[cfg->rf][wl] = (double)calls / elapsed;
        cfg->p50[cfg->rf][wl] = PCT(0.5);
        cfg->p99[cfg->rf][wl] = PCT(0.99);
    }
#undef PCT
    if (cpu0 >= 0 && cpu1 >= 0 && calls > 0) {
        /* Over the measured seconds (the threads' last calls, after stop
         * was set, are in neither count). */
        printf("%-9s rf=%d cpu/call=%.1fus (this process and the three nodes, user + system, "
               "over %.1f s: %.0f%% of the machine's cores)\n",
               wname(wl), cfg->rf, (cpu1 - cpu0) * 1e6 / (double)calls, elapsed,
               100.0 * (cpu1 - cpu0) / elapsed / (double)sysconf(_SC_NPROCESSORS_ONLN));
    }
    fflush(stdout);
    for (int i = 0; i < cfg->threads; i++) {
        if (ws[i].errors) {
            fprintf(stderr, "%s: first error: %s\n", wname(wl), ws[i].first_error);
            break;
        }
    }
    if (wl == W_PUT || wl == W_BATCH) {
        long maxk = 0;
        for (int i = 0; i < cfg->threads; i++) {
            if (ws[i].next_key > maxk) {
                maxk = ws[i].next_key;
            }
        }
        /* Every key below the slowest thread's next key was written. */
        long mink = maxk;
        for (int i = 0; i < cfg->threads; i++) {
            if (ws[i].next_key < mink) {
                mink = ws[i].next_key;
            }
        }
        if (errors == 0) {
            cfg->keys_loaded = (int)mink;
        }
        /* The next phase rewrites [mink, maxk), so 0..its own minimum is dense. */
        *next_key_base = mink;
    }
    for (int i = 0; i < cfg->threads; i++) {
        free(ws[i].lat_us);
    }
    free(all);
}

static int load_query_table(lapse_client *c, const config *cfg)
{
    lapse_error e;
    lapse_table_def q = {.name = cfg->qtable,
                         .replication = (unsigned)cfg->rf,
                         .partition_key = "Dev",
                         .partition_key_type = 'S',
                         .sort_key = "Seq",
                         .sort_key_type = 'N',
                         .partitions = 64};
    if (lapse_create_table(c, &q, &e) != 0 && e.code != LAPSE_EEXISTS) {
        fprintf(stderr, "create %s: %s\n", cfg->qtable, e.message);
        return 1;
    }
    enum { N = 10000 };
    lapse_item **items = calloc(N, sizeof(*items));
    for (int i = 0; i < N; i++) {
        char d[32];
        items[i] = lapse_item_new();
        snprintf(d, sizeof(d), "dev%d", i % 1000);
        lapse_item_set_s(items[i], "Dev", d);
        lapse_item_set_n_i64(items[i], "Seq", i / 1000);
    }
    int rv = lapse_batch_write(c, cfg->qtable, items, N, NULL, 0, &e);
    for (int i = 0; i < N; i++) {
        lapse_item_free(items[i]);
    }
    free(items);
    if (rv != 0) {
        fprintf(stderr, "load %s: %s\n", cfg->qtable, e.message);
    }
    return rv != 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: lapse-bench [--coordinator URL] [--threads N] [--seconds S] "
                    "[--warmup S] [--batch N] [--value-bytes N] [--bin-dir DIR] "
                    "[--workloads put,batch-put,get,batch-get,query] [--replication 1,3] "
                    "[--etcd N] [--partitions N] [--vs-redis] [--async]\n");
}

int main(int argc, char **argv)
{
    config cfg = {.bin_dir = "./build/bin",
                  .threads = 16,
                  .seconds = 10,
                  .warmup_s = 1,
                  .batch = 100,
                  .value_bytes = 100,
                  .rf = 1,
                  .partitions = 64};
    const char *workloads = "put,batch-put,get,batch-get,query";
    const char *replication = "1";
    int etcd = 0;
    int vs_redis = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0) {
            usage();
            return 0;
        }
        if (strcmp(a, "--vs-redis") == 0) {
            vs_redis = 1;
            continue;
        }
        if (strcmp(a, "--async") == 0) {
            cfg.async = 1;
            continue;
        }
        if (v == NULL) {
            usage();
            return 2;
        }
        i++;
        if (strcmp(a, "--coordinator") == 0) {
            cfg.coordinator = v;
        } else if (strcmp(a, "--bin-dir") == 0) {
            cfg.bin_dir = v;
        } else if (strcmp(a, "--threads") == 0) {
            cfg.threads = atoi(v);
        } else if (strcmp(a, "--seconds") == 0) {
            cfg.seconds = atoi(v);
        } else if (strcmp(a, "--warmup") == 0) {
            cfg.warmup_s = atoi(v);
        } else if (strcmp(a, "--batch") == 0) {
            cfg.batch = atoi(v);
        } else if (strcmp(a, "--value-bytes") == 0) {
            cfg.value_bytes = atoi(v);
        } else if (strcmp(a, "--workloads") == 0) {
            workloads = v;
        } else if (strcmp(a, "--replication") == 0) {
            replication = v;
        } else if (strcmp(a, "--etcd") == 0) {
            etcd = atoi(v);
        } else if (strcmp(a, "--partitions") == 0) {
            cfg.partitions = atoi(v);
        } else {
            usage();
            return 2;
        }
    }
    int rfs[8], nrf = 0;
    for (const char *r = replication; *r != 0 && nrf < 8;) {
        char *end = NULL;
        long v = strtol(r, &end, 10);
        if (end == r || v < 1 || v > 3 || (*end != 0 && *end != ',')) {
            fprintf(stderr, "lapse-bench: --replication wants copies 1, 2 or 3, comma-separated\n");
            return 2;
        }
        rfs[nrf++] = (int)v;
        r = *end == ',' ? end + 1 : end;
    }
    if (cfg.threads < 1 || cfg.threads > MAX_THREADS || cfg.seconds < 1 || cfg.warmup_s < 0 ||
        cfg.batch < 1 || cfg.batch > LAPSE_BATCH_MAX || cfg.value_bytes < 0 ||
        cfg.value_bytes > 100000 || etcd < 0 || etcd > 5 || cfg.partitions < 1 ||
        cfg.partitions > 1024) {
        fprintf(stderr, "lapse-bench: an option is out of range\n");
        return 2;
    }

    redis_rate rset[2], rget[2]; /* [0] AOF everysec, [1] Redis's defaults */
    if (vs_redis && redis_peer(&cfg, rset, rget) != 0) {
        return 1;
    }
    cluster *cl = NULL;
    const char *url = cfg.coordinator;
    if (url == NULL) {
        cluster_options o = {0};
        o.nodes = 3;
        o.bin_dir = cfg.bin_dir;
        o.quiet = 1;
        o.etcd = etcd;
        char err[512];
        fprintf(stderr, "starting a three-node cluster from %s%s\n", cfg.bin_dir,
                etcd > 0 ? " on etcd" : "");
        if (cluster_start(&cl, &o, err, sizeof(err)) != 0) {
            fprintf(stderr, "lapse-bench: %s\n", err);
            return 1;
        }
        url = cluster_coordinator_url(cl);
        for (int i = 0; i < 3; i++) {
            cfg.pids[i] = (int)cluster_pid(cl, i + 1);
        }
    }
    lapse_client *c = NULL;
    lapse_error e;
    if (lapse_connect(&c, url, &e) != 0) {
        fprintf(stderr, "lapse-bench: connect %s: %s\n", url, e.message);
        cluster_free(cl, 1);
        return 1;
    }
    printf("# lapse-bench: 3 nodes on loopback%s, %d threads, one shared client, %d s per "
           "workload after a %d s warm-up, %d-byte values, batches of %d, %d partitions\n",
           etcd > 0 ? " on etcd" : "", cfg.threads, cfg.seconds, cfg.warmup_s, cfg.value_bytes,
           cfg.batch, cfg.partitions);
    for (int r = 0; r < nrf; r++) {
        cfg.rf = rfs[r];
        cfg.keys_loaded = 0;
        snprintf(cfg.table, sizeof(cfg.table), "Bench_rf%d", cfg.rf);
        snprintf(cfg.qtable, sizeof(cfg.qtable), "BenchQ_rf%d", cfg.rf);
        lapse_table_def d = {.name = cfg.table,
                             .partition_key = "Id",
                             .partition_key_type = 'S',
                             .partitions = (unsigned)cfg.partitions,
                             .replication = (unsigned)cfg.rf};
        if (lapse_create_table(c, &d, &e) != 0 && e.code != LAPSE_EEXISTS) {
            fprintf(stderr, "lapse-bench: create table %s: %s\n", cfg.table, e.message);
            lapse_close(c);
            cluster_free(cl, 1);
            return 1;
        }
        long next_key = 0;
        for (workload wl = W_PUT; wl <= W_BATCH_GET; wl++) {
            if (!has_workload(workloads, wname(wl))) {
                continue;
            }
            if ((wl == W_GET || wl == W_BATCH_GET) && cfg.keys_loaded == 0) {
                fprintf(stderr, "%s: no keys loaded (run put or batch-put first)\n", wname(wl));
                continue;
            }
            run(wl, &cfg, c, &next_key);
        }
        if (has_workload(workloads, "query") && load_query_table(c, &cfg) == 0) {
            run(W_QUERY, &cfg, c, &next_key);
        }
    }
    lapse_close(c);
    cluster_free(cl, 1);
    if (vs_redis) {
        print_ratios(&cfg, rset, rget, rfs, nrf);
    }
    print_hop(&cfg);
    return 0;
}
