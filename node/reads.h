/*
 * reads.h: the read calls, GetItem, Query (of the table, or of an index:
 * reads_index.c), Scan, BatchGet and TableStats (reads.c), run by the dispatcher
 * (handlers.c) through the shared steps of request.h.
 *
 * Thread-safety: any RPC worker thread; a request_ctx belongs to one call.
 *
 * Invariants: as request.h. Each call sets status or body on c->resp.
 */
#ifndef LAPSE_READS_H
#define LAPSE_READS_H

#include "request.h"

void reads_get(request_ctx *c);
void reads_query(request_ctx *c);
void reads_scan(request_ctx *c);
void reads_batch_get(request_ctx *c); /* at most REQUEST_BATCH_MAX keys */
/* TableStats: the items and bytes of the asked partitions this node is the
 * primary of (store_estimate, READS_STATS_WALK items walked per partition
 * at most), with each one's LSI entries when asked (store_estimate_lsi, as
 * many walks more as the table has LSIs); the others are unprocessed. And
 * the entries of the asked GSI partitions this node holds a copy of
 * (store_estimate_gsi, one walk each); the others are unprocessed. At most
 * 4096 partitions, base and GSI, a call. */
void reads_table_stats(request_ctx *c);

/* Items walked per partition by TableStats before the rest is estimated:
 * a call of N partitions reads at most N times this many items, and the
 * gateway asks once per table per its cache period
 * (docs/dynamodb-api.md, DescribeTable). */
#define READS_STATS_WALK 10000
#define READS_STATS_MAX_PARTITIONS 4096

#endif
