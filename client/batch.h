/*
 * batch.h: the engine behind lapse_batch_write and lapse_batch_get. Entries
 * are routed with the cached map, grouped per owner node into chunks, and
 * every chunk of a round is sent at once (rpc_call_many), so a batch spread
 * over N nodes costs about one round trip. Entries a node reports as not its
 * own, and chunks that failed retryably (WRONG_NODE, timeout, unavailable),
 * go into the next round after a backoff and a map refresh, until the
 * client's timeout passes without progress.
 *
 * Internal to client/. Thread-safety: one batch_run per caller thread; the
 * client it uses is shared as usual.
 *
 * Invariants:
 *  1. Every entry is delivered to exactly one successful chunk, or the run
 *     fails; an entry is resent only after its chunk failed retryably or its
 *     node reported it unprocessed.
 */
#ifndef LAPSE_CLIENT_BATCH_H
#define LAPSE_CLIENT_BATCH_H

#include <stddef.h>

#include "../common/arena.h"
#include "client.h"

typedef struct batch_entry {
    client_target tg; /* routing: table and partition */
    size_t bytes;     /* request bytes this entry adds, for chunking */
} batch_entry;

typedef struct batch_ops {
    size_t max_entries; /* per request */
    size_t max_bytes;   /* per request */
    /* Fills req's body for entries idx[0..n), allocating from a. Returns 0
     * or a Lapse code with err set. */
    int (*build)(void *ctx, arena *a, const size_t *idx, size_t n, Lapse__Request *req,
                 lapse_error *err);
    /* Takes an OK reply for entries idx[0..n): records their results and
     * writes the positions (into idx) the node did not process into
     * unprocessed[0..*nun). Returns 0 or a Lapse code with err set. */
    int (*done)(void *ctx, const size_t *idx, size_t n, const Lapse__Response *resp,
                size_t *unprocessed, size_t *nun, lapse_error *err);
    /* How long a node may hold a request before answering (a long poll):
     * added to each round's RPC timeout. 0 for ordinary calls. */
    unsigned wait_ms;
} batch_ops;

/* Runs the batch of n entries. Returns 0, or the first non-retryable error,
 * or the last retryable one once the timeout passed without progress. */
int batch_run(lapse_client *c, batch_entry *e, size_t n, const batch_ops *ops, void *ctx,
              lapse_error *err);

#endif
