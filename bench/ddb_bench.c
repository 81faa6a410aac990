/*
 * lapse-ddb-bench: single-item PutItem and GetItem through the DynamoDB
 * gateway (HTTP/1.1 keep-alive, one connection per thread, DynamoDB's JSON
 * protocol) against the same calls through liblapse (lapse_put, lapse_get),
 * in the same run, on the same cluster, table and keys (issue 14's target:
 * the HTTP path at least 70% of the native throughput, p99 at most 5 ms).
 *
 *   lapse-ddb-bench [--endpoint URL] [--coordinator URL[,URL]] [--threads N]
 *                   [--seconds S] [--warmup S] [--keys N] [--value-bytes N]
 *                   [--workloads put,get] [--http-client wrk|builtin]
 *                   [--wrk-threads N]
 *
 * Needs a running cluster with its gateway (`make cluster`: the defaults,
 * http://127.0.0.1:8000 and liblapse's default coordinators). It creates a
 * table through the gateway (the cluster's default copies), loads --keys
 * items (progress on stderr), then for each workload runs the native path
 * and then the HTTP path: --warmup seconds whose calls count for nothing,
 * then --seconds, a progress line each second on stderr. The native path
 * is --threads threads sharing one lapse_client (as lapse-bench). The HTTP
 * path is --threads keep-alive connections (as the SDKs' pools), driven by
 * wrk (Debian's package; the default when it is on PATH: an event loop on
 * --wrk-threads threads, default 1, with a script this program writes) or
 * by the builtin client (a thread per connection on NNG's HTTP client,
 * which costs the machine more CPU per call than wrk). Both paths write and
 * read the same keys, chosen at random, and every get is strongly
 * consistent (lapse_get; GetItem with ConsistentRead), so both ask the
 * primary. On stdout: calls/s and latency percentiles (the builtin
 * client's and the native path's of the calls that
 * succeeded, failed calls counted apart; wrk's over every call, failed ones
 * counted too), and the HTTP/native ratio of each workload. The table is
 * deleted at the end.
 */
#include <getopt.h>
#include <spawn.h>
#include <sys/wait.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

#include "../client/lapse.h"
#include "../rpc/http_client.h"
#include "bench_util.h"

enum { MAX_THREADS = 64, MAX_SAMPLES_PER_THREAD = 1 << 19 };

typedef enum { W_PUT, W_GET } workload;
typedef enum { P_NATIVE, P_HTTP } path;

