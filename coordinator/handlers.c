/* handlers.c: the coordinator's RPC calls. Contract in handlers.h. */
#include "handlers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../common/schema.h"
#include "../common/token.h"
#include "../rpc/wire.h"
#include "ddl.h"
#include "leader.h"
#include "membership.h"
#include "mover.h"
#include "replicas.h"
#include "replstatus.h"
#include "server.h"
#include "streamcalls.h"
#include "ttlcalls.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* A protobuf-c message of type T, initialized, from arena a (NULL on OOM). */
#define MSG_NEW(a, T, INIT) ((T *)msg_new((a), &(T)INIT, sizeof(T)))

static void *msg_new(arena *a, const void *init, size_t size)
{
    void *m = arena_alloc(a, size);
    if (m != NULL) {
        memcpy(m, init, size);
    }
    return m;
}

static void oom(Lapse__Response *resp, arena *a)
{
    rpc_set_error(resp, a, LAPSE_ENOMEM, "out of memory");
}

/* ------------------------------------------------------------------------ */
/* Membership calls                                                         */
/* ------------------------------------------------------------------------ */

static void do_register(server *s, const Lapse__RegisterNodeRequest *r, Lapse__Response *resp,
                        arena *a)
{
    char err[512] = "";
    int rv =
        membership_register(s, r->node_id, r->address, r->incarnation, r->zone, err, sizeof(err));
    if (rv != 0) {
        rpc_set_error(resp, a, rv, "%s", err);
        return;
    }
    Lapse__RegisterNodeResponse *m =
        MSG_NEW(a, Lapse__RegisterNodeResponse, LAPSE__REGISTER_NODE_RESPONSE__INIT);
    if (m == NULL) {
        oom(resp, a);
        return;
    }
    pthread_mutex_lock(&s->lock);
    m->map = wire_pmap_to_pb(a, s->pm);
    resp->pmap_version = s->pm->version;
    pthread_mutex_unlock(&s->lock);
    if (m->map == NULL) {
        oom(resp, a);
        return;
    }
    resp->body_case = LAPSE__RESPONSE__BODY_REGISTER_NODE;
    resp->register_node = m;
}

static void do_heartbeat(server *s, const Lapse__HeartbeatRequest *r, Lapse__Response *resp,
                         arena *a)
{
    int64_t now_wall_ms = clock_wall_now().ms; /* one snapshot for skew and reply */
    char err[512] = "";
    int rv = membership_heartbeat(s, r->node_id, r->pmap_version, r->clock_ms, now_wall_ms, err,
                                  sizeof(err));
    if (rv != 0) {
        rpc_set_error(resp, a, rv, "%s", err);
        return;
    }
    ttlcalls_record_heartbeat(s, r);
    replstatus_record(s, r->node_id, r->replica_lag, r->n_replica_lag);
    replstatus_record_filling(s, r->node_id, r->filling_tables, r->n_filling_tables,
                              r->filled_version);
    Lapse__HeartbeatResponse *m =
        MSG_NEW(a, Lapse__HeartbeatResponse, LAPSE__HEARTBEAT_RESPONSE__INIT);
    if (m == NULL) {
        oom(resp, a);
        return;
    }
    pthread_mutex_lock(&s->lock);
    m->pmap_version = s->pm->version;
    pthread_mutex_unlock(&s->lock);
    m->clock_ms = now_wall_ms;
    m->clock_trusted = 1; /* the reference the nodes check against */
    resp->pmap_version = m->pmap_version;
    resp->body_case = LAPSE__RESPONSE__BODY_HEARTBEAT;
    resp->heartbeat = m;
}

/* ------------------------------------------------------------------------ */
/* Table calls that change the map                                          */
/* ------------------------------------------------------------------------ */

/* CreateTable's defaults for the indexes and the stream (docs/coordinator.md):
 * index ids 1.. in declaration order, LSIs then GSIs (any sent are ignored);
 * a GSI without a partition count gets the table's; a stream without a
 * retention keeps 24 hours (TTL deletes are in it unless excluded, the
 * wire's default). REQUIRES: t->partitions set. */
