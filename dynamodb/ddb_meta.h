/*
 * ddb_meta.h: what DynamoDB keeps of a table that Lapse's table schema does
 * not (an index's INCLUDE projection, the table's tags), kept by the
 * gateway as one item per table in a Lapse table of its own,
 * DDB_META_TABLE, so any gateway reads what another wrote
 * (docs/dynamodb-api.md, "What the gateway keeps").
 *
 * Thread-safety: as liblapse's client; each call on its own ddb_ctx.
 *
 * Invariants:
 *  1. A table's document is keyed by its name and its creation time
 *     (CreatedAtMs), so a table deleted and created again under the same
 *     name never sees the old one's.
 *  2. DDB_META_TABLE is made on first use (by whichever gateway writes
 *     first) and is hidden from the DynamoDB API: ListTables leaves it out
 *     and every call naming it is refused (ddb_meta_reserved).
 */
#ifndef LAPSE_DDB_META_H
#define LAPSE_DDB_META_H

#include <stdint.h>

#include "ddb_req.h"

#define DDB_META_TABLE "lapse.dynamodb.meta"

/* Table's document into *out (a new object, owned by the caller; {} when
 * there is none). Returns 0 or -1 with x's error set. */
int ddb_meta_get(ddb_ctx *x, const char *table, int64_t created_ms, json_t **out);
/* Replaces table's document with doc (borrowed; an empty one is deleted).
 * Returns 0 or -1 with x's error set. */
int ddb_meta_put(ddb_ctx *x, const char *table, int64_t created_ms, json_t *doc);
/* Changes table's document by fn (called with the document as stored, {}
 * when none, to change in place; returns 0, or -1 with x's error set to
 * give up), written only if nobody wrote it since it was read: read again
 * and retried otherwise (up to 8 times, then 500). Returns 0 or -1 with x's
 * error set. */
int ddb_meta_update(ddb_ctx *x, const char *table, int64_t created_ms,
                    int (*fn)(ddb_ctx *x, json_t *doc, void *arg), void *arg);
/* 1 when req names DDB_META_TABLE (TableName or a RequestItems member),
 * with x's error set: ResourceNotFoundException, or for CreateTable a
 * ValidationException saying the name is Lapse's; else 0. */
int ddb_meta_reserved(ddb_ctx *x, const char *op, json_t *req);

#endif
