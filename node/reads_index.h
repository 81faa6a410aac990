/*
 * reads_index.h: Query of a secondary index (reads_index.c;
 * docs/replication.md "Indexes"): the Query call when QueryRequest.index is
 * set, which reads_query hands on. Uses the steps of reads_steps.h.
 *
 * Thread-safety: any RPC worker thread; a request_ctx belongs to one call.
 *
 * Invariants: as request.h. The call sets status or body on c->resp.
 */
#ifndef LAPSE_READS_INDEX_H
#define LAPSE_READS_INDEX_H

#include "request.h"

/* REQUIRES: request_need_body succeeded and c->eventual is set (reads_query
 * did both). */
void reads_query_index(request_ctx *c);

#endif
