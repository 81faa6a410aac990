/*
 * nodecall.c: the coordinator's map, a copy's digest and the other calls
 * of nodecall.h, straight off the wire.
 */
#include "nodecall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/arena.h"
#include "../common/lapse_err.h"
#include "../rpc/wire.h"

#define NODECALL_TIMEOUT_MS 3000

/* Sends req to url on a client of its own, NODECALL_TIMEOUT_MS at most;
 * 0 with *resp a reply of body kind want (caller frees), or the call's
 * error with err. */
static int call_once(const char *url, Lapse__Request *req, Lapse__Response__BodyCase want,
                     const char *what, Lapse__Response **resp, char *err, size_t len)
{
    rpc_client *rc = NULL;
    *resp = NULL;
    int rv = rpc_client_open(&rc, url, err, len);
    if (rv != 0) {
        return rv;
    }
    rv = rpc_call(rc, req, NODECALL_TIMEOUT_MS, resp, err, len);
    if (rv == 0 && (*resp)->body_case != want) {
        rv = LAPSE_EPROTO;
        snprintf(err, len, "no %s reply", what);
    }
    if (rv != 0) {
        rpc_response_free(*resp);
        *resp = NULL;
    }
    rpc_client_close(rc);
    return rv;
}

int nodecall_map(const char *coordinator_url, pmap **out, char *err, size_t len)
{
    *out = NULL;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__GetPartitionMapRequest body = LAPSE__GET_PARTITION_MAP_REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_GET_PARTITION_MAP;
    req.get_partition_map = &body;
    Lapse__Response *resp = NULL;
    int rv = call_once(coordinator_url, &req, LAPSE__RESPONSE__BODY_GET_PARTITION_MAP,
                       "GetPartitionMap", &resp, err, len);
    if (rv == 0) {
        rv = wire_pmap_from_pb(resp->get_partition_map->map, out, err, len);
    }
    rpc_response_free(resp);
    return rv;
}

int nodecall_replica_join(const char *coordinator_url, const nodecall_join *j, uint64_t *version,
                          char *err, size_t len)
{
    *version = 0;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__ReplicaJoinRequest body = LAPSE__REPLICA_JOIN_REQUEST__INIT;
    body.table_id = j->table_id;
    body.partition = j->part;
    body.primary_node = j->primary;
    body.epoch = j->epoch;
    body.node = j->node;
    body.set_changes = j->changes;
    req.body_case = LAPSE__REQUEST__BODY_REPLICA_JOIN;
    req.replica_join = &body;
    Lapse__Response *resp = NULL;
    int rv = call_once(coordinator_url, &req, LAPSE__RESPONSE__BODY_REPLICA_JOIN, "ReplicaJoin",
                       &resp, err, len);
    if (rv == 0) {
        *version = resp->replica_join->pmap_version;
    }
    rpc_response_free(resp);
    return rv;
}

/* PartitionDigest of (table_id, part), or of GSI index_id's partition part
 * when index_id is not 0. */
static int digest_call(rpc_client *c, uint32_t table_id, uint32_t index_id, uint32_t part,
                       nodecall_digest *out, char *err, size_t len)
{
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__PartitionDigestRequest body = LAPSE__PARTITION_DIGEST_REQUEST__INIT;
    body.table_id = table_id;
    body.partition = part;
    body.index_id = index_id;
    req.body_case = LAPSE__REQUEST__BODY_PARTITION_DIGEST;
    req.partition_digest = &body;
    Lapse__Response *resp = NULL;
    int rv = rpc_call(c, &req, NODECALL_TIMEOUT_MS, &resp, err, len);
    if (rv == 0 && (resp->body_case != LAPSE__RESPONSE__BODY_PARTITION_DIGEST ||
                    resp->partition_digest == NULL)) {
        rv = LAPSE_EPROTO;
        snprintf(err, len, "no PartitionDigest reply");
    }
    if (rv == 0) {
        const Lapse__PartitionDigestResponse *d = resp->partition_digest;
        *out = (nodecall_digest){d->items,     d->digest,       d->epoch,      d->seq,
                                 d->log_first, d->outbox_first, d->outbox_last};
    }
    rpc_response_free(resp);
    return rv;
}

int nodecall_partition_digest(rpc_client *c, uint32_t table_id, uint32_t part, nodecall_digest *out,
                              char *err, size_t len)
{
    return digest_call(c, table_id, 0, part, out, err, len);
}

int nodecall_gsi_digest(rpc_client *c, uint32_t table_id, uint32_t index_id, uint32_t gpart,
                        nodecall_digest *out, char *err, size_t len)
{
    return digest_call(c, table_id, index_id, gpart, out, err, len);
}

