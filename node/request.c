/*
 * request.c: the steps every item call shares (request.h): the table, the
 * item, the route, the store's error.
 */
#include "request.h"

#include <stdio.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../common/schema.h"
#include "../partition/replog.h"
#include "../placement/hash.h"
#include "../rpc/wire.h"
#include "registry.h"

/* ------------------------------------------------------------------------ */
/* The body and the table                                                    */
/* ------------------------------------------------------------------------ */

int request_need_body(request_ctx *c, const void *body)
{
    if (body != NULL) {
        return 0;
    }
    rpc_set_error(c->resp, c->a, LAPSE_EPROTO, "request body is empty");
    return LAPSE_EPROTO;
}

/* A replicated partition's primary acts only under its lease
 * (registry_may_lead); a single copy has no one to be fenced from. */
static int fenced(const request_ctx *c, char *err, size_t errlen)
{
    return schema_replication(&c->table->schema) >= 2 &&
           registry_may_lead(c->ns, c->map->pm, err, errlen) != 0;
}

/* The end of a table lookup (name, else table_id): the reply's map version,
 * ENOTFOUND, or the table with its fence judged once for the request, so
 * the per-key ownership checks take no lock. */
static int table_found(request_ctx *c, const char *name, uint32_t table_id)
{
    c->resp->pmap_version = c->map->pm->version;
    if (c->table == NULL) {
        if (name != NULL) {
            rpc_set_error(c->resp, c->a, LAPSE_ENOTFOUND, "table \"%s\" does not exist", name);
        } else {
            rpc_set_error(c->resp, c->a, LAPSE_ENOTFOUND, "table id %u does not exist", table_id);
        }
        return LAPSE_ENOTFOUND;
    }
    c->fenced = fenced(c, NULL, 0);
    return 0;
}

int request_find_table(request_ctx *c, const char *name)
{
    node_server *ns = c->ns;
    if (name == NULL || name[0] == 0) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "table name is required");
        return LAPSE_EINVAL;
    }
    c->map = maps_acquire(ns);
    c->table = pmap_table_find(c->map->pm, name);
    if (c->table == NULL || c->req->pmap_version > c->map->pm->version) {
        /* Our map may be behind the caller's or the coordinator's: refresh
         * once, bounded by the request's deadline and rate-limited. No map
         * reference is held across the refresh (maps.h invariant 3). */
        char err[256] = "";
        maps_release(c->map);
        c->map = NULL;
        c->table = NULL;
        int rv = maps_refresh(ns, c->deadline_mono_ms, 1, err, sizeof(err));
        if (rv != 0) {
            log_debug("map refresh for table \"%s\" failed: %s: %s", name, lapse_strerror(rv), err);
        }
        c->map = maps_acquire(ns);
        c->table = pmap_table_find(c->map->pm, name);
    }
    return table_found(c, name, 0);
}

int request_find_table_id(request_ctx *c, uint32_t table_id)
{
    c->map = maps_acquire(c->ns);
    c->table = pmap_table_find_id(c->map->pm, table_id);
    if (c->table == NULL || c->req->pmap_version > c->map->pm->version) {
        /* As request_find_table: the sender's map may be newer. */
        char err[256] = "";
        maps_release(c->map);
        c->map = NULL;
        c->table = NULL;
        int rv = maps_refresh(c->ns, c->deadline_mono_ms, 1, err, sizeof(err));
        if (rv != 0) {
            log_debug("map refresh for table id %u failed: %s: %s", table_id, lapse_strerror(rv),
                      err);
        }
        c->map = maps_acquire(c->ns);
        c->table = pmap_table_find_id(c->map->pm, table_id);
    }
    return table_found(c, NULL, table_id);
}

/* ------------------------------------------------------------------------ */
/* The item                                                                  */
/* ------------------------------------------------------------------------ */

