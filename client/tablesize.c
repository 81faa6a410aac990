/*
 * tablesize.c: lapse_table_size (lapse.h), DescribeTable's ItemCount and
 * TableSizeBytes: one TableStats call per node owning partitions of the
 * table (the batch engine groups the partitions by primary), summed.
 */
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "batch.h"

typedef struct size_ctx {
    const char *table;
    uint32_t *parts;      /* parts[i]: entry i's partition */
    uint64_t *items;      /* per entry */
    uint64_t *bytes;      /* per entry */
    unsigned char *guess; /* per entry: estimated past the node's walk */
} size_ctx;

static int size_build(void *ctx, arena *a, const size_t *idx, size_t n, Lapse__Request *req,
                      lapse_error *err)
{
    size_ctx *x = ctx;
    Lapse__TableStatsRequest *body = arena_alloc(a, sizeof *body);
    uint32_t *parts = arena_alloc(a, (n ? n : 1) * sizeof *parts);
    if (body == NULL || parts == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    lapse__table_stats_request__init(body);
    for (size_t j = 0; j < n; j++) {
        parts[j] = x->parts[idx[j]];
    }
    body->table = (char *)x->table;
    body->partitions = parts;
    body->n_partitions = n;
    req->body_case = LAPSE__REQUEST__BODY_TABLE_STATS;
    req->table_stats = body;
    return 0;
}

static int size_done(void *ctx, const size_t *idx, size_t n, const Lapse__Response *resp,
                     size_t *unprocessed, size_t *nun, lapse_error *err)
{
    size_ctx *x = ctx;
    const Lapse__TableStatsResponse *r = resp->table_stats;
    *nun = 0;
    if (resp->body_case != LAPSE__RESPONSE__BODY_TABLE_STATS || r == NULL ||
        r->n_stats + r->n_unprocessed != n) {
        return client_err(err, LAPSE_EPROTO, "TableStats: a reply that does not match the call");
    }
    for (size_t k = 0; k < r->n_unprocessed; k++) {
        if (r->unprocessed[k] >= n) {
            return client_err(err, LAPSE_EPROTO, "TableStats: unprocessed index out of range");
        }
        unprocessed[(*nun)++] = r->unprocessed[k];
    }
    /* The stats come in request order, skipping the unprocessed. */
    size_t s = 0;
    for (size_t j = 0; j < n && s < r->n_stats; j++) {
        int skipped = 0;
        for (size_t k = 0; k < r->n_unprocessed; k++) {
            skipped |= r->unprocessed[k] == j;
        }
        if (skipped) {
            continue;
        }
        const Lapse__PartitionStats *ps = r->stats[s++];
        if (ps == NULL || ps->partition != x->parts[idx[j]]) {
            return client_err(err, LAPSE_EPROTO, "TableStats: stats of another partition");
        }
        x->items[idx[j]] = ps->items;
        x->bytes[idx[j]] = ps->bytes;
        x->guess[idx[j]] = ps->estimated != 0;
    }
    return client_ok(err);
}

int lapse_table_size(lapse_client *c, const char *table, lapse_table_size_info *out,
                     lapse_error *err)
{
    batch_ops ops = {SIZE_MAX, SIZE_MAX, size_build, size_done, 0};
    table_schema t;
    int rv;
    if (c == NULL || table == NULL || out == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    memset(out, 0, sizeof(*out));
    if ((rv = client_table(c, table, &t, err)) != 0) {
        return rv;
    }
    const size_t n = t.partitions;
    size_ctx x = {table, calloc(n, sizeof(uint32_t)), calloc(n, sizeof(uint64_t)),
                  calloc(n, sizeof(uint64_t)), calloc(n, 1)};
    batch_entry *e = calloc(n, sizeof *e);
    if (x.parts == NULL || x.items == NULL || x.bytes == NULL || x.guess == NULL || e == NULL) {
        rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        x.parts[i] = (uint32_t)i;
        e[i].tg = (client_target){.table = table, .table_id = t.id, .part = (uint32_t)i};
        e[i].bytes = 1;
    }
    if ((rv = batch_run(c, e, n, &ops, &x, err)) != 0) {
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        out->items += x.items[i];
        out->bytes += x.bytes[i];
        out->estimated |= x.guess[i];
    }
    rv = client_ok(err);
out:
    free(e);
    free(x.parts);
    free(x.items);
    free(x.bytes);
    free(x.guess);
    return rv;
}
