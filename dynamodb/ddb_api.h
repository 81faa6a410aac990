/*
 * ddb_api.h: DynamoDB's JSON-over-HTTP protocol frame for the gateway
 * (docs/dynamodb-api.md): POST / with X-Amz-Target
 * "DynamoDB_20120810.<Operation>" and a JSON body, answered with 200 and a
 * JSON document, or 400/500 and {"__type":"com.amazonaws.dynamodb.v20120810#
 * <Name>","message":"..."}; GET / answers 200 (health).
 *
 * Thread-safety: ddb_api_serve runs on any number of http_service worker
 * threads at once; the ddb_api it is given is read-only after setup.
 *
 * Invariants:
 *  1. Every request gets exactly one answer in DynamoDB's shape; no input
 *     crashes the process (bad JSON, wrong types and unknown operations are
 *     400s).
 *  2. With credentials, a POST reaches an operation only when its SigV4
 *     signature verifies (ddb_sigv4.h); without, any Authorization header
 *     (or none) is accepted. GET / (health) is never authenticated.
 */
#ifndef LAPSE_DDB_API_H
#define LAPSE_DDB_API_H

#include "../client/lapse.h"
#include "../rpc/http_service.h"

#define DDB_API_MAX_BODY (16u * 1024 * 1024) /* DynamoDB's request size limit */
#define DDB_API_CONTENT_TYPE "application/x-amz-json-1.0"

typedef struct ddb_credentials ddb_credentials;

typedef struct ddb_api {
    lapse_client *c;              /* borrowed; shared by the workers */
    const char *region;           /* borrowed; in ARNs */
    const ddb_credentials *creds; /* borrowed; NULL: signatures are not verified */
} ddb_api;

/* The http_serve_fn of the gateway: arg is a ddb_api. */
void ddb_api_serve(void *arg, const http_request *req, http_response *res);

/* The http_quick_fn of the gateway (arg is a ddb_api): takes GetItem,
 * PutItem and DeleteItem requests that can be answered from the callback of an
 * asynchronous liblapse call (ddb_items_start), so no worker waits for the
 * node; leaves every other request to ddb_api_serve on a worker, and hands
 * back to a worker one whose call the blocking form would retry. */
int ddb_api_quick(void *arg, const http_request *req, http_pending *p);

/* One call without HTTP: target is the X-Amz-Target value (NULL when
 * absent), body the request body. Fills *status and *out (caller frees with
 * free()); *out is NULL only when out of memory. */
void ddb_api_call(const ddb_api *api, const char *target, const void *body, size_t len, int *status,
                  char **out);

/* The body of the 400 the HTTP service sends for a body over
 * DDB_API_MAX_BODY (http_service.h, invariant 3), in DynamoDB's shape. */
extern const char ddb_api_reject_body[];

#endif
