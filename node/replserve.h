/*
 * replserve.h: the Replicate call, the destination side of another node's
 * shipper (docs/replication.md, "Shipping and applying"): checks the caller
 * (the cluster token) and the batch, then applies it with replicate_apply
 * (replicate.h), the same function this node's shipper delivers its own
 * records through. Run by the dispatcher (handlers.c) through the shared
 * steps of request.h.
 *
 * Thread-safety: any RPC worker thread; a request_ctx belongs to one call.
 *
 * Invariants:
 *  1. With a cluster token set, a caller without it is refused (EPERM)
 *     before anything is read: a forged batch could move the applied seq.
 *  2. The reply carries the applied seq, with ESTATE too: the sender
 *     resends from it.
 */
#ifndef LAPSE_REPLSERVE_H
#define LAPSE_REPLSERVE_H

#include "request.h"

/* Sets status or body (ReplicateResponse) on c->resp. */
void replserve_handle(request_ctx *c);

#endif
