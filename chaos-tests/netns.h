/*
 * netns.h: the network-namespace mode of a chaos run, which the partition
 * fault needs (docs/chaos.md "The partition fault").
 *
 * tests/cluster.c runs every daemon on 127.0.0.1, where one node cannot be
 * cut off alone. In this mode the coordinator and each node get a network
 * namespace of their own, joined by a bridge (deploy/netns-cluster.sh
 * net-up --nodes N: one namespace per node the run starts, 3, or 4 for the
 * move fault), and cluster.c gets a bin dir whose lapse-coordinator and
 * lapse-node are chaos-tests/netns-daemon.sh: it moves each daemon into its
 * namespace, rewrites its addresses and execs it (same pid, so kills, stops
 * and restarts work unchanged). A cluster on etcd gets its members the same
 * way ($LAPSE_ETCD is the wrapper, $LAPSE_ETCD_HOSTS the node hosts'
 * addresses): member i runs in node i+1's namespace, as on three hosts; the
 * members are three whatever the node count, so a fourth node's host has
 * none. lapse-chaos itself joins the coordinator's namespace (setns) before
 * it starts any thread, so every later thread (workload, progress, NNG's)
 * lives there too: 127.0.0.1 reaches the coordinator, BASE.11 to
 * BASE.(10+N) the nodes. A partition takes a node's link down inside its
 * namespace: the coordinator and every client lose it at once.
 *
 * Thread-safety: netns_open before any other thread exists; netns_close and
 * netns_cut from the main thread.
 *
 *   CLOSED --netns_open--> OPEN (this process in P-c) --netns_close--> CLOSED
 *                           | netns_cut(node, 1)  link of node N down
 *                           | netns_cut(node, 0)  link of node N up again
 *                           | netns_oneway(n, m)  node n drops what it sends m
 *                           | netns_oneway(n, 0)  node n sends everywhere again
 *
 * Invariants:
 *  1. netns_open either sets the whole mode up or leaves nothing behind (no
 *     namespace, no directory) and says why: not root, no `ip netns`, no
 *     free subnet, the script missing.
 *  2. netns_close deletes every namespace netns_open made and moves the
 *     calling thread back to the namespace it came from. The coordinator's
 *     namespace, now nameless and with only a loopback, lives on in the
 *     threads that were started inside it until the process exits.
 *  3. Names are lapse-ch<pid>-* (br, c, c2, n1..nN; the script's net-up makes
 *     c2 for a second coordinator, unused here), so concurrent runs never
 *     share one; namespaces left by a run that died before netns_close (its
 *     pid is gone) are deleted by the next netns_open.
 *  4. ns->nodes is fixed from netns_open to netns_close: a run that starts
 *     more nodes than that has no namespace for the others.
 */
#ifndef LAPSE_CHAOS_NETNS_H
#define LAPSE_CHAOS_NETNS_H

#include <stddef.h>

/* The most node namespaces netns_open makes (the move fault's four). */
#define NETNS_MAX_NODES 4

typedef struct chaos_netns {
    int open;                        /* the mode is set up and this thread is in P-c */
    int nodes;                       /* node namespaces, -n1..-nN (3..NETNS_MAX_NODES) */
    char prefix[32];                 /* namespace names: prefix-br, -c, -n1..-nN */
    char base[16];                   /* the /24 in use without its last octet, "10.77.0" */
    char home[512];                  /* netns-cluster.sh's LAPSE_HOME: state, log, wrappers */
    char bin_dir[600];               /* home/bin: the wrappers, for cluster_options.bin_dir */
    char log_path[600];              /* the script's output, appended */
    int orig_fd;                     /* the namespace this process started in */
    int cut[NETNS_MAX_NODES + 1];    /* [node]: its link is down (netns_cut) */
    int oneway[NETNS_MAX_NODES + 1]; /* [node]: the node whose packets it drops (0: none) */
    char prev_etcd[512];             /* $LAPSE_ETCD before netns_open ("": unset) */
} chaos_netns;

/* Sets the mode up for `nodes` nodes (namespaces -n1..-n<nodes>) with
 * daemons from real_bin_dir (NULL: $LAPSE_BIN_DIR, else ./build/bin).
 * Returns 0, or -1 with the reason in why (nothing is left behind).
 * REQUIRES: no thread other than the caller exists yet;
 *           3 <= nodes <= NETNS_MAX_NODES (three etcd member hosts). */
int netns_open(chaos_netns *ns, const char *real_bin_dir, int nodes, char *why, size_t whylen);

/* Heals cut links, deletes the namespaces and returns the calling thread to
 * its original namespace. Stop the cluster first. Accepts a closed one. */
void netns_close(chaos_netns *ns);

/* Takes node's link down (down = 1) or up (down = 0) inside its namespace.
 * Returns 0, or -1 when the command failed (see ns->log_path) or node is
 * not 1..ns->nodes. */
int netns_cut(chaos_netns *ns, int node, int down);

/* A one-way cut: node `from` drops every packet it sends to node `to`'s
 * address (an egress filter on its link; `to` still reaches `from`), or,
 * with to = 0, drops nothing any more. Returns 0, or -1 when the command
 * failed (see ns->log_path) or a node is not 1..ns->nodes. */
int netns_oneway(chaos_netns *ns, int from, int to);

#endif
