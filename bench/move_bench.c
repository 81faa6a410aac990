/*
 * lapse-move-bench: moving partitions while serving (docs/replication.md,
 * "Draining a node" and "Rebalancing"; issue 13's performance figures).
 *
 * One etcd member, a coordinator on it (moves are the etcd leader's) and
 * four nodes on loopback; node 4 is stopped before the table is made, so
 * the table's copies (three per partition) sit on nodes 1-3. Then:
 *
 *   load   --items items of --value-bytes bytes, batches of 25 from four
 *          threads, with progress every second;
 *   idle   --writers threads put single items into the table for
 *          --idle-seconds: the foreground latency with nothing moving;
 *   join   node 4 starts again; the coordinator's rebalancer moves copies
 *          to it until every node holds within one of the others (lapse
 *          rebalance --dry-run shows no move left and none under way);
 *   drain  lapse node drain 4 until no copy is left on it.
 *
 * Meanwhile a thread puts into a second table of three copies, with TTL
 * and a stream, 100 items a second, each due 3 s later: every phase's TTL
 * deletion lag (the stream's deletion instant minus the due one).
 *
 * The writers run through join and drain too. For each move phase it
 * prints the copies moved, the table data they hold (the table's bytes
 * from describe-table over its partitions, times the copies), the time and
 * the rate, and the writers' p50/p99 against idle, and their p99 split
 * two ways: the puts whose key's set was moving when they began (a copy
 * over the table's count, a member out of sync or a handover under way,
 * from the coordinator's map every 50 ms), and the others, which wait only
 * for the CPU and disk the moves take; then it reads back a
 * sample of the loaded items. A phase whose wait ran out says TIMED OUT
 * and prints no rate.
 *
 *   lapse-move-bench [--bin-dir DIR] [--items N] [--value-bytes B]
 *                    [--partitions P (at most 64)] [--writers T] [--idle-seconds S]
 *                    [--timeout-seconds S] [--replication N]
 *                    [--max-concurrent-moves N] [--node-args ARGS]
 *
 * --max-concurrent-moves N runs the coordinator with it (default 4, the
 * coordinator's own): the sets moving at once.
 *
 * --replication 1 loads a table of one copy per partition instead of three
 * (docs/replication.md, "Moving a one-copy partition").
 *
 * --node-args passes flags to every node, e.g. "--snapshot-rate-mb 20" to
 * see what a cap on snapshots buys the foreground.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../client/lapse.h"
#include "../common/item.h"
#include "../placement/hash.h"
#include "../tests/cluster.h"
#include "bench_util.h"
#include "move_bench.h"

#define LOAD_THREADS 4
#define LOAD_BATCH 25
#define SAMPLES_MAX (1 << 19) /* per writer and phase */
#define READBACK 2000
typedef struct writer {
    const config *cfg;
    int id;
    atomic_int *phase; /* PH_N: stop */
    uint32_t *us[PH_N];
    float *at[PH_N];     /* when each put began, mono_s since the start */
    uint8_t *part[PH_N]; /* its key's partition (bench partitions are at most 255) */
    double t0;           /* the start */
    size_t n[PH_N];
    long failed[PH_N];
} writer;

static char *pad_of(int bytes)
{
    char *p = malloc((size_t)bytes + 1);
    if (p != NULL) {
        memset(p, 'v', (size_t)bytes);
        p[bytes] = 0;
    }
    return p;
}

static lapse_item *make_item(const char *prefix, long k, const char *pad)
{
    char id[40];
    snprintf(id, sizeof(id), "%s%010ld", prefix, k);
    lapse_item *it = lapse_item_new();
    if (it != NULL &&
        (lapse_item_set_s(it, "Id", id) != 0 || lapse_item_set_s(it, "V", pad) != 0)) {
        lapse_item_free(it);
        it = NULL;
    }
    return it;
}

/* The partition of make_item's key (as the nodes place it). */
static uint32_t key_partition(const char *prefix, long k, uint32_t partitions)
{
    char id[40];
    int len = snprintf(id, sizeof(id), "%s%010ld", prefix, k);
    attr_value v;
    uint32_t p = 0;
    if (item_value_init_bytes(&v, ATTR_S, id, (size_t)len) == 0) {
        (void)hash_partition(&v, partitions, &p);
        item_value_fini(&v);
    }
    return p;
}