static void index_defaults(table_schema *t)
{
    uint32_t id = 1;
    for (uint32_t i = 0; i < t->nlsi && i < SCHEMA_MAX_LSI; i++) {
        t->lsi[i].id = id++;
    }
    for (uint32_t i = 0; i < t->ngsi && i < SCHEMA_MAX_GSI; i++) {
        t->gsi[i].id = id++;
        if (t->gsi[i].partitions == 0) {
            t->gsi[i].partitions = t->partitions;
        }
    }
    t->stream.generation = 0; /* UpdateStream's to count (streamcalls.h) */
    t->stream.since_ms = 0;
    if (t->stream.enabled && t->stream.retention_hours == 0) {
        t->stream.retention_hours = SCHEMA_DEFAULT_STREAM_RETENTION_HOURS;
    }
}

/* The nodes pm holds UP. */
static uint32_t up_nodes(const pmap *pm)
{
    uint32_t up = 0;
    for (size_t i = 0; i < pm->nnodes; i++) {
        up += pm->nodes[i].state == PMAP_NODE_UP;
    }
    return up;
}

/* The table a CreateTable asks for, in *ts: its schema with the defaults
 * (partitions, index projections) filled in, no id, TTL or creation time
 * yet, validated. 0, or the error set on resp. */
static int requested_schema(const Lapse__CreateTableRequest *r, table_schema *ts,
                            Lapse__Response *resp, arena *a)
{
    char err[512] = "";
    if (r->schema == NULL) {
        rpc_set_error(resp, a, LAPSE_EINVAL, "missing schema");
        return LAPSE_EINVAL;
    }
    Lapse__TableSchema pb = *r->schema; /* shallow copy: defaults go in here */
    pb.id = 0;
    if (pb.partitions == 0) {
        pb.partitions = SCHEMA_DEFAULT_PARTITIONS;
    }
    pb.ttl = NULL;     /* TTL is set by UpdateTimeToLive only, as in DynamoDB */
    pb.created_ms = 0; /* the coordinator's, set under the lock */
    memset(ts, 0, sizeof(*ts));
    int rv = wire_schema_from_pb(&pb, ts, err, sizeof(err));
    if (rv == 0) {
        index_defaults(ts);
        rv = schema_validate(ts, err, sizeof(err));
    }
    if (rv != 0) {
        rpc_set_error(resp, a, rv, "%s", err);
    }
    return rv;
}

/* Adds ts to x->next, placing its partitions on the UP nodes; a table that
 * names no replication gets the cluster's default, capped at the nodes up
 * now. 0, or the error set on resp. */
static int place_table(ddl_txn *x, table_schema *ts, Lapse__Response *resp, arena *a)
{
    const uint32_t up = up_nodes(x->next);
    const unsigned dflt = x->s->default_replication;
    if (ts->replication == 0 && dflt > 1) {
        ts->replication = up < dflt ? (up > 0 ? up : 1) : dflt;
    }
    int rv = pmap_add_table(x->next, ts);
    if (rv == LAPSE_EUNAVAILABLE && up == 0) {
        rpc_set_error(resp, a, rv, "no node is up");
    } else if (rv == LAPSE_EUNAVAILABLE) {
        rpc_set_error(resp, a, rv, "replication %u needs %u nodes up; %u %s up",
                      (unsigned)schema_replication(ts), (unsigned)schema_replication(ts),
                      (unsigned)up, up == 1 ? "is" : "are");
    } else if (rv != 0) {
        rpc_set_error(resp, a, rv, "cannot add table %s: %s", ts->name, lapse_strerror(rv));
    }
    return rv;
}

