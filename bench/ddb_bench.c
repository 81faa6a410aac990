/*
 * lapse-ddb-bench: single-item PutItem and GetItem through the DynamoDB
 * gateway (HTTP/1.1 keep-alive, one connection per thread, DynamoDB's JSON
 * protocol) against the same calls through liblapse (lapse_put, lapse_get),
 * in the same run, on the same cluster, table and keys (issue 14's target:
 * the HTTP path at least 70% of the native throughput, p99 at most 5 ms).
 *
 *   lapse-ddb-bench [--endpoint URL] [--coordinator URL[,URL]] [--threads N]
 *                   [--seconds S] [--warmup S] [--keys N] [--value-bytes N]
 *                   [--workloads put,get]
 *
 * Needs a running cluster with its gateway (`make cluster`: the defaults,
 * http://127.0.0.1:8000 and liblapse's default coordinators). It creates a
 * table through the gateway (the cluster's default copies), loads --keys
 * items (progress on stderr), then for each workload runs the native path
 * and then the HTTP path: --warmup seconds whose calls count for nothing,
 * then --seconds with --threads threads, a progress line each second on
 * stderr. Native threads share one lapse_client (as lapse-bench); HTTP
 * threads have a connection each (as the SDKs' pools). Both paths write
 * and read the same keys, chosen at random. On stdout: calls/s and latency
 * percentiles of the calls that succeeded (failed calls are counted apart,
 * in no percentile), and the HTTP/native ratio of each workload. The table
 * is deleted at the end.
 */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../client/lapse.h"
#include "../rpc/http_client.h"
#include "bench_util.h"

enum { MAX_THREADS = 64, MAX_SAMPLES_PER_THREAD = 1 << 19 };

typedef enum { W_PUT, W_GET } workload;
typedef enum { P_NATIVE, P_HTTP } path;

typedef struct config {
    const char *endpoint, *coordinator;
    int threads, seconds, warmup_s, keys, value_bytes;
    char table[64];
    char *pad; /* value_bytes of 'v' */
    lapse_client *c;
} config;

typedef struct worker {
    pthread_t th;
    int id;
    workload w;
    path p;
    const config *cfg;
    http_client *http;
    atomic_long calls; /* calls that succeeded while measuring */
    long errors;
    char first_error[256];
    uint32_t *lat_us;
    size_t nlat;
    atomic_int *stop, *measuring;
} worker;

static void record(worker *w, double t0, int ok, const char *why)
{
    double dt = mono_s() - t0;
    if (!atomic_load(w->measuring)) {
        return;
    }
    if (!ok) {
        if (w->errors++ == 0) {
            snprintf(w->first_error, sizeof w->first_error, "%s", why);
        }
        return;
    }
    if (w->nlat < MAX_SAMPLES_PER_THREAD) {
        w->lat_us[w->nlat++] = (uint32_t)(dt * 1e6);
    }
    atomic_fetch_add(&w->calls, 1);
}

/* One native call on key k. */
static void native_call(worker *w, long k)
{
    const config *cfg = w->cfg;
    char id[32];
    lapse_error e;
    snprintf(id, sizeof id, "user%010ld", k);
    lapse_item *it = lapse_item_new();
    lapse_item_set_s(it, "Id", id);
    if (w->w == W_PUT) {
        lapse_item_set_n_i64(it, "Seq", k % 10);
        lapse_item_set_s(it, "Pad", cfg->pad);
    }
    double t0 = mono_s();
    int ok;
    if (w->w == W_PUT) {
        ok = lapse_put(cfg->c, cfg->table, it, NULL, &e) == 0;
    } else {
        lapse_item *got = NULL;
        ok = lapse_get(cfg->c, cfg->table, it, &got, &e) == 0;
        if (ok && got == NULL) {
            ok = 0;
            snprintf(e.message, sizeof e.message, "key %s missing", id);
        }
        lapse_item_free(got);
    }
    record(w, t0, ok, e.message);
    lapse_item_free(it);
}