/* ---- load ---- */

typedef struct loader {
    const config *cfg;
    int id;
    atomic_long *done;
    atomic_int failed;
} loader;

static void *load_main(void *arg)
{
    loader *l = arg;
    const config *cfg = l->cfg;
    char *pad = pad_of(cfg->value_bytes);
    lapse_client *c = NULL;
    lapse_error e;
    if (pad == NULL || lapse_connect(&c, cfg->url, &e) != 0) {
        atomic_store(&l->failed, 1);
        free(pad);
        return NULL;
    }
    lapse_item *batch[LOAD_BATCH];
    for (long k = (long)l->id * LOAD_BATCH; k < cfg->items; k += (long)LOAD_THREADS * LOAD_BATCH) {
        size_t n = 0;
        for (long j = k; j < k + LOAD_BATCH && j < cfg->items; j++) {
            batch[n++] = make_item("k", j, pad);
        }
        int rv = 0;
        for (int attempt = 0; attempt < 5; attempt++) {
            if ((rv = lapse_batch_write(c, TABLE, batch, n, NULL, 0, &e)) == 0) {
                break;
            }
            sleep_ms(100);
        }
        for (size_t j = 0; j < n; j++) {
            lapse_item_free(batch[j]);
        }
        if (rv != 0) {
            fprintf(stderr, "lapse-move-bench: load: %s\n", e.message);
            atomic_store(&l->failed, 1);
            break;
        }
        atomic_fetch_add(l->done, (long)n);
    }
    lapse_close(c);
    free(pad);
    return NULL;
}

static int load(const config *cfg)
{
    atomic_long done = 0;
    loader ls[LOAD_THREADS];
    pthread_t th[LOAD_THREADS];
    double t0 = mono_s(), shown = t0;
    for (int i = 0; i < LOAD_THREADS; i++) {
        ls[i] = (loader){.cfg = cfg, .id = i, .done = &done};
        atomic_init(&ls[i].failed, 0);
        pthread_create(&th[i], NULL, load_main, &ls[i]);
    }
    for (;;) {
        long d = atomic_load(&done);
        int failed = 0;
        for (int i = 0; i < LOAD_THREADS; i++) {
            failed |= atomic_load(&ls[i].failed);
        }
        if (d >= cfg->items || failed) {
            break;
        }
        if (mono_s() - shown >= 1.0) {
            shown = mono_s();
            fprintf(stderr, "load: %ld of %ld items (%.0f%%)\n", d, cfg->items,
                    100.0 * (double)d / (double)cfg->items);
        }
        sleep_ms(50);
    }
    int failed = 0;
    for (int i = 0; i < LOAD_THREADS; i++) {
        pthread_join(th[i], NULL);
        failed |= atomic_load(&ls[i].failed);
    }
    double s = mono_s() - t0;
    if (failed) {
        printf("load          FAILED after %ld items\n", (long)atomic_load(&done));
        return -1;
    }
    printf("load          %ld items in %.1f s (%.1fk items/s)\n", cfg->items, s,
           (double)cfg->items / s / 1000.0);
    return 0;
}

/* ---- foreground writers ---- */

static void *writer_main(void *arg)
{
    writer *w = arg;
    char *pad = pad_of(w->cfg->value_bytes);
    lapse_client *c = NULL;
    lapse_error e;
    if (pad == NULL || lapse_connect(&c, w->cfg->url, &e) != 0) {
        free(pad);
        return NULL;
    }
    char prefix[16];
    snprintf(prefix, sizeof(prefix), "w%d-", w->id);
    for (long k = 0;; k++) {
        int ph = atomic_load(w->phase);
        if (ph >= PH_N) {
            break;
        }
        lapse_item *it = make_item(prefix, k, pad);
        double t0 = mono_s();
        int rv = it != NULL ? lapse_put(c, TABLE, it, NULL, &e) : LAPSE_ENOMEM;
        double us = (mono_s() - t0) * 1e6;
        lapse_item_free(it);
        if (rv != 0) {
            w->failed[ph]++;
        } else if (w->n[ph] < SAMPLES_MAX) {
            size_t i = w->n[ph]++;
            w->us[ph][i] = us > 4e9 ? 4000000000u : (uint32_t)us;
            w->at[ph][i] = (float)(t0 - w->t0);
            w->part[ph][i] = (uint8_t)key_partition(prefix, k, (uint32_t)w->cfg->partitions);
        }
    }
    lapse_close(c);
    free(pad);
    return NULL;
}

