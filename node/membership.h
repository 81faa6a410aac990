/*
 * membership.h: the node's membership thread: it registers the node with the
 * coordinator, heartbeats, and pulls newer partition maps.
 *
 * Thread-safety: membership_start and membership_stop are called by
 * node_open / node_close on the main thread; the thread itself touches only
 * the fields of node_server that say they are shared (maps.h functions, the
 * thread-safe coordinator client, atomics).
 *
 * Invariants:
 *  1. Serving never waits for membership: the node answers item calls from
 *     its persisted map while the coordinator is unreachable.
 *  2. The thread never sleeps longer than MEMBERSHIP_HEARTBEAT_MS and never
 *     blocks in one RPC longer than MEMBERSHIP_CALL_TIMEOUT_MS, so
 *     membership_stop returns within about a second.
 *
 * States of the thread (membership.c, run()):
 *
 *                 RegisterNode ok (apply its map if newer)
 *   UNREGISTERED ------------------------------------------> REGISTERED
 *     |   ^  ^                                                  |
 *     +---+  +--------------------------------------------------+
 *   failure:       Heartbeat answered ENOTFOUND (coordinator
 *   retry after    lost us, e.g. its data was wiped)
 *   50 ms, doubling
 *   up to 1 s            REGISTERED: Heartbeat every 500 ms with our map
 *                        version, wall clock, TTL progress and clock
 *                        verdict (at once after
 *                        membership_heartbeat_soon); the reply's clock
 *                        -> expiry_engine_clock_report (skew = ours - (theirs +
 *                        RTT/2)); a newer coordinator version ->
 *                        maps_refresh (GetPartitionMap + apply)
 */
#ifndef LAPSE_MEMBERSHIP_H
#define LAPSE_MEMBERSHIP_H

#include "node.h"

#define MEMBERSHIP_HEARTBEAT_MS 500
#define MEMBERSHIP_BACKOFF_MIN_MS 50
#define MEMBERSHIP_BACKOFF_MAX_MS 1000
#define MEMBERSHIP_CALL_TIMEOUT_MS 1000

/* Starts the thread (ns's stop_lock and stop_cond are node_open's). Returns 0 or
 * LAPSE_ENOMEM (thread creation failed; nothing is running).
 * REQUIRES: maps_init succeeded and ns->coord is open. */
int membership_start(node_server *ns, char *err, size_t errlen);
/* Asks for the next heartbeat now rather than at the end of the current
 * pause: something it reports changed, such as a table's backfill
 * completing, which turns describe-ttl ENABLED. Any thread, any time
 * between node_open and node_close (stop_lock lives that long); before
 * membership_start it is remembered. */
void membership_heartbeat_soon(node_server *ns);
/* Wakes the thread and waits for it to exit.
 * Safe when membership_start was never called or failed. */
void membership_stop(node_server *ns);

#endif