int request_item_from_pb(request_ctx *c, const Lapse__Item *pb, int key_only, const char *what,
                         item **out)
{
    char err[512] = "";
    *out = NULL;
    if (pb == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "%s is required", what);
        return LAPSE_EINVAL;
    }
    int rv = wire_item_from_pb(pb, out, err, sizeof(err));
    if (rv != 0) {
        rpc_set_error(c->resp, c->a, rv, "%s: %s", what, err[0] ? err : lapse_strerror(rv));
        return rv;
    }
    if ((rv = schema_check_item(&c->table->schema, *out, key_only, err, sizeof(err))) != 0) {
        rpc_set_error(c->resp, c->a, rv, "%s: %s", what, err[0] ? err : lapse_strerror(rv));
        item_free(*out);
        *out = NULL;
        return rv;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The route                                                                 */
/* ------------------------------------------------------------------------ */

int request_partition_of(request_ctx *c, const item *it, uint32_t *part)
{
    const table_schema *t = &c->table->schema;
    const attr_value *pk = item_get(it, t->pk.name);
    if (pk == NULL) {
        /* schema_check_item ran before: it cannot be missing. */
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "partition key \"%s\" is missing", t->pk.name);
        return LAPSE_EINVAL;
    }
    int rv = hash_partition(pk, t->partitions, part);
    if (rv != 0) {
        rpc_set_error(c->resp, c->a, rv, "partition key \"%s\": %s", t->pk.name,
                      lapse_strerror(rv));
    }
    return rv;
}

/* An in-sync follower's copy, for an eventually consistent read: the map
 * holds it in the in-sync set and the copy has applied a record. */
static int follower_reads(const request_ctx *c, uint32_t part)
{
    const pmap_replicas *r = pmap_part(c->table, part);
    int i = r != NULL ? pmap_replicas_index(r, c->ns->id) : -1;
    uint64_t epoch = 0, seq = 0;
    if (i <= 0 || !pmap_in_sync(r, (uint32_t)i)) {
        return 0;
    }
    return replog_position(c->ns->st, c->table->schema.id, part, &epoch, &seq, NULL, 0) == 0 &&
           seq > 0;
}

/* Whether this node, the partition's primary, is handing the primaryship
 * over (pmap_replica_step_down): it serves no write and no strong read. */
static int stepping_down(const request_ctx *c, uint32_t part)
{
    const pmap_replicas *r = pmap_part(c->table, part);
    return r != NULL && r->handing_since != 0;
}

int request_owns(const request_ctx *c, uint32_t part)
{
    if (pmap_owner(c->table, part) == c->ns->id) {
        return c->eventual || (!c->fenced && !stepping_down(c, part));
    }
    return c->eventual && follower_reads(c, part);
}

int request_wrong_node(request_ctx *c, uint32_t part)
{
    char err[256] = "";
    uint32_t owner = pmap_owner(c->table, part);
    if (owner == c->ns->id && !c->eventual && stepping_down(c, part)) {
        rpc_set_error(c->resp, c->a, LAPSE_EWRONGNODE,
                      "partition %u of table %s: node %u is handing its primaryship over; try "
                      "again",
                      part, c->table->schema.name, (unsigned)c->ns->id);
    } else if (owner == c->ns->id && c->fenced && !c->eventual) {
        if (!fenced(c, err, sizeof(err))) { /* renewed since the request came in */
            snprintf(err, sizeof(err),
                     "node %u's etcd lease was not current when the request "
                     "came in; try again",
                     (unsigned)c->ns->id);
        }
        rpc_set_error(c->resp, c->a, LAPSE_EWRONGNODE, "partition %u of table %s: %s", part,
                      c->table->schema.name, err);
    } else {
        rpc_set_error(c->resp, c->a, LAPSE_EWRONGNODE,
                      "partition %u of table %s is owned by node %u", part, c->table->schema.name,
                      owner);
    }
    return LAPSE_EWRONGNODE;
}