/* p50 and p99 (ms) of phase ph over every writer; n gets the count. */
static void percentiles(writer *ws, int nw, int ph, double *p50, double *p99, size_t *n,
                        long *failed)
{
    size_t total = 0;
    *failed = 0;
    for (int i = 0; i < nw; i++) {
        total += ws[i].n[ph];
        *failed += ws[i].failed[ph];
    }
    *n = total;
    *p50 = *p99 = 0;
    if (total == 0) {
        return;
    }
    uint32_t *all = malloc(total * sizeof(*all));
    if (all == NULL) {
        return;
    }
    size_t k = 0;
    for (int i = 0; i < nw; i++) {
        memcpy(all + k, ws[i].us[ph], ws[i].n[ph] * sizeof(*all));
        k += ws[i].n[ph];
    }
    qsort(all, total, sizeof(*all), cmp_u32);
    *p50 = all[total / 2] / 1000.0;
    *p99 = all[(total * 99) / 100 < total ? (total * 99) / 100 : total - 1] / 1000.0;
    free(all);
}

/* p99 (ms) of phase ph's puts on sets that were moving when they began
 * (moving 1) or on the others (0); n gets their count. */
static double p99_split(writer *ws, int nw, int ph, const set_watch *sw, int moving, size_t *n)
{
    size_t total = 0;
    for (int i = 0; i < nw; i++) {
        total += ws[i].n[ph];
    }
    uint32_t *all = total > 0 ? malloc(total * sizeof(*all)) : NULL;
    size_t k = 0;
    for (int i = 0; all != NULL && i < nw; i++) {
        for (size_t j = 0; j < ws[i].n[ph]; j++) {
            if (watch_sets_moving(sw, sw->t0 + ws[i].at[ph][j], ws[i].part[ph][j]) == moving) {
                all[k++] = ws[i].us[ph][j];
            }
        }
    }
    *n = k;
    double p99 = 0;
    if (k > 0) {
        qsort(all, k, sizeof(*all), cmp_u32);
        p99 = all[(k * 99) / 100 < k ? (k * 99) / 100 : k - 1] / 1000.0;
    }
    free(all);
    return p99;
}

static void report_move(const config *cfg, const char *what, long copies, double part_bytes,
                        double s, int timed_out, writer *ws, int nw, int ph, double idle_p99,
                        const set_watch *sw)
{
    double p50, p99;
    size_t n;
    long failed;
    percentiles(ws, nw, ph, &p50, &p99, &n, &failed);
    if (timed_out) {
        printf("%-13s TIMED OUT after %.1f s (%ld copies planned)\n", what, s, copies);
    } else {
        double mb = (double)copies * part_bytes / 1e6;
        printf("%-13s %ld copies of " TABLE
               ", %.1f MB in %.1f s: %.1f MB/s overall, %.1f MB/s per move "
               "(%d at a time)\n",
               what, copies, mb, s, mb / s, mb / s / cfg->max_moves, cfg->max_moves);
    }
    printf("%-13s puts meanwhile: n=%zu p50 %.2f ms p99 %.2f ms (%.1fx idle p99), %ld failed\n", "",
           n, p50, p99, idle_p99 > 0 ? p99 / idle_p99 : 0.0, failed);
    size_t nm, no;
    double pm = p99_split(ws, nw, ph, sw, 1, &nm), po = p99_split(ws, nw, ph, sw, 0, &no);
    printf("%-13s of them on sets moving then: n=%zu p99 %.2f ms (%.1fx idle); on the others: "
           "n=%zu p99 %.2f ms (%.1fx idle)\n",
           "", nm, pm, idle_p99 > 0 ? pm / idle_p99 : 0.0, no, po,
           idle_p99 > 0 ? po / idle_p99 : 0.0);
}

