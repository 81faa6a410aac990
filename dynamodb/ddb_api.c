/*
 * ddb_api.c: the protocol frame and the operation table of the gateway.
 */
#include "ddb_api.h"

#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "ddb_items.h"
#include "ddb_legacy.h"
#include "ddb_meta.h"
#include "ddb_query.h"
#include "ddb_req.h"
#include "ddb_sigv4.h"
#include "ddb_streams.h"
#include "ddb_tables.h"
#include "ddb_tags.h"

#define TARGET_PREFIX "DynamoDB_20120810."
#define STREAMS_PREFIX "DynamoDBStreams_20120810."
#define TYPE_PREFIX "com.amazonaws.dynamodb.v20120810#"

const char ddb_api_reject_body[] =
    "{\"__type\":\"" TYPE_PREFIX "SerializationException\",\"message\":\"request refused: "
    "body over 16777216 bytes, a bad Content-Length or no Host header\"}";

typedef int (*op_fn)(ddb_ctx *x, json_t *req);

/* Operations by X-Amz-Target: DynamoDB's and DynamoDB Streams' (the aws CLI
 * and the SDKs send each service's prefix to the same endpoint). */
static const struct {
    const char *prefix;
    const char *name;
    op_fn fn;
} ops[] = {
    {TARGET_PREFIX, "CreateTable", ddb_tables_create},
    {TARGET_PREFIX, "DescribeTable", ddb_tables_describe},
    {TARGET_PREFIX, "ListTables", ddb_tables_list},
    {TARGET_PREFIX, "DeleteTable", ddb_tables_delete},
    {TARGET_PREFIX, "UpdateTable", ddb_tables_update},
    {TARGET_PREFIX, "UpdateTimeToLive", ddb_tables_update_ttl},
    {TARGET_PREFIX, "DescribeTimeToLive", ddb_tables_describe_ttl},
    {TARGET_PREFIX, "PutItem", ddb_items_put},
    {TARGET_PREFIX, "GetItem", ddb_items_get},
    {TARGET_PREFIX, "DeleteItem", ddb_items_delete},
    {TARGET_PREFIX, "UpdateItem", ddb_items_update},
    {TARGET_PREFIX, "Query", ddb_query_query},
    {TARGET_PREFIX, "Scan", ddb_query_scan},
    {TARGET_PREFIX, "BatchWriteItem", ddb_batch_write},
    {TARGET_PREFIX, "BatchGetItem", ddb_batch_get},
    {TARGET_PREFIX, "TagResource", ddb_tags_tag},
    {TARGET_PREFIX, "UntagResource", ddb_tags_untag},
    {TARGET_PREFIX, "ListTagsOfResource", ddb_tags_list},
    {STREAMS_PREFIX, "ListStreams", ddb_streams_list},
    {STREAMS_PREFIX, "DescribeStream", ddb_streams_describe},
    {STREAMS_PREFIX, "GetShardIterator", ddb_streams_get_iterator},
    {STREAMS_PREFIX, "GetRecords", ddb_streams_get_records},
};

/* Runs the operation target names on body; fills x (invariant 1 of
 * ddb_req.h). */
static void dispatch(ddb_ctx *x, const char *target, const void *body, size_t len)
{
    if (target == NULL) {
        ddb_req_fail(x, 400, "UnknownOperationException", "missing X-Amz-Target header");
        return;
    }
    const char *name = NULL;
    op_fn fn = NULL;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        size_t pl = strlen(ops[i].prefix);
        if (strncmp(target, ops[i].prefix, pl) == 0) {
            name = target + pl;
            fn = strcmp(ops[i].name, name) == 0 ? ops[i].fn : fn;
        }
    }
    if (name == NULL) {
        ddb_req_fail(x, 400, "UnknownOperationException",
                     "X-Amz-Target must be " TARGET_PREFIX "<Operation> or " STREAMS_PREFIX
                     "<Operation>");
        return;
    }
    if (fn == NULL) {
        ddb_req_fail(x, 400, "UnknownOperationException",
                     "operation %.100s is not served by Lapse's DynamoDB API (yet)", name);
        return;
    }
    json_error_t jerr;
    json_t *req = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (req == NULL || !json_is_object(req)) {
        ddb_req_fail(x, 400, "SerializationException",
                     req == NULL ? "malformed JSON body: %s" : "the body is not a JSON object%s",
                     req == NULL ? jerr.text : "");
        json_decref(req);
        return;
    }
    if (ddb_meta_reserved(x, name, req)) {
        json_decref(req);
        return;
    }
    /* The legacy parameters become expressions before the operation sees
     * the request (ddb_legacy.h). */
    json_t *exprs = NULL;
    if (ddb_legacy_translate(x, name, req, &exprs) == 0 && fn(x, exprs) == 0 &&
        !ddb_req_answered(x)) {
        ddb_req_fail(x, 500, "InternalServerError", "out of memory");
    }
    json_decref(exprs);
    json_decref(req);
}

/* DynamoDB's error document for type (short name) and message, with item
 * (borrowed; NULL: none) as its "Item"; NULL on OOM. */
static char *error_body(const char *type, const char *message, json_t *item)
{
    char t[128];
    snprintf(t, sizeof t, TYPE_PREFIX "%s", type);
    json_t *e = json_pack("{s:s,s:s}", "__type", t, "message", message);
    if (e != NULL && item != NULL) {
        json_object_set(e, "Item", item);
    }
    char *out = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    return out;
}

/* x's answer: its status and document (caller frees; NULL when out of
 * memory); consumes x's documents. */
