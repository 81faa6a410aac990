/*
 * peerclock.h: the clock check against peer nodes, for while no coordinator
 * answers. The TTL scanners delete nothing until this node's wall clock has
 * been checked (expiry_engine.h); normally the coordinator's heartbeat replies do
 * it. A node that restarts while every coordinator is down would wait for
 * them forever, so the membership thread asks the other nodes of its map
 * for their clocks instead (a Heartbeat to a node, answered by
 * handlers.c). Only peers whose own clock passed a check count
 * (clock_trusted), and the verdict is taken on the peer that disagrees most:
 * a node resumes deleting only if every trusted peer that answered puts it
 * within --max-clock-skew-ms.
 *
 * Thread-safety: a peerclock belongs to the membership thread.
 *
 * Invariants:
 *  1. Without an answer from a trusted peer the verdict is left as it was.
 *  2. One check waits at most PEERCLOCK_CALL_TIMEOUT_MS per peer.
 */
#ifndef LAPSE_NODE_PEERCLOCK_H
#define LAPSE_NODE_PEERCLOCK_H

#include "node.h"

#define PEERCLOCK_MAX_PEERS 16
#define PEERCLOCK_CALL_TIMEOUT_MS 300

typedef struct peerclock_peer {
    uint32_t id;
    char url[NODE_MAX_URL];
    rpc_client *client; /* owned; NULL until first used */
} peerclock_peer;

typedef struct peerclock {
    peerclock_peer peers[PEERCLOCK_MAX_PEERS];
    size_t n;
    int warned; /* logged that no trusted peer answered */
} peerclock;

/* Asks every other node of the current map for its clock and reports the
 * verdict to the expiry engine (expiry_engine_clock_report). Returns how many trusted
 * peers answered. */
int peerclock_check(node_server *ns, peerclock *pc);
/* Closes the clients; *pc is empty again. */
void peerclock_fini(peerclock *pc);

#endif
