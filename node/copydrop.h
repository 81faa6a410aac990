/*
 * copydrop.h: dropping the data of the copies this node no longer holds
 * (docs/replication.md, "Draining a node"). A move (a drain, the
 * rebalancer, a dead node's removal) ends by taking a copy out of its
 * replica set; the node that held it then deletes the partition's keys in
 * every family (replog_reset: range deletes, one synced batch), so a
 * drained node ends with nothing on disk for the sets it left.
 *
 * Not at once: maps_apply notes each base partition its previous map named
 * this node in and the new one does not (copydrop_note), and the
 * membership thread drops it COPYDROP_DELAY_MS later (copydrop_take_due),
 * once a fresh fetch of the coordinator's map confirms the node is still
 * out of the set. By then the set's primary has long had the map that removed the
 * copy and ships it nothing more, so the drop races no shipment; a copy
 * added back meanwhile is simply not dropped. A snapshot that a primary
 * was sending to the copy when it was dropped cannot finish on half the
 * keys: the replica marks the copy dropped after deleting its keys
 * (logship_copy_dropped) and refuses the snapshot's next part, so the
 * primary starts again from a reset.
 *
 * A node that crashes between the map and the drop finds that copy's keys
 * on disk when it starts again, with a map that no longer names it:
 * copydrop_note_held notes those copies then (base partitions, stream
 * shards and GSI partitions alike).
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef LAPSE_COPYDROP_H
#define LAPSE_COPYDROP_H

#include <stdint.h>

#include "../placement/pmap.h"
#include "node.h"

#define COPYDROP_DELAY_MS 3000 /* from the map that removed a copy to its drop */

/* Initializes ns's list of copies to drop. */
void copydrop_init(node_server *ns);
/* Frees it. REQUIRES: no thread uses ns. */
void copydrop_fini(node_server *ns);

/* A copy this node held: of a base partition, a stream shard, or (kind >=
 * 0) a partition of the table's GSI at that position in its schema. */
#define COPYDROP_BASE (-2)
#define COPYDROP_SHARD (-1)
typedef struct copydrop_copy {
    uint32_t table_id, part;
    int kind; /* COPYDROP_BASE, COPYDROP_SHARD or a GSI's position */
} copydrop_copy;

/* Notes every copy (base partition, stream shard, GSI partition) old names
 * this node a member of and new does not (a table gone from new is
 * dropped whole by maps_apply instead), and forgets noted ones new names
 * it in again. Called by maps_apply. */
void copydrop_note(node_server *ns, const pmap *old, const pmap *new);

/* Notes every copy (base partition, stream shard, GSI partition) of pm
 * that does not name this node a member but whose keys (a base
 * partition's items or log position, a shard's records, a GSI partition's
 * entries) are on this node's disk (a node killed between the map that
 * removed its copy and the drop), due COPYDROP_DELAY_MS from now; the drop
 * checks membership on a fresh map first, as for any noted copy. Returns
 * how many it noted. Called once, by maps_init, before the node serves:
 * one look at the store per list of pm this node is not a member of. */
size_t copydrop_note_held(node_server *ns, const pmap *pm);

/* Whether a noted copy is due. */
int copydrop_due(node_server *ns);

/* Takes a due copy out of the list into *out, skipping (and forgetting)
 * those current names this node in again or no longer has the table of; 0
 * when none is left. The caller drops it (the membership thread: a base
 * partition's with replog_reset, then logship_copy_dropped; a stream
 * shard's or GSI partition's with apply_drop_copy). */
int copydrop_take_due(node_server *ns, const pmap *current, copydrop_copy *out);

/* Makes every noted copy due COPYDROP_DELAY_MS from now at the earliest
 * (the coordinator's map could not be fetched). */
void copydrop_postpone(node_server *ns);

/* Copies noted and not dropped yet. */
size_t copydrop_pending(node_server *ns);

#endif
