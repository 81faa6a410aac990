/*
 * streamcalls.h: the coordinator's UpdateStream call, a table's change
 * stream turned on or off after CreateTable (docs/coordinator.md, "Streams
 * turned on or off"; docs/dynamodb-api.md, UpdateTable).
 *
 * The table's stream config is part of its schema in the map, so a change
 * is a map change like UpdateTimeToLive's: committed to the catalog (on
 * etcd, one transaction fenced by the leader's election key: a
 * compare-and-set against the map version this leader holds), then pushed
 * to every UP node before the reply. Nodes that miss the push pull the
 * version on their next heartbeat.
 *
 *        UpdateStream(on): generation + 1, new shards placed
 *   OFF ----------------------------------------------------> ON
 *    ^                                                         |
 *    +---------------------------------------------------------+
 *        UpdateStream(off): shards dropped, generation kept
 *
 * (A table created with a stream starts ON at generation 0.)
 *
 * Thread-safety: called on rpc worker threads; takes server.ddl_lock then
 * server.lock as server.h orders.
 *
 * Invariants:
 *  1. A stream's generation only grows, also across OFF, so a stream turned
 *     on again is a new one (new label, records numbered from
 *     schema_stream_base), and its since_ms is later than every earlier
 *     generation's.
 *  2. Holds ddl_lock from its state check to its reply: no other table
 *     change interleaves.
 */
#ifndef LAPSE_COORD_STREAMCALLS_H
#define LAPSE_COORD_STREAMCALLS_H

#include "../rpc/rpc.h"
#include "server.h"

/* UpdateStream. Answers ENOTFOUND (no such table), EINVAL (a bad view),
 * EEXISTS (turning on a stream that is on), ESTATE (turning off one that is
 * off), EUNAVAILABLE (fewer UP nodes than the table's copies), EIO (the
 * commit failed; nothing changed), or the table's new StreamConfig. */
void streamcalls_update(server *s, const Lapse__UpdateStreamRequest *r, Lapse__Response *resp,
                        arena *a);

#endif
