/*
 * replserve.c: the Replicate call (replserve.h): another node's shipper
 * brings a batch of a source partition's outbox records, applied by
 * replicate_apply as this node's own shipper applies its own.
 */
#include "replserve.h"

#include <inttypes.h>
#include <stdlib.h>

#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../common/token.h"
#include "replicate.h"

void replserve_handle(request_ctx *c)
{
    const Lapse__ReplicateRequest *r = c->req->replicate;
    const void **recs = NULL;
    size_t *lens = NULL;
    char err[512] = "";
    /* A Replicate moves this node's applied seq of its source partition:
     * a forged one could make it skip records. With a cluster token, only
     * callers holding it (other nodes) are heard. */
    if (c->ns->cluster_token_len > 0 &&
        !token_equal(c->ns->cluster_token, c->ns->cluster_token_len, c->req->admin_token)) {
        log_warn("refused Replicate: cluster token %s",
                 c->req->admin_token == NULL || c->req->admin_token[0] == '\0' ? "missing"
                                                                               : "wrong");
        rpc_set_error(c->resp, c->a, LAPSE_EPERM, "cluster token missing or wrong");
        return;
    }
    if (request_need_body(c, r) != 0 || request_find_table_id(c, r->table_id) != 0) {
        return;
    }
    const table_schema *t = &c->table->schema;
    if (!schema_has_outbox(t)) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "table \"%s\" has neither a GSI nor a stream",
                      t->name);
        return;
    }
    if (r->source_partition >= t->partitions) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL,
                      "source partition %u is out of range: table \"%s\" has %u partitions",
                      r->source_partition, t->name, t->partitions);
        return;
    }
    int probe = r->to_seq == r->from_seq && r->n_records == 0; /* where it stands */
    if ((!probe && r->to_seq <= r->from_seq) || r->n_records > r->to_seq - r->from_seq) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL,
                      "batch (%" PRIu64 ", %" PRIu64 "] cannot hold %zu records", r->from_seq,
                      r->to_seq, r->n_records);
        return;
    }
    size_t n = r->n_records;
    recs = calloc(n ? n : 1, sizeof(*recs));
    lens = calloc(n ? n : 1, sizeof(*lens));
    Lapse__ReplicateResponse *out = arena_alloc(c->a, sizeof(*out));
    if (recs == NULL || lens == NULL || out == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        recs[i] = r->records[i].data;
        lens[i] = r->records[i].len;
    }
    uint64_t applied = 0;
    int rv = replicate_apply(c->ns, c->table, c->map->pm->version, r->source_partition,
                             c->req->pmap_version, r->from_seq, r->to_seq, r->first_kept, recs,
                             lens, n, &applied, err, sizeof(err));
    lapse__replicate_response__init(out);
    out->applied_seq = applied;
    /* The applied seq travels with ESTATE too: the sender resends from it. */
    c->resp->body_case = LAPSE__RESPONSE__BODY_REPLICATE;
    c->resp->replicate = out;
    if (rv != 0) {
        if (rv != LAPSE_ESTATE && rv != LAPSE_EUNAVAILABLE) { /* a gap; resend later */
            log_warn("Replicate from node %u, table \"%s\" partition %u (%" PRIu64 ", %" PRIu64
                     "]: %s: %s",
                     r->source_node, t->name, r->source_partition, r->from_seq, r->to_seq,
                     lapse_strerror(rv), err);
        }
        rpc_set_error(c->resp, c->a, rv, "%s", err[0] ? err : lapse_strerror(rv));
    }
out:
    free(recs);
    free(lens);
}
