/*
 * rpc.h: request/reply over NNG (req0/rep0 on TCP) with protobuf-c messages
 * (proto/lapse.proto). The only module that includes <nng/...>.
 *
 * Server: connections framed by hand over NNG's stream API
 * (rpc_server_stream.c; docs/wire-protocol.md, "The stream server"), or,
 * with LAPSE_RPC_SERVER=rep0 set when a server opens, NNG's rep0 socket: a
 * fixed pool of contexts, each a small state machine
 *
 *     RECV --(message)--> QUEUED --(a worker ran the handler)--> SEND --+
 *      ^                                                                |
 *      +----------------------------------------------------------------+
 *
 * (NNG's demo/async/server.c). Either way a pool of worker threads runs the
 * handler, so a handler may block (on RocksDB, or on an RPC to another
 * daemon) without stalling NNG's own threads. The server decodes each
 * request on the thread that received it, answers EPROTO itself for
 * undecodable bytes, a wrong protocol version or an empty body, serves a
 * quick call (rpc_server_options.quick) right there, and on a stream
 * connection a call that may wait there (conn_thread), and queues the others
 * for the workers, answering ETIMEDOUT for a request whose deadline passed
 * while it was queued. A coalesced frame (docs/wire-protocol.md, "Coalesced
 * calls") is served call by call the same way, and answered once all are.
 * Both transports speak the same wire (req0/rep0's SP over TCP).
 *
 * Client: one connection per peer URL framed by hand over NNG's stream API
 * (rpc_conn.h; docs/wire-protocol.md, "The stream client"), or, with
 * LAPSE_RPC_CLIENT=req0 set when a client opens, one req0 socket per peer
 * with a context per call; dialled in the background and redialled
 * automatically either way. A client of a comma-separated list of URLs (up
 * to 8: a list of coordinators) holds one connection per peer and sends
 * each call to a connected one, moving on after a peer's time-out, so a list
 * works while any of its peers does; one client is safe to share between
 * threads and calls run concurrently. Single-item
 * calls (GetItem, PutItem, DeleteItem, UpdateItem) that threads make while
 * the client has a frame out wait and go together in the next frame
 * (coalescing; rpc_coalesce.c).
 *
 * Thread-safety: rpc_server_* and rpc_client_* may be called from any
 * thread; the handler runs on worker threads, several at once.
 *
 * Invariants:
 *  1. Every received request gets exactly one reply, or the connection closes.
 *  2. rpc_server_close stops receiving, waits for running handlers and frees
 *     everything; no handler runs after it returns.
 */
#ifndef LAPSE_RPC_H
#define LAPSE_RPC_H

#include <stddef.h>
#include <stdint.h>

#include "../common/arena.h"
#include "lapse.pb-c.h"

#define RPC_PROTOCOL_VERSION 1
#define RPC_MAX_MESSAGE_BYTES (64u * 1024 * 1024)
#define RPC_DEFAULT_TIMEOUT_MS 5000
#define RPC_MAX_URGENT_CALLS 8 /* rpc_server_options.urgent_calls */
#define RPC_MAX_COALESCED 64   /* calls in one coalesced frame */

typedef struct rpc_server rpc_server;
typedef struct rpc_client rpc_client;

/*
 * Handles one request. resp arrives initialized (status OK, no body); the
 * handler sets status and message on failure, or a body on success. Every
 * sub-message and string it puts into resp must be allocated from a (freed by
 * the server after the reply is packed) or be static. req is borrowed for the
 * duration of the call. deadline is the request's deadline in monotonic ms.
 */
typedef void (*rpc_handler)(void *arg, const Lapse__Request *req, Lapse__Response *resp, arena *a,
                            int64_t deadline_mono_ms);
typedef int (*rpc_quick_fn)(void *arg, const Lapse__Request *req);
typedef int (*rpc_batchable_fn)(void *arg, const Lapse__Request *req);
/* Handles n requests at once (as rpc_handler does one: resps[i] and as[i]
 * are reqs[i]'s, deadlines[i] its deadline). */
typedef void (*rpc_serve_many_fn)(void *arg, const Lapse__Request *const *reqs,
                                  Lapse__Response **resps, arena **as, const int64_t *deadlines,
                                  size_t n);

