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

#endif
