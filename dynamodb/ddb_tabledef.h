/*
 * ddb_tabledef.h: CreateTable's KeySchema, AttributeDefinitions and
 * secondary indexes read into liblapse's lapse_table_def (ddb_tables.c
 * makes the table).
 *
 * Thread-safety: as ddb_tables.h.
 *
 * Invariants:
 *  1. Every name put into a lapse_index_def or returned is borrowed from
 *     the request document.
 *  2. On -1 x's error is set (DynamoDB's shape) and nothing was sent.
 */
#ifndef LAPSE_DDB_TABLEDEF_H
#define LAPSE_DDB_TABLEDEF_H

#include "ddb_req.h"

/* Reads a KeySchema (one HASH, at most one RANGE) into *pk and *sk (NULL:
 * none), with their types from defs. Returns 0 or -1 with the error set. */
int ddb_tabledef_key_schema(ddb_ctx *x, json_t *ks, json_t *defs, const char *what, const char **pk,
                            char *pkt, const char **sk, char *skt);
/* Reads LocalSecondaryIndexes (gsi 0) or GlobalSecondaryIndexes (gsi 1)
 * array arr into *out (caller frees; *n entries), an INCLUDE projection
 * kept as ALL for the nodes and recorded in projections (a JSON object, by
 * index name, {"ProjectionType":"INCLUDE","NonKeyAttributes":[...]});
 * *nonkey counts NonKeyAttributes over the table's indexes (DynamoDB's
 * limit is 100). Returns 0 or -1 with the error set. */
int ddb_tabledef_indexes(ddb_ctx *x, json_t *arr, json_t *defs, int gsi, lapse_index_def **out,
                         size_t *n, json_t *projections, size_t *nonkey);

#endif
