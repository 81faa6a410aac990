/*
 * handlers.c: the dispatcher of the node's calls (handlers.h).
 */
#include "handlers.h"

#include <stdlib.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../placement/failover.h"
#include "../rpc/wire.h"
#include "logship.h"
#include "preview.h"
#include "reads.h"
#include "replserve.h"
#include "request.h"
#include "streams.h"
#include "telemetry.h"
#include "writes.h"

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                  */
/* ------------------------------------------------------------------------ */

static void push_partition_map(request_ctx *c)
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
        expiry_engine_wait_backfilled(c->ns->ttl, EXPIRY_ENGINE_PUSH_WAIT_MS);
    }
    if (c->ns->ttl != NULL &&
        expiry_engine_progress_pb(c->ns->ttl, c->a, &out->ttl, &out->n_ttl) != 0) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    c->resp->body_case = LAPSE__RESPONSE__BODY_PUSH_PARTITION_MAP;
    c->resp->push_partition_map = out;
}

/* A client that reached no coordinator asks a node for the map it holds. */
static void get_partition_map(request_ctx *c)
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
static void peer_heartbeat(request_ctx *c)
{
    Lapse__HeartbeatResponse *out = arena_alloc(c->a, sizeof(*out));
    if (out == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__heartbeat_response__init(out);
    out->pmap_version = maps_version(c->ns);
    out->clock_ms = clock_wall_now().ms;
    out->clock_trusted =
        c->ns->ttl != NULL && expiry_engine_clock(c->ns->ttl, NULL) == EXPIRY_ENGINE_CLOCK_OK;
    c->resp->body_case = LAPSE__RESPONSE__BODY_HEARTBEAT;
    c->resp->heartbeat = out;
}

/* The end of every call: invariants 1 to 3 (handlers.h). */
static void call_done(request_ctx *c)
{
    /* Invariant 1: the version the call was routed by, else the current. */
    if (c->map != NULL) {
        c->resp->pmap_version = c->map->pm->version;
        maps_release(c->map);
        c->map = NULL;
    } else {
        c->resp->pmap_version = maps_version(c->ns);
    }
    telemetry_count_rpc(c->ns, c->req, c->resp);
}

int handlers_quick(void *arg, const Lapse__Request *req)
{
    const char *table;
    switch (req->body_case) {
    case LAPSE__REQUEST__BODY_GET_ITEM:
        table = req->get_item != NULL ? req->get_item->table : NULL;
        break;
    case LAPSE__REQUEST__BODY_PUT_ITEM:
        table = req->put_item != NULL ? req->put_item->table : NULL;
        break;
    case LAPSE__REQUEST__BODY_DELETE_ITEM:
        table = req->delete_item != NULL ? req->delete_item->table : NULL;
        break;
    case LAPSE__REQUEST__BODY_UPDATE_ITEM:
        table = req->update_item != NULL ? req->update_item->table : NULL;
        break;
    default:
        return 0;
    }
    if (table == NULL) {
        return 1; /* refused at once */
    }
    /* A table of one copy: nothing to wait for, unless a move gives one
     * of its sets a second copy (maps_logged). A table of more waits for
     * its followers (a write's round, a read's settle) and one this map
     * does not hold, or a caller's map newer than ours, for a refresh from
     * the coordinator (request_find_table). */
    node_map *m = maps_acquire(arg);
    const pmap_table *t = pmap_table_find(m->pm, table);
    int quick =
        t != NULL && req->pmap_version <= m->pm->version && schema_replication(&t->schema) <= 1;
    uint32_t table_id = quick ? t->schema.id : 0;
    maps_release(m);
    return quick && !maps_logged(arg, table_id, PMAP_ANY_PART);
}

int handlers_conn_thread(void *arg, const Lapse__Request *req)
{
    node_server *ns = arg;
    if (req->body_case == LAPSE__REQUEST__BODY_REPLICATE_LOG) {
        return logship_on_conn_thread(ns->logship, req->replicate_log);
    }
    return rpc_single_item_call(req);
}

void handlers_serve(void *arg, const Lapse__Request *req, Lapse__Response *resp, arena *a,
                    int64_t deadline_mono_ms)
{
    request_ctx c = {
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
    case LAPSE__REQUEST__BODY_TABLE_STATS:
        reads_table_stats(&c);
        break;
    case LAPSE__REQUEST__BODY_PUSH_PARTITION_MAP:
        push_partition_map(&c);
        break;
    case LAPSE__REQUEST__BODY_TTL_PREVIEW:
        preview_ttl(&c);
        break;
    case LAPSE__REQUEST__BODY_REPLICATE:
        replserve_handle(&c);
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
    call_done(&c);
}

int handlers_batchable(void *arg, const Lapse__Request *req)
{
    (void)arg;
    return req->body_case == LAPSE__REQUEST__BODY_PUT_ITEM ||
           req->body_case == LAPSE__REQUEST__BODY_DELETE_ITEM;
}

void handlers_serve_many(void *arg, const Lapse__Request *const *reqs, Lapse__Response **resps,
                         arena **as, const int64_t *deadlines, size_t n)
{
    /* One coalesced frame's calls, so at most RPC_MAX_COALESCED: no
     * allocation per frame. */
    request_ctx cs[RPC_MAX_COALESCED];
    if (n > RPC_MAX_COALESCED) {
        for (size_t i = 0; i < n; i++) {
            handlers_serve(arg, reqs[i], resps[i], as[i], deadlines[i]);
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        cs[i] = (request_ctx){.ns = arg,
                              .req = reqs[i],
                              .resp = resps[i],
                              .a = as[i],
                              .deadline_mono_ms = deadlines[i]};
    }
    writes_many(cs, n);
    for (size_t i = 0; i < n; i++) {
        call_done(&cs[i]);
    }
}
