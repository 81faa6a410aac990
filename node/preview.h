/*
 * preview.h: the TtlPreview call (preview.c), a dry run of a TTL rule over
 * the partitions this node owns, run by the dispatcher (handlers.c) through
 * the shared steps of request.h.
 *
 * Thread-safety: any RPC worker thread; a request_ctx belongs to one call.
 *
 * Invariants: as request.h. The call sets status or body on c->resp.
 */
#ifndef LAPSE_PREVIEW_H
#define LAPSE_PREVIEW_H

#include "request.h"

void preview_ttl(request_ctx *c);

#endif
