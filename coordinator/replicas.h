/*
 * replicas.h: the coordinator's side of replica set failover
 * (docs/replication.md, "Failover"; the set changes themselves are
 * placement/failover.h):
 *   - ReplicaJoin: a partition's primary reports that a replica has caught
 *     up; the leader adds it to the in-sync set (one fenced commit) if the
 *     asker is still the primary at that epoch and the replica is UP;
 *   - ReplicaShrink: a partition's primary reports that a follower did not
 *     confirm a record; the leader takes it out of the in-sync set (one
 *     fenced commit) if the asker is still the primary at that epoch and
 *     min-in-sync copies stay in sync;
 *   - replicas_push: the map pushed to the UP nodes right after a commit
 *     that changed replica sets (a node's DOWN: membership.c), so a new
 *     primary starts serving without waiting for its next heartbeat.
 *
 * Thread-safety: as membership.h; each takes or expects server.lock as it
 * says.
 */
#ifndef LAPSE_COORD_REPLICAS_H
#define LAPSE_COORD_REPLICAS_H

#include "../common/arena.h"
#include "../rpc/rpc.h"
#include "server.h"

/* ReplicaJoin. Answers ENOTFOUND (no such table or partition),
 * EWRONGNODE (the asker is not the primary at that epoch: its map is
 * stale), EINVAL (not a member), EUNAVAILABLE (the replica is not UP),
 * EIO (commit failed), or the new map version. Pushes the map on a
 * change. */
void replicas_join(server *s, const Lapse__ReplicaJoinRequest *r, Lapse__Response *resp,
                   arena *a);

/* ReplicaShrink. Answers as ReplicaJoin, but EUNAVAILABLE when fewer than
 * min-in-sync copies would stay in sync (the follower's state does not
 * matter). */
void replicas_shrink(server *s, const Lapse__ReplicaShrinkRequest *r, Lapse__Response *resp,
                     arena *a);

/* Pushes the current map to the UP nodes, with s->lock released during
 * the calls (reacquired before returning). REQUIRES: s->lock held. */
void replicas_push(server *s);

#endif
