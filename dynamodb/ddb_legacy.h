/*
 * ddb_legacy.h: DynamoDB's legacy (non-expression) request parameters,
 * which the AWS SDKs still send, rewritten into the expression parameters
 * the operations serve (docs/dynamodb-api.md, "Legacy parameters"):
 *
 *   Expected (+ ConditionalOperator)     -> ConditionExpression
 *   AttributeUpdates                     -> UpdateExpression
 *   AttributesToGet                      -> ProjectionExpression
 *   KeyConditions                        -> KeyConditionExpression
 *   QueryFilter / ScanFilter (+ ConditionalOperator) -> FilterExpression
 *
 * on PutItem, DeleteItem, UpdateItem, GetItem, Query, Scan and each table of
 * BatchGetItem's RequestItems. Evaluation, atomicity (ddb_expr.h) and the
 * expressions' own errors then stay in one place.
 *
 * Thread-safety: as ddb_ctx (one worker thread per call); no global state.
 *
 * Invariants:
 *  1. Attribute names and values reach the expressions only through
 *     generated placeholders (#legacyN, :legacyN), never as expression text:
 *     a legacy attribute name may be a reserved word or hold any character.
 *  2. A generated placeholder never collides with one the request defines,
 *     and every one generated is used by the generated text, so the
 *     expression code's undefined / unused checks hold unchanged.
 *  3. A legacy parameter beside its expression counterpart in one request is
 *     refused (DynamoDB's "Can not use both expression and non-expression
 *     parameters"), except KeyConditions with FilterExpression or
 *     ProjectionExpression and no KeyConditionExpression, which DynamoDB
 *     allows. A legacy form is never half applied: either every legacy
 *     member of the request is translated or the request fails.
 *  4. Every legacy mistake DynamoDB refuses (operator name, value count or
 *     type, Exists with or without Value, an Action without Value) is a
 *     ValidationException naming the parameter and the attribute, raised
 *     before any liblapse call.
 */
#ifndef LAPSE_DDB_LEGACY_H
#define LAPSE_DDB_LEGACY_H

#include "ddb_req.h"

/* Rewrites the legacy parameters of req, a request of DynamoDB operation op
 * ("PutItem", ...). Returns 0 with *out a new reference the caller releases:
 * req itself when it has nothing to rewrite, else a new request whose legacy
 * members are replaced by the equivalent expressions, their placeholders
 * added to ExpressionAttributeNames / ExpressionAttributeValues. Returns -1
 * with the error set and *out NULL. req is borrowed and never modified. */
int ddb_legacy_translate(ddb_ctx *x, const char *op, json_t *req, json_t **out);

#endif
