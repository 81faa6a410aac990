/*
 * ddb_legacy_int.h: what the two halves of the legacy-parameter translation
 * share (ddb_legacy.h says what they do): ddb_legacy.c, the requests (the
 * mixing rule, AttributeUpdates, AttributesToGet), which uses
 * ddb_legacy_cond.c, the conditions (Expected, QueryFilter, ScanFilter,
 * KeyConditions and their ComparisonOperators); both write with
 * ddb_legacy_text.c (the placeholders, the expression text, the checks of
 * values and DynamoDB's parameter error). Internal to dynamodb/.
 */
#ifndef LAPSE_DDB_LEGACY_INT_H
#define LAPSE_DDB_LEGACY_INT_H

#include <stddef.h>

#include "../common/buf.h"
#include "ddb_req.h"

typedef enum cond_mode {
    EXPECTED, /* Expected: the Exists/Value form or a ComparisonOperator */
    FILTER,   /* QueryFilter, ScanFilter: a ComparisonOperator */
    KEY       /* KeyConditions: a ComparisonOperator usable on a key */
} cond_mode;

typedef struct legacy {
    ddb_ctx *x;
    json_t *names;       /* owned: the request's ExpressionAttributeNames plus ours */
    json_t *values;      /* owned: the same for ExpressionAttributeValues */
    json_t *placeholder; /* owned: attribute name -> its generated #name */
    unsigned next_name, next_value;
    int oom; /* a buf or jansson call failed */
} legacy;

/* A ValidationException with DynamoDB's prefix for parameter mistakes
 * ("One or more parameter values were invalid: "). Returns -1. */
int ddb_legacy_invalid(legacy *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Whether obj has member, not null. */
int ddb_legacy_present(json_t *obj, const char *member);
/* The #placeholder of attribute name (borrowed from l), made on first use;
 * NULL on OOM (l->oom set). */
const char *ddb_legacy_name_ph(legacy *l, const char *name);
/* A fresh :placeholder for value v into ph (len bytes). */
void ddb_legacy_value_ph(legacy *l, json_t *v, char *ph, size_t len);
/* Appends formatted expression text to b (l->oom on failure). */
void ddb_legacy_append(legacy *l, buf *b, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Moves b's text into obj[member] as a string. */
void ddb_legacy_set_text(legacy *l, json_t *obj, const char *member, buf *b);
/* Checks one typed value of attribute attr: one known, well-formed type.
 * 0 or -1 with the error set. */
int ddb_legacy_check_value(legacy *l, const char *attr, json_t *v);
/* The type name of typed value v ("S", "NS", ...; "" when none). */
const char *ddb_legacy_vtype(json_t *v);

/* The legacy condition map req[param] (Expected, QueryFilter, ScanFilter
 * or KeyConditions, by mode) as one condition expression in out[member]: its
 * entries joined by join (AND, or ConditionalOperator's). An empty map sets
 * nothing. 0 or -1 with the error set (ddb_legacy_cond.c). */
int ddb_legacy_condition_map(legacy *l, json_t *req, json_t *out, const char *param, cond_mode mode,
                             const char *join, const char *member);

#endif