static void do_create_table(server *s, const Lapse__CreateTableRequest *r, Lapse__Response *resp,
                            arena *a)
{
    table_schema ts;
    if (requested_schema(r, &ts, resp, a) != 0) {
        return;
    }
    Lapse__CreateTableResponse *m =
        MSG_NEW(a, Lapse__CreateTableResponse, LAPSE__CREATE_TABLE_RESPONSE__INIT);
    if (m == NULL) {
        oom(resp, a);
        return;
    }
    ddl_txn x;
    ddl_begin(&x, s, resp);
    if (pmap_table_find(s->pm, ts.name) != NULL) {
        rpc_set_error(resp, a, LAPSE_EEXISTS, "table %s already exists", ts.name);
        goto unlock;
    }
    if (s->next_table_id == UINT32_MAX) {
        rpc_set_error(resp, a, LAPSE_ESTATE, "table ids are exhausted");
        goto unlock;
    }
    ts.id = s->next_table_id;
    ts.created_ms = clock_wall_now().ms;
    if (ddl_dup(&x, resp, a) != 0 || place_table(&x, &ts, resp, a) != 0 ||
        ddl_commit(&x, ts.id + 1, resp, a) != 0) {
        goto unlock;
    }
    m->table = wire_table_to_pb(a, pmap_table_find(s->pm, ts.name));
    if (m->table == NULL) {
        oom(resp, a); /* created and durable; a retry answers EEXISTS */
    } else {
        resp->body_case = LAPSE__RESPONSE__BODY_CREATE_TABLE;
        resp->create_table = m;
    }
    log_info("created table %s (id %u, %u partitions over %zu UP nodes, %u LSIs, %u GSIs, "
             "stream %s); map version %llu",
             ts.name, ts.id, ts.partitions, x.plan.n, ts.nlsi, ts.ngsi,
             ts.stream.enabled ? "on" : "off", (unsigned long long)s->pm->version);
unlock:
    ddl_push(&x, ttlcalls_record_push_reply);
    ddl_end(&x);
}

static void do_delete_table(server *s, const Lapse__DeleteTableRequest *r, Lapse__Response *resp,
                            arena *a)
{
    const char *name = r->table != NULL ? r->table : "";
    Lapse__DeleteTableResponse *m =
        MSG_NEW(a, Lapse__DeleteTableResponse, LAPSE__DELETE_TABLE_RESPONSE__INIT);
    if (m == NULL) {
        oom(resp, a);
        return;
    }
    ddl_txn x;
    ddl_begin(&x, s, resp);
    const pmap_table *t = ddl_find(&x, name, resp, a);
    if (t == NULL) {
        goto unlock;
    }
    uint32_t table_id = t->schema.id;
    if (ddl_dup(&x, resp, a) != 0) {
        goto unlock;
    }
    pmap_remove_table(x.next, name);
    if (ddl_commit(&x, s->next_table_id, resp, a) != 0) {
        goto unlock;
    }
    ttlprop_forget_table(&s->ttl, table_id);
    resp->body_case = LAPSE__RESPONSE__BODY_DELETE_TABLE;
    resp->delete_table = m;
    log_info("deleted table %s; map version %llu", name, (unsigned long long)s->pm->version);
unlock:
    ddl_push(&x, ttlcalls_record_push_reply);
    ddl_end(&x);
}

/* ------------------------------------------------------------------------ */
/* Read-only calls                                                          */
/* ------------------------------------------------------------------------ */

static void do_describe_table(server *s, const Lapse__DescribeTableRequest *r,
                              Lapse__Response *resp, arena *a)
{
    const char *name = r->table != NULL ? r->table : "";
    Lapse__DescribeTableResponse *m =
        MSG_NEW(a, Lapse__DescribeTableResponse, LAPSE__DESCRIBE_TABLE_RESPONSE__INIT);
    if (m == NULL) {
        oom(resp, a);
        return;
    }
    pthread_mutex_lock(&s->lock);
    resp->pmap_version = s->pm->version;
    const pmap_table *t = pmap_table_find(s->pm, name);
    int failed = 0;
    if (t != NULL) {
        m->table = wire_table_to_pb(a, t);
        failed = replstatus_lag_pb(s, t->schema.id, a, &m->replica_lag, &m->n_replica_lag) != 0;
    }
    pthread_mutex_unlock(&s->lock);
    if (t == NULL) {
        rpc_set_error(resp, a, LAPSE_ENOTFOUND, "table %s does not exist", name);
    } else if (m->table == NULL || failed) {
        oom(resp, a);
    } else {
        resp->body_case = LAPSE__RESPONSE__BODY_DESCRIBE_TABLE;
        resp->describe_table = m;
    }
}

