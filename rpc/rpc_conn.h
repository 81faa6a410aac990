/*
 * rpc_conn.h: a client connection to one peer that frames requests by hand
 * over a plain TCP socket read by a thread of its own, and speaks the wire
 * a req0 socket speaks (SP over TCP, docs/wire-protocol.md), so an
 * unchanged rep0 server (rpc_server) answers it. It skips the hand-offs
 * between threads a reply costs on NNG's sockets and aios: a caller writes
 * its request itself, many requests go in one write when the socket is
 * busy, and the connection's thread reads many replies at once and runs
 * their callbacks. Used by the client (rpc_client_exchange.c) unless
 * LAPSE_RPC_CLIENT=req0; internal to rpc/.
 *
 * The wire, per connection:
 *   handshake  each side sends {0x00,'S','P',0x00, proto (16-bit big-endian),
 *              0x00,0x00}: we send req0 (48) and accept only rep0 (49)
 *   message    an 8-byte big-endian length, then the body. A request's body
 *              is a 4-byte big-endian id with its top bit set, then the
 *              request's bytes; the reply's body starts with the same id
 *              (rep0's backtrace), then the reply's bytes.
 *
 * A connection is a small state machine run by its thread, which sleeps in
 * poll(2) on the socket and on an eventfd that wakes it early. Opened on a
 * loop (rpc_conn_open_on, rpc_loop.h), the socket is read on the loop's
 * thread while the connection is UP, and the replies' callbacks run there:
 * the connection's thread then only dials, shakes hands, writes what the
 * socket did not take at once and ends calls whose deadline passed.
 *
 *   BACKOFF --time up--> CONNECTING --connected--> HANDSHAKE --both headers--> UP
 *      ^                     |fail or 5 s              |fail or 5 s              |fail
 *      +---------------------+-------------------------+-------------------------+
 *
 * The first dial is at once; the backoff starts at 10 ms after a connection
 * was up and doubles to 1 s while dials fail. The host is resolved (and a
 * name looked up) on the connection's thread, so a slow lookup delays only
 * this connection, and its calls' deadlines by as much.
 *
 * Thread-safety: every function may be called from any thread; one mutex
 * (rpc_conn.mu) guards all the state but the receive buffer, which only the
 * connection's thread touches. The socket is non-blocking: a caller that
 * writes under the mutex never waits on the peer. Callbacks run without the
 * mutex, so a callback may call rpc_conn_call again.
 *
 * Invariants:
 *  1. A call queued by rpc_conn_call ends exactly once, by its callback: with
 *     the reply, or NNG_ECONNSHUT when the connection it went on (or waited
 *     for) failed, NNG_ETIMEDOUT when its deadline passed, NNG_ECLOSED from
 *     rpc_conn_close. A reply that comes for a call that has ended is
 *     dropped (matched by id).
 *  2. A call made while the connection is not UP keeps its own copy of the
 *     request and goes out when it is (a call whose deadline passes first
 *     never goes out); one made while it is UP is written at once, or
 *     appended to the bytes that go in the next write.
 *  3. Only the connection's thread opens the socket. One thread reads it:
 *     the connection's, or while UP on a loop the loop's (a driven loop's
 *     driver, rpc_loop_drive; calls the connection's thread ends then wake
 *     that loop, since its driver waits on nothing else), which may also
 *     close it when a read fails (then the connection's thread dials again
 *     only once that reader is done with the received bytes). Callers only
 *     write to it, under the mutex.
 */
#ifndef LAPSE_RPC_CONN_H
#define LAPSE_RPC_CONN_H

#include <stddef.h>

#include "../common/clock.h"

typedef struct rpc_conn rpc_conn;

/* A call's outcome: rv 0 with the reply's bytes (after the id; borrowed for
 * the duration of the callback), or an NNG error (invariant 1) with reply
 * NULL. Runs on the connection's thread, its loop's, or the thread in
 * rpc_conn_close: it must not block. */
typedef void (*rpc_conn_done_fn)(void *arg, int rv, const void *reply, size_t len);

/* Creates a connection to url (tcp://host:port, tcp://[v6-address]:port)
 * and starts dialling it on the connection's thread; never blocks. Returns
 * 0, or an NNG error (NNG_EADDRINVAL, NNG_ENOTSUP for a scheme other than
 * tcp, NNG_ENOMEM) with *out NULL. */
int rpc_conn_open(rpc_conn **out, const char *url);

/* As rpc_conn_open, with the socket read on loop's thread (rpc_loop.h)
 * while the connection is UP, the replies' callbacks run there too; NULL:
 * on the connection's thread, as rpc_conn_open. loop must outlive c. */
struct rpc_loop;
int rpc_conn_open_on(rpc_conn **out, const char *url, struct rpc_loop *loop);

/* Whether the connection is UP (handshake done) right now. */
int rpc_conn_connected(rpc_conn *c);

/* Queues a request of len bytes (body, copied) that must be answered by
 * deadline. Returns 0, and done(arg, ...) is then called exactly once
 * (perhaps before this returns, on another thread); or NNG_EMSGSIZE (len over
 * RPC_MAX_MESSAGE_BYTES) or NNG_ENOMEM, and done is never called.
 * REQUIRES: rpc_conn_close has not begun. */
int rpc_conn_call(rpc_conn *c, const void *body, size_t len, clock_mono deadline,
                  rpc_conn_done_fn done, void *arg);

/* Stops the connection's thread (waiting for callbacks in progress), ends
 * every outstanding call with NNG_ECLOSED, closes the socket and frees c;
 * no callback runs after it returns. Accepts NULL. REQUIRES: not called
 * from a callback of c, nor on its loop's thread. */
void rpc_conn_close(rpc_conn *c);

#endif /* LAPSE_RPC_CONN_H */
