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
 * Thread-safety: every function may be called from any thread but
 * rpc_loop_barrier and rpc_loop_close (not from the loop's own thread).
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

/* Whether the caller runs on l's thread. */
int rpc_loop_on_thread(const rpc_loop *l);

/* Stops the thread and frees l, with the watches it keeps
 * (rpc_loop_watch_fd) still there. Every rpc_loop_add watch must have been
 * removed. Accepts NULL. REQUIRES: not on the loop's thread. */
void rpc_loop_close(rpc_loop *l);

#endif /* LAPSE_RPC_LOOP_H */
