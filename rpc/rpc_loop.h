/*
 * rpc_loop.h: one thread that waits on many file descriptors (epoll) and
 * runs a callback for each that is readable, so that a process may read its
 * connections to the nodes and serve its own sockets on one thread instead
 * of handing each event from a thread to another.
 *
 * Used by rpc_conn (a connection opened with a loop is read on the loop's
 * thread once it is up, rpc_conn.h) and, through liblapse's lapse_loop, by
 * the DynamoDB gateway, whose HTTP server runs on the same thread
 * (docs/dynamodb-api.md, "Threads").
 *
 * A driven loop (rpc_loop_open_driven) has no thread of its own: whoever
 * waits for its calls runs its rounds, in rpc_loop_drive, one caller at a
 * time; so the thread that made the calls reads their replies itself, and
 * no other thread is woken in between. The node ships its replication log
 * to its followers on one (docs/replication.md, "Group commit"). Nothing
 * reads its descriptors while nobody drives it.
 *
 * Thread-safety: every function may be called from any thread but
 * rpc_loop_barrier and rpc_loop_close (not from the loop's own thread, nor
 * by a driver from a callback).
 *
 * Invariants:
 *  1. A watch's callback runs only on the loop's thread, one at a time, and
 *     only while its descriptor is watched or in the round of events that
 *     was taken before rpc_loop_del.
 *  2. After rpc_loop_del(fd) then rpc_loop_barrier, no callback of that
 *     watch runs or will run: its memory may go.
 */
#ifndef LAPSE_RPC_LOOP_H
#define LAPSE_RPC_LOOP_H

#include "../common/clock.h"

typedef struct rpc_loop rpc_loop;

/* A watch: fn(arg) runs on the loop's thread while its descriptor is
 * readable (level-triggered: it must read until the descriptor would block,
 * or it runs again at once). Owned by the caller; it lives until the
 * barrier after its rpc_loop_del. */
typedef struct rpc_loop_watch {
    void (*fn)(void *arg);
    void *arg;
} rpc_loop_watch;

/* Starts a loop and its thread (named name, up to 15 characters). Returns
 * 0, or a Lapse code. */
int rpc_loop_open(rpc_loop **out, const char *name);

/* Makes a driven loop: no thread; its rounds run in rpc_loop_drive.
 * Returns 0 or LAPSE_ENOMEM. */
int rpc_loop_open_driven(rpc_loop **out);

/* Runs l's rounds on the calling thread until done(arg) is nonzero or
 * deadline passes; while another caller runs them, waits for each round's
 * end instead. done is called with the loop's lock held: it may take its
 * own lock, never call into l. A callback that ends a caller's wait on
 * another thread (a connection's, for a timeout or a failure) calls
 * rpc_loop_wake. REQUIRES: l is driven. */
void rpc_loop_drive(rpc_loop *l, int (*done)(void *arg), void *arg, clock_mono deadline);

/* Whether l (which may be NULL) is a driven loop. */
int rpc_loop_is_driven(const rpc_loop *l);

/* Ends the round under way early (its epoll_wait returns), so a driver
 * looks at its done() again. */
void rpc_loop_wake(rpc_loop *l);

/* Watches fd for readability (and its errors and hang-ups). Returns 0 or a
 * Lapse code. */
int rpc_loop_add(rpc_loop *l, int fd, rpc_loop_watch *w);

/* Stops watching fd (closing it does too). Callbacks of the current round
 * may still run: rpc_loop_barrier waits them out. */
void rpc_loop_del(rpc_loop *l, int fd);

/* rpc_loop_add and rpc_loop_del for an owner that keeps no watch of its
 * own: the loop keeps one per descriptor. rpc_loop_unwatch_fd returns once
 * no callback of fd's watch runs or will (del, then the barrier), so it has
 * the barrier's REQUIRES. Returns as rpc_loop_add. */
int rpc_loop_watch_fd(rpc_loop *l, int fd, void (*fn)(void *arg), void *arg);
void rpc_loop_unwatch_fd(rpc_loop *l, int fd);

/* Returns once the round of callbacks running now (if any) has ended.
 * REQUIRES: not on the loop's thread. */
void rpc_loop_barrier(rpc_loop *l);

/* Whether the caller runs on l's thread (a driven loop's: is its driver). */
int rpc_loop_on_thread(const rpc_loop *l);

/* Stops the thread and frees l, with the watches it keeps
 * (rpc_loop_watch_fd) still there. Every rpc_loop_add watch must have been
 * removed. Accepts NULL. REQUIRES: not on the loop's thread. */
void rpc_loop_close(rpc_loop *l);

#endif /* LAPSE_RPC_LOOP_H */
