/*
 * ddb_expr.h: expressions in the gateway's requests (expr/ parses and
 * evaluates them) and the conditional write: PutItem, DeleteItem and
 * UpdateItem with a ConditionExpression and/or an UpdateExpression, made
 * atomic on the node where Lapse's one-attribute conditions allow it and
 * refused where they do not (docs/dynamodb-api.md, "What is atomic").
 *
 * Thread-safety: as ddb_ctx (one worker thread per call).
 *
 * Invariants:
 *  1. A write whose outcome depends on the item is sent with a Condition
 *     that the node checks under the partition lock and that holds exactly
 *     when the item still has what the gateway read: the one attribute read
 *     unchanged (or still absent), the item still absent, or the whole item
 *     as read (LAPSE_COND_ITEM_EQUALS). A condition is never ignored.
 *  2. When that guard fails (the item changed between the read and the
 *     write) the gateway reads again and re-evaluates, up to
 *     DDB_WRITE_ATTEMPTS times, then answers 500 (the SDKs retry).
 */
#ifndef LAPSE_DDB_EXPR_H
#define LAPSE_DDB_EXPR_H

#include "../expr/expr.h"
#include "ddb_req.h"

#define DDB_WRITE_ATTEMPTS 8

/* Reads ExpressionAttributeNames and ExpressionAttributeValues of req into
 * a fresh e (expr_ctx_fini it whatever this returns). Returns 0 or -1 with
 * the error set. */
int ddb_expr_init(ddb_ctx *x, json_t *req, expr_ctx *e);
/* Parses req's member (a condition-like expression: ConditionExpression,
 * FilterExpression, KeyConditionExpression) into *out; NULL when absent.
 * Returns 0 or -1 with a ValidationException. */
int ddb_expr_condition(ddb_ctx *x, expr_ctx *e, json_t *req, const char *member, expr_node **out);
int ddb_expr_update(ddb_ctx *x, expr_ctx *e, json_t *req, expr_action **out);
int ddb_expr_projection(ddb_ctx *x, expr_ctx *e, json_t *req, expr_node **out);
/* Adds the top-level attribute name of every document path in condition c
 * (may be NULL) to reads, as keys. */
void ddb_expr_reads(const expr_node *c, json_t *reads);
/* After every expression is parsed: refuses unused names or values. */
int ddb_expr_done(ddb_ctx *x, expr_ctx *e);

typedef enum ddb_write_kind { DDB_PUT, DDB_DELETE, DDB_UPDATE } ddb_write_kind;

typedef struct ddb_write {
    ddb_write_kind kind;
    const char *table;
    const lapse_item *key;     /* the item's key (for PUT: its key attributes) */
    const lapse_item *item;    /* PUT: the new item */
    const expr_node *cond;     /* NULL: unconditional */
    const expr_action *update; /* UPDATE: the actions */
    int want_new;              /* UPDATE: fill new_item */
    json_t *new_item;          /* out, owned by the caller: the item after an update */
    int want_old;              /* read first, guard the whole item: fill old_item */
    json_t *old_item;          /* out, owned by the caller: the item replaced (NULL: none) */
    int old_on_failure;        /* a false condition puts the item read in x->err_item */
} ddb_write;

/* Runs w. Returns 0, or -1 with the error set (ConditionalCheckFailed
 * when the condition is false). */
int ddb_write_run(ddb_ctx *x, expr_ctx *e, ddb_write *w);

/* The key of item (its key attributes by the table's schema) into *out
 * (caller frees). Returns 0 or -1 with the error set. */
int ddb_expr_key_of(ddb_ctx *x, const char *table, const lapse_item *item, lapse_item **out);

#endif
