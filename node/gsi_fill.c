/* gsi_fill.c: this node's GSI copies filled from a source partition's
 * items (contract in gsi_fill.h). */
#include "gsi_fill.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../partition/apply.h"
#include "../rpc/rpc.h"
#include "replicate.h"

/* Whether f owns any partition of t's GSIs. */
static int owns_any(const table_schema *t, const apply_filter *f)
{
    for (uint32_t g = 0; f->owns_gsi != NULL && g < t->ngsi; g++) {
        for (uint32_t p = 0; p < t->gsi[g].partitions; p++) {
            if (f->owns_gsi(f->arg, g, p)) {
                return 1;
            }
        }
    }
    return 0;
}

/* One page of the items of (t, part) after after[0..alen) from c, of up
 * to max_bytes (at least one item). */
static int read_page(node_server *ns, rpc_client *c, const table_schema *t, uint32_t part,
                     const uint8_t *after, size_t alen, uint32_t max_bytes, Lapse__Response **resp,
                     char *err, size_t errlen)
{
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__PartitionItemsRequest body = LAPSE__PARTITION_ITEMS_REQUEST__INIT;
    body.table_id = t->id;
    body.partition = part;
    body.after_key.data = (uint8_t *)after;
    body.after_key.len = alen;
    body.max_bytes = max_bytes;
    req.body_case = LAPSE__REQUEST__BODY_PARTITION_ITEMS;
    req.partition_items = &body;
    if (ns->cluster_token_len > 0) {
        req.admin_token = ns->cluster_token;
    }
    int rv = rpc_call(c, &req, GSI_FILL_CALL_TIMEOUT_MS, resp, err, errlen);
    if (rv == 0 && ((*resp)->body_case != LAPSE__RESPONSE__BODY_PARTITION_ITEMS ||
                    (*resp)->partition_items == NULL)) {
        snprintf(err, errlen, "the reply carries no items");
        rv = LAPSE_ECORRUPT;
    }
    return rv;
}

/* Reads every page from the primary at url and puts the entries. REQUIRES:
 * the source's batches held off (replicate_pause). *items gets the items
 * read. */
static int fill_from(node_server *ns, const pmap_table *t, uint32_t part, const apply_filter *f,
                     const char *url, uint64_t *items, char *err, size_t errlen)
{
    uint64_t applied = 0;
    int rv = apply_applied_seq(ns->st, t->schema.id, part, &applied, err, errlen);
    rpc_client *c = NULL;
    if (rv == 0) {
        rv = rpc_client_open(&c, url, err, errlen);
    }
    uint8_t *after = NULL;
    size_t alen = 0;
    int done = 0;
    while (rv == 0 && !done) {
        Lapse__Response *resp = NULL;
        if ((rv = read_page(ns, c, &t->schema, part, after, alen, GSI_FILL_PAGE_BYTES, &resp, err,
                            errlen)) != 0) {
            rpc_response_free(resp);
            break;
        }
        const Lapse__PartitionItemsResponse *r = resp->partition_items;
        size_t n = r->n_items;
        const void **vals = calloc(n ? n : 1, sizeof(*vals));
        size_t *lens = calloc(n ? n : 1, sizeof(*lens));
        if (vals == NULL || lens == NULL) {
            snprintf(err, errlen, "out of memory");
            rv = LAPSE_ENOMEM;
        } else if (r->outbox_seq < applied) {
            /* Cannot happen: the primary holds every record shipped. */
            snprintf(err, errlen,
                     "the primary's items stand at outbox record %" PRIu64 ", before the %" PRIu64
                     " applied here",
                     r->outbox_seq, applied);
            rv = LAPSE_ESTATE;
        }
        for (size_t i = 0; rv == 0 && i < n; i++) {
            vals[i] = r->items[i]->value.data;
            lens[i] = r->items[i]->value.len;
        }
        if (rv == 0) {
            rv = apply_gsi_fill(ns->st, &t->schema, part, f, vals, lens, n, err, errlen);
        }
        if (rv == 0 && n > 0) {
            const ProtobufCBinaryData *k = &r->items[n - 1]->key;
            uint8_t *na = realloc(after, k->len ? k->len : 1);
            if (na == NULL) {
                snprintf(err, errlen, "out of memory");
                rv = LAPSE_ENOMEM;
            } else {
                after = na;
                memcpy(after, k->data, k->len);
                alen = k->len;
            }
        }
        if (rv == 0) {
            *items += n;
            done = r->done || n == 0;
        }
        free(vals);
        free(lens);
        rpc_response_free(resp);
    }
    free(after);
    rpc_client_close(c);
    return rv;
}

