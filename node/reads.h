/*
 * reads.h: the read calls, GetItem, Query (of the table, or of an index:
 * reads_index.c), Scan and BatchGet (reads.c), run by the dispatcher
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

#endif
