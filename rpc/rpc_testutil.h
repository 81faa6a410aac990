/*
 * rpc_testutil.h: what the rpc/ transport tests share (rpc_test,
 * rpc_coalesce_test): a server with the test handler and a client to it on
 * a free loopback port, and the calls the tests make to it.
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

#endif /* LAPSE_RPC_TESTUTIL_H */