int request_route(request_ctx *c, const item *it, uint32_t *part)
{
    int rv = request_partition_of(c, it, part);
    if (rv != 0) {
        return rv;
    }
    return request_owns(c, *part) ? 0 : request_wrong_node(c, *part);
}

int request_route_pk(request_ctx *c, const attr_value *pk, uint32_t *part)
{
    const table_schema *t = &c->table->schema;
    int rv = hash_partition(pk, t->partitions, part);
    if (rv != 0) {
        rpc_set_error(c->resp, c->a, rv, "partition key \"%s\": %s", t->pk.name,
                      lapse_strerror(rv));
        return rv;
    }
    return request_owns(c, *part) ? 0 : request_wrong_node(c, *part);
}

/* ------------------------------------------------------------------------ */
/* The condition and the store's error                                       */
/* ------------------------------------------------------------------------ */

int request_cond_from_pb(request_ctx *c, const Lapse__Condition *pb, store_cond *cond,
                         attr_value *value_out)
{
    memset(cond, 0, sizeof(*cond));
    if (pb == NULL || pb->kind == LAPSE__CONDITION__KIND__NONE) {
        return 0;
    }
    if (pb->kind != LAPSE__CONDITION__KIND__ITEM_EQUALS &&
        (pb->attribute == NULL || pb->attribute[0] == 0)) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "condition: attribute name is required");
        return LAPSE_EINVAL;
    }
    cond->attr = pb->attribute;
    switch (pb->kind) {
    case LAPSE__CONDITION__KIND__ATTRIBUTE_NOT_EXISTS:
        cond->kind = STORE_COND_NOT_EXISTS;
        return 0;
    case LAPSE__CONDITION__KIND__ATTRIBUTE_EXISTS:
        cond->kind = STORE_COND_EXISTS;
        return 0;
    case LAPSE__CONDITION__KIND__ATTRIBUTE_EQUALS:
    case LAPSE__CONDITION__KIND__ITEM_EQUALS: {
        char err[256] = "";
        const int whole = pb->kind == LAPSE__CONDITION__KIND__ITEM_EQUALS;
        if (pb->value == NULL) {
            rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "condition: %s needs a value",
                          whole ? "item_equals" : "attribute_equals");
            return LAPSE_EINVAL;
        }
        /* A whole item's attributes are top-level ones: the M adds no
         * level to ITEM_MAX_DEPTH (wire_item_value_from_pb). */
        int rv = whole ? wire_item_value_from_pb(pb->value, value_out, err, sizeof(err))
                       : wire_value_from_pb(pb->value, value_out, err, sizeof(err));
        if (rv == 0 && whole && value_out->type != ATTR_M) {
            item_value_fini(value_out);
            snprintf(err, sizeof err, "item_equals needs an M value (the whole item)");
            rv = LAPSE_EINVAL;
        }
        if (rv != 0) {
            rpc_set_error(c->resp, c->a, rv, "condition value: %s", err);
            return rv;
        }
        cond->kind = whole ? STORE_COND_ITEM_EQUALS : STORE_COND_EQUALS;
        cond->value = value_out;
        return 0;
    }
    default:
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "condition: unknown kind %d", (int)pb->kind);
        return LAPSE_EINVAL;
    }
}

void request_store_error(request_ctx *c, int rv, const char *err)
{
    if (rv == LAPSE_ECONDITION && (err == NULL || err[0] == 0)) {
        err = "the conditional request failed";
    }
    if (rv == LAPSE_EIO || rv == LAPSE_ECORRUPT || rv == LAPSE_EINTERNAL) {
        log_error("table \"%s\": store failed: %s: %s", c->table->schema.name, lapse_strerror(rv),
                  err != NULL ? err : "");
    }
    rpc_set_error(c->resp, c->a, rv, "%s", err != NULL && err[0] ? err : lapse_strerror(rv));
}
