/*
 * cluster.h: a real Lapse cluster for tests, benchmarks and chaos runs: one
 * lapse-coordinator and N lapse-node processes on free loopback ports, each
 * with its own data dir under a fresh run directory, started with
 * posix_spawn (NNG is not fork-safe) and logging to files in that directory.
 *
 * Processes are addressed by index: 0 is the coordinator, 1..N the nodes
 * (node index i has node id i), and with several coordinators (on etcd) the
 * others follow the nodes (cluster_coordinator_index). With
 * cluster_options.etcd the cluster also runs that many etcd members
 * (etcd_members.h) and its coordinators keep their catalog there.
 *
 * Thread-safety: none; drive a cluster from one thread.
 *
 * Invariants:
 *  1. A process counts as "crashed" only when it exited without having been
 *     killed or stopped through this API (cluster_crashed reports it).
 *  2. cluster_free stops every process it started and nothing else.
 *
 * Process states, by index:
 *
 *              cluster_start / cluster_restart
 *   STOPPED ----------------------------------> RUNNING
 *      ^                                          |
 *      +------------------------------------------+
 *        cluster_kill(SIGKILL or SIGTERM) and reaped
 */
#ifndef LAPSE_TEST_CLUSTER_H
#define LAPSE_TEST_CLUSTER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../client/lapse.h"

#define CLUSTER_MAX_NODES 8
#define CLUSTER_MAX_COORDINATORS 4

typedef struct cluster cluster;
typedef struct lapse_client lapse_client;
typedef struct etcd_members etcd_members;

typedef struct cluster_options {
    int nodes;                    /* node count, 1..CLUSTER_MAX_NODES */
    const char *bin_dir;          /* NULL: $LAPSE_BIN_DIR, else "./build/bin" */
    const char *run_dir;          /* NULL: a new directory under $LAPSE_TEST_TMP or /tmp */
    const char *node_args;        /* extra arguments for every node, space-separated */
    int quiet;                    /* 0: print a line per start/kill to stderr */
    int metrics;                  /* give each node --metrics-listen on a free port */
    int etcd;                     /* 0: the coordinator keeps its catalog in --data; N: N etcd
                                     members, and the coordinators run with --etcd */
    int coordinators;             /* 0 or 1: one; more needs etcd */
    const char *coordinator_args; /* extra arguments for every coordinator, space-separated */
    const char *node_zones;       /* NULL, or node i's --zone as the i-th of a comma-separated
                                     list ("a,a,b": nodes 1 and 2 in a, 3 in b; "" none) */
} cluster_options;

/* Starts the coordinator and the nodes and waits (up to 20 s) until every
 * node is registered and UP. On error *out is NULL, everything started is
 * stopped and err says why. Returns 0, LAPSE_EUNAVAILABLE or LAPSE_EIO. */
int cluster_start(cluster **out, const cluster_options *opt, char *err, size_t errlen);
/* cluster_start, then lapse_connect to every coordinator of it into
 * *client: the set-up of a test group. On failure prints why to stderr,
 * frees what it started and returns -1 (*out and *client NULL); else 0. */
int cluster_start_client(cluster **out, const cluster_options *opt, lapse_client **client);

/* Stops every running process (SIGTERM, then SIGKILL after 5 s) and frees.
 * The run directory is removed when remove_dir is set. Accepts NULL. */
void cluster_free(cluster *c, int remove_dir);

/* Every coordinator's URL, comma-separated (what nodes and clients get). */
const char *cluster_coordinator_url(const cluster *c);
int cluster_coordinators(const cluster *c);
/* The process index of coordinator k (0-based): 0 for the first. */
int cluster_coordinator_index(const cluster *c, int k);
/* The cluster's etcd members, or NULL without cluster_options.etcd. */
etcd_members *cluster_etcd(cluster *c);
/* The process index of the coordinator that etcd says leads, waiting up to
 * timeout_ms for one that is running and is not not_idx (-1: any); -1
 * when none does by then, or without etcd. */