static int run(cluster *cl, const config *cfg)
{
    lapse_client *c = NULL;
    lapse_error e;
    if (lapse_connect(&c, cfg->url, &e) != 0) {
        fprintf(stderr, "lapse-move-bench: connect: %s\n", e.message);
        return 1;
    }
    lapse_table_def d = {.name = TABLE,
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .partitions = (unsigned)cfg->partitions,
                         .replication = (unsigned)cfg->replication};
    if (lapse_create_table(c, &d, &e) != 0) {
        fprintf(stderr, "lapse-move-bench: create table: %s\n", e.message);
        lapse_close(c);
        return 1;
    }
    lapse_table_def td = {.name = TTL_TABLE,
                          .partition_key = "Id",
                          .partition_key_type = 'S',
                          .partitions = 8,
                          .replication = 3,
                          .stream = 1};
    lapse_ttl_spec spec = {.action = LAPSE_TTL_ENABLE, .attribute = "Exp"};
    if (lapse_create_table(c, &td, &e) != 0 ||
        lapse_update_ttl(c, TTL_TABLE, &spec, NULL, &e) != 0) {
        fprintf(stderr, "lapse-move-bench: TTL table: %s\n", e.message);
        lapse_close(c);
        return 1;
    }
    if (load(cfg) != 0) {
        lapse_close(c);
        return 1;
    }
    double part_bytes = watch_table_bytes(c, cfg) / cfg->partitions;

    atomic_int phase = PH_IDLE;
    int64_t bounds[PH_N + 1];
    bounds[PH_IDLE] = wall_ms() + TTL_AHEAD_S * 1000 + 1000; /* due after the first put */
    ttl_writer tw = {.cfg = cfg, .phase = &phase, .due_ms = calloc(TTL_MAX, sizeof(int64_t))};
    pthread_t tth;
    pthread_create(&tth, NULL, move_ttl_main, &tw);
    writer *ws = calloc((size_t)cfg->writers, sizeof(*ws));
    pthread_t *th = calloc((size_t)cfg->writers, sizeof(*th));
    set_watch sw = {.cl = cl,
                    .phase = &phase,
                    .t0 = mono_s(),
                    .at = calloc(WATCH_SETS_MAX, sizeof(float)),
                    .moving = calloc(WATCH_SETS_MAX, sizeof(uint64_t))};
    pthread_t wth;
    if (ws == NULL || th == NULL || sw.at == NULL || sw.moving == NULL) {
        fprintf(stderr, "lapse-move-bench: out of memory\n");
        exit(1);
    }
    pthread_create(&wth, NULL, watch_sets_main, &sw);
    for (int i = 0; i < cfg->writers; i++) {
        ws[i] = (writer){.cfg = cfg, .id = i, .phase = &phase, .t0 = sw.t0};
        for (int p = 0; p < PH_N; p++) {
            ws[i].us[p] = malloc(SAMPLES_MAX * sizeof(uint32_t));
            ws[i].at[p] = malloc(SAMPLES_MAX * sizeof(float));
            ws[i].part[p] = malloc(SAMPLES_MAX);
            if (ws[i].us[p] == NULL || ws[i].at[p] == NULL || ws[i].part[p] == NULL) {
                fprintf(stderr, "lapse-move-bench: out of memory\n");
                exit(1);
            }
        }
        pthread_create(&th[i], NULL, writer_main, &ws[i]);
    }
    sleep_ms((int64_t)cfg->idle_s * 1000);
    double p50, idle_p99;
    size_t n;
    long failed;
    percentiles(ws, cfg->writers, PH_IDLE, &p50, &idle_p99, &n, &failed);
    printf("%-13s puts: n=%zu p50 %.2f ms p99 %.2f ms, %ld failed (%d writers, nothing moving)\n",
           "idle", n, p50, idle_p99, failed, cfg->writers);
    fflush(stdout);

    /* join: node 4 back; the rebalancer moves copies to it. */
    atomic_store(&phase, PH_JOIN);
    bounds[PH_JOIN] = wall_ms();
    long marks[5];
    watch_log_marks(cl, marks);
    double t0 = mono_s();
    int rv = cluster_restart(cl, 4);
    long planned = 0, moves = 0, moving = 0, last_shown = -1;
    int timed_out = rv != 0;
    while (!timed_out) {
        if (watch_plan(c, &moves, &moving) == 0) {
            planned = moves + moving > planned ? moves + moving : planned;
            if (moves == 0 && moving == 0 && watch_copies_on(c, 4) > 0) {
                break;
            }
        }
        if ((long)(mono_s() - t0) != last_shown) {
            last_shown = (long)(mono_s() - t0);
            char pr[160] = "";
            long on4 = watch_copies_on_progress(c, 4, pr, sizeof(pr));
            fprintf(stderr, "join: %.0f s: %ld moves planned, node 4 holds %ld; %s\n",
                    mono_s() - t0, moves, on4, pr);
        }
        timed_out = mono_s() - t0 > cfg->timeout_s;
        sleep_ms(100);
    }
    double join_s = mono_s() - t0;
    long joined = watch_table_copies_on(cl, TABLE, 4);
    atomic_store(&phase, PH_SETTLE);
    bounds[PH_SETTLE] = wall_ms();
    report_move(cfg, "join", joined, part_bytes, join_s, timed_out, ws, cfg->writers, PH_JOIN,
                idle_p99, &sw);
    watch_report_snapshots(cl, marks);
    watch_log_marks(cl, marks);
    fflush(stdout);

    /* The copies that moved to node 4 are dropped from their old nodes
     * first, so the drain copies them back in full. */
    sleep_ms(SETTLE_MS);
    atomic_store(&phase, PH_DRAIN);
    bounds[PH_DRAIN] = wall_ms();

    /* drain: every copy off node 4 again. */
    t0 = mono_s();
    last_shown = -1;
    char *js = NULL;
    timed_out = lapse_node_drain(c, 4, 0, &js, &e) != 0;
    lapse_free(js);
    long left = joined;
    char pr[160] = "";
    while (!timed_out && (left = watch_copies_on_progress(c, 4, pr, sizeof(pr))) != 0) {
        if ((long)(mono_s() - t0) != last_shown) {
            last_shown = (long)(mono_s() - t0);
            fprintf(stderr, "drain: %.0f s: node 4 holds %ld copies; %s\n", mono_s() - t0, left,
                    pr);
        }
        timed_out = mono_s() - t0 > cfg->timeout_s;
        sleep_ms(100);
    }
    double drain_s = mono_s() - t0;
    atomic_store(&phase, PH_N);
    bounds[PH_N] = wall_ms();
    pthread_join(tth, NULL);
    pthread_join(wth, NULL);
    for (int i = 0; i < cfg->writers; i++) {
        pthread_join(th[i], NULL);
    }
    report_move(cfg, "drain", joined, part_bytes, drain_s, timed_out, ws, cfg->writers, PH_DRAIN,
                idle_p99, &sw);
    watch_report_snapshots(cl, marks);

    /* Every sampled item still reads back. */
    long missing = 0, errors = 0;
    uint64_t seed = 0x5eed;
    for (int i = 0; i < READBACK && cfg->items > 0; i++) {
        long k = (long)(bench_rng(&seed) % (uint64_t)cfg->items);
        char id[40];
        snprintf(id, sizeof(id), "k%010ld", k);
        lapse_item *key = lapse_item_new(), *got = NULL;
        lapse_item_set_s(key, "Id", id);
        if (lapse_get(c, TABLE, key, &got, &e) != 0) {
            errors++;
        } else {
            missing += got == NULL;
        }
        lapse_item_free(got);
        lapse_item_free(key);
    }
    printf("%-13s %d sampled items: %ld missing, %ld errors\n", "read back", READBACK, missing,
           errors);
    move_ttl_report(c, &tw, bounds);
    free(tw.due_ms);
    for (int i = 0; i < cfg->writers; i++) {
        for (int p = 0; p < PH_N; p++) {
            free(ws[i].us[p]);
            free(ws[i].at[p]);
            free(ws[i].part[p]);
        }
    }
    free(ws);
    free(th);
    free(sw.at);
    free(sw.moving);
    lapse_close(c);
    return missing > 0 || errors > 0 || timed_out;
}

