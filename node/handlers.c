/*
 * handlers.c: dispatch and the shared steps of item calls (handlers.h).
 */
#include "handlers.h"

#include <stdio.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../common/schema.h"
#include "../partition/replog.h"
#include "../placement/hash.h"
#include "../rpc/wire.h"
#include "logship.h"
#include "registry.h"
#include "telemetry.h"

/* ------------------------------------------------------------------------ */
/* Shared steps                                                              */
/* ------------------------------------------------------------------------ */

int handlers_need_body(handlers_ctx *c, const void *body)
{
    if (body != NULL) {
        return 0;
    }
    rpc_set_error(c->resp, c->a, LAPSE_EPROTO, "request body is empty");
    return LAPSE_EPROTO;
}

/* A replicated partition's primary acts only under its lease
 * (registry_may_lead); a single copy has no one to be fenced from. */
static int fenced(const handlers_ctx *c, char *err, size_t errlen)
{
    return schema_replication(&c->table->schema) >= 2 &&
           registry_may_lead(c->ns, c->map->pm, err, errlen) != 0;
}

/* The end of a table lookup (name, else table_id): the reply's map version,
 * ENOTFOUND, or the table with its fence judged once for the request, so
 * the per-key ownership checks take no lock. */
static int table_found(handlers_ctx *c, const char *name, uint32_t table_id)
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

int handlers_find_table(handlers_ctx *c, const char *name)
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

