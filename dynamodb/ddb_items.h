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

/* How a started operation ended: x filled (ddb_req.h's invariant 1), or
 * retry set when the blocking operation is to run instead (a failover's
 * refusal, a time-out: what liblapse's blocking calls retry). */
typedef void (*ddb_items_done)(void *arg, ddb_ctx *x, int retry);

/* Starts operation op ("GetItem", or "PutItem" or "DeleteItem" without a
 * condition or return values) on req without blocking (liblapse's asynchronous calls):
 * returns 1 when started, done then being called once from liblapse's
 * thread (x and req borrowed until then), or 0 when this request is not
 * one that can go so (another operation or shape, an invalid request, a
 * table the client's map lacks): the caller runs the blocking operation,
 * which says what is wrong. */
int ddb_items_start(ddb_ctx *x, const char *op, json_t *req, ddb_items_done done, void *arg);

#endif
