/*
 * node_testutil.h: the harness of node_test: the daemons it starts
 * (node_testutil.c: processes, the map, setup and teardown) and the calls
 * it makes (node_calls_testutil.c: request builders and one function per call).
 *
 * Not thread-safe: one test thread drives everything through the state nt.
 */
#ifndef LAPSE_NODE_TESTUTIL_H
#define LAPSE_NODE_TESTUTIL_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../common/arena.h"
#include "../common/clock.h"
#include "../common/item.h"
#include "../common/lapse_err.h"
#include "../placement/hash.h"
#include "../placement/pmap.h"
#include "../rpc/rpc.h"
#include "../rpc/wire.h"

/* snprintf into a char array, failing the test when it does not fit. */
#define PATHF(dst, ...)                                                                            \
    do {                                                                                           \
        if (snprintf(dst, sizeof(dst), __VA_ARGS__) >= (int)sizeof(dst)) {                         \
            fail_msg("path too long");                                                             \
        }                                                                                          \
    } while (0)

#define NODES 2
#define TABLE "node_test.items"
#define PARTS 8
#define NITEMS 120
#define CALL_MS 5000

typedef struct proc {
    pid_t pid;          /* 0 when not running */
    uint32_t id;        /* node id (nodes only) */
    char url[64];       /* listen URL */
    char dir[PATH_MAX]; /* data dir */
    char log[PATH_MAX]; /* stderr/stdout of the process */
} proc;

typedef struct node_test_state {
    char root[PATH_MAX];    /* fresh run directory */
    char bin_dir[PATH_MAX]; /* $LAPSE_BIN_DIR */
    int have_coord;         /* the real coordinator is built */
    proc coord;
    proc node[NODES];
    rpc_client *cc;        /* to the coordinator */
    rpc_client *nc[NODES]; /* to each node */
    pmap *map;             /* the map the test routes by */
    const pmap_table *t;   /* TABLE in map */
    int acked[NITEMS];     /* item i was acknowledged by a put */
    int call_ms;           /* timeout of node calls (0 = CALL_MS) */
    int started;           /* cluster_starts succeeded */
} node_test_state;

extern node_test_state nt;

/* ---- node_testutil.c ---- */

/* n distinct free TCP ports on 127.0.0.1 (bound together, then released). */
void free_ports(int *ports, int n);
int free_port(void);
/* Starts argv[0] from bin_dir with output appended to log. Returns the pid. */
pid_t spawn(char *const argv[], const char *log);
/* Waits up to timeout_ms for pid to exit. Returns its wait status, or -1. */
int wait_exit(pid_t pid, int timeout_ms);
/* Runs lapse-node with args to completion (it must exit by itself). Returns
 * its exit code; the output goes to out.log in the run dir. */
int run_node_expect_exit(char *const argv[]);
int log_contains(const char *log, const char *needle);
void stop_proc(proc *p, int sig);
void start_node(int i);
void start_coord(void);
void adopt_map(const Lapse__PartitionMap *pb);
int coord_call(Lapse__Request *req, Lapse__Response **resp, char *err);
/* Waits until the coordinator reports both nodes UP. */
void wait_registered(void);
void fetch_map(void);
void create_table_via_coordinator(void);
/* Without a coordinator: a map with both nodes, partitions alternating. */
int push_map(int node, const pmap *pm, char *err);
void create_table_by_push(void);
/* Waits until node i answers a GetItem (any status but a transport error). */
void wait_serving(int i);
int group_setup(void **state);
int group_teardown(void **state);

/* ---- node_calls_testutil.c ---- */

Lapse__AttributeValue *pb_s(arena *a, const char *s);
Lapse__AttributeValue *pb_n(arena *a, const char *n);
/* An item from name/value pairs, NULL-terminated. */
Lapse__Item *pb_item(arena *a, ...);
const char *pk_of(int i, char *buf, size_t len);
Lapse__Item *item_i(arena *a, int i, const char *val);
Lapse__Item *key_i(arena *a, int i);
/* Index (0-based) of the node owning partition key pk. */
int owner_of_pk(const char *pk, uint32_t *part_out);
int owner_of(int i);
/* Sends req; returns the status (transport errors too). *resp may be NULL. */
int call(rpc_client *c, Lapse__Request *req, Lapse__Response **resp, char *err);
int put(int node, arena *a, Lapse__Item *it, Lapse__Condition *cond, char *err);
/* GetItem; *out gets the item (caller item_free) or NULL. */
int get(int node, Lapse__Item *key, item **out, char *err, uint64_t *version);
/* The "v" attribute of item i as stored, "" when absent; via its owner. */
void expect_stored(int i, const char *want);
Lapse__Response *update(int node, Lapse__UpdateItemRequest *body, int *rv, char *err);
int delete_item(int node, Lapse__Item *key, Lapse__Condition *cond, char *err);
/* Runs a query; returns the status, items in *items (caller frees). */
int query(Lapse__QueryRequest *q, item ***items, size_t *n, Lapse__Item **last, arena *a,
          char *err);
void free_items(item **items, size_t n);
const char *sk_text(const item *it);
/* Scans partition part at node; returns status; counts items in *count. */
int scan_all(int node, uint32_t part, size_t *count, char *err);
int batch(int node, Lapse__WriteRequest **w, size_t n, uint32_t **unproc, size_t *nun, char *err);

#endif