/* The primary of partition part of t in pm, or NULL (with err) when the
 * map names none UP. */
static const pmap_node *primary_of(const pmap *pm, const pmap_table *t, uint32_t part, char *err,
                                   size_t errlen)
{
    const pmap_replicas *set = pmap_part(t, part);
    const pmap_node *primary = set != NULL ? pmap_node_find(pm, set->ids[0]) : NULL;
    if (primary == NULL || primary->state != PMAP_NODE_UP) {
        snprintf(err, errlen, "partition %u has no primary UP", (unsigned)part);
        return NULL;
    }
    return primary;
}

int gsi_fill_source(node_server *ns, const pmap *pm, const pmap_table *t, uint32_t src_part,
                    uint64_t mark)
{
    replicate_filter_arg fa;
    apply_filter f;
    replicate_filter(t, src_part, ns->id, &fa, &f);
    char err[512] = "";
    uint64_t items = 0;
    int rv = 0;
    const pmap_node *primary = NULL;
    if (!owns_any(&t->schema, &f)) {
        /* Nothing here to fill. */
    } else if ((primary = primary_of(pm, t, src_part, err, sizeof(err))) == NULL) {
        rv = LAPSE_EUNAVAILABLE;
    } else {
        replicate_pause(ns, t->schema.id, src_part, 1);
        rv = fill_from(ns, t, src_part, &f, primary->address, &items, err, sizeof(err));
        if (rv == 0) {
            rv = apply_gsi_filled(ns->st, t->schema.id, src_part, mark, err, sizeof(err));
        }
        replicate_pause(ns, t->schema.id, src_part, 0);
    }
    if (rv == 0 && !owns_any(&t->schema, &f)) {
        rv = apply_gsi_filled(ns->st, t->schema.id, src_part, mark, err, sizeof(err));
    } else if (rv == 0) {
        log_info("table %s: this node's GSI copies, missing records of partition %u (through "
                 "outbox record %" PRIu64 "), filled from the %" PRIu64
                 " items of its primary, node %u; they answer again once no partition misses any",
                 t->schema.name, (unsigned)src_part, mark, items, (unsigned)primary->id);
    }
    if (rv != 0) {
        log_warn("table %s: filling this node's GSI copies from the items of partition %u: %s: %s",
                 t->schema.name, (unsigned)src_part, lapse_strerror(rv), err);
    }
    return rv;
}

int gsi_fill_primary_seq(node_server *ns, const pmap *pm, const pmap_table *t, uint32_t src_part,
                         uint64_t *seq, uint64_t *version, char *err, size_t errlen)
{
    *version = 0;
    *seq = 0;
    const pmap_node *primary = primary_of(pm, t, src_part, err, errlen);
    if (primary == NULL) {
        return LAPSE_EUNAVAILABLE;
    }
    rpc_client *c = NULL;
    Lapse__Response *resp = NULL;
    int rv = rpc_client_open(&c, primary->address, err, errlen);
    if (rv == 0) {
        rv = read_page(ns, c, &t->schema, src_part, NULL, 0, 1, &resp, err, errlen);
    }
    if (rv == 0) {
        *seq = resp->partition_items->outbox_seq;
        *version = resp->pmap_version;
    }
    rpc_response_free(resp);
    rpc_client_close(c);
    return rv;
}
