/*
 * reads_index.c: Query of a secondary index (QueryRequest.index set;
 * docs/replication.md "Indexes"). An LSI lives beside the base partition:
 * the query goes to the partition's owner, like a base query. A GSI has its
 * own partitions: the client names the one the partition key hashes to
 * (index_partition), and only its owner answers (EWRONGNODE otherwise, as
 * for base partitions). GSI entries arrive asynchronously through the
 * outbox, so a GSI query reads what this node has applied so far.
 *
 * hide_expired works as for base reads: a GSI entry carries the TTL
 * attribute whatever its projection, so an expired item is hidden even
 * before its delete has arrived here.
 */
#include <stdio.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../partition/apply.h"
#include "../placement/hash.h"
#include "../rpc/wire.h"
#include "newcopy.h"
#include "reads_index.h"
#include "reads_steps.h"

/* Checks that this node owns the GSI partition the query names, which
 * must be the one its partition key hashes to. */
static int route_gsi(request_ctx *c, uint32_t gsi, uint32_t want, const attr_value *pk)
{
    const index_def *g = &c->table->schema.gsi[gsi];
    uint32_t part = 0;
    if (want >= g->partitions) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL,
                      "index_partition %u is out of range: index \"%s\" has %u partitions", want,
                      g->name, g->partitions);
        return LAPSE_EINVAL;
    }
    int rv = hash_partition(pk, g->partitions, &part);
    if (rv != 0) {
        rpc_set_error(c->resp, c->a, rv, "partition key \"%s\": %s", g->pk.name,
                      lapse_strerror(rv));
        return rv;
    }
    if (part != want) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL,
                      "the partition key belongs to partition %u of index \"%s\", not %u", part,
                      g->name, want);
        return LAPSE_EINVAL;
    }
    if (pmap_replicas_index(pmap_gsi_part(c->table, gsi, part), c->ns->id) < 0) {
        rpc_set_error(c->resp, c->a, LAPSE_EWRONGNODE,
                      "partition %u of index %s of table %s is held by node %u, not this one", part,
                      g->name, c->table->schema.name, pmap_gsi_owner(c->table, gsi, part));
        return LAPSE_EWRONGNODE;
    }
    /* A copy missing records its sources trimmed (apply.h), or new here and
     * not yet reached by its sources (newcopy.h), answers no read: the
     * client goes to another copy. */
    int missing = newcopy_waiting(c->ns, c->table->schema.id);
    char err[256] = "";
    if (missing ||
        (rv = apply_missing(c->ns->st, c->table->schema.id, -1, &missing, err, sizeof(err))) != 0 ||
        missing) {
        rpc_set_error(c->resp, c->a, LAPSE_EUNAVAILABLE,
                      "this node's copy of partition %u of index %s of table %s %s: another copy "
                      "answers",
                      part, g->name, c->table->schema.name,
                      rv != 0 ? err
                              : "is being filled (new here, or it misses records trimmed before "
                                "it applied them)");
        return LAPSE_EUNAVAILABLE;
    }
    return 0;
}

void reads_query_index(request_ctx *c)
{
    const Lapse__QueryRequest *r = c->req->query;
    reads_query_state q;
    char err[512] = "";
    reads_query_state_init(&q);

    if (request_find_table(c, r->table) != 0) {
        goto out;
    }
    const table_schema *t = &c->table->schema;
    int lsi = -1;
    for (uint32_t i = 0; i < t->nlsi; i++) {
        if (strcmp(t->lsi[i].name, r->index) == 0) {
            lsi = (int)i;
        }
    }
    int gsi = lsi < 0 ? pmap_gsi_find(c->table, r->index) : -1;
    if (lsi < 0 && gsi < 0) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "table \"%s\" has no index \"%s\"", t->name,
                      r->index);
        goto out;
    }
    const index_def *ix = lsi >= 0 ? &t->lsi[lsi] : &t->gsi[gsi];
    char owner[SCHEMA_MAX_NAME + 16];
    snprintf(owner, sizeof(owner), "index \"%s\"", ix->name);
    uint32_t part = 0;
    if (reads_pk_from_pb(c, r->partition_key, lsi >= 0 ? &t->pk : &ix->pk, &q.pk) != 0 ||
        (lsi >= 0 ? request_route_pk(c, &q.pk, &part)
                  : route_gsi(c, (uint32_t)gsi, r->index_partition, &q.pk)) != 0 ||
        reads_sk_from_pb(c, r->sort_key, &ix->sk, owner, &q.sk, &q.v1, &q.v2) != 0) {
        goto out;
    }
    /* A start key carries the table's keys and the index's (the store
     * checks the latter against the query). */
    if (r->exclusive_start_key != NULL &&
        request_item_from_pb(c, r->exclusive_start_key, 0, "exclusive_start_key", &q.start) != 0) {
        goto out;
    }
    const store_sk_cond *skp = q.sk.op == STORE_SK_NONE ? NULL : &q.sk;
    int rv;
    if (lsi >= 0) {
        rv = store_query_lsi(c->ns->st, t, (uint32_t)lsi, &q.pk, skp, r->limit, !r->reverse,
                             q.start, &q.page, err, sizeof(err));
    } else {
        rv = store_query_gsi(c->ns->st, t, (uint32_t)gsi, r->index_partition, &q.pk, skp, r->limit,
                             !r->reverse, q.start, &q.page, err, sizeof(err));
    }
    reads_reply_page(c, rv, err, &q.page, r->hide_expired);
out:
    reads_query_state_fini(&q);
}