typedef struct rpc_server_options {
    int contexts; /* concurrent requests in flight; 0 = 64 */
    int workers;  /* handler threads; 0 = 4 */
    /* The urgent lane: requests whose body is one of these calls (body
     * cases, the oneof's field numbers) are queued apart and served first,
     * by urgent_workers threads of their own as well as by the others, so
     * they never wait behind requests that wait for them (a node's writes
     * wait for its peers' ReplicateLog). NULL/0: one lane. */
    const uint32_t *urgent_calls;
    size_t nurgent;
    int urgent_workers;
    /* Quick calls (NULL: none): quick(arg, req), arg the handler's, says
     * whether req can be served on the NNG thread that received it, with
     * no hand-off to a worker: only a call that never waits for anything
     * (another daemon, a condition variable, a lock held across I/O) may,
     * since NNG's few threads carry every socket of the process. It runs
     * on that thread for every request, so it must be cheap itself. */
    rpc_quick_fn quick;
    /* Calls served on their connection's own thread (NULL: none):
     * conn_thread(arg, req) says whether req (alone in its frame, or a
     * call of a coalesced frame that is not served with others, batchable)
     * may be served on the thread of the connection that brought it, with
     * no hand-off, although it may wait (for a lock, for a peer's answer on
     * another connection). The connection reads nothing more meanwhile,
     * which costs a client that keeps one frame in flight (rpc_coalesce.c)
     * nothing: a frame is answered once all its calls are. Only the stream
     * transport asks, whose connections have a thread each; rep0's
     * receiving threads are NNG's few, shared by every socket, so there
     * such calls go to the workers. Such a call must never wait for
     * anything that needs an answer on its own connection. Cheap, as quick
     * is: it runs for every request that is not quick. */
    rpc_quick_fn conn_thread;
    /* Calls served together (NULL: none): the calls of a coalesced frame
     * that are not quick and that batchable accepts go to one worker as
     * one serve_many, when there are two or more (a node's writes: their
     * records then reach the replicas in one round); the handler serves
     * the others one by one. Both or neither. */
    rpc_batchable_fn batchable;
    rpc_serve_many_fn serve_many;
} rpc_server_options;

/* 1 for the single-item calls (GetItem, PutItem, DeleteItem, UpdateItem):
 * the calls that coalesce, small and made by many threads at once. */
int rpc_single_item_call(const Lapse__Request *req);

/* Listens on url (e.g. tcp://127.0.0.1:7401) and serves until closed.
 * Returns 0, LAPSE_EUNAVAILABLE ("address in use") or LAPSE_EINVAL (bad URL)
 * with a reason in err. */
int rpc_server_open(rpc_server **out, const char *url, const rpc_server_options *opt,
                    rpc_handler handler, void *arg, char *err, size_t errlen);
/* Closes the socket, waits for running handlers, frees s. Accepts NULL.
 * REQUIRES: not called from a handler (it would wait for itself). */
void rpc_server_close(rpc_server *s);

/* What a server has received and served since it opened. */
typedef struct rpc_server_count {
    uint64_t frames;    /* requests received, a coalesced frame counting once */
    uint64_t coalesced; /* of them, coalesced frames */
    uint64_t calls;     /* calls handed to the handler, each of a frame's counting */
    uint64_t quick;     /* of them, served on the thread that received them (quick, conn_thread) */
} rpc_server_count;
void rpc_server_counts(rpc_server *s, rpc_server_count *out);

/* Sets resp's status and message (copied into a). Helper for handlers. */
void rpc_set_error(Lapse__Response *resp, arena *a, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Frees NNG's global state once every socket is closed, waiting for its
 * reaper to free what closes left behind. Only for a program's exit (an
 * atexit handler) with no other thread in this module: it spares leak
 * checkers the objects a close hands to that thread. */
void rpc_fini(void);

/* Creates a client for url; never blocks (dials in the background).
 * Returns 0, LAPSE_EINVAL or LAPSE_ENOMEM. */
int rpc_client_open(rpc_client **out, const char *url, char *err, size_t errlen);
/* As rpc_client_open, its connections read on loop's thread (rpc_loop.h,
 * rpc_conn_open_on; NULL: each on its own). Not with LAPSE_RPC_CLIENT=req0,
 * whose sockets NNG reads. loop must outlive c. */
struct rpc_loop;
int rpc_client_open_on(rpc_client **out, const char *url, struct rpc_loop *loop, char *err,
                       size_t errlen);
void rpc_client_close(rpc_client *c); /* accepts NULL */
const char *rpc_client_url(const rpc_client *c);
/* Whether c has a connection to any of its peers, waiting up to wait_ms for
 * one. A call to a client with none waits out its whole timeout (the
 * request queues until a dialer connects), so a caller with somewhere else
 * to go asks this first: a live peer on the same network connects within a
 * millisecond or so of the open, a dead one never. */
int rpc_client_connected(rpc_client *c, int wait_ms);

