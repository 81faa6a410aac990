/*
 * ddb_req.h: one DynamoDB API call in progress in the gateway, and the helpers
 * every operation uses to read its request and to fail in DynamoDB's shape
 * (docs/dynamodb-api.md, "Errors").
 *
 * Thread-safety: a ddb_ctx belongs to the one worker thread serving the call.
 *
 * Invariants:
 *  1. An operation returns 0 with ctx->out or ctx->out_text set (the
 *     response, owned by ctx: one of them, never both), or -1 with
 *     ctx->status (400 or 500), ctx->type and ctx->message set and both
 *     NULL.
 *  2. A member of the wrong JSON type is a SerializationException (DynamoDB's
 *     answer to a body it cannot deserialize); a well-typed value DynamoDB
 *     would refuse is a ValidationException.
 */
#ifndef LAPSE_DDB_REQ_H
#define LAPSE_DDB_REQ_H

#include <jansson.h>

#include "../client/lapse.h"

typedef struct ddb_ctx {
    lapse_client *c;    /* borrowed: the gateway's client */
    const char *region; /* borrowed: for ARNs */
    json_t *out;        /* the response document on success; owned */
    char *out_text;     /* or the response as its text already (malloc'd; owned): GetItem's
                           item goes out as liblapse formats it, not parsed to be dumped again */
    int status;         /* HTTP status: 200, 400 or 500 */
    char type[64];      /* the error's short name, e.g. "ValidationException" */
    char message[640];  /* the error's message */
    json_t *err_item;   /* owned; with a ConditionalCheckFailedException: its "Item" */
} ddb_ctx;

/* Sets the error (status 400 or 500, DynamoDB's short type name, a message)
 * and returns -1. */
int ddb_req_fail(ddb_ctx *x, int status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Maps a liblapse failure onto DynamoDB's error for it (table: the table the
 * call was about, for ResourceNotFoundException's message) and returns -1. */
int ddb_req_lapse_fail(ddb_ctx *x, const lapse_error *err, const char *table);

/* Member name of req as a string into *out (borrowed from req): returns 0,
 * or -1 with a SerializationException when it has another type, or a
 * ValidationException when it is absent and required. *out is NULL when
 * absent. */
int ddb_req_string(ddb_ctx *x, json_t *req, const char *name, int required, const char **out);
/* The same for a JSON object, array or boolean member (*out borrowed; NULL /
 * unchanged when absent). */
int ddb_req_object(ddb_ctx *x, json_t *req, const char *name, int required, json_t **out);
int ddb_req_array(ddb_ctx *x, json_t *req, const char *name, int required, json_t **out);
int ddb_req_bool(ddb_ctx *x, json_t *req, const char *name, int required, int *out);
/* An integer member in [lo, hi] into *out (unchanged when absent). */
int ddb_req_int(ddb_ctx *x, json_t *req, const char *name, long lo, long hi, long *out);
/* Returns -1 with a ValidationException naming the first member of req listed
 * in names (NULL-terminated) that this gateway does not support yet, else 0. */
int ddb_req_unsupported(ddb_ctx *x, json_t *req, const char *op, const char *const *names);
/* Parses DynamoDB JSON (an item or key object) into *out (caller frees with
 * lapse_item_free). Returns 0 or -1 with a ValidationException naming what. */
int ddb_req_item(ddb_ctx *x, json_t *obj, const char *what, lapse_item **out);
/* A liblapse item as a jansson object (a new reference), or NULL with a 500
 * set. */
json_t *ddb_req_item_json(ddb_ctx *x, const lapse_item *it);

/* Whether x holds a response (invariant 1). */
int ddb_req_answered(const ddb_ctx *x);
/* Frees x's response and error item, if any. */
void ddb_req_clear(ddb_ctx *x);

/* The stream ARN and label of table, created at created_ms (epoch ms), into
 * arn and label (docs/dynamodb-api.md, "Streams": the label is the creation
 * time in UTC with milliseconds, so a re-created table's stream is another). */
void ddb_req_stream_arn(const ddb_ctx *x, const char *table, int64_t created_ms, char *arn,
                        size_t arnlen, char *label, size_t labellen);

#endif
