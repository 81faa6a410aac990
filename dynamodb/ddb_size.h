/*
 * ddb_size.h: DescribeTable's ItemCount and TableSizeBytes
 * (docs/dynamodb-api.md): lapse_table_size, cached per table for
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

/* The items and bytes of table (created at created_ms) into *items and *bytes, from
 * the cache when sized less than DDB_SIZE_CACHE_MS ago, else from the
 * nodes (both 0 when that fails: invariant 2). */
void ddb_size_get(ddb_ctx *x, const char *table, int64_t created_ms, uint64_t *items,
                  uint64_t *bytes);

#endif
