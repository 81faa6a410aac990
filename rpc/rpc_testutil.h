/*
 * rpc_testutil.h: what the rpc/ transport tests share (rpc_test,
 * rpc_coalesce_test, rpc_server_stream_test, rpc_driven_test; rpc_conn_test uses only the raw
 * wire helpers): a server with the test handler and a client to it on a free
 * loopback port, the calls the tests make to it, and the packed requests and
 * socket reads of the tests that speak the wire by hand.
 *
 * The test handler (fixture_handler):
 *
 *   GetItem(key)           echoes key back as the item; with table
 *                          "slow:MS", after sleeping MS ms
 *   PutItem                sleeps 2 ms, answers OK echoing pmap_version
 *   Heartbeat(node_id, clock_ms)
 *                          sleeps clock_ms, answers pmap_version = node_id
 *   ListTables             answers ENOTFOUND with a formatted message
 *   DescribeTable(table)   a barrier of atoi(table) calls (3 s at most)
 *   ReplicateLog           enters the barrier and answers at once
 *   anything else          answers EINVAL
 *
 * Thread-safety: the handler runs on any server's workers; the counters are
 * atomics shared by every server of the process.
 */
#ifndef LAPSE_RPC_TESTUTIL_H
#define LAPSE_RPC_TESTUTIL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/lapse_err.h"
#include "../tests/freeport.h" /* freeport_loopback */
#include "rpc.h"

#define assert_rv(call, code, err)                                                                 \
    do {                                                                                           \
        int rv_ = (call);                                                                          \
        if (rv_ != (code)) {                                                                       \
            fail_msg("%s returned %d (%s), expected %d (%s): %s", #call, rv_, lapse_strerror(rv_), \
                     (code), lapse_strerror(code), (err));                                         \
        }                                                                                          \
    } while (0)

/* Counted by the handler: Heartbeat and slow GetItem calls entered,
 * Heartbeat calls done, and DescribeTable/ReplicateLog barrier entries. */
extern atomic_int fixture_handlers_entered;
extern atomic_int fixture_handlers_done;
extern atomic_int fixture_barrier_entered;

/* The test handler (above), an rpc_handler. */
void fixture_handler(void *arg, const Lapse__Request *req, Lapse__Response *resp, arena *a,
                     int64_t deadline_mono_ms);

/* Answers the Heartbeat req as the test handler does: resp (and its
 * heartbeat body, allocated in a, so freed with it) gets pmap_version =
 * node_id. REQUIRES: req->body_case is LAPSE__REQUEST__BODY_HEARTBEAT. */
void fixture_heartbeat_answer(const Lapse__Request *req, Lapse__Response *resp, arena *a);

typedef struct fixture {
    char url[64];
    rpc_server *srv;
    rpc_client *cli;
} fixture;

/* Waits until fixture_handlers_entered reaches n, for at most 5 s (else
 * fails the test). */
void fixture_wait_entered(int n);

/* A server (rpc_server_options of these fields, the test handler) and a
 * client to it; fixture_close closes both and frees f. */
fixture *fixture_open(int contexts, int workers);
fixture *fixture_open_lanes(int contexts, int workers, const uint32_t *urgent, size_t nurgent,
                            int urgent_workers, rpc_quick_fn quick);
/* A fixture whose server has options o (a free loopback port). */
fixture *fixture_open_opts(const rpc_server_options *o);
void fixture_close(fixture *f);

/* One heartbeat call: returns the status; on OK checks the echo. */
int fixture_heartbeat(rpc_client *c, uint32_t id, int64_t sleep_ms, int timeout_ms, char *err,
                      size_t errlen);

/* Sends raw bytes and decodes the reply, which must be a Response (caller
 * frees with lapse__response__free_unpacked). */
Lapse__Response *fixture_raw_call(rpc_client *c, const void *data, size_t len);

/* A heartbeat of sleep_ms on the server made from a thread of its own
 * (fixture_slow_call_run, a pthread start routine): rv its status. */
typedef struct fixture_slow_call {
    rpc_client *c;
    int64_t sleep_ms;
    int timeout_ms;
    int rv;
} fixture_slow_call;
void *fixture_slow_call_run(void *arg);

/* ---- the wire by hand: packed requests, frames and raw sockets ---- */

/* Writes "tcp://127.0.0.1:PORT" of a free loopback port (freeport_loopback)
 * into url, n bytes at most. */
void fixture_url_free_port(char *url, size_t n);

/* A packed Heartbeat request (version RPC_PROTOCOL_VERSION, timeout 10 s) of
 * node_id id and clock_ms sleep_ms, with pmap_version reply_bytes (0 for the
 * fixture handler; rpc_conn_test's answers that many bytes). Returns bytes
 * the caller frees with free(); *len their size. */
uint8_t *fixture_pack_heartbeat(uint32_t id, int64_t sleep_ms, uint64_t reply_bytes, size_t *len);
/* As fixture_pack_heartbeat (no sleep, no reply bytes), padded to about
 * pad_bytes more by an admin_token of 'a's, which the handler ignores. */
uint8_t *fixture_pack_heartbeat_padded(uint32_t id, size_t pad_bytes, size_t *len);

/* Sends one coalesced frame (a MultiRequest of the n packed calls, version
 * RPC_PROTOCOL_VERSION, timeout 2 s) through c by fixture_raw_call and
 * returns its reply (caller frees with lapse__response__free_unpacked).
 * calls stays the caller's. */
Lapse__Response *fixture_multi_call(rpc_client *c, ProtobufCBinaryData *calls, size_t n);

/* Reads exactly n bytes from fd into p; fails the test on an end of stream
 * or error first. */
void fixture_read_full(int fd, uint8_t *p, size_t n);

/* The big-endian 64-bit number at p[0..7] (an SP message's length). */
uint64_t fixture_be64(const uint8_t *p);

#endif /* LAPSE_RPC_TESTUTIL_H */
