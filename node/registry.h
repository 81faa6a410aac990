/*
 * registry.h: the node's presence in etcd (--etcd): a lease kept alive by a
 * thread of its own, the node's key /lapse/<cluster>/nodes/<id> (its
 * advertised URL) attached to it, a watch of the catalog's map key (every
 * committed map is applied from etcd too, whichever of it and the
 * coordinator's push comes first), and reads of that key for when no
 * coordinator answers. The coordinators judge the node UP exactly while the
 * key is there (coordinator/membership.h); a node that stops cleanly revokes
 * its lease, so it is DOWN at once; one that dies is DOWN as soon as the
 * coordinator leader finds its port closed (it revokes the lease,
 * coordinator/membership.h), or when the lease runs out
 * (REGISTRY_LEASE_TTL_S, or --lease-ttl): a stopped or cut-off node keeps
 * its lease that long.
 *
 * Thread-safety: registry_open and registry_close run on node_open's and
 * node_close's thread; registry_tick and registry_fetch_map on the
 * membership thread. The lease keeper and the map watch call back on threads
 * of their own.
 *
 * Invariants:
 *  1. The key is only ever written with the lease held now, so it goes when
 *     that lease does.
 *  2. A map read from etcd is applied only when newer than ours (maps.h).
 *
 * Lifecycle:
 *
 *   registry_open        lease granted          registry_close(revoke)
 *   (keeper starts) ---> key put (callback,  --> keeper stopped, lease
 *                        or registry_tick        revoked: the key goes
 *                        after a failed put)
 *       ^  lease lost (etcd unreachable for the TTL): a new lease, key again
 */
#ifndef LAPSE_NODE_REGISTRY_H
#define LAPSE_NODE_REGISTRY_H

#include <stddef.h>

#include "node.h"

#define REGISTRY_LEASE_TTL_S 2
#define REGISTRY_RENEW_MS 500
#define REGISTRY_CALL_TIMEOUT_MS 1000
/* A primary stops acting this long before its lease could expire in etcd:
 * room for the time between the check and the act it guards. */
#define REGISTRY_LEAD_MARGIN_MS 300

/* Opens the etcd client of endpoints and starts the lease keeper (a lease
 * of lease_ttl_s seconds). Returns 0, LAPSE_EINVAL (bad endpoint list or
 * cluster name) or LAPSE_ENOMEM with a reason in err. Sends nothing
 * itself. */
int registry_open(node_server *ns, const char *endpoints, const char *cluster, int lease_ttl_s,
                  char *err, size_t errlen);

/* Whether the node's key is in etcd under the lease held now (as far as
 * this process knows). 1 without --etcd: nothing to wait for. */
int registry_present(node_server *ns);

/* Puts the key again when the lease changed since the last put that
 * succeeded (the put in the keeper's callback failed). No-op without
 * --etcd. Also applies --debug-fault-dir's cut-etcd switch (registry.c). */
void registry_tick(node_server *ns);

/* Whether this node may act as a primary of replica sets in pm now (serve
 * writes and strongly consistent reads, sweep): with --etcd, only while pm
 * names it UP under the lease it holds and that lease is certain to live
 * more than REGISTRY_LEAD_MARGIN_MS (etcd_keeper_valid_ms); so a node
 * whose lease lapsed, or was replaced by a new one the coordinators have
 * not recorded yet, never acts beside the primary that took its place
 * (docs/replication.md, "Leases and fencing"). Without --etcd, always
 * (heartbeat liveness has no lease to fence by). Returns 0, or
 * LAPSE_EWRONGNODE with the reason in err (may be NULL). Thread-safe. */
int registry_may_lead(node_server *ns, const pmap *pm, char *err, size_t errlen);

/* Reads the map the coordinators stored in etcd and applies it when newer.
 * Returns 0 (applied or not newer), LAPSE_ENOTFOUND (no catalog yet) or an
 * etcd or decode error with a reason in err; 0 without --etcd. */
int registry_fetch_map(node_server *ns, char *err, size_t errlen);

/* Stops the keeper and, when revoke is set, revokes the lease (the key goes
 * at once); then closes the client. Accepts a node that never opened one. */
void registry_close(node_server *ns, int revoke);

#endif
