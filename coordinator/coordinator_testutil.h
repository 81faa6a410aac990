/*
 * coordinator_testutil.h: the process fixture of the coordinator tests (its
 * exports are fixture_*): one real lapse-coordinator started with
 * posix_spawn (NNG is not fork-safe) on a free loopback port and a fresh
 * data dir, one rpc_client to it, and a thread that
 * heartbeats for up to FIXTURE_NODES fake nodes (no node servers exist, so
 * pushes to them fail and are logged). Fake heartbeats carry the TTL progress
 * and clock pause a test sets (fixture_set_ttl_progress,
 * fixture_set_ttl_paused), as a node's do.
 *
 * Thread-safety: drive it from the test thread; only the heartbeat thread
 * runs beside it, and fixture_set_alive synchronizes with it.
 *
 * Invariants:
 *  1. fixture_teardown stops every process the fixture started and nothing
 *     else; it fails when the coordinator does not exit 0 on SIGTERM or left
 *     a sanitizer report in its log.
 *  2. After fixture_set_alive returns, no heartbeat of a node outside the
 *     new set is sent.
 */
#ifndef LAPSE_COORD_TESTUTIL_H
#define LAPSE_COORD_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cmocka.h>

#include "../common/lapse_err.h"
#include "../rpc/rpc.h"
#include "../tests/freeport.h" /* freeport_loopback */

#define FIXTURE_NODES 3
#define FIXTURE_CALL_TIMEOUT_MS 10000
#define FIXTURE_SKEW_NODE 2 /* this fake node reports a clock ahead by FIXTURE_SKEW_MS */
#define FIXTURE_SKEW_MS 5000
#define FIXTURE_ALL_ALIVE ((1u << 1) | (1u << 2) | (1u << 3))
#define FIXTURE_MAX_TTL 8 /* TTL progress entries per fake node */

typedef struct fixture {
    char bin[1024];                       /* path of lapse-coordinator */
    char run_dir[1024];                   /* fresh per run, under $LAPSE_TEST_TMP */
    char data_dir[1100];                  /* the coordinator's --data */
    char log_path[1100];                  /* its stdout and stderr */
    char url[64];                         /* its --listen */
    pid_t pid;                            /* 0 when not running */
    rpc_client *cli;                      /* to url; survives restarts (redials) */
    char node_url[FIXTURE_NODES + 1][64]; /* fake node addresses, by id */
    const char *extra_args[8];            /* more coordinator flags, NULL-terminated */
    const char *admin_token;              /* sent by fixture_call; NULL: none */
} fixture;

extern fixture fx;

/* Fails the test, naming the call, both codes, err and the coordinator log. */
#define assert_code(expr, code, err)                                                               \
    do {                                                                                           \
        int rv_ = (expr);                                                                          \
        if (rv_ != (code)) {                                                                       \
            fail_msg("%s returned %d (%s), expected %d (%s): %s (coordinator log: %s)", #expr,     \
                     rv_, lapse_strerror(rv_), (code), lapse_strerror(code), (err), fx.log_path);  \
        }                                                                                          \
    } while (0)

/* cmocka group setup/teardown: start the coordinator and the heartbeat
 * thread (no node alive yet); stop both (SIGTERM, expecting exit 0). */
int fixture_setup(void **state);
int fixture_teardown(void **state);

/* Starts lapse-coordinator with the NULL-terminated args, output appended
 * to log. Returns the pid or fails the test. */
pid_t fixture_spawn(const char *log, const char **args);
/* Waits up to timeout_ms for pid to exit: 1 with *status set, or 0. */
int fixture_wait_exit(pid_t pid, int timeout_ms, int *status);
int fixture_file_contains(const char *path, const char *needle);
/* Fails the test if log holds an ASan/UBSan/LSan report. */
void fixture_assert_no_sanitizer_report(const char *log);
/* Starts the coordinator on fx.url and fx.data_dir (plus fx.extra_args) and
 * waits until it answers. */
void fixture_start_coordinator(void);
/* Sets which fake nodes heartbeat (bit id), waiting for a running round. */
void fixture_set_alive(unsigned mask);
/* clock_mono ms of the last OK heartbeat of node id (0: none). */
int64_t fixture_last_heartbeat_ms(uint32_t id);
/* From the next heartbeat round on, node id reports this progress on
 * table_id (replacing what it reported on that table before). */
void fixture_set_ttl_progress(uint32_t id, uint32_t table_id, uint64_t config_version,
                              int backfill_done);
/* From the next round on, node id reports its scanners paused for skew. */
void fixture_set_ttl_paused(uint32_t id, int paused);
/* Waits until every alive node has sent a heartbeat that started after
 * this call (so what was set before is now recorded by the coordinator). */
void fixture_wait_heartbeat_round(void);

/* Calls: each returns rpc_call's code; *resp (NULL on a transport error)
 * is freed by the caller with rpc_response_free. fixture_call sends
 * fx.admin_token; heartbeats never do. */
int fixture_call(Lapse__Request *req, Lapse__Response **resp, char *err, size_t errlen);
int fixture_register_node(uint32_t id, const char *address, Lapse__Response **resp, char *err,
                          size_t errlen);
int fixture_heartbeat(uint32_t id, uint64_t version, int64_t clock_ms, Lapse__Response **resp,
                      char *err, size_t errlen);
/* pk is an S key (NULL: none), sk an N key (NULL: none). */
int fixture_create_table(const char *name, const char *pk, const char *sk, uint32_t partitions,
                         Lapse__Response **resp, char *err, size_t errlen);
int fixture_describe(const char *name, Lapse__Response **resp, char *err, size_t errlen);
int fixture_delete_table(const char *name, Lapse__Response **resp, char *err, size_t errlen);
int fixture_cluster_status(Lapse__Response **resp, char *err, size_t errlen);
/* The full map, borrowed from *resp; fails the test on error. */
Lapse__PartitionMap *fixture_get_map(Lapse__Response **resp);
const Lapse__NodeStatus *fixture_find_status(const Lapse__ClusterStatusResponse *cs, uint32_t id);
/* LAPSE__NODE_STATE__NODE_* of node id in a fresh ClusterStatus. */
int fixture_node_state(uint32_t id);

#endif
