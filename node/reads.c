/*
 * reads.c: GetItem, Query and Scan (request.h pipeline). Reads take no
 * partition lock (the store's contract); pages are bounded by the request's
 * limit and STORE_PAGE_MAX_BYTES.
 *
 * hide_expired (the request's flag or the table's default, while the
 * table's TTL is enabled) drops the items ttl_eval finds expired at ONE
 * wall-clock snapshot taken per request right after the store read, so no read returns an item
 * after its due instant even before the scanner deletes it. Query and Scan filter after the page is
 * read (DynamoDB's filter expressions do the same): a page may come back shorter, even empty, and
 * keeps its continuation key.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../rpc/wire.h"
#include "reads.h"
#include "reads_index.h"
#include "reads_steps.h"

void reads_get(request_ctx *c)
{
    const Lapse__GetItemRequest *r = c->req->get_item;
    item *key = NULL;
    item *found = NULL;
    uint32_t part;
    char err[512] = "";

    c->eventual = r != NULL && r->eventually_consistent;
    if (request_need_body(c, r) != 0 || request_find_table(c, r->table) != 0 ||
        request_item_from_pb(c, r->key, 1, "key", &key) != 0 || request_route(c, key, &part) != 0) {
        goto out;
    }
    int rv = store_get(c->ns->st, &c->table->schema, key, &found, err, sizeof(err));
    if (rv != 0) {
        request_store_error(c, rv, err);
        goto out;
    }
    /* The snapshot is taken after the read: an item that fell due while it
     * was read is hidden too. */
    clock_wall now = clock_wall_now();
    if (found != NULL && reads_hide_expired(c, r->hide_expired) &&
        reads_is_expired(c, found, now)) {
        item_free(found);
        found = NULL;
    }
    Lapse__GetItemResponse *out = arena_alloc(c->a, sizeof(*out));
    if (out == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    lapse__get_item_response__init(out);
    if (found != NULL && (out->item = wire_item_to_pb(c->a, found)) == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    c->resp->body_case = LAPSE__RESPONSE__BODY_GET_ITEM;
    c->resp->get_item = out;
out:
    item_free(key);
    item_free(found);
}

void reads_query(request_ctx *c)
{
    const Lapse__QueryRequest *r = c->req->query;
    reads_query_state q;
    uint32_t part;
    char err[512] = "";
    reads_query_state_init(&q);

    if (request_need_body(c, r) != 0) {
        goto out;
    }
    c->eventual = r->eventually_consistent;
    if (r->index != NULL && r->index[0] != 0) {
        reads_query_index(c);
        goto out;
    }
    if (request_find_table(c, r->table) != 0) {
        goto out;
    }
    const table_schema *t = &c->table->schema;
    char owner[SCHEMA_MAX_NAME + 16];
    snprintf(owner, sizeof(owner), "table \"%s\"", t->name);
    int rv;
    if (reads_pk_from_pb(c, r->partition_key, &t->pk, &q.pk) != 0 ||
        request_route_pk(c, &q.pk, &part) != 0 ||
        reads_sk_from_pb(c, r->sort_key, &t->sk, owner, &q.sk, &q.v1, &q.v2) != 0) {
        goto out;
    }
    if (r->exclusive_start_key != NULL) {
        if (request_item_from_pb(c, r->exclusive_start_key, 1, "exclusive_start_key", &q.start) !=
            0) {
            goto out;
        }
        if (!item_value_eq(item_get(q.start, t->pk.name), &q.pk)) {
            rpc_set_error(c->resp, c->a, LAPSE_EINVAL,
                          "exclusive_start_key has another partition key than the query");
            goto out;
        }
    }
    rv = store_query(c->ns->st, t, &q.pk, q.sk.op == STORE_SK_NONE ? NULL : &q.sk, r->limit,
                     !r->reverse, q.start, &q.page, err, sizeof(err));
    reads_reply_page(c, rv, err, &q.page, r->hide_expired);
out:
    reads_query_state_fini(&q);
}

void reads_scan(request_ctx *c)
{
    const Lapse__ScanRequest *r = c->req->scan;
    item *start = NULL;
    store_page page;
    char err[512] = "";
    memset(&page, 0, sizeof(page));

    c->eventual = r != NULL && r->eventually_consistent;
    if (request_need_body(c, r) != 0 || request_find_table(c, r->table) != 0) {
        goto out;
    }
    const table_schema *t = &c->table->schema;
    if (r->partition >= t->partitions) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL,
                      "partition %u is out of range: table \"%s\" has %u partitions", r->partition,
                      t->name, t->partitions);
        goto out;
    }
    if (!request_owns(c, r->partition)) {
        request_wrong_node(c, r->partition);
        goto out;
    }
    if (r->exclusive_start_key != NULL) {
        uint32_t part;
        if (request_item_from_pb(c, r->exclusive_start_key, 1, "exclusive_start_key", &start) !=
                0 ||
            request_partition_of(c, start, &part) != 0) {
            goto out;
        }
        if (part != r->partition) {
            rpc_set_error(c->resp, c->a, LAPSE_EINVAL,
                          "exclusive_start_key is in partition %u, not %u", part, r->partition);
            goto out;
        }
    }
    int rv = store_scan(c->ns->st, t, r->partition, r->limit, start, &page, err, sizeof(err));
    reads_reply_page(c, rv, err, &page, r->hide_expired);
