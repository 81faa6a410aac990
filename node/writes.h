/*
 * writes.h: the write calls, PutItem, DeleteItem, UpdateItem and BatchWrite
 * (writes.c), run by the dispatcher (handlers.c) through the shared steps of
 * request.h.
 *
 * Thread-safety: any RPC worker thread; a request_ctx belongs to one call.
 *
 * Invariants: as request.h. Each call sets status or body on c->resp.
 */
#ifndef LAPSE_WRITES_H
#define LAPSE_WRITES_H

#include "request.h"

void writes_put(request_ctx *c);
void writes_delete(request_ctx *c);
void writes_update(request_ctx *c);
void writes_batch(request_ctx *c); /* at most REQUEST_BATCH_MAX writes */
/* The PutItem and DeleteItem calls cs[0..n) (of one coalesced frame,
 * docs/wire-protocol.md), each with its own reply: every call writes,
 * then one wait sees their records onto the replicas, so they ship in one
 * round instead of a round each. More than RPC_MAX_COALESCED calls
 * (never from a frame) are served one at a time. */
void writes_many(request_ctx *cs, size_t n);

#endif