/* The same call through the gateway. */
static void http_call(worker *w, long k, buf *body, buf *resp)
{
    const config *cfg = w->cfg;
    static const char *const names[] = {"X-Amz-Target", "Content-Type"};
    const char *values[] = {w->w == W_PUT ? "DynamoDB_20120810.PutItem"
                                          : "DynamoDB_20120810.GetItem",
                            "application/x-amz-json-1.0"};
    char err[256] = "";
    buf_clear(body);
    if (w->w == W_PUT) {
        buf_printf(body,
                   "{\"TableName\":\"%s\",\"Item\":{\"Id\":{\"S\":\"user%010ld\"},"
                   "\"Seq\":{\"N\":\"%ld\"},\"Pad\":{\"S\":\"%s\"}}}",
                   cfg->table, k, k % 10, cfg->pad);
    } else {
        buf_printf(body, "{\"TableName\":\"%s\",\"Key\":{\"Id\":{\"S\":\"user%010ld\"}}}",
                   cfg->table, k);
    }
    int status = 0;
    double t0 = mono_s();
    int rv = http_client_post(w->http, names, values, 2, body->data, body->len, 10000, &status,
                              resp, err, sizeof err);
    int ok = rv == 0 && status == 200 &&
             (w->w == W_PUT || strstr((const char *)resp->data, "\"Item\"") != NULL);
    if (rv == 0 && !ok) {
        snprintf(err, sizeof err, "HTTP %d: %.200s", status, (const char *)resp->data);
    }
    record(w, t0, ok, err);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    uint64_t seed = 0x9e3779b97f4a7c15ULL ^ (uint64_t)(w->id + 1) * 7919;
    buf body, resp;
    buf_init(&body);
    buf_init(&resp);
    while (!atomic_load(w->stop)) {
        long k = (long)(bench_rng(&seed) % (uint64_t)w->cfg->keys);
        if (w->p == P_NATIVE) {
            native_call(w, k);
        } else {
            http_call(w, k, &body, &resp);
        }
    }
    buf_fini(&body);
    buf_fini(&resp);
    return NULL;
}

static double pct(const uint32_t *v, size_t n, double p)
{
    if (n == 0) {
        return 0;
    }
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i] / 1000.0;
}