static int cmp_names(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

static void do_list_tables(server *s, Lapse__Response *resp, arena *a)
{
    Lapse__ListTablesResponse *m =
        MSG_NEW(a, Lapse__ListTablesResponse, LAPSE__LIST_TABLES_RESPONSE__INIT);
    if (m == NULL) {
        oom(resp, a);
        return;
    }
    int failed = 0;
    pthread_mutex_lock(&s->lock);
    resp->pmap_version = s->pm->version;
    size_t n = s->pm->ntables;
    m->names = arena_alloc(a, (n + 1) * sizeof(*m->names));
    failed = m->names == NULL;
    for (size_t i = 0; !failed && i < n; i++) {
        failed = (m->names[i] = arena_strdup(a, s->pm->tables[i].schema.name)) == NULL;
    }
    pthread_mutex_unlock(&s->lock);
    if (failed) {
        oom(resp, a);
        return;
    }
    qsort(m->names, n, sizeof(*m->names), cmp_names);
    m->n_names = n;
    resp->body_case = LAPSE__RESPONSE__BODY_LIST_TABLES;
    resp->list_tables = m;
}

static void do_get_partition_map(server *s, Lapse__Response *resp, arena *a)
{
    Lapse__GetPartitionMapResponse *m =
        MSG_NEW(a, Lapse__GetPartitionMapResponse, LAPSE__GET_PARTITION_MAP_RESPONSE__INIT);
    if (m == NULL) {
        oom(resp, a);
        return;
    }
    pthread_mutex_lock(&s->lock);
    resp->pmap_version = s->pm->version;
    m->map = wire_pmap_to_pb(a, s->pm);
    pthread_mutex_unlock(&s->lock);
    if (m->map == NULL) {
        oom(resp, a);
        return;
    }
    resp->body_case = LAPSE__RESPONSE__BODY_GET_PARTITION_MAP;
    resp->get_partition_map = m;
}

/* Fills one NodeStatus. REQUIRES: s->lock held. Returns NULL on OOM. */
static Lapse__NodeStatus *node_status(server *s, const pmap_node *n, int64_t now_mono_ms, arena *a)
{
    Lapse__NodeStatus *ns = MSG_NEW(a, Lapse__NodeStatus, LAPSE__NODE_STATUS__INIT);
    if (ns == NULL || (ns->address = arena_strdup(a, n->address)) == NULL) {
        return NULL;
    }
    ns->id = n->id;
    ns->state =
        n->state == PMAP_NODE_UP ? LAPSE__NODE_STATE__NODE_UP : LAPSE__NODE_STATE__NODE_DOWN;
    ns->partitions = (uint32_t)pmap_partitions_owned(s->pm, n->id);
    ns->gsi_partitions = (uint32_t)pmap_gsi_partitions_owned(s->pm, n->id);
    ns->stream_shards = (uint32_t)pmap_stream_shards_hosted(s->pm, n->id);
    ns->last_heartbeat_age_ms = -1;
    const node_live *l = server_live(s, n->id, 0);
    if (l != NULL) {
        if (l->last_heartbeat_mono_ms >= 0) {
            ns->last_heartbeat_age_ms = now_mono_ms - l->last_heartbeat_mono_ms;
        }
        ns->pmap_version = l->pmap_version;
        ns->clock_skew_ms = l->clock_skew_ms;
        ns->ttl_paused_for_clock = l->ttl_paused_for_clock != 0;
    }
    return ns;
}

static void do_cluster_status(server *s, Lapse__Response *resp, arena *a)
{
    Lapse__ClusterStatusResponse *m =
        MSG_NEW(a, Lapse__ClusterStatusResponse, LAPSE__CLUSTER_STATUS_RESPONSE__INIT);
    if (m == NULL) {
        oom(resp, a);
        return;
    }
    int64_t now_mono_ms = clock_mono_now().ms;
    int failed = 0;
    pthread_mutex_lock(&s->lock);
    resp->pmap_version = s->pm->version;
    m->pmap_version = s->pm->version;
    m->tables = (uint32_t)s->pm->ntables;
    size_t n = s->pm->nnodes;
    m->nodes = arena_alloc(a, (n + 1) * sizeof(*m->nodes));
    failed = m->nodes == NULL;
    for (size_t i = 0; !failed && i < n; i++) {
        failed = (m->nodes[i] = node_status(s, &s->pm->nodes[i], now_mono_ms, a)) == NULL;
    }
    failed = failed || (m->map = wire_pmap_to_pb(a, s->pm)) == NULL ||
             replstatus_lag_pb(s, 0, a, &m->replica_lag, &m->n_replica_lag) != 0;
    pthread_mutex_unlock(&s->lock);
    if (failed) {
        oom(resp, a);
        return;
    }
    m->n_nodes = n;
    resp->body_case = LAPSE__RESPONSE__BODY_CLUSTER_STATUS;
    resp->cluster_status = m;
}

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                 */
/* ------------------------------------------------------------------------ */

/* Admin calls (CreateTable, DeleteTable, UpdateTimeToLive, UpdateStream) need the token
 * when the coordinator has one. Returns 1 when the call may go on, else 0
 * with EPERM set in resp and a log line naming the call and the table (never
 * the token). */
static int admin_allowed(server *s, const Lapse__Request *req, const char *call, const char *table,
                         Lapse__Response *resp, arena *a)
{
    if (s->admin_token == NULL) {
        return 1;
    }
    const char *got = req->admin_token != NULL ? req->admin_token : "";
    if (token_equal(s->admin_token, s->admin_token_len, got)) {
        return 1;
    }
    log_warn("refused %s on table %.255s: admin token %s", call, table != NULL ? table : "",
             got[0] == '\0' ? "missing" : "wrong");
    rpc_set_error(resp, a, LAPSE_EPERM, "admin token missing or wrong");
    return 0;
}

/* The name in a CreateTable's schema, for admin_allowed's log (NULL: none). */
static const char *schema_name(const Lapse__TableSchema *ts)
{
    return ts != NULL ? ts->name : NULL;
}

/* Whether a coordinator call of this kind must carry a body. The calls
 * that read nothing from theirs are answered without one, as are the
 * kinds the coordinator does not serve (they get "not a coordinator
 * call"). */
static int needs_body(Lapse__Request__BodyCase c)
{
    switch (c) {
    case LAPSE__REQUEST__BODY_REGISTER_NODE:
    case LAPSE__REQUEST__BODY_HEARTBEAT:
    case LAPSE__REQUEST__BODY_REPLICA_JOIN:
    case LAPSE__REQUEST__BODY_REPLICA_SHRINK:
    case LAPSE__REQUEST__BODY_CREATE_TABLE:
    case LAPSE__REQUEST__BODY_DELETE_TABLE:
    case LAPSE__REQUEST__BODY_UPDATE_TTL:
    case LAPSE__REQUEST__BODY_UPDATE_STREAM:
    case LAPSE__REQUEST__BODY_NODE_DRAIN:
    case LAPSE__REQUEST__BODY_NODE_REMOVE:
    case LAPSE__REQUEST__BODY_DESCRIBE_TTL:
    case LAPSE__REQUEST__BODY_DESCRIBE_TABLE:
    case LAPSE__REQUEST__BODY_REBALANCE:
        return 1;
    default:
        return 0;
    }
}

/* The calls nodes make: joining, heartbeats and the in-sync set changes
 * their primaries ask for. Returns 1 when req was one (answered), else 0.
 * REQUIRES: req's body is there (needs_body). */
static int dispatch_node_call(server *s, const Lapse__Request *req, Lapse__Response *resp, arena *a)
{
    switch (req->body_case) {
    case LAPSE__REQUEST__BODY_REGISTER_NODE:
        do_register(s, req->register_node, resp, a);
        return 1;
    case LAPSE__REQUEST__BODY_HEARTBEAT:
        do_heartbeat(s, req->heartbeat, resp, a);
        return 1;
    case LAPSE__REQUEST__BODY_REPLICA_JOIN:
        replicas_join(s, req->replica_join, resp, a);
        return 1;
    case LAPSE__REQUEST__BODY_REPLICA_SHRINK:
        replicas_shrink(s, req->replica_shrink, resp, a);
        return 1;
    default:
        return 0;
    }
}

/* The admin calls, each answered only when admin_allowed: the table
 * changes and the node moves an operator asks for. Returns 1 when req was
 * one (answered), else 0. REQUIRES: req's body is there (needs_body). */
static int dispatch_admin_call(server *s, const Lapse__Request *req, Lapse__Response *resp,
                               arena *a)
{
    switch (req->body_case) {
    case LAPSE__REQUEST__BODY_CREATE_TABLE:
        if (admin_allowed(s, req, "CreateTable", schema_name(req->create_table->schema), resp, a)) {
            do_create_table(s, req->create_table, resp, a);
        }
        return 1;
    case LAPSE__REQUEST__BODY_DELETE_TABLE:
        if (admin_allowed(s, req, "DeleteTable", req->delete_table->table, resp, a)) {
            do_delete_table(s, req->delete_table, resp, a);
        }
        return 1;
    case LAPSE__REQUEST__BODY_UPDATE_TTL:
        if (admin_allowed(s, req, "UpdateTimeToLive", req->update_ttl->table, resp, a)) {
            ttlcalls_update(s, req->update_ttl, resp, a);
        }
        return 1;
    case LAPSE__REQUEST__BODY_UPDATE_STREAM:
        if (admin_allowed(s, req, "UpdateStream", req->update_stream->table, resp, a)) {
            streamcalls_update(s, req->update_stream, resp, a);
        }
        return 1;
    case LAPSE__REQUEST__BODY_NODE_DRAIN:
        if (admin_allowed(s, req, "NodeDrain", NULL, resp, a)) {
            mover_drain(s, req->node_drain, resp, a);
        }
        return 1;
    case LAPSE__REQUEST__BODY_NODE_REMOVE:
        if (admin_allowed(s, req, "NodeRemove", NULL, resp, a)) {
            mover_remove(s, req->node_remove, resp, a);
        }
        return 1;
    default:
        return 0;
    }
}

/* The calls anyone may make: the descriptions and listings, and asking for
 * a rebalance. Returns 1 when req was one (answered), else 0. REQUIRES:
 * req's body is there where needs_body says it must be. */
static int dispatch_open_call(server *s, const Lapse__Request *req, Lapse__Response *resp, arena *a)
{
    switch (req->body_case) {
    case LAPSE__REQUEST__BODY_DESCRIBE_TTL:
        ttlcalls_describe(s, req->describe_ttl, resp, a);
        return 1;
    case LAPSE__REQUEST__BODY_DESCRIBE_TABLE:
        do_describe_table(s, req->describe_table, resp, a);
        return 1;
    case LAPSE__REQUEST__BODY_LIST_TABLES:
        do_list_tables(s, resp, a);
        return 1;
    case LAPSE__REQUEST__BODY_GET_PARTITION_MAP:
        do_get_partition_map(s, resp, a);
        return 1;
    case LAPSE__REQUEST__BODY_CLUSTER_STATUS:
        do_cluster_status(s, resp, a);
        return 1;
    case LAPSE__REQUEST__BODY_REBALANCE:
        mover_rebalance(s, req->rebalance, resp, a);
        return 1;
    default:
        return 0;
    }
}

void handlers_dispatch(void *arg, const Lapse__Request *req, Lapse__Response *resp, arena *a,
                       int64_t deadline_mono_ms)
{
    server *s = arg;
    if (!server_leads(s)) {
        leader_forward(s, req, resp, a, deadline_mono_ms);
        return;
    }
    /* Every call from here is short, or bounded by the push timeout. */

    pthread_mutex_lock(&s->lock);
    resp->pmap_version = s->pm->version; /* invariant 1, for early failures */
    pthread_mutex_unlock(&s->lock);

    if (req->body_case == LAPSE__REQUEST__BODY__NOT_SET) {
        rpc_set_error(resp, a, LAPSE_EPROTO, "empty request");
        return;
    }
    /* A oneof message body is never NULL after protobuf-c decoded it; the
     * check keeps a bug elsewhere from becoming a crash here. The oneof's
     * members are one union of pointers, so any member tells (push.c's
     * broadcast copies the body the same way). */
    if (needs_body(req->body_case) && req->register_node == NULL) {
        rpc_set_error(resp, a, LAPSE_EPROTO, "request body missing");
        return;
    }
    if (!dispatch_node_call(s, req, resp, a) && !dispatch_admin_call(s, req, resp, a) &&
        !dispatch_open_call(s, req, resp, a)) {
        rpc_set_error(resp, a, LAPSE_EINVAL, "not a coordinator call");
    }
}