static void ctx_answer(ddb_ctx *x, int *status, char **out)
{
    if (x->out_text != NULL) {
        *status = 200;
        *out = x->out_text;
        x->out_text = NULL;
    } else if (x->out != NULL) {
        *status = 200;
        *out = json_dumps(x->out, JSON_COMPACT);
    } else {
        *status = x->status;
        *out = error_body(x->type, x->message, x->err_item);
    }
    ddb_req_clear(x);
}

void ddb_api_call(const ddb_api *api, const char *target, const void *body, size_t len, int *status,
                  char **out)
{
    ddb_ctx x = {.c = api->c, .region = api->region, .status = 200};
    dispatch(&x, target, body, len);
    ctx_answer(&x, status, out);
}

static const char *request_header(void *arg, const char *name)
{
    return http_request_header(arg, name);
}

/* ddb_sigv4_verify of req (body: its body) against api's credentials. */
static int verify(const ddb_api *api, const http_request *req, const void *body, size_t len,
                  char *type, size_t typelen, char *msg, size_t msglen)
{
    ddb_sigv4_request sr = {.method = http_request_method(req),
                            .uri = http_request_uri(req),
                            .header = request_header,
                            .arg = (void *)req,
                            .body = body,
                            .len = len,
                            .now_ms = clock_wall_now().ms};
    return ddb_sigv4_verify(api->creds, api->region, &sr, type, typelen, msg, msglen);
}

/* res answers with status and out (freed here; NULL: out of memory). */
static void set_answer(http_response *res, int status, char *out)
{
    snprintf(res->content_type, sizeof res->content_type, DDB_API_CONTENT_TYPE);
    res->status = out != NULL ? status : 500;
    if (out == NULL || buf_append_str(&res->body, out) != 0) {
        buf_clear(&res->body);
        res->status = 500;
        buf_append_str(&res->body, "{\"__type\":\"" TYPE_PREFIX "InternalServerError\","
                                   "\"message\":\"out of memory\"}");
    }
    free(out);
}

void ddb_api_serve(void *arg, const http_request *req, http_response *res)
{
    const ddb_api *api = arg;
    const char *method = http_request_method(req);
    if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) {
        /* DynamoDB answers a GET of / with this line; load balancers probe it. */
        snprintf(res->content_type, sizeof res->content_type, "text/plain");
        buf_printf(&res->body, "healthy: lapse dynamodb %s\n", api->region);
        return;
    }
    int status = 400;
    char *out = NULL, type[64], msg[512];
    const void *body;
    size_t len;
    http_request_body(req, &body, &len);
    if (strcmp(method, "POST") != 0) {
        ddb_api_call(api, "", NULL, 0, &status, &out); /* an UnknownOperationException */
    } else if (api->creds != NULL &&
               verify(api, req, body, len, type, sizeof type, msg, sizeof msg) != 0) {
        status = strcmp(type, "InternalFailure") == 0 ? 500 : 400;
        out = error_body(type, msg, NULL);
    } else {
        ddb_api_call(api, http_request_header(req, "X-Amz-Target"), body, len, &status, &out);
    }
    set_answer(res, status, out);
}

/* ---- the quick path: GetItem, PutItem and DeleteItem answered from the
 * reply's callback (ddb_api_quick) ---- */

/* The largest body the quick path parses on the HTTP server's thread (tens of
 * microseconds of JSON); a bigger one (an item may be 400 KB) goes to a
 * worker. */
#define QUICK_MAX_BODY (64u * 1024)

typedef struct quick_call {
    http_pending *p;
    ddb_ctx x;
} quick_call;

static void quick_done(void *arg, ddb_ctx *x, int retry)
{
    quick_call *q = arg;
    if (retry) {
        /* A failover or a time-out: the blocking operation retries it, on a
         * worker, from the request. */
        ddb_req_clear(x);
        http_pending_to_worker(q->p);
        free(q);
        return;
    }
    int status;
    char *out;
    ctx_answer(x, &status, &out);
    http_response res = {.status = 200};
    buf_init(&res.body);
    set_answer(&res, status, out);
    http_pending_reply(q->p, &res);
    free(q);
}

int ddb_api_quick(void *arg, const http_request *req, http_pending *p)
{
    const ddb_api *api = arg;
    const char *target = http_request_header(req, "X-Amz-Target");
    const size_t pl = strlen(TARGET_PREFIX);
    if (strcmp(http_request_method(req), "POST") != 0 || target == NULL ||
        strncmp(target, TARGET_PREFIX, pl) != 0 ||
        (strcmp(target + pl, "GetItem") != 0 && strcmp(target + pl, "PutItem") != 0 &&
         strcmp(target + pl, "DeleteItem") != 0)) {
        return 0;
    }
    const char *op = target + pl;
    const void *body;
    size_t len;
    char type[64], msg[512];
    http_request_body(req, &body, &len);
    if (len > QUICK_MAX_BODY) {
        return 0; /* parsing it would hold the server's thread too long: a worker's work */
    }
    if (api->creds != NULL &&
        verify(api, req, body, len, type, sizeof type, msg, sizeof msg) != 0) {
        return 0; /* the worker refuses it, in DynamoDB's words */
    }
    json_t *doc = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, NULL);
    quick_call *q = json_is_object(doc) ? calloc(1, sizeof *q) : NULL;
    if (q == NULL) {
        json_decref(doc);
        return 0;
    }
    q->p = p;
    q->x = (ddb_ctx){.c = api->c, .region = api->region, .status = 200};
    json_t *exprs = NULL;
    int started = !ddb_meta_reserved(&q->x, op, doc) &&
                  ddb_legacy_translate(&q->x, op, doc, &exprs) == 0 &&
                  ddb_items_start(&q->x, op, exprs, quick_done, q);
    /* Once started, q belongs to quick_done (which may have run already). */
    json_decref(exprs);
    json_decref(doc);
    if (!started) {
        ddb_req_clear(&q->x);
        free(q);
    }
    return started;
}