out:
    store_page_fini(&page);
    item_free(start);
}

/* ======================= BatchGetItem ======================= */

/* One BatchGetItem's keys and what the store found for the ones this node
 * owns. The heap arrays are freed by batch_fini; unprocessed and items come
 * from the request's arena. */
typedef struct batch_get {
    size_t n;              /* keys in the request */
    item **keys;           /* n parsed keys, owned */
    const item **mine;     /* the keys this node owns, in request order (borrowed from keys) */
    size_t *mine_at;       /* mine[j] is keys[mine_at[j]] */
    item **found;          /* found[j]: mine[j]'s item or NULL, owned */
    size_t nmine;          /* entries of mine, mine_at and found */
    uint32_t *unprocessed; /* request indexes of the keys other nodes own (arena) */
    size_t nun;            /* entries of unprocessed */
    Lapse__Item **items;   /* n reply items (arena) */
} batch_get;

/* Allocates b's arrays for n keys. 0, or LAPSE_ENOMEM (batch_fini frees
 * what was allocated). */
static int batch_alloc(request_ctx *c, batch_get *b, size_t n)
{
    const size_t m = n ? n : 1;
    b->n = n;
    b->keys = calloc(m, sizeof(*b->keys));
    b->found = calloc(m, sizeof(*b->found));
    b->mine = calloc(m, sizeof(*b->mine));
    b->mine_at = calloc(m, sizeof(*b->mine_at));
    b->unprocessed = arena_alloc(c->a, m * sizeof(*b->unprocessed));
    b->items = arena_alloc(c->a, m * sizeof(*b->items));
    if (b->keys == NULL || b->found == NULL || b->mine == NULL || b->mine_at == NULL ||
        b->unprocessed == NULL || b->items == NULL) {
        return LAPSE_ENOMEM;
    }
    return 0;
}

/* Parses every key and sorts it into mine (this node owns its partition)
 * or unprocessed (another node does: the client asks that one). 0, or an
 * error set on the reply. */
static int batch_sort_keys(request_ctx *c, const Lapse__BatchGetRequest *r, batch_get *b)
{
    for (size_t i = 0; i < b->n; i++) {
        char what[32];
        uint32_t part;
        snprintf(what, sizeof(what), "key %zu", i);
        if (request_item_from_pb(c, r->keys[i], 1, what, &b->keys[i]) != 0 ||
            request_partition_of(c, b->keys[i], &part) != 0) {
            return -1;
        }
        if (request_owns(c, part)) {
            b->mine_at[b->nmine] = i;
            b->mine[b->nmine++] = b->keys[i];
        } else {
            b->unprocessed[b->nun++] = (uint32_t)i;
        }
    }
    return 0;
}

/* Drops the found items that are expired at now, as if absent. */
static void batch_hide_expired(request_ctx *c, batch_get *b, clock_wall now)
{
    for (size_t j = 0; j < b->nmine; j++) {
        if (b->found[j] != NULL && reads_is_expired(c, b->found[j], now)) {
            item_free(b->found[j]);
            b->found[j] = NULL;
        }
    }
}

/* Sets the BatchGet reply: one Item per key in request order, empty for an
 * absent item and for a key of another node. 0, or LAPSE_ENOMEM set on the
 * reply. */
