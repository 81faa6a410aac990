/*
 * refill.h: the thread that makes this node's copies whole again after they
 * lost records (its data dir was lost, and their sources trimmed what they
 * had not applied: partition/apply.h, REPL_MISSING; docs/replication.md,
 * "A copy that lost records"). Every REFILL_PERIOD_MS it looks at the
 * tables whose copies here ever missed records and fills, for each source
 * partition with a gap, the stream shard copy from another copy
 * (streams_fill_shard) and the GSI copies from the partition's items
 * (gsi_fill_source). Copies with a gap answer no read until filled.
 *
 * Thread-safety: refill_open and refill_close on node_open's and
 * node_close's thread. A pass blocks on peers' calls (a few seconds at
 * most per source partition); refill_close waits for the current one.
 */
#ifndef LAPSE_NODE_REFILL_H
#define LAPSE_NODE_REFILL_H

#include "node.h"

#define REFILL_SLOW_MS 1500 /* a pass's pause under the slow-refill fault switch */
#define REFILL_PERIOD_MS 1000

typedef struct refill refill;

/* Starts the thread. 0 or LAPSE_ENOMEM with a reason. REQUIRES:
 * maps_init ran. */
int refill_open(refill **out, node_server *ns, char *err, size_t errlen);
/* Stops the thread and frees r. Accepts NULL. */
void refill_close(refill *r);

#endif
