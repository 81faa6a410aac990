/*
 * admin.c: table management and cluster status through the coordinator, and
 * their JSON forms (DynamoDB-like names, built with jansson):
 *
 *   describe: {"Table":{"TableName","TableId","CreatedAtMs"?,"KeySchema","AttributeDefinitions",
 *              "PartitionCount","PartitionsPerNode":{"1":22,...},"HideExpired",
 *              "TimeToLive":{...},"LocalSecondaryIndexes"?,"GlobalSecondaryIndexes"?,
 *              "StreamSpecification","StreamShards"?}}
 *              (TimeToLive: ttlcfg_config_json; the rest: indexcfg_describe)
 *   list:     {"TableNames":[...]}
 *   drain:    {"NodeId","Draining","BaseCopiesLeft","DerivedCopiesLeft","Moves","OtherCopies",
 *              "LostCopies","PartitionMapVersion"}
 *              and, for a table of several copies, "ReplicaSets" (replica_sets_json)
 *   remove:   {"NodeId","Removed","BaseCopiesLeft","DerivedCopiesLeft","Moves","OtherCopies",
 *              "LostCopies","PartitionMapVersion"}
 *   status:   {"PartitionMapVersion","Tables","Nodes":[{"NodeId","Address","State","Draining",
 *              "Removed","LastHeartbeatAgeMs","Partitions","GsiPartitions","StreamShards",
 *              "Replicas","Primaries","PartitionMapVersion","ClockSkewMs","Zone"?}],
 *              "UnderReplicated","PrimaryChanges",
 *              "ReplicaSets":[...every replicated table's, each naming its "Table"],
 *              "Moves":[{"Table","Partition","From","To","Step","Copy"?}] (moves_json),
 *                       and the GSI and stream copies' (derived_moves_json)}
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../placement/failover.h"
#include "../rpc/wire.h"
#include "client.h"
#include "indexcfg.h"
#include "ttlcfg.h"

/* ------------------------------------------------------------------------ */
/* JSON helpers                                                              */
/* ------------------------------------------------------------------------ */