static int batch_reply(request_ctx *c, batch_get *b)
{
    Lapse__BatchGetResponse *resp = arena_alloc(c->a, sizeof(*resp));
    if (resp == NULL) {
        goto oom;
    }
    for (size_t i = 0; i < b->n; i++) {
        if ((b->items[i] = arena_alloc(c->a, sizeof(Lapse__Item))) == NULL) {
            goto oom;
        }
        lapse__item__init(b->items[i]);
    }
    for (size_t j = 0; j < b->nmine; j++) {
        if (b->found[j] != NULL &&
            (b->items[b->mine_at[j]] = wire_item_to_pb(c->a, b->found[j])) == NULL) {
            goto oom;
        }
    }
    lapse__batch_get_response__init(resp);
    resp->n_items = b->n;
    resp->items = b->n > 0 ? b->items : NULL;
    resp->n_unprocessed = b->nun;
    resp->unprocessed = b->nun > 0 ? b->unprocessed : NULL;
    c->resp->body_case = LAPSE__RESPONSE__BODY_BATCH_GET;
    c->resp->batch_get = resp;
    return 0;
oom:
    rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
    return LAPSE_ENOMEM;
}

/* Frees b's keys, found items and heap arrays. Safe on a half-built b. */
static void batch_fini(batch_get *b)
{
    for (size_t i = 0; i < b->n && b->keys != NULL; i++) {
        item_free(b->keys[i]);
    }
    for (size_t j = 0; j < b->nmine && b->found != NULL; j++) {
        item_free(b->found[j]);
    }
    free(b->keys);
    free(b->found);
    free(b->mine);
    free(b->mine_at);
}

void reads_batch_get(request_ctx *c)
{
    const Lapse__BatchGetRequest *r = c->req->batch_get;
    batch_get b;
    char err[512] = "";
    memset(&b, 0, sizeof(b));

    c->eventual = r != NULL && r->eventually_consistent;
    if (request_need_body(c, r) != 0 || request_find_table(c, r->table) != 0) {
        goto out;
    }
    if (r->n_keys > REQUEST_BATCH_MAX) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "batch of %zu keys: at most %d allowed",
                      r->n_keys, REQUEST_BATCH_MAX);
        goto out;
    }
    if (batch_alloc(c, &b, r->n_keys) != 0) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    if (batch_sort_keys(c, r, &b) != 0) {
        goto out;
    }
    int rv =
        store_get_many(c->ns->st, &c->table->schema, b.mine, b.nmine, b.found, err, sizeof(err));
    if (rv != 0) {
        request_store_error(c, rv, err);
        goto out;
    }
    if (reads_hide_expired(c, r->hide_expired)) {
        batch_hide_expired(c, &b, clock_wall_now());
    }
    batch_reply(c, &b);
out:
    batch_fini(&b);
}

/* ======================= TableStats ======================= */

/* A walk's figures (store_estimate_*: rv its return, err its message) as a
 * PartitionStats from c's arena into *out. Returns 0, or the error set on
 * the reply. */
static int stats_pb(request_ctx *c, int rv, const char *err, uint32_t part, uint32_t index_id,
                    const store_size *sz, Lapse__PartitionStats **out)
{
    Lapse__PartitionStats *ps = rv == 0 ? arena_alloc(c->a, sizeof(*ps)) : NULL;
    if (ps == NULL) {
        request_store_error(c, rv != 0 ? rv : LAPSE_ENOMEM, rv != 0 ? err : "out of memory");
        return rv != 0 ? rv : LAPSE_ENOMEM;
    }
    lapse__partition_stats__init(ps);
    ps->partition = part;
    ps->index_id = index_id;
    ps->items = sz->items;
    ps->bytes = sz->bytes;
    ps->estimated = sz->estimated != 0;
    *out = ps;
    return 0;
}

/* The base partitions: each one's items, then (with r->lsi) its entries of
 * each LSI. Returns 0 or the error set on the reply. */
