/*
 * move_ttl.c: lapse-move-bench's TTL deletes falling due throughout the
 * moves, and their deletion lag per phase (move_bench.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/streamread.h"
#include "bench_util.h"
#include "move_bench.h"

void *move_ttl_main(void *arg)
{
    ttl_writer *t = arg;
    lapse_client *c = NULL;
    lapse_error e;
    if (lapse_connect(&c, t->cfg->url, &e) != 0) {
        return NULL;
    }
    while (atomic_load(t->phase) < PH_N && t->n < TTL_MAX) {
        long long exp = wall_ms() / 1000 + TTL_AHEAD_S;
        char id[32], ex[32];
        snprintf(id, sizeof(id), "t%ld", t->n);
        snprintf(ex, sizeof(ex), "%lld", exp);
        lapse_item *it = lapse_item_new();
        if (it != NULL && lapse_item_set_s(it, "Id", id) == 0 &&
            lapse_item_set_n(it, "Exp", ex) == 0 && lapse_put(c, TTL_TABLE, it, NULL, &e) == 0) {
            t->due_ms[t->n++] = exp * 1000;
        } else {
            t->failed++;
        }
        lapse_item_free(it);
        sleep_ms(TTL_EVERY_MS);
    }
    lapse_close(c);
    return NULL;
}

/* Reads TTL_TABLE's stream until it holds a TTL delete of each of t's items
 * or 30 s pass; prints each phase's deletion lag (deleted - due, from the
 * records: items due within [bounds[ph], bounds[ph + 1]) count for ph). */
void move_ttl_report(lapse_client *c, const ttl_writer *t, const int64_t bounds[PH_N + 1])
{
    streamread sr = {0};
    lapse_error e;
    int64_t *lag = calloc((size_t)(t->n > 0 ? t->n : 1), sizeof(*lag));
    char *seen = calloc((size_t)(t->n > 0 ? t->n : 1), 1);
    long got = 0;
    double t0 = mono_s();
    while (lag != NULL && seen != NULL && got < t->n && mono_s() - t0 < 30.0) {
        if (streamread_more(c, TTL_TABLE, &sr, &e) != 0) {
            fprintf(stderr, "lapse-move-bench: reading the stream: %s\n", e.message);
            break;
        }
        got = 0;
        memset(seen, 0, (size_t)t->n);
        for (size_t i = 0; i < sr.n; i++) {
            const lapse_stream_record *r = sr.r[i];
            const char *id = lapse_item_get_s(r->keys, "Id");
            long k = id != NULL && id[0] == 't' ? atol(id + 1) : -1;
            if (r->ttl_delete && k >= 0 && k < t->n && !seen[k]) {
                seen[k] = 1;
                lag[k] = r->ttl_deleted_at_ms - t->due_ms[k];
                got++;
            }
        }
        if (got < t->n) {
            sleep_ms(500);
        }
    }
    for (int ph = 0; ph < PH_N; ph++) {
        static const char *const names[PH_N] = {"idle", "join", "settle", "drain"};
        if (ph == PH_SETTLE) {
            continue;
        }
        int64_t *v = malloc((size_t)(t->n > 0 ? t->n : 1) * sizeof(*v));
        long n = 0, missing = 0;
        for (long k = 0; v != NULL && k < t->n; k++) {
            if (t->due_ms[k] < bounds[ph] || t->due_ms[k] >= bounds[ph + 1]) {
                continue;
            }
            if (seen != NULL && seen[k]) {
                v[n++] = lag[k];
            } else {
                missing++;
            }
        }
        if (n > 0) {
            qsort(v, (size_t)n, sizeof(*v), cmp_i64);
            printf("ttl %-9s %ld items due: deletion lag p50 %lld ms p99 %lld ms max %lld ms%s\n",
                   names[ph], n, (long long)v[n / 2], (long long)v[(n * 99) / 100],
                   (long long)v[n - 1], missing > 0 ? " (and some never deleted: below)" : "");
        } else {
            printf("ttl %-9s no item fell due in it\n", names[ph]);
        }
        if (missing > 0) {
            printf("ttl %-9s %ld items due NOT deleted within 30 s of the end\n", names[ph],
                   missing);
        }
        free(v);
    }
    free(lag);
    free(seen);
    streamread_free(&sr);
}