int nodecall_get(rpc_client *c, const char *table, const item *key, int timeout_ms, item **out,
                 char *err, size_t len)
{
    *out = NULL;
    arena a;
    arena_init(&a);
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__GetItemRequest body = LAPSE__GET_ITEM_REQUEST__INIT;
    body.table = (char *)table;
    body.key = wire_item_to_pb(&a, key);
    req.body_case = LAPSE__REQUEST__BODY_GET_ITEM;
    req.get_item = &body;
    Lapse__Response *resp = NULL;
    int rv = body.key == NULL ? LAPSE_ENOMEM : rpc_call(c, &req, timeout_ms, &resp, err, len);
    if (rv == 0 && (resp->body_case != LAPSE__RESPONSE__BODY_GET_ITEM || resp->get_item == NULL)) {
        rv = LAPSE_EPROTO;
        snprintf(err, len, "no GetItem reply");
    }
    if (rv == 0 && resp->get_item->item != NULL) {
        rv = wire_item_from_pb(resp->get_item->item, out, err, len);
    }
    rpc_response_free(resp);
    arena_fini(&a);
    return rv;
}

int nodecall_gsi_count(rpc_client *c, const char *table, const char *index, uint32_t part,
                       const char *pk_s, size_t *items, char *err, size_t len)
{
    *items = 0;
    arena a;
    arena_init(&a);
    attr_value pk;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__QueryRequest body = LAPSE__QUERY_REQUEST__INIT;
    body.table = (char *)table;
    body.index = (char *)index;
    body.index_partition = part;
    int rv = item_value_init_bytes(&pk, ATTR_S, pk_s, strlen(pk_s));
    if (rv == 0) {
        body.partition_key = wire_value_to_pb(&a, &pk);
        item_value_fini(&pk);
        rv = body.partition_key == NULL ? LAPSE_ENOMEM : 0;
    }
    req.body_case = LAPSE__REQUEST__BODY_QUERY;
    req.query = &body;
    Lapse__Response *resp = NULL;
    if (rv == 0) {
        rv = rpc_call(c, &req, NODECALL_TIMEOUT_MS, &resp, err, len);
    }
    if (rv == 0 && (resp->body_case != LAPSE__RESPONSE__BODY_PAGE || resp->page == NULL)) {
        rv = LAPSE_EPROTO;
        snprintf(err, len, "no Query reply");
    }
    if (rv == 0) {
        *items = resp->page->n_items;
    }
    rpc_response_free(resp);
    arena_fini(&a);
    return rv;
}

int nodecall_stream_shard(rpc_client *c, const char *table, uint32_t shard, size_t *records,
                          uint64_t *last, char *err, size_t len)
{
    *records = 0;
    *last = 0;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__GetStreamRecordsRequest body = LAPSE__GET_STREAM_RECORDS_REQUEST__INIT;
    body.table = (char *)table;
    body.shard = shard;
    req.body_case = LAPSE__REQUEST__BODY_GET_STREAM_RECORDS;
    req.get_stream_records = &body;
    Lapse__Response *resp = NULL;
    int rv = rpc_call(c, &req, NODECALL_TIMEOUT_MS, &resp, err, len);
    if (rv == 0 && (resp->body_case != LAPSE__RESPONSE__BODY_GET_STREAM_RECORDS ||
                    resp->get_stream_records == NULL)) {
        rv = LAPSE_EPROTO;
        snprintf(err, len, "no GetStreamRecords reply");
    }
    if (rv == 0) {
        *records = resp->get_stream_records->n_records;
        *last = resp->get_stream_records->last_sequence;
    }
    rpc_response_free(resp);
    return rv;
}

int nodecall_replicate(rpc_client *c, uint32_t table_id, uint32_t part, uint64_t from, uint64_t to,
                       const buf *recs, size_t n, uint64_t *applied, char *err, size_t len)
{
    ProtobufCBinaryData *data = calloc(n > 0 ? n : 1, sizeof *data);
    if (data == NULL) {
        snprintf(err, len, "out of memory");
        return LAPSE_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        data[i].data = recs[i].data;
        data[i].len = recs[i].len;
    }
    Lapse__ReplicateRequest body = LAPSE__REPLICATE_REQUEST__INIT;
    body.table_id = table_id;
    body.source_partition = part;
    body.from_seq = from;
    body.to_seq = to;
    body.records = data;
    body.n_records = n;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_REPLICATE;
    req.replicate = &body;
    Lapse__Response *resp = NULL;
    int rv = rpc_call(c, &req, NODECALL_TIMEOUT_MS, &resp, err, len);
    if (resp != NULL && resp->body_case == LAPSE__RESPONSE__BODY_REPLICATE &&
        resp->replicate != NULL) {
        *applied = resp->replicate->applied_seq;
    }
    rpc_response_free(resp);
    free(data);
    return rv;
}