typedef struct config {
    const char *endpoint, *coordinator;
    const char *http_client; /* "wrk" or "builtin" */
    int threads, seconds, warmup_s, keys, value_bytes, wrk_threads;
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
        buf_printf(body,
                   "{\"TableName\":\"%s\",\"ConsistentRead\":true,\"Key\":{\"Id\":{\"S\":"
                   "\"user%010ld\"}}}",
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

/* ---- the HTTP path driven by wrk (--http-client wrk) ---- */

/* wrk's script for workload wl: the same requests as http_call, on random
 * keys; a reply that is not 200 (or, for a get, has no Item) is failed;
 * done() prints the row's figures. */
static void wrk_script(const config *cfg, workload wl, FILE *f)
{
    fprintf(f,
            "wrk.method = \"POST\"\n"
            "wrk.headers[\"X-Amz-Target\"] = \"DynamoDB_20120810.%s\"\n"
            "wrk.headers[\"Content-Type\"] = \"application/x-amz-json-1.0\"\n"
            "local keys, tbl, pad, put = %d, \"%s\", \"%s\", %s\n"
            "local threads = {}\n"
            "local seq = 0\n"
            "function setup(thread) seq = seq + 1; thread:set(\"id\", seq); "
            "table.insert(threads, thread) end\n"
            "function init(args) failed = 0; math.randomseed(id * 7919 + os.time()) end\n"
            "function request()\n"
            "  local k = math.random(0, keys - 1)\n"
            "  if put then\n"
            "    return wrk.format(nil, nil, nil, string.format("
            "'{\"TableName\":\"%%s\",\"Item\":{\"Id\":{\"S\":\"user%%010d\"},"
            "\"Seq\":{\"N\":\"%%d\"},\"Pad\":{\"S\":\"%%s\"}}}', tbl, k, k %% 10, pad))\n"
            "  end\n"
            "  return wrk.format(nil, nil, nil, string.format("
            "'{\"TableName\":\"%%s\",\"ConsistentRead\":true,\"Key\":{\"Id\":{\"S\":"
            "\"user%%010d\"}}}', tbl, k))\n"
            "end\n"
            "function response(status, headers, body)\n"
            "  if status ~= 200 or (not put and not string.find(body, '\"Item\"', 1, true)) then\n"
            "    failed = failed + 1\n"
            "  end\n"
            "end\n"
            "function done(summary, latency, requests)\n"
            "  local failed = 0\n"
            "  for _, t in ipairs(threads) do failed = failed + t:get(\"failed\") end\n"
            "  local e = summary.errors\n"
            "  failed = failed + e.connect + e.read + e.write + e.timeout\n"
            "  local ok = summary.requests - failed\n"
            "  io.write(string.format(\"calls/s=%%.0f p50=%%.2fms p90=%%.2fms p99=%%.2fms "
            "p99.9=%%.2fms max=%%.2fms failed=%%d\\n\", ok / (summary.duration / 1e6),"
            " latency:percentile(50) / 1000, latency:percentile(90) / 1000,"
            " latency:percentile(99) / 1000, latency:percentile(99.9) / 1000,"
            " latency.max / 1000, failed))\n"
            "end\n",
            wl == W_PUT ? "PutItem" : "GetItem", cfg->keys, cfg->table, cfg->pad,
            wl == W_PUT ? "true" : "false");
}

/* Runs wrk for seconds with the script at path; its last line (done()'s
 * figures) into line (empty when it failed). Progress on stderr each
 * second when label is not NULL. */
static void wrk_run(const config *cfg, const char *path, int seconds, const char *label, char *line,
                    size_t linelen)
{
    char t[16], c[16], d[16];
    snprintf(t, sizeof t, "%d", cfg->wrk_threads < cfg->threads ? cfg->wrk_threads : cfg->threads);
    snprintf(c, sizeof c, "%d", cfg->threads);
    snprintf(d, sizeof d, "%ds", seconds);
    char *const argv[] = {"wrk",
                          "-t",
                          t,
                          "-c",
                          c,
                          "-d",
                          d,
                          "--timeout",
                          "10s",
                          "-s",
                          (char *)path,
                          (char *)cfg->endpoint,
                          NULL};
    int fd[2];
    line[0] = '\0';
    if (pipe(fd) != 0) {
        return;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    pid_t pid;
    int rv = posix_spawnp(&pid, "wrk", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (rv != 0) {
        close(fd[0]);
        fprintf(stderr, "lapse-ddb-bench: cannot run wrk: %s\n", strerror(rv));
        return;
    }
    FILE *out = fdopen(fd[0], "r");
    char l[512];
    for (int s = 1; label != NULL && s <= seconds; s++) {
        sleep_ms(1000);
        fprintf(stderr, "  %s: %d/%d s (wrk reports at the end)\n", label, s, seconds);
    }
    while (out != NULL && fgets(l, sizeof l, out) != NULL) {
        if (strncmp(l, "calls/s=", 8) == 0) {
            snprintf(line, linelen, "%s", l);
        }
    }
    if (out != NULL) {
        fclose(out);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        line[0] = '\0';
    }
}

/* The HTTP path of workload wl through wrk: its row; returns calls/s (0
 * when wrk failed, said on stderr). */
static double run_wrk(const config *cfg, workload wl)
{
    static const char *const wname[] = {"put", "get"};
    char path[] = "/tmp/lapse-ddb-bench-XXXXXX.lua", line[512], label[32];
    int fd = mkstemps(path, 4);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL) {
        fprintf(stderr, "lapse-ddb-bench: cannot write wrk's script\n");
        return 0;
    }
    wrk_script(cfg, wl, f);
    fclose(f);
    if (cfg->warmup_s > 0) {
        wrk_run(cfg, path, cfg->warmup_s, NULL, line, sizeof line); /* counts for nothing */
    }
    snprintf(label, sizeof label, "%s http (wrk)", wname[wl]);
    wrk_run(cfg, path, cfg->seconds, label, line, sizeof line);
    unlink(path);
    if (line[0] == '\0') {
        fprintf(stderr, "lapse-ddb-bench: wrk failed (no figures)\n");
        printf("%-4s %-6s wrk failed\n", wname[wl], "http");
        return 0;
    }
    printf("%-4s %-6s threads=%d (wrk connections; %d wrk thread%s) %s", wname[wl], "http",
           cfg->threads, cfg->wrk_threads, cfg->wrk_threads == 1 ? "" : "s", line);
    fflush(stdout);
    return atof(line + 8);
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

/* 1 when an executable name is on $PATH. */
static int on_path(const char *name)
{
    const char *p = getenv("PATH");
    char dir[4096], file[4200];
    while (p != NULL && *p != '\0') {
        size_t n = strcspn(p, ":");
        snprintf(dir, sizeof dir, "%.*s", (int)n, p);
        snprintf(file, sizeof file, "%s/%s", dir[0] ? dir : ".", name);
        if (access(file, X_OK) == 0) {
            return 1;
        }
        p += n + (p[n] == ':');
    }
    return 0;
}

int main(int argc, char **argv)
{
    config cfg = {.endpoint = "http://127.0.0.1:8000/",
                  .threads = 16,
                  .seconds = 8,
                  .warmup_s = 1,
                  .keys = 20000,
                  .value_bytes = 100,
                  .wrk_threads = 1};
    const char *workloads = "put,get";
    static const struct option opts[] = {{"endpoint", required_argument, NULL, 'e'},
                                         {"coordinator", required_argument, NULL, 'c'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"seconds", required_argument, NULL, 's'},
                                         {"warmup", required_argument, NULL, 'w'},
                                         {"keys", required_argument, NULL, 'k'},
                                         {"value-bytes", required_argument, NULL, 'v'},
                                         {"workloads", required_argument, NULL, 'W'},
                                         {"http-client", required_argument, NULL, 'H'},
                                         {"wrk-threads", required_argument, NULL, 'T'},
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
        case 'H':
            cfg.http_client = optarg;
            break;
        case 'T':
            cfg.wrk_threads = atoi(optarg);
            break;
        default:
            fprintf(stderr, "usage: see the comment at the top of bench/ddb_bench.c\n");
            return 2;
        }
    }
    if (cfg.http_client == NULL) {
        cfg.http_client = on_path("wrk") ? "wrk" : "builtin";
    }
    if (cfg.threads < 1 || cfg.threads > MAX_THREADS || cfg.seconds < 1 || cfg.warmup_s < 0 ||
        cfg.keys < 1 || cfg.value_bytes < 0 || cfg.value_bytes > 100000 || cfg.wrk_threads < 1 ||
        (strcmp(cfg.http_client, "wrk") != 0 && strcmp(cfg.http_client, "builtin") != 0)) {
        fprintf(stderr,
                "lapse-ddb-bench: --threads 1-%d, --seconds >= 1, --warmup >= 0, "
                "--keys >= 1, --value-bytes 0-100000, --http-client wrk|builtin, "
                "--wrk-threads >= 1\n",
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
    printf("lapse-ddb-bench: %d threads, %d s (+%d s warm-up) per run, %d keys, %d-byte values, "
           "HTTP client %s\n",
           cfg.threads, cfg.seconds, cfg.warmup_s, cfg.keys, cfg.value_bytes, cfg.http_client);
    static const char *const names[] = {"put", "get"};
    for (int wl = W_PUT; wl <= W_GET; wl++) {
        if (!has_workload(workloads, names[wl])) {
            continue;
        }
        double native = run(&cfg, (workload)wl, P_NATIVE);
        double http = strcmp(cfg.http_client, "wrk") == 0 ? run_wrk(&cfg, (workload)wl)
                                                          : run(&cfg, (workload)wl, P_HTTP);
        printf("%-4s http/native=%.2f (issue 14's target: at least 0.70)\n", names[wl],
               native > 0 ? http / native : 0.0);
    }
    snprintf(body, sizeof body, "{\"TableName\":\"%s\"}", cfg.table);
    gateway(&cfg, "DeleteTable", body);
    lapse_close(cfg.c);
    free(cfg.pad);
    return 0;
}