/* Runs workload w on path p; returns calls/s, prints its row. */
static double run(const config *cfg, workload wl, path p)
{
    static const char *const wname[] = {"put", "get"}, *const pname[] = {"native", "http"};
    worker *ws = calloc((size_t)cfg->threads, sizeof *ws);
    atomic_int stop = 0, measuring = 0;
    for (int i = 0; i < cfg->threads; i++) {
        worker *w = &ws[i];
        *w = (worker){.id = i, .w = wl, .p = p, .cfg = cfg, .stop = &stop, .measuring = &measuring};
        w->lat_us = malloc(MAX_SAMPLES_PER_THREAD * sizeof *w->lat_us);
        char err[256];
        if (p == P_HTTP && http_client_open(&w->http, cfg->endpoint, err, sizeof err) != 0) {
            fprintf(stderr, "lapse-ddb-bench: %s\n", err);
            exit(1);
        }
        pthread_create(&w->th, NULL, worker_main, w);
    }
    sleep_ms((int64_t)cfg->warmup_s * 1000);
    atomic_store(&measuring, 1);
    double t0 = mono_s();
    long last = 0;
    for (int s = 1; s <= cfg->seconds; s++) {
        sleep_ms(1000);
        long now = 0;
        for (int i = 0; i < cfg->threads; i++) {
            now += atomic_load(&ws[i].calls);
        }
        fprintf(stderr, "  %s %s: %d/%d s, %ld calls/s\n", wname[wl], pname[p], s, cfg->seconds,
                now - last);
        last = now;
    }
    atomic_store(&stop, 1);
    double elapsed = mono_s() - t0;
    size_t n = 0;
    long calls = 0, errors = 0;
    const char *first = NULL;
    for (int i = 0; i < cfg->threads; i++) {
        pthread_join(ws[i].th, NULL);
        n += ws[i].nlat;
        calls += atomic_load(&ws[i].calls);
        errors += ws[i].errors;
        if (first == NULL && ws[i].errors > 0) {
            first = ws[i].first_error;
        }
    }
    uint32_t *all = malloc((n ? n : 1) * sizeof *all);
    size_t k = 0;
    for (int i = 0; i < cfg->threads; i++) {
        memcpy(all + k, ws[i].lat_us, ws[i].nlat * sizeof *all);
        k += ws[i].nlat;
    }
    qsort(all, n, sizeof *all, cmp_u32);
    double rate = (double)calls / elapsed;
    printf("%-4s %-6s threads=%d calls/s=%.0f p50=%.2fms p90=%.2fms p99=%.2fms p99.9=%.2fms "
           "max=%.2fms failed=%ld%s%s\n",
           wname[wl], pname[p], cfg->threads, rate, pct(all, n, 0.5), pct(all, n, 0.9),
           pct(all, n, 0.99), pct(all, n, 0.999), n ? all[n - 1] / 1000.0 : 0.0, errors,
           first ? " first error: " : "", first ? first : "");
    fflush(stdout);
    for (int i = 0; i < cfg->threads; i++) {
        free(ws[i].lat_us);
        http_client_close(ws[i].http);
    }
    free(all);
    free(ws);
    return rate;
}

/* One gateway call outside the measurement (table management); exits on
 * failure. */
static void gateway(const config *cfg, const char *op, const char *body)
{
    http_client *h = NULL;
    char err[256], target[64];
    int status = 0;
    buf resp;
    buf_init(&resp);
    snprintf(target, sizeof target, "DynamoDB_20120810.%s", op);
    const char *names[] = {"X-Amz-Target"}, *values[] = {target};
    if (http_client_open(&h, cfg->endpoint, err, sizeof err) != 0 ||
        http_client_post(h, names, values, 1, body, strlen(body), 30000, &status, &resp, err,
                         sizeof err) != 0 ||
        status != 200) {
        fprintf(stderr, "lapse-ddb-bench: %s at %s: %s%s\n", op, cfg->endpoint, err,
                status ? (const char *)resp.data : "");
        exit(1);
    }
    http_client_close(h);
    buf_fini(&resp);
}

static void load(const config *cfg)
{
    enum { BATCH = 100 };
    lapse_item *batch[BATCH];
    lapse_error e;
    for (long k = 0; k < cfg->keys; k += BATCH) {
        int n = 0;
        for (long j = k; j < cfg->keys && n < BATCH; j++) {
            char id[32];
            snprintf(id, sizeof id, "user%010ld", j);
            batch[n] = lapse_item_new();
            lapse_item_set_s(batch[n], "Id", id);
            lapse_item_set_n_i64(batch[n], "Seq", j % 10);
            lapse_item_set_s(batch[n], "Pad", cfg->pad);
            n++;
        }
        int rv = lapse_batch_write(cfg->c, cfg->table, batch, (size_t)n, NULL, 0, &e);
        for (int i = 0; i < n; i++) {
            lapse_item_free(batch[i]);
        }
        if (rv != 0) {
            fprintf(stderr, "lapse-ddb-bench: load: %s\n", e.message);
            exit(1);
        }
        if ((k / BATCH) % 100 == 0) {
            fprintf(stderr, "  loaded %ld of %d keys\n", k + n, cfg->keys);
        }
    }
}