/* What a probe of a peer's address found (rpc_probe). */
typedef enum rpc_probe_result {
    RPC_PROBE_UNKNOWN,   /* no answer in time, unreachable, or not a tcp:// URL */
    RPC_PROBE_LISTENING, /* a connection was accepted */
    RPC_PROBE_REFUSED,   /* the peer's host refused it: nothing listens there */
} rpc_probe_result;

/* Connects once to url (tcp://host:port) outside NNG and closes at once,
 * waiting up to timeout_ms. RPC_PROBE_REFUSED is the only outcome that
 * proves anything: no process listens at url now (a process killed with
 * kill -9 stops listening when the kernel reaps it; a stopped one, or one
 * behind a cut, does not refuse). Blocks the caller up to timeout_ms. */
rpc_probe_result rpc_probe(const char *url, int timeout_ms);

/*
 * Sends req (its version and timeout_ms are filled in here) and waits up to
 * timeout_ms (<= 0: RPC_DEFAULT_TIMEOUT_MS) for the reply. Returns:
 *  - a transport error (LAPSE_ETIMEDOUT, LAPSE_EUNAVAILABLE, LAPSE_EPROTO for
 *    an undecodable reply, LAPSE_ETOOBIG for a request over
 *    RPC_MAX_MESSAGE_BYTES) with *resp = NULL; or
 *  - the reply's status, with *resp set (caller frees with rpc_response_free)
 *    and, when the status is not OK, the reply's message copied into err.
 * A request may have been executed even when a transport error is returned.
 */
int rpc_call(rpc_client *c, Lapse__Request *req, int timeout_ms, Lapse__Response **resp, char *err,
             size_t errlen);
void rpc_response_free(Lapse__Response *resp); /* accepts NULL */

/* An asynchronous call's outcome, as rpc_call would return it: rv, the
 * reply (the callee's to free with rpc_response_free; NULL on a transport
 * error) and the message when rv != 0. Runs on NNG's thread, or on a
 * caller's thread of this client that was finishing other calls: it must
 * not block. */
typedef void (*rpc_done_fn)(void *arg, int rv, Lapse__Response *resp, const char *err);

/* rpc_call without waiting, for the single-item calls that coalesce (get,
 * put, delete, update: they share frames with the client's other calls).
 * Returns 0 when the call was queued: done is then called exactly once,
 * perhaps before this returns; or LAPSE_EINVAL (a call that does not
 * coalesce), LAPSE_ETOOBIG or LAPSE_ENOMEM with err set, and done is never
 * called. A call queued behind a slow frame goes in one of its own after a
 * millisecond, as a blocking one does. rpc_client_close waits (up to 2 s)
 * for the calls still out, and ends any left (LAPSE_EUNAVAILABLE or a
 * time-out), before it returns. */
int rpc_call_async(rpc_client *c, Lapse__Request *req, int timeout_ms, rpc_done_fn done, void *arg,
                   char *err, size_t errlen);

/* One call of a concurrent group (rpc_call_many). */
typedef struct rpc_multi_call {
    rpc_client *client;    /* where to send; borrowed */
    Lapse__Request *req;   /* borrowed; version and timeout_ms are filled in */
    Lapse__Response *resp; /* out: as rpc_call's *resp (caller frees) */
    int rv;                /* out: as rpc_call's return */
    char err[512];         /* out: the message when rv != 0 */
} rpc_multi_call;

/* Runs n calls at once (each on its own context, to the same or different
 * peers) and returns when every one has finished or the shared timeout_ms
 * passed; each gets its own outcome exactly as rpc_call would. Used to fan a
 * batch out to every owning node in one round trip. */
void rpc_call_many(rpc_multi_call *calls, size_t n, int timeout_ms);

/* Sends req (borrowed; its version and timeout are filled in) to c as
 * rpc_call does and copies the reply into *resp, every part of it allocated
 * from a: a server handing a call on (a coordinator that does not lead, to
 * the one that does) answers with the other's reply as it came. Returns 0
 * when a reply came (its status is in resp), or a transport error with err
 * set and resp untouched. */
int rpc_forward(rpc_client *c, const Lapse__Request *req, int timeout_ms, Lapse__Response *resp,
                arena *a, char *err, size_t errlen);

/* Sends raw bytes as one message and returns the raw reply bytes in *reply
 * (caller frees with free()). For tests that send malformed frames.
 * Returns 0 or a transport error as rpc_call. */
int rpc_call_raw(rpc_client *c, const void *data, size_t len, int timeout_ms, void **reply,
                 size_t *reply_len, char *err, size_t errlen);

#endif
