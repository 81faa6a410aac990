/*
 * ddb_size.h: DescribeTable's ItemCount and TableSizeBytes, and each
 * index's ItemCount and IndexSizeBytes (docs/dynamodb-api.md):
 * lapse_table_sizes, cached per table for
 * DDB_SIZE_CACHE_MS, so DescribeTable in a loop (the SDKs' waiters poll it)
 * costs the nodes one walk of the table per period, not one per call.
 * DynamoDB itself refreshes the figures about every six hours.
 *
 * Thread-safety: any worker thread; the cache has its own lock, never held
 * during a call to the cluster.
 *
 * Invariants:
 *  1. A cached figure belongs to one table and creation time: a table
 *     deleted and made again under the same name is sized afresh.
 *  2. A failed sizing answers 0 and is not cached, so the next DescribeTable
 *     asks again; DescribeTable never fails for it.
 */
#ifndef LAPSE_DDB_SIZE_H
#define LAPSE_DDB_SIZE_H

#include <stdint.h>

#include "ddb_req.h"

#define DDB_SIZE_CACHE_MS 10000
#define DDB_SIZE_SLOTS 64

/* A table's figures and its indexes' (lapse_table_sizes). */
typedef struct ddb_size {
    lapse_table_size_info table;
    lapse_index_size_info *indexes; /* owned: ddb_size_fini */
    size_t nindexes;
} ddb_size;

/* The figures of table (created at created_ms) into *out, from the cache
 * when sized less than DDB_SIZE_CACHE_MS ago, else from the nodes (all 0
 * and no indexes when that fails: invariant 2). The caller frees *out with
 * ddb_size_fini. */
void ddb_size_get(ddb_ctx *x, const char *table, int64_t created_ms, ddb_size *out);
/* Frees what s holds and zeroes it; accepts a zeroed s. */
void ddb_size_fini(ddb_size *s);

#endif