static int wait_down(lapse_client *c, uint32_t id, int timeout_ms)
{
    char st[16];
    double t0 = mono_s();
    while ((mono_s() - t0) * 1000 < timeout_ms) {
        if (cluster_node_state(c, id, st, sizeof(st)) != NULL && strcmp(st, "DOWN") == 0) {
            return 0;
        }
        sleep_ms(200);
    }
    return -1;
}

int main(int argc, char **argv)
{
    config cfg = {.items = 1000000,
                  .value_bytes = 200,
                  .partitions = 16,
                  .writers = 4,
                  .idle_s = 5,
                  .timeout_s = 600,
                  .replication = 3,
                  .max_moves = 4};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) {
            fprintf(stderr, "lapse-move-bench: %s wants a value\n", a);
            return 2;
        }
        if (strcmp(a, "--bin-dir") == 0) {
            cfg.bin_dir = v;
        } else if (strcmp(a, "--items") == 0) {
            cfg.items = atol(v);
        } else if (strcmp(a, "--value-bytes") == 0) {
            cfg.value_bytes = atoi(v);
        } else if (strcmp(a, "--partitions") == 0) {
            cfg.partitions = atoi(v);
        } else if (strcmp(a, "--writers") == 0) {
            cfg.writers = atoi(v);
        } else if (strcmp(a, "--idle-seconds") == 0) {
            cfg.idle_s = atoi(v);
        } else if (strcmp(a, "--timeout-seconds") == 0) {
            cfg.timeout_s = atoi(v);
        } else if (strcmp(a, "--node-args") == 0) {
            cfg.node_args = v;
        } else if (strcmp(a, "--replication") == 0) {
            cfg.replication = atoi(v);
        } else if (strcmp(a, "--max-concurrent-moves") == 0) {
            cfg.max_moves = atoi(v);
        } else {
            fprintf(stderr,
                    "usage: lapse-move-bench [--bin-dir DIR] [--items N] [--value-bytes B] "
                    "[--partitions P] [--writers T] [--idle-seconds S] [--timeout-seconds S] "
                    "[--replication N] [--max-concurrent-moves N] [--node-args ARGS]\n");
            return 2;
        }
        i++;
    }
    if (cfg.items < 1 || cfg.value_bytes < 1 || cfg.partitions < 1 || cfg.partitions > 64 ||
        cfg.writers < 1 || cfg.writers > 64 || cfg.idle_s < 1 || cfg.timeout_s < 1 ||
        cfg.replication < 1 || cfg.replication > 3 || cfg.max_moves < 1 || cfg.max_moves > 64) {
        fprintf(stderr, "lapse-move-bench: every count must be positive (--partitions, "
                        "--writers and --max-concurrent-moves at most 64, --replication 1 to "
                        "3)\n");
        return 2;
    }
    char coord_args[64];
    snprintf(coord_args, sizeof(coord_args), "--max-concurrent-moves %d", cfg.max_moves);
    cluster_options o = {.nodes = 4,
                         .bin_dir = cfg.bin_dir,
                         .quiet = 1,
                         .etcd = 1,
                         .node_args = cfg.node_args,
                         .coordinator_args = coord_args};
    cluster *cl = NULL;
    char err[512];
    fprintf(stderr, "starting a four-node cluster\n");
    if (cluster_start(&cl, &o, err, sizeof(err)) != 0) {
        fprintf(stderr, "lapse-move-bench: %s\n", err);
        return 1;
    }
    cfg.url = cluster_coordinator_url(cl);
    lapse_client *c = NULL;
    lapse_error e;
    int rv = lapse_connect(&c, cfg.url, &e);
    if (rv == 0) {
        cluster_kill(cl, 4, SIGTERM);
        rv = wait_down(c, 4, 30000);
        lapse_close(c);
    }
    if (rv != 0) {
        fprintf(stderr, "lapse-move-bench: node 4 did not go DOWN\n");
        cluster_free(cl, 1);
        return 1;
    }
    printf("# lapse-move-bench: 4 nodes on loopback (node 4 stopped first), %ld items of "
           "%d-byte values in %d partitions of %d cop%s, %d foreground writers, %d move%s at "
           "once%s%s\n",
           cfg.items, cfg.value_bytes, cfg.partitions, cfg.replication,
           cfg.replication == 1 ? "y" : "ies", cfg.writers, cfg.max_moves,
           cfg.max_moves == 1 ? "" : "s", cfg.node_args != NULL ? ", nodes with " : "",
           cfg.node_args != NULL ? cfg.node_args : "");
    fflush(stdout);
    rv = run(cl, &cfg);
    cluster_free(cl, 1);
    return rv;
}