/* Formats doc compactly and drops the reference. */
static int dump(json_t *doc, char **json_out, lapse_error *err)
{
    if (doc == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    *json_out = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(doc);
    if (*json_out == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    return client_ok(err);
}

static int has_key(const Lapse__KeyDef *k)
{
    return k != NULL && k->name != NULL && k->name[0] != '\0' &&
           k->type != LAPSE__KEY_TYPE__KEY_NONE;
}

/* {"Table":{...}} from a TableMap. NULL on OOM or a map without schema. */
static json_t *table_json(const Lapse__TableMap *tm)
{
    const Lapse__TableSchema *s = tm->schema;
    if (s == NULL || s->partition_key == NULL) {
        return NULL;
    }
    json_t *keys = json_array(), *defs = json_array(), *per_node = json_object();
    json_t *t = json_object(), *doc = json_object();
    const Lapse__KeyDef *kd[2] = {s->partition_key, s->sort_key};
    const char *role[2] = {"HASH", "RANGE"};
    for (int i = 0; i < 2; i++) {
        if (!has_key(kd[i])) {
            continue;
        }
        json_array_append_new(
            keys, json_pack("{s:s,s:s}", "AttributeName", kd[i]->name, "KeyType", role[i]));
        json_array_append_new(defs,
                              json_pack("{s:s,s:s}", "AttributeName", kd[i]->name, "AttributeType",
                                        indexcfg_key_type_name(kd[i]->type)));
    }
    for (size_t i = 0; i < tm->n_partitions; i++) {
        const Lapse__PartitionReplicas *r = tm->partitions[i];
        if (r == NULL || r->n_node_ids == 0) {
            continue;
        }
        char id[16];
        snprintf(id, sizeof id, "%u", (unsigned)r->node_ids[0]);
        json_t *n = json_object_get(per_node, id);
        json_object_set_new(per_node, id, json_integer(n ? json_integer_value(n) + 1 : 1));
    }
    json_object_set_new(t, "TableName", json_string(s->name));
    json_object_set_new(t, "TableId", json_integer(s->id));
    if (s->created_ms > 0) {
        json_object_set_new(t, "CreatedAtMs", json_integer((json_int_t)s->created_ms));
    }
    json_object_set_new(t, "KeySchema", keys);
    json_object_set_new(t, "AttributeDefinitions", defs);
    json_object_set_new(t, "PartitionCount", json_integer(s->partitions));
    json_object_set_new(t, "PartitionsPerNode", per_node);
    json_object_set_new(t, "HideExpired", json_boolean(s->hide_expired));
    json_object_set_new(t, "Replication", json_integer(s->replication > 1 ? s->replication : 1));
    json_t *ttl = ttlcfg_config_json(s->ttl);
    if (ttl == NULL || json_object_set_new(t, "TimeToLive", ttl) != 0 ||
        indexcfg_describe(t, tm) != 0) {
        json_decref(t);
        json_decref(doc);
        return NULL;
    }
    json_object_set_new(doc, "Table", t);
    return doc;
}

/* The lag report of follower node of partition part of table_id, or NULL. */
static const Lapse__ReplicaLag *lag_of(Lapse__ReplicaLag *const *lags, size_t n, uint32_t table_id,
                                       uint32_t part, uint32_t node)
{
    for (size_t i = 0; i < n; i++) {
        if (lags[i]->table_id == table_id && lags[i]->partition == part && lags[i]->node == node) {
            return lags[i];
        }
    }
    return NULL;
}

/* A snapshot under way to a follower, from its primary's report:
 * {"BytesSent","KeysSent","Seconds","BytesTotal"?,"EtaSeconds"?} (the
 * total is the primary's estimate of the partition's items; the ETA
 * assumes the rate so far, and reads 0 once the items are sent, while the
 * index, outbox and counters follow). */
static json_t *copy_json(const Lapse__ReplicaLag *l)
{
    json_t *o = json_pack("{s:I,s:I,s:f}", "BytesSent", (json_int_t)l->copy_bytes, "KeysSent",
                          (json_int_t)l->copy_keys, "Seconds", (double)l->copy_ms / 1000.0);
    if (o != NULL && l->copy_bytes_total > 0) {
        json_object_set_new(o, "BytesTotal", json_integer((json_int_t)l->copy_bytes_total));
        if (l->copy_bytes > 0) {
            double left = l->copy_bytes >= l->copy_bytes_total
                              ? 0.0
                              : (double)(l->copy_bytes_total - l->copy_bytes);
            double eta = (double)l->copy_ms / 1000.0 * left / (double)l->copy_bytes;
            json_object_set_new(o, "EtaSeconds", json_real((double)(int64_t)(eta * 10) / 10.0));
        }
    }
    return o;
}

/* Appends to arr the move of list r (of table tb; index: the GSI's name,
 * NULL for stream shard part), if it has one. 0, or -1 on OOM. */
static int derived_move_json(json_t *arr, const pmap *pm, const pmap_table *tb, const char *index,
                             uint32_t part, const pmap_replicas *r)
{
    json_t *from = json_array(), *to = json_array();
    for (uint32_t i = 0; i < r->n; i++) {
        uint32_t id = r->ids[i];
        if (id == r->joining) {
            json_array_append_new(to, json_integer(id));
        } else if (id == r->leaving || pmap_node_leaving(pm, id)) {
            json_array_append_new(from, json_integer(id));
        }
    }
    if (json_array_size(from) == 0 && json_array_size(to) == 0) {
        json_decref(from);
        json_decref(to);
        return 0;
    }
    json_t *o = json_pack("{s:s,s:s,s:I,s:o,s:o,s:s}", "Table", tb->schema.name, "Kind",
                          index != NULL ? "gsi" : "stream", "Partition", (json_int_t)part, "From",
                          from, "To", to, "Step", r->joining != 0 ? "filling" : "adding");
    if (o != NULL && index != NULL) {
        json_object_set_new(o, "Index", json_string(index));
    }
    return o == NULL || json_array_append_new(arr, o) != 0 ? -1 : 0;
}

/* Appends to arr the moves of pm's GSI partition and stream shard copies:
 * {"Table","Kind":"gsi"|"stream","Index"?,"Partition","From":[ids],"To":[ids],
 * "Step"}. Step: "filling" while the new copy is filled (To names it),
 * "adding" before one is added. 0, or -1 on OOM. */
static int derived_moves_json(json_t *arr, const pmap *pm)
{
    for (size_t t = 0; t < pm->ntables; t++) {
        const pmap_table *tb = &pm->tables[t];
        for (uint32_t g = 0; g < tb->schema.ngsi; g++) {
            for (uint32_t q = 0; q < tb->schema.gsi[g].partitions; q++) {
                if (derived_move_json(arr, pm, tb, tb->schema.gsi[g].name, q,
                                      pmap_gsi_part(tb, g, q)) != 0) {
                    return -1;
                }
            }
        }
        for (uint32_t p = 0; tb->stream_shards != NULL && p < tb->schema.partitions; p++) {
            if (derived_move_json(arr, pm, tb, NULL, p, pmap_stream_shard(tb, p)) != 0) {
                return -1;
            }
        }
    }
    return 0;
}

/* Appends to arr one object per set of pm being moved (a member leaving: the
 * rebalancer's, or on a draining or removed node): {"Table","Partition","From":[ids],
 * "To":[ids],"Step","LagRecords"?,"Copy"?}. Step: "copying" while a new
 * copy is out of sync (LagRecords: how far its log is behind; Copy: its
 * snapshot's progress; each once its primary reports one), "adding" while
 * the copies staying are fewer than the table keeps, "handing-over" while
 * a leaving copy still leads, else "removing". 0, or -1 on OOM. */
static int moves_json(json_t *arr, const pmap *pm, Lapse__ReplicaLag *const *lags, size_t nlags)
{
    for (size_t t = 0; t < pm->ntables; t++) {
        const pmap_table *tb = &pm->tables[t];
        for (uint32_t p = 0; tb->schema.replication >= 2 && p < tb->schema.partitions; p++) {
            const pmap_replicas *r = &tb->parts[p];
            json_t *from = json_array(), *to = json_array(), *copy = NULL;
            int copying = 0;
            uint32_t staying = 0;
            json_int_t behind = -1;
            for (uint32_t i = 0; i < r->n; i++) {
                uint32_t id = r->ids[i];
                if (id == r->leaving || pmap_node_leaving(pm, id)) {
                    json_array_append_new(from, json_integer(id));
                } else if (staying++, !pmap_in_sync(r, i)) {
                    json_array_append_new(to, json_integer(id));
                    copying = 1;
                    const Lapse__ReplicaLag *l = lag_of(lags, nlags, tb->schema.id, p, id);
                    if (copy == NULL && l != NULL && l->copy_ms > 0) {
                        copy = copy_json(l);
                    }
                    if (l != NULL && l->known && (json_int_t)l->lag_records > behind) {
                        behind = (json_int_t)l->lag_records;
                    }
                }
            }
            if (json_array_size(from) == 0) {
                json_decref(from);
                json_decref(to);
                json_decref(copy);
                continue;
            }
            int primary_leaves = r->ids[0] == r->leaving || pmap_node_leaving(pm, r->ids[0]);
            const char *step = copying                            ? "copying"
                               : staying < tb->schema.replication ? "adding"
                               : primary_leaves                   ? "handing-over"
                                                                  : "removing";
            json_t *o = json_pack("{s:s,s:I,s:o,s:o,s:s}", "Table", tb->schema.name, "Partition",
                                  (json_int_t)p, "From", from, "To", to, "Step", step);
            if (o != NULL && behind >= 0) {
                json_object_set_new(o, "LagRecords", json_integer(behind));
            }
            if (o != NULL && copy != NULL) {
                json_object_set_new(o, "Copy", copy);
            } else {
                json_decref(copy);
            }
            if (o == NULL || json_array_append_new(arr, o) != 0) {
                return -1;
            }
        }
    }
    return 0;
}

/* Appends one object per set of parts[0..n) (the base partitions of the
 * table, one of several copies) to arr:
 * {"Table"?,"Partition","Epoch","Primary","InSync":[ids],"Followers":[{"NodeId",
 * "InSync","LagRecords"?}]} (LagRecords: the primary's last report, left out
 * when it has none or has not heard from the follower). with_table: name
 * the table in each. Adds the sets with a member out of sync to *under. 0,
 * or -1 on OOM. */
static int replica_sets_json(json_t *arr, uint32_t table_id, const char *table,
                             const pmap_replicas *parts, uint32_t n, int with_table,
                             Lapse__ReplicaLag *const *lags, size_t nlags, uint64_t *under)
{
    for (uint32_t p = 0; p < n; p++) {
        const pmap_replicas *r = &parts[p];
        json_t *o = json_object(), *in_sync = json_array(), *followers = json_array();
        for (uint32_t i = 0; i < r->n; i++) {
            int yes = pmap_in_sync(r, i);
            if (yes) {
                json_array_append_new(in_sync, json_integer(r->ids[i]));
            }
            if (i == 0) {
                continue;
            }
            json_t *f = json_pack("{s:I,s:b}", "NodeId", (json_int_t)r->ids[i], "InSync", yes);
            const Lapse__ReplicaLag *l = lag_of(lags, nlags, table_id, p, r->ids[i]);
            if (f != NULL && l != NULL && l->known) {
                json_object_set_new(f, "LagRecords", json_integer((json_int_t)l->lag_records));
            }
            if (f != NULL && l != NULL && l->copy_ms > 0) {
                json_object_set_new(f, "Copy", copy_json(l));
            }
            json_array_append_new(followers, f);
        }
        if (with_table) {
            json_object_set_new(o, "Table", json_string(table));
        }
        json_object_set_new(o, "Partition", json_integer((json_int_t)p));
        json_object_set_new(o, "Epoch", json_integer((json_int_t)pmap_epoch(r)));
        json_object_set_new(o, "Primary", json_integer(r->ids[0]));
        json_object_set_new(o, "InSync", in_sync);
        json_object_set_new(o, "Followers", followers);
        if (json_array_append_new(arr, o) != 0) {
            return -1;
        }
        *under += pmap_in_sync_count(r) < r->n;
    }
    return 0;
}

/* describe-table's "ReplicaSets" of a table of several copies, added to
 * doc's "Table" (nothing for one copy). 0, LAPSE_EPROTO (a set that does not
 * decode) or LAPSE_ENOMEM, with err. */
static int describe_replica_sets(json_t *doc, const Lapse__DescribeTableResponse *d,
                                 lapse_error *err)
{
    const Lapse__TableMap *tm = d->table;
    if (tm->schema->replication < 2) {
        return 0;
    }
    pmap_replicas *parts = calloc(tm->n_partitions ? tm->n_partitions : 1, sizeof(*parts));
    json_t *sets = json_array();
    uint64_t under = 0;
    char why[192] = "";
    int rv = parts == NULL || sets == NULL ? LAPSE_ENOMEM : 0;
    for (size_t p = 0; rv == 0 && p < tm->n_partitions; p++) {
        rv = wire_replicas_from_pb(tm->partitions[p], &parts[p], why, sizeof(why)) != 0
                 ? LAPSE_EPROTO
                 : 0;
    }
    if (rv == 0 && (replica_sets_json(sets, tm->schema->id, tm->schema->name, parts,
                                      (uint32_t)tm->n_partitions, 0, d->replica_lag,
                                      d->n_replica_lag, &under) != 0 ||
                    json_object_set(json_object_get(doc, "Table"), "ReplicaSets", sets) != 0)) {
        rv = LAPSE_ENOMEM;
    }
    json_decref(sets);
    free(parts);
    if (rv == LAPSE_EPROTO) {
        return client_err(err, rv, "describe table: a replica set in the reply: %s", why);
    }
    return rv != 0 ? client_err(err, rv, "out of memory") : 0;
}

static json_t *table_json_checked(const Lapse__TableMap *tm, lapse_error *err, int *rv)
{
    json_t *doc = tm != NULL ? table_json(tm) : NULL;
    *rv = doc != NULL ? 0 : client_err(err, LAPSE_EPROTO, "reply carries no table description");
    return doc;
}

/* ------------------------------------------------------------------------ */
/* Tables                                                                    */
/* ------------------------------------------------------------------------ */

static int check_key_type(const char *what, const char *name, char t, lapse_error *err)
{
    if (name == NULL || name[0] == '\0') {
        return client_err(err, LAPSE_EINVAL, "%s: no attribute name", what);
    }
    if (indexcfg_key_type(t) == LAPSE__KEY_TYPE__KEY_NONE) {
        return client_err(err, LAPSE_EINVAL, "%s \"%s\": type must be S, N or B", what, name);
    }
    return 0;
}

/* Creates the table; the description JSON goes to *json_out when non-NULL. */
int lapse_create_table_json(lapse_client *c, const lapse_table_def *def, char **json_out,
                            lapse_error *err)
{
    Lapse__CreateTableRequest body = LAPSE__CREATE_TABLE_REQUEST__INIT;
    Lapse__TableSchema s = LAPSE__TABLE_SCHEMA__INIT;
    Lapse__KeyDef pk = LAPSE__KEY_DEF__INIT, sk = LAPSE__KEY_DEF__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    char msg[256] = "";
    arena a;
    int rv;

    if (json_out != NULL) {
        *json_out = NULL;
    }
    if (c == NULL || def == NULL || def->name == NULL) {
        return client_err(err, LAPSE_EINVAL, "create table: NULL argument");
    }
    if ((rv = schema_validate_table_name(def->name, msg, sizeof msg)) != 0) {
        return client_err(err, rv, "%s", msg);
    }
    if ((rv = check_key_type("partition key", def->partition_key, def->partition_key_type, err)) !=
            0 ||
        (def->sort_key != NULL &&
         (rv = check_key_type("sort key", def->sort_key, def->sort_key_type, err)) != 0)) {
        return rv;
    }
    unsigned parts = def->partitions ? def->partitions : SCHEMA_DEFAULT_PARTITIONS;
    if ((parts & (parts - 1)) != 0 || parts > SCHEMA_MAX_PARTITIONS) {
        return client_err(err, LAPSE_EINVAL, "partitions must be a power of two from 1 to %d",
                          SCHEMA_MAX_PARTITIONS);
    }
    s.name = (char *)def->name;
    pk.name = (char *)def->partition_key;
    pk.type = indexcfg_key_type(def->partition_key_type);
    s.partition_key = &pk;
    if (def->sort_key != NULL) {
        sk.name = (char *)def->sort_key;
        sk.type = indexcfg_key_type(def->sort_key_type);
        s.sort_key = &sk;
    }
    s.partitions = parts;
    s.hide_expired = def->hide_expired != 0;
    s.replication = def->replication;
    arena_init(&a);
    if ((rv = indexcfg_to_pb(&a, def, &s, err)) != 0) {
        arena_fini(&a);
        return rv;
    }
    body.schema = &s;
    req.body_case = LAPSE__REQUEST__BODY_CREATE_TABLE;
    req.create_table = &body;
    rv = client_call_coord(c, &req, 0, &resp, err);
    arena_fini(&a);
    if (rv != 0) {
        return rv;
    }
    /* The new table should be routable at once by this client. */
    client_refresh(c, client_timeout_ms(c), NULL);
    if (json_out != NULL) {
        const Lapse__TableMap *tm =
            resp->body_case == LAPSE__RESPONSE__BODY_CREATE_TABLE && resp->create_table != NULL
                ? resp->create_table->table
                : NULL;
        json_t *doc = table_json_checked(tm, err, &rv);
        if (rv == 0) {
            rv = dump(doc, json_out, err);
        }
    }
    rpc_response_free(resp);
    return rv;
}

int lapse_create_table(lapse_client *c, const lapse_table_def *def, lapse_error *err)
{
    return lapse_create_table_json(c, def, NULL, err);
}

int lapse_delete_table(lapse_client *c, const char *table, lapse_error *err)
{
    Lapse__DeleteTableRequest body = LAPSE__DELETE_TABLE_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    int rv;

    if (c == NULL || table == NULL) {
        return client_err(err, LAPSE_EINVAL, "delete table: NULL argument");
    }
    body.table = (char *)table;
    req.body_case = LAPSE__REQUEST__BODY_DELETE_TABLE;
    req.delete_table = &body;
    if ((rv = client_call_coord(c, &req, 0, &resp, err)) != 0) {
        return rv;
    }
    rpc_response_free(resp);
    client_refresh(c, client_timeout_ms(c), NULL);
    return client_ok(err);
}

int lapse_describe_table(lapse_client *c, const char *table, char **json_out, lapse_error *err)
{
    Lapse__DescribeTableRequest body = LAPSE__DESCRIBE_TABLE_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    int rv;

    if (json_out == NULL) {
        return client_err(err, LAPSE_EINVAL, "describe table: NULL argument");
    }
    *json_out = NULL;
    if (c == NULL || table == NULL) {
        return client_err(err, LAPSE_EINVAL, "describe table: NULL argument");
    }
    body.table = (char *)table;
    req.body_case = LAPSE__REQUEST__BODY_DESCRIBE_TABLE;
    req.describe_table = &body;
    if ((rv = client_call_coord(c, &req, 1, &resp, err)) != 0) {
        return rv;
    }
    const Lapse__DescribeTableResponse *d =
        resp->body_case == LAPSE__RESPONSE__BODY_DESCRIBE_TABLE ? resp->describe_table : NULL;
    const Lapse__TableMap *tm = d != NULL ? d->table : NULL;
    json_t *doc = table_json_checked(tm, err, &rv);
    if (rv == 0 && (rv = describe_replica_sets(doc, d, err)) != 0) {
        json_decref(doc);
    }
    rpc_response_free(resp);
    return rv != 0 ? rv : dump(doc, json_out, err);
}

int lapse_list_tables(lapse_client *c, char **json_out, lapse_error *err)
{
    Lapse__ListTablesRequest body = LAPSE__LIST_TABLES_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    int rv;

    if (c == NULL || json_out == NULL) {
        return client_err(err, LAPSE_EINVAL, "list tables: NULL argument");
    }
    *json_out = NULL;
    req.body_case = LAPSE__REQUEST__BODY_LIST_TABLES;
    req.list_tables = &body;
    if ((rv = client_call_coord(c, &req, 1, &resp, err)) != 0) {
        return rv;
    }
    if (resp->body_case != LAPSE__RESPONSE__BODY_LIST_TABLES || resp->list_tables == NULL) {
        rpc_response_free(resp);
        return client_err(err, LAPSE_EPROTO, "list tables: reply has no list_tables body");
    }
    json_t *names = json_array();
    for (size_t i = 0; i < resp->list_tables->n_names; i++) {
        json_array_append_new(names, json_string(resp->list_tables->names[i]));
    }
    rpc_response_free(resp);
    return dump(json_pack("{s:o}", "TableNames", names), json_out, err);
}

/* ------------------------------------------------------------------------ */
/* Cluster status                                                            */
/* ------------------------------------------------------------------------ */

int lapse_node_drain(lapse_client *c, uint32_t node_id, int stop, char **json_out, lapse_error *err)
{
    Lapse__NodeDrainRequest body = LAPSE__NODE_DRAIN_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    int rv;

    if (c == NULL || json_out == NULL) {
        return client_err(err, LAPSE_EINVAL, "node drain: NULL argument");
    }
    *json_out = NULL;
    body.node = node_id;
    body.stop = stop != 0;
    req.body_case = LAPSE__REQUEST__BODY_NODE_DRAIN;
    req.node_drain = &body;
    if ((rv = client_call_coord(c, &req, 0, &resp, err)) != 0) {
        return rv;
    }
    const Lapse__NodeDrainResponse *d = resp->node_drain;
    if (resp->body_case != LAPSE__RESPONSE__BODY_NODE_DRAIN || d == NULL) {
        rpc_response_free(resp);
        return client_err(err, LAPSE_EPROTO, "node drain: reply has no node_drain body");
    }
    json_t *doc = json_pack("{s:i,s:b,s:i,s:i,s:i,s:i,s:i,s:I}", "NodeId", (int)node_id, "Draining",
                            !stop, "BaseCopiesLeft", (int)d->base_copies_left, "DerivedCopiesLeft",
                            (int)d->derived_copies_left, "Moves", (int)d->moves, "OtherCopies",
                            (int)d->other_copies, "LostCopies", (int)d->lost_copies,
                            "PartitionMapVersion", (json_int_t)d->pmap_version);
    rpc_response_free(resp);
    return dump(doc, json_out, err);
}

int lapse_node_remove(lapse_client *c, uint32_t node_id, unsigned flags, char **json_out,
                      lapse_error *err)
{
    Lapse__NodeRemoveRequest body = LAPSE__NODE_REMOVE_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    int rv;

    if (c == NULL || json_out == NULL) {
        return client_err(err, LAPSE_EINVAL, "node remove: NULL argument");
    }
    *json_out = NULL;
    body.node = node_id;
    body.lose_data = (flags & LAPSE_REMOVE_LOSE_DATA) != 0;
    req.body_case = LAPSE__REQUEST__BODY_NODE_REMOVE;
    req.node_remove = &body;
    if ((rv = client_call_coord(c, &req, 0, &resp, err)) != 0) {
        return rv;
    }
    const Lapse__NodeRemoveResponse *d = resp->node_remove;
    if (resp->body_case != LAPSE__RESPONSE__BODY_NODE_REMOVE || d == NULL) {
        rpc_response_free(resp);
        return client_err(err, LAPSE_EPROTO, "node remove: reply has no node_remove body");
    }
    json_t *doc = json_pack("{s:i,s:b,s:i,s:i,s:i,s:i,s:i,s:I}", "NodeId", (int)node_id, "Removed",
                            1, "BaseCopiesLeft", (int)d->base_copies_left, "DerivedCopiesLeft",
                            (int)d->derived_copies_left, "Moves", (int)d->moves, "OtherCopies",
                            (int)d->other_copies, "LostCopies", (int)d->lost_copies,
                            "PartitionMapVersion", (json_int_t)d->pmap_version);
    rpc_response_free(resp);
    return dump(doc, json_out, err);
}

int lapse_rebalance_plan(lapse_client *c, char **json_out, lapse_error *err)
{
    Lapse__RebalanceRequest body = LAPSE__REBALANCE_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    int rv;

    if (c == NULL || json_out == NULL) {
        return client_err(err, LAPSE_EINVAL, "rebalance: NULL argument");
    }
    *json_out = NULL;
    body.dry_run = 1;
    req.body_case = LAPSE__REQUEST__BODY_REBALANCE;
    req.rebalance = &body;
    if ((rv = client_call_coord(c, &req, 1, &resp, err)) != 0) {
        return rv;
    }
    const Lapse__RebalanceResponse *rb = resp->rebalance;
    if (resp->body_case != LAPSE__RESPONSE__BODY_REBALANCE || rb == NULL) {
        rpc_response_free(resp);
        return client_err(err, LAPSE_EPROTO, "rebalance: reply has no rebalance body");
    }
    json_t *moves = json_array();
    pthread_mutex_lock(&c->mu); /* table names from the cached map; ids where it is older */
    for (size_t i = 0; moves != NULL && i < rb->n_moves; i++) {
        const Lapse__RebalanceMove *m = rb->moves[i];
        const pmap_table *t = c->map != NULL ? pmap_table_find_id(c->map, m->table_id) : NULL;
        const char *kind = m->handover ? "handover" : "move";
        json_t *o = t != NULL ? json_pack("{s:s,s:s,s:i,s:i,s:i}", "Kind", kind, "Table",
                                          t->schema.name, "Partition", (int)m->partition, "From",
                                          (int)m->from_node, "To", (int)m->to_node)
                              : json_pack("{s:s,s:i,s:i,s:i,s:i}", "Kind", kind, "TableId",
                                          (int)m->table_id, "Partition", (int)m->partition, "From",
                                          (int)m->from_node, "To", (int)m->to_node);
        if (o == NULL || json_array_append_new(moves, o) != 0) {
            json_decref(moves);
            moves = NULL;
        }
    }
    pthread_mutex_unlock(&c->mu);
    json_t *doc = moves != NULL
                      ? json_pack("{s:o,s:i,s:I}", "Moves", moves, "Moving", (int)rb->moving,
                                  "PartitionMapVersion", (json_int_t)rb->pmap_version)
                      : NULL;
    rpc_response_free(resp);
    return dump(doc, json_out, err);
}

/* The "Nodes" list of a cluster status: each node's heartbeat figures, and
 * from the map pm (NULL: none in the reply, counted as 0) the copies it
 * holds of every set (base partitions, GSI partitions, stream shards) as
 * "Replicas" and the first copies among them as "Primaries". NULL on OOM. */
static json_t *status_nodes(const Lapse__ClusterStatusResponse *cs, const pmap *pm)
{
    json_t *nodes = json_array();
    for (size_t i = 0; nodes != NULL && i < cs->n_nodes; i++) {
        const Lapse__NodeStatus *n = cs->nodes[i];
        size_t primaries = 0, replicas = 0;
        if (pm != NULL) {
            primaries = pmap_partitions_owned(pm, n->id) + pmap_gsi_partitions_owned(pm, n->id) +
                        pmap_stream_shards_hosted(pm, n->id);
            replicas = primaries + pmap_follower_copies(pm, n->id) + pmap_derived_copies(pm, n->id);
        }
        const pmap_node *pn = pm != NULL ? pmap_node_find(pm, n->id) : NULL;
        json_t *o = json_pack(
            "{s:i,s:s,s:s,s:b,s:b,s:I,s:i,s:i,s:i,s:I,s:I,s:I,s:I}", "NodeId", (int)n->id,
            "Address", n->address ? n->address : "", "State",
            n->state == LAPSE__NODE_STATE__NODE_UP ? "UP" : "DOWN", "Draining",
            pn != NULL && pn->draining, "Removed", pn != NULL && pn->removed, "LastHeartbeatAgeMs",
            (json_int_t)n->last_heartbeat_age_ms, "Partitions", (int)n->partitions, "GsiPartitions",
            (int)n->gsi_partitions, "StreamShards", (int)n->stream_shards, "Replicas",
            (json_int_t)replicas, "Primaries", (json_int_t)primaries, "PartitionMapVersion",
            (json_int_t)n->pmap_version, "ClockSkewMs", (json_int_t)n->clock_skew_ms);
        if (o != NULL && pn != NULL && pn->zone[0] != '\0' &&
            json_object_set_new(o, "Zone", json_string(pn->zone)) != 0) {
            json_decref(o);
            o = NULL;
        }
        if (o == NULL || json_array_append_new(nodes, o) != 0) {
            json_decref(nodes);
            return NULL;
        }
    }
    return nodes;
}

int lapse_cluster_status(lapse_client *c, char **json_out, lapse_error *err)
{
    Lapse__ClusterStatusRequest body = LAPSE__CLUSTER_STATUS_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    int rv;

    if (c == NULL || json_out == NULL) {
        return client_err(err, LAPSE_EINVAL, "cluster status: NULL argument");
    }
    *json_out = NULL;
    req.body_case = LAPSE__REQUEST__BODY_CLUSTER_STATUS;
    req.cluster_status = &body;
    if ((rv = client_call_coord(c, &req, 1, &resp, err)) != 0) {
        return rv;
    }
    const Lapse__ClusterStatusResponse *cs = resp->cluster_status;
    if (resp->body_case != LAPSE__RESPONSE__BODY_CLUSTER_STATUS || cs == NULL) {
        rpc_response_free(resp);
        return client_err(err, LAPSE_EPROTO, "cluster status: reply has no cluster_status body");
    }
    json_t *doc = json_object(), *sets = json_array();
    uint64_t under = 0, changes = 0;
    pmap *pm = NULL;
    char why[256] = "";
    rv = cs->map != NULL ? wire_pmap_from_pb(cs->map, &pm, why, sizeof(why)) : 0;
    for (size_t t = 0; rv == 0 && pm != NULL && t < pm->ntables; t++) {
        const pmap_table *tb = &pm->tables[t];
        if (tb->schema.replication >= 2 &&
            replica_sets_json(sets, tb->schema.id, tb->schema.name, tb->parts,
                              tb->schema.partitions, 1, cs->replica_lag, cs->n_replica_lag,
                              &under) != 0) {
            rv = LAPSE_ENOMEM;
        }
    }
    changes = pm != NULL ? pmap_primary_changes(pm) : 0;
    json_t *moves = json_array();
    if (rv == 0 && pm != NULL &&
        (moves == NULL || moves_json(moves, pm, cs->replica_lag, cs->n_replica_lag) != 0 ||
         derived_moves_json(moves, pm) != 0)) {
        rv = LAPSE_ENOMEM;
    }
    json_t *nodes = rv == 0 ? status_nodes(cs, pm) : NULL;
    pmap_free(pm);
    if (rv == 0 && nodes == NULL) {
        rv = LAPSE_ENOMEM;
    }
    if (rv != 0) {
        json_decref(sets);
        json_decref(moves);
        json_decref(doc);
        rpc_response_free(resp);
        return rv == LAPSE_ENOMEM
                   ? client_err(err, rv, "out of memory")
                   : client_err(err, LAPSE_EPROTO, "cluster status: bad map in reply: %s", why);
    }
    json_object_set_new(doc, "PartitionMapVersion", json_integer((json_int_t)cs->pmap_version));
    json_object_set_new(doc, "Tables", json_integer(cs->tables));
    json_object_set_new(doc, "Nodes", nodes);
    json_object_set_new(doc, "UnderReplicated", json_integer((json_int_t)under));
    json_object_set_new(doc, "PrimaryChanges", json_integer((json_int_t)changes));
    json_object_set_new(doc, "ReplicaSets", sets);
    json_object_set_new(doc, "Moves", moves);
    rpc_response_free(resp);
    return dump(doc, json_out, err);
}
