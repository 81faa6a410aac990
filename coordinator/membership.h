/*
 * membership.h: node liveness: registration, heartbeats and down detection.
 *
 * Node states (pmap_node.state; each change is committed with server_commit,
 * so it bumps the map version and is durable before anyone is told):
 *
 *          membership_register
 *   (new) ---------------------> UP <------------------------+
 *                                 |                          |
 *        silent > heartbeat       | membership thread        | membership_register or
 *        timeout                  v (every 250 ms)           | membership_heartbeat
 *                                DOWN -----------------------+
 *
 * After a coordinator restart every known node starts DOWN (server.h,
 * invariant 1) and turns UP with its first heartbeat or registration.
 *
 * On etcd the timer gives way to leases: each node holds one on its key
 * /lapse/<cluster>/nodes/<id> (node/registry.h), and the leader's
 * membership thread reads those keys every MEMBERSHIP_PERIOD_MS: a node is
 * UP exactly while its key is there (with the address the key holds), DOWN
 * once its lease expired or was revoked. RegisterNode is accepted only while
 * the node's key is there; heartbeats still carry TTL progress and clocks
 * but no longer turn a node UP. Before each read the leader revokes the
 * lease of a node whose process is gone (its connection to the node dropped
 * and the node's address refuses a connection: nothing listens there), so
 * kill -9 fails a node over within a period or so rather than when its
 * lease runs out; a stopped or cut-off node refuses nothing and keeps its
 * lease until it expires.
 * DOWN also fails the node over in every replica set that holds it in sync
 * (placement/failover.h), in the same commit, and the new map is pushed to
 * the UP nodes at once; a partition of one copy stays with its node.
 *
 * A node's key and RegisterNode carry the incarnation of its data dir, a
 * random id made with the dir (node/node.h). A node back under another
 * incarnation than the map's came back on an empty dir, perhaps before its
 * old lease ran out or while no leader ran: it is failed over as if DOWN
 * and marked UP again in one commit, so it leads no set and counts in sync
 * in none until its copies are rebuilt (docs/replication.md, "A node back
 * on an empty data dir"). Incarnation 0 (a map or node from before them)
 * matches any.
 *
 * A removed node (lapse node remove, mover.h) stays DOWN for good:
 * RegisterNode and heartbeats from it are refused (ESTATE) and its lease
 * key is ignored, so it is given nothing and leads nothing.
 *
 * Thread-safety: all functions take server.lock themselves.
 *
 * Invariants:
 *  1. A node is UP only if it was heard from within the heartbeat timeout
 *     (plus one membership period) or the last commit failed; on etcd, only
 *     if its lease key was there at the last registry read (or it
 *     registered, with its key there, since).
 *  2. Registration and heartbeats record liveness even when a commit fails;
 *     the state change is retried on the next heartbeat.
 */
#ifndef LAPSE_COORD_MEMBERSHIP_H
#define LAPSE_COORD_MEMBERSHIP_H

#include <stddef.h>
#include <stdint.h>

#include "server.h"

#define MEMBERSHIP_PERIOD_MS 250
/* A probe of a node whose connection dropped (is its process gone?) */
#define MEMBERSHIP_PROBE_TIMEOUT_MS 100

/* Registers node id at address with the incarnation of its data dir and
 * its zone (NULL or "": none) (new, moved, or back from DOWN): marks it UP
 * and records a heartbeat. Commits when anything changed; a node back
 * under a new incarnation is failed over in the same commit (above).
 * Returns 0, LAPSE_EINVAL (id 0, empty or over-long address, a zone that
 * is not pmap_zone_valid) or LAPSE_EIO/ENOMEM with a reason in err; on
 * error the map is unchanged. */
int membership_register(server *s, uint32_t id, const char *address, uint64_t incarnation,
                        const char *zone, char *err, size_t errlen);

/* Records a heartbeat of node id carrying its map version and wall clock;
 * now_wall_ms is our own wall clock snapshot for this request. Turns a DOWN
 * node UP (commit). Returns 0, LAPSE_ENOTFOUND (unknown node: it must
 * register) or LAPSE_EIO/ENOMEM with a reason in err. */
int membership_heartbeat(server *s, uint32_t id, uint64_t pmap_version, int64_t clock_ms,
                         int64_t now_wall_ms, char *err, size_t errlen);

/* Starts the thread that marks silent nodes DOWN. Returns 0 or
 * LAPSE_ENOMEM. REQUIRES: not running. */
int membership_start(server *s);
/* Stops and joins the thread. No-op when it is not running. */
void membership_stop(server *s);

#endif