int cluster_leader(cluster *c, int not_idx, int timeout_ms);
const char *cluster_node_url(const cluster *c, int node); /* node 1..N */
/* The URL process idx listens on (any process), or NULL for a bad index. */
const char *cluster_url(const cluster *c, int idx);
const char *cluster_run_dir(const cluster *c);
/* The data dir of process idx (a node's --data). */
const char *cluster_data_dir(const cluster *c, int idx);
/* Starts the lapse CLI (in the cluster's bin dir) with --coordinator set to
 * c's and args (NULL-terminated, at most 28), stdin /dev/null, stdout and
 * stderr into out_path and err_path (truncated). Returns its pid (the
 * caller waits for it), or -1. */
pid_t cluster_cli_spawn(const cluster *c, const char *const *args, const char *out_path,
                        const char *err_path);
/* As cluster_cli_spawn, with stdin read from in_path (NULL: /dev/null). */
/* The whole file at path, NUL-terminated (empty when it cannot be read);
 * caller frees. */
char *cluster_read_file(const char *path);
/* Runs the CLI as cluster_cli_spawn_in does and waits for it: returns its
 * exit status (-1: it could not run or died of a signal), with *out and
 * *err (caller frees; never NULL) holding its stdout and stderr. */
int cluster_cli_run(const cluster *c, const char *const *args, const char *in_path, char **out,
                    char **err);
pid_t cluster_cli_spawn_in(const cluster *c, const char *const *args, const char *in_path,
                           const char *out_path, const char *err_path);
/* "127.0.0.1:PORT" of node's /metrics endpoint, or NULL without
 * cluster_options.metrics. */
const char *cluster_metrics_addr(const cluster *c, int node);
int cluster_nodes(const cluster *c);
pid_t cluster_pid(const cluster *c, int idx); /* 0 when not running */

/* Sends sig to process idx. SIGKILL and SIGTERM also reap it (state
 * STOPPED). SIGSTOP/SIGCONT leave it RUNNING. Returns 0 or LAPSE_ESTATE. */
int cluster_kill(cluster *c, int idx, int sig);
/* Starts process idx again on its data dir and port. Returns 0 or an error.
 * Does not wait for readiness: see cluster_wait_up. */
int cluster_restart(cluster *c, int idx);
/* Waits until the coordinator answers and reports `nodes` nodes UP, up to
 * timeout_ms. Returns 0 or LAPSE_ETIMEDOUT. */
int cluster_wait_up(cluster *c, int nodes, int timeout_ms);
/* Node id's state in cl's cluster status, "UP" or "DOWN", written to out;
 * "" when the status cannot be read or does not list it. Returns out. */
const char *cluster_node_state(lapse_client *cl, uint32_t id, char *out, size_t len);
/* Returns the index of a process that exited on its own (not through
 * cluster_kill), or -1 when none did; *status gets its wait status. */
int cluster_crashed(cluster *c, int *status);

/* How many times process idx exited on its own (not through cluster_kill)
 * since cluster_start, so a caller that restarts crashed processes can
 * notice each crash (cluster_crashed keeps naming the first one). */
int cluster_crash_count(cluster *c, int idx);
/* The wait status of process idx's last exit (through cluster_kill or on
 * its own), or -1 when it has not exited yet. */
int cluster_exit_status(const cluster *c, int idx);
/* The path of process idx's log file (stdout and stderr, appended across
 * restarts), or NULL for a bad index. */
const char *cluster_log_path(const cluster *c, int idx);
/* 1 when process idx's log holds needle, else 0 (also for a bad index or
 * no log yet). */
int cluster_log_contains(const cluster *c, int idx, const char *needle);
/* Prints the last `lines` lines of process idx's log to stderr, under a
 * header naming it: what a failing test shows of a daemon where CI keeps
 * no files. */
void cluster_print_log_tail(const cluster *c, int idx, int lines);

/* A free TCP port on 127.0.0.1 (bound and released). 0 on failure. */
int cluster_free_port(void);
/* A free port not among taken[0..n): each port is free when picked and
 * closed again at once, so the kernel may hand one out twice. 0 when 100
 * picks found none. */
int cluster_free_port_except(const int *taken, size_t n);
/* Makes a new directory "PREFIX-XXXXXX" under $LAPSE_TEST_TMP (else /tmp)
 * and writes its path to out. Returns 0 or LAPSE_EIO with err set. */
int cluster_mkdtemp(char *out, size_t outlen, const char *prefix, char *err, size_t errlen);
/* Removes dir and everything in it (rm -rf). Accepts NULL and "". */
void cluster_rm_rf(const char *dir);

#endif
