/*
 * ddb_tables.h: the gateway's table and TTL operations (CreateTable,
 * DescribeTable, ListTables, DeleteTable, UpdateTimeToLive,
 * DescribeTimeToLive), each a DynamoDB request document in and a response
 * document out, on liblapse's admin calls.
 *
 * Thread-safety: as liblapse's client; each call on its own ddb_ctx.
 *
 * Invariants:
 *  1. Each returns as ddb_req.h's invariant 1 says; req is borrowed.
 *  2. A refused request changes nothing in the cluster: the request is
 *     validated before the admin call, and what only the coordinator can
 *     judge (a taken name, a bad index) it refuses whole.
 *  3. A table is ACTIVE as soon as CreateTable answers (liblapse's create
 *     returns once the map is pushed); DeleteTable answers DELETING with the
 *     description it read just before deleting.
 */
#ifndef LAPSE_DDB_TABLES_H
#define LAPSE_DDB_TABLES_H

#include "ddb_req.h"

int ddb_tables_create(ddb_ctx *x, json_t *req);
int ddb_tables_describe(ddb_ctx *x, json_t *req);
int ddb_tables_list(ddb_ctx *x, json_t *req);
int ddb_tables_delete(ddb_ctx *x, json_t *req);
int ddb_tables_update_ttl(ddb_ctx *x, json_t *req);
int ddb_tables_describe_ttl(ddb_ctx *x, json_t *req);
/* UpdateTable: BillingMode and ProvisionedThroughput are checked and
 * accepted (every Lapse table is on-demand: nothing changes); a
 * StreamSpecification that would change nothing gets DynamoDB's refusal, one
 * that would turn the stream on or off is refused as not served yet. */
int ddb_tables_update(ddb_ctx *x, json_t *req);

/* Every table's name, in name order (DynamoDB's paging order), as a new JSON
 * array of strings; NULL with x's error set. */
json_t *ddb_tables_names(ddb_ctx *x);

#endif
