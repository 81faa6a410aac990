/*
 * ddb_items.h: the gateway's item operations (PutItem, GetItem, DeleteItem,
 * UpdateItem) on liblapse's item calls, with ConditionExpression,
 * UpdateExpression and ProjectionExpression (ddb_expr.h says what is
 * atomic). The legacy Expected/AttributeUpdates/AttributesToGet forms
 * arrive here already rewritten into those (ddb_legacy.h).
 *
 * Thread-safety: as liblapse's client; each call on its own ddb_ctx.
 *
 * Invariants:
 *  1. Each returns as ddb_req.h's invariant 1 says; req is borrowed.
 *  2. A key is checked against the table's schema before the call, so a key
 *     with missing, extra or mistyped attributes is a ValidationException
 *     and nothing is sent to a node.
 */
#ifndef LAPSE_DDB_ITEMS_H
#define LAPSE_DDB_ITEMS_H

#include "ddb_req.h"

int ddb_items_put(ddb_ctx *x, json_t *req);
int ddb_items_get(ddb_ctx *x, json_t *req);
int ddb_items_delete(ddb_ctx *x, json_t *req);
int ddb_items_update(ddb_ctx *x, json_t *req);

#endif