int main(int argc, char **argv)
{
    config cfg = {.endpoint = "http://127.0.0.1:8000/",
                  .threads = 16,
                  .seconds = 8,
                  .warmup_s = 1,
                  .keys = 20000,
                  .value_bytes = 100};
    const char *workloads = "put,get";
    static const struct option opts[] = {{"endpoint", required_argument, NULL, 'e'},
                                         {"coordinator", required_argument, NULL, 'c'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"seconds", required_argument, NULL, 's'},
                                         {"warmup", required_argument, NULL, 'w'},
                                         {"keys", required_argument, NULL, 'k'},
                                         {"value-bytes", required_argument, NULL, 'v'},
                                         {"workloads", required_argument, NULL, 'W'},
                                         {NULL, 0, NULL, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'e':
            cfg.endpoint = optarg;
            break;
        case 'c':
            cfg.coordinator = optarg;
            break;
        case 't':
            cfg.threads = atoi(optarg);
            break;
        case 's':
            cfg.seconds = atoi(optarg);
            break;
        case 'w':
            cfg.warmup_s = atoi(optarg);
            break;
        case 'k':
            cfg.keys = atoi(optarg);
            break;
        case 'v':
            cfg.value_bytes = atoi(optarg);
            break;
        case 'W':
            workloads = optarg;
            break;
        default:
            fprintf(stderr, "usage: see the comment at the top of bench/ddb_bench.c\n");
            return 2;
        }
    }
    if (cfg.threads < 1 || cfg.threads > MAX_THREADS || cfg.seconds < 1 || cfg.warmup_s < 0 ||
        cfg.keys < 1 || cfg.value_bytes < 0 || cfg.value_bytes > 100000) {
        fprintf(stderr,
                "lapse-ddb-bench: --threads 1-%d, --seconds >= 1, --warmup >= 0, "
                "--keys >= 1, --value-bytes 0-100000\n",
                MAX_THREADS);
        return 2;
    }
    cfg.pad = malloc((size_t)cfg.value_bytes + 1);
    memset(cfg.pad, 'v', (size_t)cfg.value_bytes);
    cfg.pad[cfg.value_bytes] = '\0';
    lapse_error e;
    if (lapse_connect(&cfg.c, cfg.coordinator, &e) != 0) {
        fprintf(stderr, "lapse-ddb-bench: connect: %s\n", e.message);
        return 1;
    }
    snprintf(cfg.table, sizeof cfg.table, "ddb_bench_%d", (int)getpid());
    char body[512];
    snprintf(body, sizeof body,
             "{\"TableName\":\"%s\",\"KeySchema\":[{\"AttributeName\":\"Id\",\"KeyType\":"
             "\"HASH\"}],\"AttributeDefinitions\":[{\"AttributeName\":\"Id\","
             "\"AttributeType\":\"S\"}]}",
             cfg.table);
    gateway(&cfg, "CreateTable", body);
    lapse_refresh_map(cfg.c, &e);
    fprintf(stderr, "table %s created through %s; loading %d keys\n", cfg.table, cfg.endpoint,
            cfg.keys);
    load(&cfg);
    printf("lapse-ddb-bench: %d threads, %d s (+%d s warm-up) per run, %d keys, %d-byte values\n",
           cfg.threads, cfg.seconds, cfg.warmup_s, cfg.keys, cfg.value_bytes);
    static const char *const names[] = {"put", "get"};
    for (int wl = W_PUT; wl <= W_GET; wl++) {
        if (!has_workload(workloads, names[wl])) {
            continue;
        }
        double native = run(&cfg, (workload)wl, P_NATIVE);
        double http = run(&cfg, (workload)wl, P_HTTP);
        printf("%-4s http/native=%.2f (issue 14's target: at least 0.70)\n", names[wl],
               native > 0 ? http / native : 0.0);
    }
    snprintf(body, sizeof body, "{\"TableName\":\"%s\"}", cfg.table);
    gateway(&cfg, "DeleteTable", body);
    lapse_close(cfg.c);
    free(cfg.pad);
    return 0;
}
