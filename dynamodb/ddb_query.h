/*
 * ddb_query.h: Query and Scan on lapse_query_index and lapse_scan, with
 * KeyConditionExpression, FilterExpression, ProjectionExpression, Select,
 * Limit and pagination (ExclusiveStartKey / LastEvaluatedKey); Scan with
 * IndexName scans the table and keeps the items the index holds
 * (ddb_index.h; docs/dynamodb-api.md, "Scan of an index"). Batch calls:
 * BatchWriteItem and BatchGetItem on lapse_batch_write and lapse_batch_get.
 *
 * Thread-safety: as ddb_items.h. Invariants:
 *  1. Each returns as ddb_req.h's invariant 1 says; req is borrowed.
 *  2. Limit counts the items read before the filter, as DynamoDB's does:
 *     Count is what passed the filter, ScannedCount what was read, and
 *     LastEvaluatedKey is present exactly when liblapse's page has a last
 *     key (more may follow).
 *  3. A batch's UnprocessedItems / UnprocessedKeys hold exactly the
 *     requests of a table whose liblapse call failed for want of a node
 *     (timeout, unavailable); other failures fail the call.
 */
#ifndef LAPSE_DDB_QUERY_H
#define LAPSE_DDB_QUERY_H

#include "ddb_req.h"

#define DDB_BATCH_WRITE_MAX 25 /* DynamoDB's BatchWriteItem limit */
#define DDB_BATCH_GET_MAX 100  /* DynamoDB's BatchGetItem limit */

int ddb_query_query(ddb_ctx *x, json_t *req);
int ddb_query_scan(ddb_ctx *x, json_t *req);
int ddb_batch_write(ddb_ctx *x, json_t *req);
int ddb_batch_get(ddb_ctx *x, json_t *req);

#endif
