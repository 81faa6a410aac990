/*
 * ttlcalls.h: the coordinator's TTL calls and reports (docs/ttl.md,
 * "Configuration and propagation"):
 *   - UpdateTimeToLive: checks the change (ttlprop.h rules), commits the map
 *     with the table's new TTL config (one synced batch, map version + 1),
 *     pushes it to every UP node at once and replies with the
 *     TtlDescription as of right after the pushes;
 *   - DescribeTimeToLive: the derived status, the config and, per node
 *     holding the table's partitions, its last reported progress;
 *   - the TTL part of a heartbeat (progress, clock pause) and of a
 *     PushPartitionMap reply (progress), recorded in server.ttl.
 *
 * Thread-safety: called on rpc worker threads (and push threads for
 * ttlcalls_record_push_reply); each takes server.ddl_lock/server.lock as
 * server.h orders.
 *
 * Invariants:
 *  1. UpdateTimeToLive holds ddl_lock from its status check to its reply, so
 *     no other table change interleaves and the status it checked is the one
 *     the previous change left.
 *  2. Progress is recorded only for tables that exist in the current map.
 */
#ifndef LAPSE_COORD_TTLCALLS_H
#define LAPSE_COORD_TTLCALLS_H

#include <stddef.h>
#include <stdint.h>

#include "../rpc/rpc.h"
#include "server.h"

/* UpdateTimeToLive. Answers EINVAL (bad arguments), ENOTFOUND (no such
 * table), ESTATE (DynamoDB's state rules; message names the table), EIO
 * (commit failed; nothing changed), or the description. */
void ttlcalls_update(server *s, const Lapse__UpdateTimeToLiveRequest *r, Lapse__Response *resp,
                     arena *a);

/* DescribeTimeToLive. Answers ENOTFOUND or the description. */
void ttlcalls_describe(server *s, const Lapse__DescribeTimeToLiveRequest *r, Lapse__Response *resp,
                       arena *a);

/* Records the TTL part of a heartbeat of a registered node: its progress per
 * table, its own clock skew estimate and whether its scanners are paused for
 * clock skew (logged when that changes). REQUIRES: lock not held. */
void ttlcalls_record_heartbeat(server *s, const Lapse__HeartbeatRequest *r);

/* push_reply_fn: records the TTL progress in a PushPartitionMap reply.
 * arg is a ddl_push_ctx (ddl_push). REQUIRES: lock not held. */
void ttlcalls_record_push_reply(void *arg, size_t i, const Lapse__Response *resp);

#endif
