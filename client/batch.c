/*
 * batch.c: the batch engine (batch.h).
 */
#include "batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"

/* One chunk of a round: a request to one node for entries idx[0..n). */
typedef struct chunk {
    client_route route;
    size_t *idx; /* into the round's chunk index space */
    size_t n;
    Lapse__Request req;
} chunk;

typedef struct round {
    size_t *pending, npending; /* entries to send this round */
    size_t *next, nnext;       /* entries to send next round */
    int progressed;            /* some chunk was applied this round */
    lapse_error last;          /* the last retryable failure */
} round;

static int retryable(int rv)
{
    return rv == LAPSE_EWRONGNODE || rv == LAPSE_ETIMEDOUT || rv == LAPSE_EUNAVAILABLE;
}

/* Groups the pending entries by owner node into chunks (in idx_space,
 * which has room for npending indexes). Returns the chunk count, or a
 * negative Lapse code with err set. */
static long make_chunks(lapse_client *c, batch_entry *e, round *r, const batch_ops *ops,
                        client_route *routes, char *done, size_t *idx_space, chunk *chunks,
                        lapse_error *err)
{
    int rv;
    size_t nchunks = 0, used = 0;
    for (size_t i = 0; i < r->npending; i++) {
        if ((rv = client_route_of(c, &e[r->pending[i]].tg, &routes[i], err)) != 0) {
            return -rv;
        }
    }
    memset(done, 0, r->npending);
    /* Each outer step takes the first unsent entry's node and cuts all of
     * that node's entries into chunks; few nodes, so the walk is short. */
    for (size_t first = 0; first < r->npending; first++) {
        if (done[first]) {
            continue;
        }
        chunk *ch = NULL;
        size_t bytes = 0;
        for (size_t i = first; i < r->npending; i++) {
            if (done[i] || routes[i].node_id != routes[first].node_id) {
                continue;
            }
            size_t b = e[r->pending[i]].bytes;
            if (ch == NULL || ch->n == ops->max_entries || bytes + b > ops->max_bytes) {
                ch = &chunks[nchunks++];
                memset(ch, 0, sizeof(*ch));
                ch->route = routes[first];
                ch->idx = idx_space + used;
                bytes = 0;
            }
            ch->idx[ch->n++] = r->pending[i];
            used++;
            bytes += b;
            done[i] = 1;
        }
    }
    return (long)nchunks;
}

/* Sends all chunks at once and sorts the outcomes into r. */
static int send_round(lapse_client *c, batch_entry *e, chunk *chunks, size_t nchunks,
                      const batch_ops *ops, void *ctx, round *r, lapse_error *err)
{
    int rv = 0;
    int timeout = client_timeout_ms(c);
    arena a;
    arena_init(&a);
    rpc_multi_call *calls = calloc(nchunks ? nchunks : 1, sizeof(*calls));
    size_t *unprocessed = NULL;
    if (calls == NULL) {
        rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < nchunks; k++) {
        lapse__request__init(&chunks[k].req);
        chunks[k].req.pmap_version = chunks[k].route.pmap_version;
        if ((rv = client_conn(c, chunks[k].route.addr, &calls[k].client, err)) != 0 ||
            (rv = ops->build(ctx, &a, chunks[k].idx, chunks[k].n, &chunks[k].req, err)) != 0) {
            goto out;
        }
        calls[k].req = &chunks[k].req;
    }
    rpc_call_many(calls, nchunks, timeout + (int)ops->wait_ms);
    for (size_t k = 0; k < nchunks && rv == 0; k++) {
        chunk *ch = &chunks[k];
        if (calls[k].rv == 0) {
            size_t nun = 0;
            unprocessed = realloc(unprocessed, (ch->n ? ch->n : 1) * sizeof(*unprocessed));
            if (unprocessed == NULL) {
                rv = client_err(err, LAPSE_ENOMEM, "out of memory");
                break;
            }
            if ((rv = ops->done(ctx, ch->idx, ch->n, calls[k].resp, unprocessed, &nun, err)) != 0) {
                break;
            }
            for (size_t j = 0; j < nun; j++) {
                size_t i = ch->idx[unprocessed[j]];
                client_target_failed(&e[i].tg, ch->route.node_id, LAPSE_EWRONGNODE);
                r->next[r->nnext++] = i;
            }
            if (nun < ch->n) {
                r->progressed = 1;
            } else {
                client_err(&r->last, LAPSE_EWRONGNODE, "node %u (%s): %zu entries unprocessed",
                           (unsigned)ch->route.node_id, ch->route.addr, ch->n);
            }
        } else if (retryable(calls[k].rv)) {
            client_node_err(&r->last, calls[k].rv, &ch->route, calls[k].err, timeout);
            for (size_t j = 0; j < ch->n; j++) {
                client_target_failed(&e[ch->idx[j]].tg, ch->route.node_id, calls[k].rv);
                r->next[r->nnext++] = ch->idx[j];
            }
        } else {
            rv = client_node_err(err, calls[k].rv, &ch->route, calls[k].err, timeout);
        }
    }
out:
    for (size_t k = 0; calls != NULL && k < nchunks; k++) {
        rpc_response_free(calls[k].resp);
    }
    free(calls);
    free(unprocessed);
    arena_fini(&a);
    return rv;
}

int batch_run(lapse_client *c, batch_entry *e, size_t n, const batch_ops *ops, void *ctx,
              lapse_error *err)
{
    int rv = 0;
    round r;
    memset(&r, 0, sizeof(r));
    r.pending = malloc((n ? n : 1) * sizeof(size_t));
    r.next = malloc((n ? n : 1) * sizeof(size_t));
    client_route *routes = malloc((n ? n : 1) * sizeof(*routes));
    char *done = malloc(n ? n : 1);
    size_t *idx_space = malloc((n ? n : 1) * sizeof(size_t));
    chunk *chunks = malloc((n ? n : 1) * sizeof(*chunks));
    if (r.pending == NULL || r.next == NULL || routes == NULL || done == NULL ||
        idx_space == NULL || chunks == NULL) {
        rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        r.pending[i] = i;
    }
    r.npending = n;

    int timeout = client_timeout_ms(c);
    clock_mono deadline = clock_mono_after_ms(timeout);
    int64_t backoff = CLIENT_BACKOFF_MIN_MS;
    client_refresh_suspect(c, timeout);
    while (r.npending > 0) {
        r.nnext = 0;
        r.progressed = 0;
        long nchunks = make_chunks(c, e, &r, ops, routes, done, idx_space, chunks, err);
        if (nchunks < 0) {
            rv = (int)-nchunks;
            goto out;
        }
        if ((rv = send_round(c, e, chunks, (size_t)nchunks, ops, ctx, &r, err)) != 0) {
            goto out;
        }
        if (r.nnext == 0) {
            break;
        }
        if (r.progressed) {
            /* The deadline bounds a stall, not a long batch. */
            deadline = clock_mono_after_ms(timeout);
        }
        if (clock_mono_remaining_ms(deadline) <= 0) {
            rv = client_err(err, r.last.code ? r.last.code : LAPSE_ETIMEDOUT,
                            "%zu of %zu entries not done: %s", r.nnext, n, r.last.message);
            client_map_suspect(c, rv);
            goto out;
        }
        client_backoff(&backoff, deadline);
        client_refresh(c, timeout, NULL);
        size_t *tmp = r.pending;
        r.pending = r.next;
        r.next = tmp;
        r.npending = r.nnext;
    }
    rv = client_ok(err);
out:
    free(r.pending);
    free(r.next);
    free(routes);
    free(done);
    free(idx_space);
    free(chunks);
    return rv;
}
