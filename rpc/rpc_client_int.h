/*
 * rpc_client_int.h: what the client half of rpc.h shares between its
 * files, which call one way, down:
 *   rpc_client.c           the client (open, close) and its calls
 *   rpc_coalesce.c         single-item calls of many threads sent together
 *                          in frames (docs/wire-protocol.md "Coalesced
 *                          calls")
 *   rpc_client_exchange.c  under both: peers, exchanges, requests packed
 *                          and replies taken
 * and each peer's rpc_conn (rpc_conn.h) carries every exchange and
 * coalesced frame; with LAPSE_RPC_CLIENT=req0 set when a client opens, a
 * req0 socket per peer does instead, and there is no conn. Not part of the module's
 * interface (rpc.h is).
 *
 * Thread-safety: a client is shared by any number of threads. peers, npeers,
 * stream and url are set by rpc_client_open and read-only after; cur and each
 * peer's pipes are atomics; a conn locks itself; the coalescing fields are
 * guarded by cmu.
 *
 * Invariants:
 *  1. A frame that is not out sits on free_frames or on dead_frames, never
 *     on both.
 *  2. A frame on dead_frames is never sent on again: its context may still
 *     wait for a reply, so a caller's thread closes it (rpc_coalesce.c).
 *  3. A waiter lives on its caller's stack: queued (qhead..qtail) or not,
 *     then in one frame's batch unless its deadline passes first, then
 *     done (W_DONE); its caller returns only once it is done.
 */
#ifndef LAPSE_RPC_CLIENT_INT_H
#define LAPSE_RPC_CLIENT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include <nng/nng.h>

#include "../common/clock.h"
#include "rpc.h"
#include "rpc_conn.h"

#define RPC_CLIENT_MAX_PEERS 8 /* URLs in one client's list */

/* One req0 socket with one dialer per peer URL: a list is several sockets,
 * never several dialers on one socket (each peer's connection is managed
 * apart, as for a single URL). A call goes to the current peer while it has
 * a connection, else to the first peer that has one; a call that times out
 * moves the current peer on, so a stalled peer costs one timeout. With the
 * stream transport on, a peer has a conn instead (no socket), and whether it
 * is connected is the conn's state. */
typedef struct peer {
    nng_socket sock;
    int open;         /* sock was opened */
    atomic_int pipes; /* connected pipes, from NNG's pipe notifications */
    rpc_conn *conn;   /* owned; NULL unless rpc_client.stream */
} peer;

typedef struct waiter waiter; /* a coalescable call (rpc_coalesce.c) */
typedef struct frame frame;   /* one coalesced exchange (rpc_coalesce.c) */

struct rpc_client {
    peer peers[RPC_CLIENT_MAX_PEERS];
    int npeers;
    int stream;              /* not LAPSE_RPC_CLIENT=req0 at the open: peers have conns */
    atomic_int cur;          /* the peer calls go to while it works */
    char *url;               /* owned: the list as given */
    struct rpc_loop *driven; /* its conns' loop when that is driven: a caller
                                waits for its calls by driving it */

    /* Coalescing (rpc_call): frames in flight, and the calls waiting for
     * one of them to come back, oldest first. */
    pthread_mutex_t cmu;
    pthread_cond_t idle; /* signalled when a frame ends */
    int inflight;
    waiter *qhead, *qtail;
    frame *free_frames;      /* frames not out, each with its aio (and context) */
    frame *dead_frames;      /* frames whose exchange failed: their context may still
                                wait for a reply, so it is closed, never reused */
    int async_queued;        /* queued calls of rpc_call_async */
    int stall_started;       /* stall_thread runs (from the first one queued) */
    int stall_idle;          /* it waits for one to be queued (no time-out) */
    pthread_t stall_thread;  /* sends them on after a stall (rpc_coalesce.c) */
    pthread_cond_t stall_cv; /* wakes it: one queued, or closing */
    int closing;             /* rpc_client_close began: no frame is started for them */
};

/* One message exchange of a group: msg (consumed) goes to client; on return
 * reply holds the reply message (caller frees) or rv a Lapse code with err. */
