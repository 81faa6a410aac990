/*
 * cluster_int.h: what the files of the test cluster share (cluster.c starts,
 * watches and stops the processes; cluster_files.c reads their logs and data
 * dirs and runs the lapse CLI against them). Not part of cluster.h's API.
 */
#ifndef LAPSE_TESTS_CLUSTER_INT_H
#define LAPSE_TESTS_CLUSTER_INT_H

#include <sys/types.h>

#include "cluster.h"
#include "etcd_members.h"

/* Coordinators on etcd run as cluster CLUSTER_NAME (docs/coordinator.md). */
#define CLUSTER_NAME "test"
#define CLUSTER_ELECTION "/lapse/" CLUSTER_NAME "/coordinator/leader"

typedef struct proc {
    pid_t pid;    /* 0 when not running */
    int port;     /* its loopback port, fixed for the cluster's life */
    char url[64]; /* tcp://127.0.0.1:port */
    char data_dir[640];
    char log_path[640];
    int killed;       /* set when we signalled it with SIGKILL/SIGTERM */
    int crash_status; /* wait status when it exited on its own */
    int crashed;
    int crash_count;       /* exits on its own since cluster_start */
    int port_retries;      /* restarts on fresh ports during start-up */
    int exit_status;       /* wait status of the last exit, -1 before any */
    char metrics_addr[32]; /* "127.0.0.1:port", or "" */
} proc;

struct cluster {
    int nodes;
    int coordinators; /* 1 + the extra ones at procs[nodes + 1 ..] */
    int nprocs;       /* 1 + nodes + coordinators - 1 */
    int quiet;
    char bin_dir[512];
    char run_dir[512];
    char node_args[512];
    char coord_args[512];
    char zone[CLUSTER_MAX_NODES + 1][64]; /* node i's --zone; "": none */
    etcd_members *etcd; /* owned; NULL: the coordinator keeps its catalog in --data */
    char coord_urls[CLUSTER_MAX_COORDINATORS * 64]; /* every coordinator's URL, comma-separated */
    /* [0] coordinator, [1..nodes] nodes, [nodes+1..] more coordinators */
    proc procs[CLUSTER_MAX_NODES + CLUSTER_MAX_COORDINATORS];
};

#endif
