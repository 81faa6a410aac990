/*
 * fault_switch.h: the test fault switches of --debug-fault-dir. A switch is
 * on while the file <dir>/node<id>.<name> exists; the chaos harness and the
 * replication tests create and remove them (logserve.c's
 * refuse-replicate-log, logship_commit.c's slow-ship, registry.c's cut-etcd,
 * resync_snapshot.c's small-snapshot-calls, resync.c's hold-after-join,
 * refill.c's slow-refill).
 *
 * Thread-safe: reads only the node's fixed fields and the file system.
 */
#ifndef LAPSE_NODE_FAULT_SWITCH_H
#define LAPSE_NODE_FAULT_SWITCH_H

#include "node.h"

/* 1 while switch name of this node is on; 0 without --debug-fault-dir. */
int fault_switch_on(const node_server *ns, const char *name);

#endif