typedef struct exchange {
    rpc_client *client;
    int peer; /* the peer it went to */
    nng_msg *msg;
    nng_msg *reply;
    int rv;
    char *err;
    size_t errlen;
} exchange;

/* ---- rpc_client_exchange.c ---- */

/* Whether peer i of c is connected: its conn with the stream transport on,
 * else its req0 socket. */
int rpc_client_peer_up(rpc_client *c, int i);

/* The peer a call goes to: the current one while it is connected, else the
 * first connected one after it (which becomes current), else the current
 * one (the call waits for its connection). May wait up to 200 ms for a peer
 * of a list to connect. */
int rpc_client_pick_peer(rpc_client *c);

/* Runs n exchanges at once, each on its own context (or, when the client
 * has conns, as a call on its peer's conn), so n messages to
 * n peers take about one round trip, bounded by the one shared deadline.
 * Exchanges whose msg is NULL are skipped (their rv is left as it is). */
void rpc_client_exchange_all(exchange *xs, size_t n, int timeout_ms);

/* Sets x->rv (a Lapse code) and x->err from NNG's error nrv of an exchange
 * of timeout_ms; a timeout moves the client's current peer on. */
void rpc_client_exchange_fail(exchange *x, int nrv, int timeout_ms);

/* An exchange's send on ctx completed with rv: on success, sets
 * *receiving (before the receive is posted: its completion may run at
 * once, on another thread), posts the receive of the reply and returns 1;
 * on failure, frees the message the send left with us and returns 0. */
int rpc_client_send_done(nng_aio *aio, nng_ctx ctx, int rv, clock_mono deadline, int *receiving);

/* Unpacks reply (consumed) with alloc (NULL: malloc), after the nesting
 * check every frame from the network gets. NULL when it does not decode;
 * *len gets its size. */
Lapse__Response *rpc_client_unpack_reply(ProtobufCAllocator *alloc, nng_msg *reply, size_t *len);
/* rpc_client_unpack_reply of len bytes at data (borrowed). */
Lapse__Response *rpc_client_unpack_bytes(ProtobufCAllocator *alloc, const void *data, size_t len);

/* Takes a decoded reply r (NULL: undecodable, len bytes) from url into
 * *resp (caller frees with rpc_response_free) and returns its status, as
 * rpc_call does. */
int rpc_client_take_reply(const char *url, Lapse__Response *r, size_t len, Lapse__Response **resp,
                          char *err, size_t errlen);

/* A new message of len bytes in *out (caller frees). 0, LAPSE_ETOOBIG or
 * LAPSE_ENOMEM with err set. */
int rpc_client_new_msg(nng_msg **out, size_t len, char *err, size_t errlen);

/* Fills req's envelope (version, timeout_ms) and packs it into a new *out
 * (caller frees). Returns 0, LAPSE_ETOOBIG or LAPSE_ENOMEM with err set. */
int rpc_client_pack_request(Lapse__Request *req, int timeout_ms, nng_msg **out, char *err,
                            size_t errlen);

/* ---- rpc_coalesce.c ---- */

/* rpc_call of a coalescable call (same contract). REQUIRES: timeout_ms > 0. */
int rpc_coalesce_call(rpc_client *c, Lapse__Request *req, int timeout_ms, Lapse__Response **resp,
                      char *err, size_t errlen);

/* rpc_call_async of a coalescable call (same contract). REQUIRES:
 * timeout_ms > 0. */
int rpc_coalesce_call_async(rpc_client *c, Lapse__Request *req, int timeout_ms, rpc_done_fn done,
                            void *arg, char *err, size_t errlen);

/* Before c's sockets close: waits for the callbacks of the frames not out
 * to return, then closes their contexts. */
void rpc_coalesce_idle_close(rpc_client *c);

/* After c's sockets closed: waits (bounded) for the frames still out, then
 * frees every frame. */
void rpc_coalesce_close(rpc_client *c);

#endif /* LAPSE_RPC_CLIENT_INT_H */