int handlers_find_table_id(handlers_ctx *c, uint32_t table_id)
{
    c->map = maps_acquire(c->ns);
    c->table = pmap_table_find_id(c->map->pm, table_id);
    if (c->table == NULL || c->req->pmap_version > c->map->pm->version) {
        /* As handlers_find_table: the sender's map may be newer. */
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

int handlers_item_from_pb(handlers_ctx *c, const Lapse__Item *pb, int key_only, const char *what,
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

int handlers_partition_of(handlers_ctx *c, const item *it, uint32_t *part)
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
static int follower_reads(const handlers_ctx *c, uint32_t part)
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

int handlers_owns(const handlers_ctx *c, uint32_t part)
{
    if (pmap_owner(c->table, part) == c->ns->id) {
        return !c->fenced || c->eventual;
    }
    return c->eventual && follower_reads(c, part);
}

int handlers_wrong_node(handlers_ctx *c, uint32_t part)
{
    char err[256] = "";
    uint32_t owner = pmap_owner(c->table, part);
    if (owner == c->ns->id && c->fenced && !c->eventual) {
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

int handlers_route(handlers_ctx *c, const item *it, uint32_t *part)
{
    int rv = handlers_partition_of(c, it, part);
    if (rv != 0) {
        return rv;
    }
    return handlers_owns(c, *part) ? 0 : handlers_wrong_node(c, *part);
}

int handlers_route_pk(handlers_ctx *c, const attr_value *pk, uint32_t *part)
{
    const table_schema *t = &c->table->schema;
    int rv = hash_partition(pk, t->partitions, part);
    if (rv != 0) {
        rpc_set_error(c->resp, c->a, rv, "partition key \"%s\": %s", t->pk.name,
                      lapse_strerror(rv));
        return rv;
    }
    return handlers_owns(c, *part) ? 0 : handlers_wrong_node(c, *part);
}

int handlers_cond_from_pb(handlers_ctx *c, const Lapse__Condition *pb, store_cond *cond,
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
        int rv = wire_value_from_pb(pb->value, value_out, err, sizeof(err));
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

void handlers_store_error(handlers_ctx *c, int rv, const char *err)
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

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                  */
/* ------------------------------------------------------------------------ */

static void push_partition_map(handlers_ctx *c)
{
    char err[256] = "";
    const Lapse__PushPartitionMapRequest *body = c->req->push_partition_map;
    int applied = 0;
    int rv = maps_apply_pb(c->ns, body != NULL ? body->map : NULL, &applied, err, sizeof(err));
    if (rv != 0) {
        rpc_set_error(c->resp, c->a, rv, "push_partition_map: %s", err);
        return;
    }
    Lapse__PushPartitionMapResponse *out = arena_alloc(c->a, sizeof(*out));
    if (out == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__push_partition_map_response__init(out);
    /* A just-enabled table's backfill is usually done within a few ms (an
     * empty or small table): wait a little so the coordinator learns it
     * from this reply and turns the table ENABLED at once. The map may have
     * come by the etcd watch a moment before this push (applied is 0 then):
     * the wait is for the pushed version, however it arrived. */
    if ((applied || (body->map != NULL && body->map->version == maps_version(c->ns))) &&
        c->ns->ttl != NULL) {
        expire_wait_backfilled(c->ns->ttl, EXPIRE_PUSH_WAIT_MS);
    }
    if (c->ns->ttl != NULL && expire_progress_pb(c->ns->ttl, c->a, &out->ttl, &out->n_ttl) != 0) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    c->resp->body_case = LAPSE__RESPONSE__BODY_PUSH_PARTITION_MAP;
    c->resp->push_partition_map = out;
}

/* A client that reached no coordinator asks a node for the map it holds. */
static void get_partition_map(handlers_ctx *c)
{
    Lapse__GetPartitionMapResponse *out = arena_alloc(c->a, sizeof(*out));
    node_map *m = maps_acquire(c->ns);
    if (out != NULL) {
        lapse__get_partition_map_response__init(out);
    }
    if (out == NULL || (out->map = wire_pmap_to_pb(c->a, m->pm)) == NULL) {
        maps_release(m);
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    maps_release(m);
    c->resp->body_case = LAPSE__RESPONSE__BODY_GET_PARTITION_MAP;
    c->resp->get_partition_map = out;
}

/* A peer checking its clock against ours while no coordinator answers
 * (membership.h): our wall clock, and whether it passed our own check. */
static void peer_heartbeat(handlers_ctx *c)
{
    Lapse__HeartbeatResponse *out = arena_alloc(c->a, sizeof(*out));
    if (out == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__heartbeat_response__init(out);
    out->pmap_version = maps_version(c->ns);
    out->clock_ms = clock_wall_now().ms;
    out->clock_trusted = c->ns->ttl != NULL && expire_clock(c->ns->ttl, NULL) == EXPIRE_CLOCK_OK;
    c->resp->body_case = LAPSE__RESPONSE__BODY_HEARTBEAT;
    c->resp->heartbeat = out;
}

void handlers_serve(void *arg, const Lapse__Request *req, Lapse__Response *resp, arena *a,
                    int64_t deadline_mono_ms)
{
    handlers_ctx c = {
        .ns = arg, .req = req, .resp = resp, .a = a, .deadline_mono_ms = deadline_mono_ms};
    switch (req->body_case) {
    case LAPSE__REQUEST__BODY_PUT_ITEM:
        writes_put(&c);
        break;
    case LAPSE__REQUEST__BODY_DELETE_ITEM:
        writes_delete(&c);
        break;
    case LAPSE__REQUEST__BODY_UPDATE_ITEM:
        writes_update(&c);
        break;
    case LAPSE__REQUEST__BODY_BATCH_WRITE:
        writes_batch(&c);
        break;
    case LAPSE__REQUEST__BODY_GET_ITEM:
        reads_get(&c);
        break;
    case LAPSE__REQUEST__BODY_QUERY:
        reads_query(&c);
        break;
    case LAPSE__REQUEST__BODY_SCAN:
        reads_scan(&c);
        break;
    case LAPSE__REQUEST__BODY_BATCH_GET:
        reads_batch_get(&c);
        break;
    case LAPSE__REQUEST__BODY_PUSH_PARTITION_MAP:
        push_partition_map(&c);
        break;
    case LAPSE__REQUEST__BODY_TTL_PREVIEW:
        preview_ttl(&c);
        break;
    case LAPSE__REQUEST__BODY_REPLICATE:
        replicate_handle(&c);
        break;
    case LAPSE__REQUEST__BODY_GET_STREAM_RECORDS:
        streams_get_records(&c);
        break;
    case LAPSE__REQUEST__BODY_REPLICATE_LOG:
        logship_handle(&(logship_call){c.ns, c.req, c.resp, c.a});
        break;
    case LAPSE__REQUEST__BODY_PARTITION_DIGEST:
        logship_digest(&(logship_call){c.ns, c.req, c.resp, c.a});
        break;
    case LAPSE__REQUEST__BODY_PARTITION_ITEMS:
        logship_items(&(logship_call){c.ns, c.req, c.resp, c.a});
        break;
    case LAPSE__REQUEST__BODY_GET_PARTITION_MAP:
        get_partition_map(&c);
        break;
    case LAPSE__REQUEST__BODY_HEARTBEAT:
        peer_heartbeat(&c);
        break;
    case LAPSE__REQUEST__BODY__NOT_SET:
        rpc_set_error(resp, a, LAPSE_EPROTO, "request has no body");
        break;
    default:
        rpc_set_error(resp, a, LAPSE_EINVAL, "not a node call");
        break;
    }
    /* Invariant 1: the version the call was routed by, else the current. */
    if (c.map != NULL) {
        resp->pmap_version = c.map->pm->version;
        maps_release(c.map);
    } else {
        resp->pmap_version = maps_version(c.ns);
    }
    telemetry_count_rpc(c.ns, req, resp);
}
