/*
 * gsi_fill.h: making this node's GSI copies whole again after they lost
 * records of a source partition (its data dir was lost and the source
 * trimmed what it had not applied: apply.h, REPL_MISSING), from the items
 * of that partition as its primary holds them (docs/replication.md, "A copy
 * that lost records").
 *
 * Every entry such a copy holds is right as of its applied seq A: a
 * record's delta only deletes its old image's entry and puts its new
 * image's. What it lacks is the entries of the items no record since the
 * gap touched. So the fill holds the source's batches off this node
 * (replicate_pause), reads the partition's items page after page from its
 * primary (PartitionItems: each page stands at an outbox seq P >= A that
 * every in-sync copy holds), puts each item's entries in the GSI
 * partitions this node owns (apply_gsi_fill), marks the copies filled
 * through the gap's mark (apply_gsi_filled) and lets the batches in again:
 * the records after A then delete, by their old images, every entry the
 * fill put that a later change replaced.
 *
 * Thread-safety: one fill at a time (the refill thread runs them,
 * refill.h); it blocks on the primary's calls.
 */
#ifndef LAPSE_NODE_GSI_FILL_H
#define LAPSE_NODE_GSI_FILL_H

#include <stdint.h>

#include "node.h"

#define GSI_FILL_PAGE_BYTES (256 * 1024)
#define GSI_FILL_CALL_TIMEOUT_MS 4000 /* the primary waits up to 1.5 s for its followers */

/* Fills this node's GSI copies of table t with the items of source
 * partition src_part, whose gap has mark (apply_gsi_gap), from the
 * partition's primary in pm. A node that owns no partition of t's GSIs
 * only marks them filled. Returns 0 once filled (they answer again), else
 * the error (logged); the next pass tries again. */
int gsi_fill_source(node_server *ns, const pmap *pm, const pmap_table *t, uint32_t src_part,
                    uint64_t mark);

/* The outbox seq partition src_part of t stands at on its primary in pm,
 * and the primary's map version: one item's page of PartitionItems
 * (newcopy.h asks it of the sources that have not reached it). 0, or the
 * call's error with err. */
int gsi_fill_primary_seq(node_server *ns, const pmap *pm, const pmap_table *t, uint32_t src_part,
                         uint64_t *seq, uint64_t *version, char *err, size_t errlen);

#endif
