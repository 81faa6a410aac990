/*
 * replicate.h: the destination side of replication on a node
 * (docs/replication.md, "Shipping and applying"): applying a batch of a
 * source partition's outbox records, from the Replicate call (another
 * node's shipper, served by replserve.c) or from this node's own shipper
 * when it is the destination, with the apply_filter the partition map
 * gives this node; and the metrics of what was applied.
 *
 * Thread-safety: any thread. Applies of one (table, source partition) are
 * serialized by a node-level stripe lock (ns->repl_locks) around the store's
 * own apply lock, so the records newly applied by each call are known
 * exactly and counted once.
 *
 * Invariants:
 *  1. The filter of a batch is this node's share of the source partition
 *     in the map the call was routed by: the GSI partitions it owns
 *     (pmap_gsi_owner) and the stream shard when it hosts it
 *     (pmap_stream_host(t, source part) == this node).
 *  2. lapse_replication_lag_seconds and lapse_stream_records_total count
 *     each record once: only records with seq above the applied seq read
 *     under the lock before the apply, up to the applied seq after it.
 *  3. Readers waiting for stream records of this node (streams.h) are woken
 *     after every apply that stored one.
 */
#ifndef LAPSE_REPLICATE_H
#define LAPSE_REPLICATE_H

#include <stddef.h>
#include <stdint.h>

#include "../partition/apply.h"
#include "../placement/pmap.h"
#include "node.h"

/*
 * Applies records recs[0..n) (lens[i] bytes each) of source partition
 * src_part of table t (from the map the caller holds), covering outbox
 * seqs (after_seq, to_seq], with this node's filter (invariant 1). With
 * first_kept non-zero, the source trimmed its records (after_seq,
 * first_kept): if this node has not applied them, it notes that its copies
 * miss them for good (apply_note_missing) before applying the batch.
 * *applied_out (may be NULL) gets the applied seq afterwards whenever it
 * could be read. Returns apply_batch's codes: 0, LAPSE_ESTATE (a gap:
 * resend after *applied_out), LAPSE_EINVAL, LAPSE_ECORRUPT, LAPSE_EIO or
 * LAPSE_ENOMEM, with err; on error nothing is applied. A batch applied
 * (or a batch of none answered) tells newcopy_reached that the source,
 * at its map version src_version, reached this node. LAPSE_EUNAVAILABLE
 * (resend later) when a map newer than map_version (the version of the
 * map t is from) or src_version (the sender's, whose map chose which
 * records to send: 0, unknown, counts as map_version) gave this node new
 * GSI or stream copies of the table (newcopy_added_after): the batch is
 * filtered for the old copies.
 */
int replicate_apply(node_server *ns, const pmap_table *t, uint64_t map_version, uint32_t src_part,
                    uint64_t src_version, uint64_t after_seq, uint64_t to_seq, uint64_t first_kept,
                    const void *const *recs, const size_t *lens, size_t n, uint64_t *applied_out,
                    char *err, size_t errlen);

/* The filter of node node_id for source partition src_part of t
 * (invariant 1). arg is filled and must outlive the filter. */
typedef struct replicate_filter_arg {
    const pmap_table *t;
    uint32_t node_id;
} replicate_filter_arg;
void replicate_filter(const pmap_table *t, uint32_t src_part, uint32_t node_id,
                      replicate_filter_arg *arg, apply_filter *f);

/* Holds every batch of source partition src_part of table table_id off
 * this node while its GSI copies are filled from the source's items
 * (gsi_fill.c), on set, until called again with on unset: replicate_apply
 * refuses them (EUNAVAILABLE) and the sources resend later. A batch being
 * applied when the hold starts is finished first (it takes the same stripe
 * lock). One source at a time. */
void replicate_pause(node_server *ns, uint32_t table_id, uint32_t src_part, int on);

#endif
