/*
 * shipper.h: the source side of replication on a node (docs/replication.md,
 * "Shipping and applying"): for every base partition this node owns of
 * every table with an outbox (schema_has_outbox), the outbox is shipped in
 * order to each destination of pmap_outbox_destinations: a ReplicateRequest
 * to another node, apply_batch through replicate_apply when the destination
 * is this node. Acks from the replies are kept in the lanes and stored
 * (outbox_ack) by the acks thread every SHIPPER_ACKS_MS, which also trims
 * what every current destination has acked (outbox_trim), each outbox at
 * most every SHIPPER_TRIM_INTERVAL_MS (shipper_acks.c says why).
 *
 * Units of work:
 *   lane   (table, source partition, destination node): acked seq (cached
 *          from the store), a dirty flag (records may be waiting) and a
 *          backoff for errors of that lane alone;
 *   dest   a destination node: its RPC client, a claim (one worker at a
 *          time ships to it, so each lane's batches go out in order), and
 *          a backoff while it is unreachable.
 * A worker claims one destination with dirty lanes, ships one batch per
 * dirty lane to it in one concurrent round (rpc_call_many), handles the
 * replies and releases it. A write marks the lanes of its partition dirty
 * and wakes a worker (shipper_notify), so a record ships within
 * milliseconds; every SHIPPER_RESCAN_MS every lane is marked dirty anyway
 * (a safety net: a lane with nothing new costs one cached counter read).
 *
 * A destination that is down (a round failed with a transport error) is
 * retried with exponential backoff (SHIPPER_BACKOFF_MIN_MS doubling to
 * SHIPPER_BACKOFF_MAX_MS) with a short probe timeout, and at most workers - 1
 * workers probe down destinations at once, so one dead node cannot hold
 * every worker. Writes never wait for the shipper: the outbox keeps the
 * records and the lanes catch up when the destination returns.
 *
 * Thread-safety: shipper_open/shipper_close on the main thread (node_open,
 * node_close); shipper_notify and shipper_collect from any thread. One mutex
 * guards the lanes and destinations; no store call or RPC is made holding
 * it.
 *
 * Invariants:
 *  1. The batches of one lane are sent one at a time, in seq order, each
 *     covering (acked, to_seq] of the outbox; a destination applies each
 *     record once (apply.h), whatever is resent.
 *  2. A lane's cached acked seq is at least its stored ack, except after an
 *     ESTATE reply lowered it to the destination's applied seq (resend); the
 *     stored ack trails it by at most one step of the acks thread, and is only ever
 *     set to what a destination replied it applied.
 *  3. The lanes follow the current map: rebuilt (state carried over) when a
 *     worker sees a new map version; trimming uses the destinations of the
 *     map the lanes were built from.
 *  4. Destination RPC clients are closed only by shipper_close, after every
 *     worker has stopped (no NNG call races a close).
 */
#ifndef LAPSE_SHIPPER_H
#define LAPSE_SHIPPER_H

#include <stddef.h>
#include <stdint.h>

#include "../common/metrics.h"
#include "../common/schema.h"
#include "node.h"

/* The batch and round sizes, time-outs and intervals above are in
 * shipper_int.h. */
#define SHIPPER_DEFAULT_WORKERS 2
#define SHIPPER_MAX_WORKERS 64

typedef struct shipper shipper;

/* Builds the lanes from the current map and starts workers threads
 * (1..SHIPPER_MAX_WORKERS). Returns 0, or LAPSE_ENOMEM with a reason
 * (nothing left running). REQUIRES: maps_init and telemetry_init ran. */
int shipper_open(shipper **out, node_server *ns, int workers, char *err, size_t errlen);
/* Stops the workers (each finishes its current round: at most one RPC
 * timeout), then the acks thread (after storing the last acks), then closes the
 * destination clients and frees s. Accepts NULL. */
void shipper_close(shipper *s);

/* A write committed outbox records of partition part of table_id: marks
 * the partition's lanes dirty and wakes a worker. Quick; never blocks on
 * the store or the network. Accepts NULL. */
void shipper_notify(shipper *s, uint32_t table_id, uint32_t part);
/* shipper_notify when t has an outbox; nothing otherwise. */
void shipper_notify_table(shipper *s, const table_schema *t, uint32_t part);

/* Sets lapse_outbox_pending_records{dest} (records not acked, summed over
 * partitions) for the metrics collector. */
void shipper_collect(shipper *s, metrics *m);

#endif