static int stats_base(request_ctx *c, const Lapse__TableStatsRequest *r,
                      Lapse__TableStatsResponse *out)
{
    const table_schema *t = &c->table->schema;
    const uint32_t nlsi = r->lsi ? t->nlsi : 0;
    char err[512] = "";
    for (size_t i = 0; i < r->n_partitions; i++) {
        const uint32_t part = r->partitions[i];
        if (part >= t->partitions) {
            rpc_set_error(c->resp, c->a, LAPSE_EINVAL,
                          "partition %u is out of range: table \"%s\" has %u", part, t->name,
                          t->partitions);
            return LAPSE_EINVAL;
        }
        if (!request_owns(c, part)) {
            out->unprocessed[out->n_unprocessed++] = (uint32_t)i;
            continue;
        }
        store_size sz;
        int rv = store_estimate(c->ns->st, t->id, part, READS_STATS_WALK, &sz, err, sizeof(err));
        if ((rv = stats_pb(c, rv, err, part, 0, &sz, &out->stats[out->n_stats])) != 0) {
            return rv;
        }
        out->n_stats++;
        for (uint32_t j = 0; j < nlsi; j++) {
            const uint32_t id = t->lsi[j].id;
            rv = store_estimate_lsi(c->ns->st, t->id, part, id, READS_STATS_WALK, &sz, err,
                                    sizeof(err));
            if ((rv = stats_pb(c, rv, err, part, id, &sz, &out->lsi_stats[out->n_lsi_stats])) !=
                0) {
                return rv;
            }
            out->n_lsi_stats++;
        }
    }
    return 0;
}

/* The GSI partitions: the entries of the copy this node holds of each.
 * Returns 0 or the error set on the reply. */
static int stats_gsi(request_ctx *c, const Lapse__TableStatsRequest *r,
                     Lapse__TableStatsResponse *out)
{
    const table_schema *t = &c->table->schema;
    char err[512] = "";
    for (size_t i = 0; i < r->n_gsi_ids; i++) {
        const uint32_t id = r->gsi_ids[i], part = r->gsi_partitions[i];
        uint32_t g = 0;
        while (g < t->ngsi && t->gsi[g].id != id) {
            g++;
        }
        if (g == t->ngsi || part >= t->gsi[g].partitions) {
            rpc_set_error(c->resp, c->a, LAPSE_EINVAL,
                          "table \"%s\" has no partition %u of a GSI with id %u", t->name, part,
                          id);
            return LAPSE_EINVAL;
        }
        if (pmap_replicas_index(pmap_gsi_part(c->table, g, part), c->ns->id) < 0) {
            out->gsi_unprocessed[out->n_gsi_unprocessed++] = (uint32_t)i;
            continue;
        }
        store_size sz;
        int rv =
            store_estimate_gsi(c->ns->st, t->id, id, part, READS_STATS_WALK, &sz, err, sizeof(err));
        if ((rv = stats_pb(c, rv, err, part, id, &sz, &out->gsi_stats[out->n_gsi_stats])) != 0) {
            return rv;
        }
        out->n_gsi_stats++;
    }
    return 0;
}

void reads_table_stats(request_ctx *c)
{
    const Lapse__TableStatsRequest *r = c->req->table_stats;
    if (request_need_body(c, r) != 0 || request_find_table(c, r->table) != 0) {
        return;
    }
    const size_t n = r->n_partitions, ng = r->n_gsi_ids;
    const size_t nl = r->lsi ? n * c->table->schema.nlsi : 0;
    if (r->n_gsi_partitions != ng) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL,
                      "TableStats of %zu GSI ids but %zu GSI partitions", ng, r->n_gsi_partitions);
        return;
    }
    if (n + ng > READS_STATS_MAX_PARTITIONS) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "TableStats of %zu partitions: at most %d",
                      n + ng, READS_STATS_MAX_PARTITIONS);
        return;
    }
    Lapse__TableStatsResponse *out = arena_alloc(c->a, sizeof(*out));
    if (out == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__table_stats_response__init(out);
    out->stats = arena_alloc(c->a, (n ? n : 1) * sizeof(*out->stats));
    out->unprocessed = arena_alloc(c->a, (n ? n : 1) * sizeof(*out->unprocessed));
    out->lsi_stats = arena_alloc(c->a, (nl ? nl : 1) * sizeof(*out->lsi_stats));
    out->gsi_stats = arena_alloc(c->a, (ng ? ng : 1) * sizeof(*out->gsi_stats));
    out->gsi_unprocessed = arena_alloc(c->a, (ng ? ng : 1) * sizeof(*out->gsi_unprocessed));
    if (out->stats == NULL || out->unprocessed == NULL || out->lsi_stats == NULL ||
        out->gsi_stats == NULL || out->gsi_unprocessed == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    if (stats_base(c, r, out) != 0 || stats_gsi(c, r, out) != 0) {
        return;
    }
    c->resp->body_case = LAPSE__RESPONSE__BODY_TABLE_STATS;
    c->resp->table_stats = out;
}
