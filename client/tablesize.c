/*
 * tablesize.c: lapse_table_size and lapse_table_sizes (lapse.h),
 * DescribeTable's ItemCount and TableSizeBytes and its indexes' ItemCount
 * and IndexSizeBytes: one TableStats call per node owning partitions of the
 * table (the batch engine groups the partitions by node: a base partition
 * goes to its primary, which also sizes its LSI entries; a GSI partition to
 * the first copy the map holds UP), summed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "batch.h"

/* Entries and GSI partitions a TableStats call may carry, in all (the
 * node's READS_STATS_MAX_PARTITIONS). */
#define SIZE_MAX_ENTRIES 4096

typedef struct size_ctx {
    const char *table;
    const table_schema *t;
    const batch_entry *e; /* e[i]: entry i, a base partition or a GSI partition */
    size_t n;             /* entries */
    uint32_t nlsi;        /* LSIs sized per base partition (0: none asked) */
    /* got[i]: entry i's figures; got[n + i * nlsi + j]: base entry i's
     * entries of LSI j */
    lapse_table_size_info *got;
} size_ctx;

static int size_build(void *ctx, arena *a, const size_t *idx, size_t n, Lapse__Request *req,
                      lapse_error *err)
{
    size_ctx *x = ctx;
    Lapse__TableStatsRequest *body = arena_alloc(a, sizeof *body);
    uint32_t *parts = arena_alloc(a, (n ? n : 1) * sizeof *parts);
    uint32_t *gsi_ids = arena_alloc(a, (n ? n : 1) * sizeof *gsi_ids);
    uint32_t *gsi_parts = arena_alloc(a, (n ? n : 1) * sizeof *gsi_parts);
    if (body == NULL || parts == NULL || gsi_ids == NULL || gsi_parts == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    lapse__table_stats_request__init(body);
    size_t nb = 0, ng = 0;
    for (size_t j = 0; j < n; j++) {
        const client_target *tg = &x->e[idx[j]].tg;
        if (tg->kind == CLIENT_ROUTE_GSI) {
            gsi_ids[ng] = x->t->gsi[tg->gsi].id;
            gsi_parts[ng++] = tg->part;
        } else {
            parts[nb++] = tg->part;
        }
    }
    body->table = (char *)x->table;
    body->partitions = parts;
    body->n_partitions = nb;
    body->lsi = x->nlsi > 0;
    body->gsi_ids = gsi_ids;
    body->n_gsi_ids = ng;
    body->gsi_partitions = gsi_parts;
    body->n_gsi_partitions = ng;
    req->body_case = LAPSE__REQUEST__BODY_TABLE_STATS;
    req->table_stats = body;
    return 0;
}

/* Matches one kind of a reply (base or GSI partitions) to its entries:
 * pos[0..np) are the chunk positions of the entries asked, in request
 * order; un[0..nun) the indexes into pos the node left unprocessed, which
 * go into unprocessed[*nunp..] as chunk positions; the nstats stats answer
 * the others in order, and at[s] receives stats s's chunk position.
 * Returns 0 or LAPSE_EPROTO / LAPSE_ENOMEM with err set. */
static int match(const size_t *pos, size_t np, const uint32_t *un, size_t nun, size_t nstats,
                 size_t *at, size_t *unprocessed, size_t *nunp, lapse_error *err)
{
    if (nstats + nun != np) {
        return client_err(err, LAPSE_EPROTO, "TableStats: a reply that does not match the call");
    }
    unsigned char *skip = calloc(np ? np : 1, 1);
    if (skip == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    for (size_t k = 0; k < nun; k++) {
        if (un[k] >= np || skip[un[k]]) {
            free(skip);
            return client_err(err, LAPSE_EPROTO, "TableStats: unprocessed index out of range");
        }
        skip[un[k]] = 1;
        unprocessed[(*nunp)++] = pos[un[k]];
    }
    for (size_t j = 0, s = 0; j < np; j++) {
        if (!skip[j]) {
            at[s++] = pos[j];
        }
    }
    free(skip);
    return 0;
}

/* Records ps, which must be the figures of partition part of index id
 * (0: the table), into *got. Returns 0 or LAPSE_EPROTO with err set. */
static int take(const Lapse__PartitionStats *ps, uint32_t part, uint32_t id,
                lapse_table_size_info *got, lapse_error *err)
{
    if (ps == NULL || ps->partition != part || ps->index_id != id) {
        return client_err(err, LAPSE_EPROTO, "TableStats: stats of another partition");
    }
    got->items = ps->items;
    got->bytes = ps->bytes;
    got->estimated = ps->estimated != 0;
    return 0;
}

static int size_done(void *ctx, const size_t *idx, size_t n, const Lapse__Response *resp,
                     size_t *unprocessed, size_t *nun, lapse_error *err)
{
    size_ctx *x = ctx;
    const Lapse__TableStatsResponse *r = resp->table_stats;
    int rv = 0;
    *nun = 0;
    if (resp->body_case != LAPSE__RESPONSE__BODY_TABLE_STATS || r == NULL ||
        r->n_lsi_stats != r->n_stats * x->nlsi) {
        return client_err(err, LAPSE_EPROTO, "TableStats: a reply that does not match the call");
    }
    /* Chunk positions of the base entries, then of the GSI ones; at[s]:
     * the chunk position stats s answers. */
    size_t *pos = malloc((n ? n : 1) * sizeof *pos), *at = malloc((n ? n : 1) * sizeof *at);
    size_t nb = 0, ng = 0;
    if (pos == NULL || at == NULL) {
        rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t j = 0; j < n; j++) {
        if (x->e[idx[j]].tg.kind != CLIENT_ROUTE_GSI) {
            pos[nb++] = j;
        }
    }
    for (size_t j = 0; j < n; j++) {
        if (x->e[idx[j]].tg.kind == CLIENT_ROUTE_GSI) {
            pos[nb + ng++] = j;
        }
    }
    if ((rv = match(pos, nb, r->unprocessed, r->n_unprocessed, r->n_stats, at, unprocessed, nun,
                    err)) != 0) {
        goto out;
    }
    for (size_t s = 0; s < r->n_stats && rv == 0; s++) {
        const size_t i = idx[at[s]];
        rv = take(r->stats[s], x->e[i].tg.part, 0, &x->got[i], err);
        for (uint32_t k = 0; k < x->nlsi && rv == 0; k++) {
            rv = take(r->lsi_stats[s * x->nlsi + k], x->e[i].tg.part, x->t->lsi[k].id,
                      &x->got[x->n + i * x->nlsi + k], err);
        }
    }
    if (rv != 0 || (rv = match(pos + nb, ng, r->gsi_unprocessed, r->n_gsi_unprocessed,
                               r->n_gsi_stats, at, unprocessed, nun, err)) != 0) {
        goto out;
    }
    for (size_t s = 0; s < r->n_gsi_stats && rv == 0; s++) {
        const client_target *tg = &x->e[idx[at[s]]].tg;
        rv = take(r->gsi_stats[s], tg->part, x->t->gsi[tg->gsi].id, &x->got[idx[at[s]]], err);
    }
    if (rv == 0) {
        rv = client_ok(err);
    }
out:
    free(pos);
    free(at);
    return rv;
}

/* Adds b's figures to *sum. */
static void add(lapse_table_size_info *sum, const lapse_table_size_info *b)
{
    sum->items += b->items;
    sum->bytes += b->bytes;
    sum->estimated |= b->estimated;
}

/* lapse_table_sizes; indexes NULL: the table's figures only (no index is
 * walked). */
static int sizes(lapse_client *c, const char *table, lapse_table_size_info *out,
                 lapse_index_size_info **indexes, size_t *nindexes, lapse_error *err)
{
    batch_ops ops = {SIZE_MAX_ENTRIES, SIZE_MAX, size_build, size_done, 0};
    table_schema t;
    lapse_index_size_info *ix = NULL;
    batch_entry *e = NULL;
    size_ctx x = {table, &t, NULL, 0, 0, NULL};
    int rv;
    if ((rv = client_table(c, table, &t, err)) != 0) {
        return rv;
    }
    const int with = indexes != NULL;
    const size_t nix = with ? t.nlsi + t.ngsi : 0;
    x.n = t.partitions;
    x.nlsi = with ? t.nlsi : 0;
    for (uint32_t g = 0; with && g < t.ngsi; g++) {
        x.n += t.gsi[g].partitions;
    }
    e = calloc(x.n, sizeof *e);
    x.got = calloc(x.n + (size_t)t.partitions * x.nlsi, sizeof *x.got);
    ix = calloc(nix ? nix : 1, sizeof *ix);
    if (e == NULL || x.got == NULL || ix == NULL) {
        rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    x.e = e;
    for (size_t i = 0; i < t.partitions; i++) {
        e[i].tg = (client_target){.table = table, .table_id = t.id, .part = (uint32_t)i};
        e[i].bytes = 1;
    }
    for (uint32_t g = 0, i = t.partitions; with && g < t.ngsi; g++) {
        for (uint32_t p = 0; p < t.gsi[g].partitions; p++, i++) {
            e[i].tg = (client_target){
                .table = table, .table_id = t.id, .part = p, .kind = CLIENT_ROUTE_GSI, .gsi = g};
            e[i].bytes = 1;
        }
    }
    if ((rv = batch_run(c, e, x.n, &ops, &x, err)) != 0) {
        goto out;
    }
    for (size_t i = 0; i < t.partitions; i++) {
        add(out, &x.got[i]);
        for (uint32_t j = 0; j < x.nlsi; j++) {
            add(&ix[j].size, &x.got[x.n + i * x.nlsi + j]);
        }
    }
    for (size_t i = t.partitions; i < x.n; i++) {
        add(&ix[t.nlsi + e[i].tg.gsi].size, &x.got[i]);
    }
    for (size_t k = 0; k < nix; k++) {
        const index_def *d = k < t.nlsi ? &t.lsi[k] : &t.gsi[k - t.nlsi];
        snprintf(ix[k].name, sizeof ix[k].name, "%s", d->name);
        ix[k].global = k >= t.nlsi;
    }
    if (with) {
        *indexes = ix;
        *nindexes = nix;
        ix = NULL;
    }
    rv = client_ok(err);
out:
    if (rv != 0) {
        memset(out, 0, sizeof(*out));
    }
    free(ix);
    free(e);
    free(x.got);
    return rv;
}

int lapse_table_size(lapse_client *c, const char *table, lapse_table_size_info *out,
                     lapse_error *err)
{
    if (c == NULL || table == NULL || out == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    memset(out, 0, sizeof(*out));
    return sizes(c, table, out, NULL, NULL, err);
}

int lapse_table_sizes(lapse_client *c, const char *table, lapse_table_size_info *out,
                      lapse_index_size_info **indexes, size_t *n, lapse_error *err)
{
    if (indexes != NULL && n != NULL) {
        *indexes = NULL;
        *n = 0;
    }
    if (c == NULL || table == NULL || out == NULL || indexes == NULL || n == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    memset(out, 0, sizeof(*out));
    return sizes(c, table, out, indexes, n, err);
}
