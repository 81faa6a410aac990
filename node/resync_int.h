/*
 * resync_int.h: what resync.c (when a replica is brought back) and
 * resync_snapshot.c (a copy dropped and rebuilt from a snapshot) share.
 * Internal to node/.
 *
 * Thread-safety: called on the resync thread only (logship_start); the
 * snapshot's calls go out on threads of their own, joined before return.
 */
#ifndef LAPSE_NODE_RESYNC_INT_H
#define LAPSE_NODE_RESYNC_INT_H

#include <stddef.h>
#include <stdint.h>

#include "../rpc/rpc.h"
#include "logship_int.h"

/* Tells replica c (node id) of (table_id, part) to drop its copy at epoch;
 * why: the reason, for the log. Returns 0 or the call's error with err. */
int resync_reset_copy(logship *ls, rpc_client *c, uint32_t id, uint32_t table_id, uint32_t part,
                      uint64_t epoch, const char *why, char *err, size_t errlen);

/* Rebuilds replica c's copy from a snapshot of this one: a reset, the
 * partition's keys call after call while writes go on, then the position
 * they stand at, which *applied gets. Progress goes to the log and to the
 * follower's copy figures (ReplicaLag). Returns 0 or an error with err. */
int resync_send_snapshot(logship *ls, rpc_client *c, uint32_t id, uint32_t table_id, uint32_t part,
                         uint64_t epoch, const char *why, uint64_t *applied, char *err,
                         size_t errlen);

#endif
