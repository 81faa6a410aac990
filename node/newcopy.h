/*
 * newcopy.h: GSI partition and stream shard copies new on this node, which
 * a move added (placement/derived.h; docs/replication.md, "Moving GSI and
 * stream copies"), made whole before they are read.
 *
 * Such a copy misses what came before it:
 *  - the records of its source partitions this node applied before it held
 *    the copy (it held other copies of the table): newcopy_note, run by
 *    maps_apply once the new map is current, marks them missing through
 *    the applied seq (apply_note_new_copy, under the lock the source's
 *    batches are applied under; a batch filtered by an older map is refused
 *    from then on: newcopy_added_after), and the refill thread fills the
 *    new kinds as it fills a copy that lost records;
 *  - the records a source trimmed before this node was its destination:
 *    the source's new lane to this node learns where it stands and says
 *    what it no longer holds (first_kept), which apply_note_missing marks.
 *    Until a source whose destination this node was not has reached it
 *    with a map that adds the copy (newcopy_reached), or its primary says
 *    it stands where this node applied already (the refill thread asks:
 *    a source that never wrote ships nothing), the table waits on it.
 * A table is "filling" while it waits on a source or has a mark left
 * (apply_missing_any). The heartbeat reports the filling tables with the
 * map version they hold for (newcopy_filling), and the coordinator's mover
 * lets the copy be read, and the one it replaces go, once its node
 * reports the table whole at a map at least as new as the one that added
 * it. A joining copy is read by no client (liblapse skips it) and refuses
 * GSI queries and stream reads while its table waits.
 *
 * Waits are kept in memory: after a restart the node waits again on every
 * source of each table where it holds a joining copy (every source's lane
 * checks a restarted destination anyway).
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef LAPSE_NODE_NEWCOPY_H
#define LAPSE_NODE_NEWCOPY_H

#include <stddef.h>
#include <stdint.h>

#include "../placement/pmap.h"
#include "node.h"

typedef struct newcopy newcopy;

/* A source a table waits on: it has not reached this node with a map of
 * version since or later. */
typedef struct newcopy_wait {
    uint32_t table_id, part;
    uint64_t since;
} newcopy_wait;

/* Creates ns->newcopy and waits on every source of each table of pm where
 * node ns->id holds a joining copy. 0 or LAPSE_ENOMEM. */
int newcopy_open(node_server *ns, const pmap *pm);
/* Frees ns->newcopy. Accepts NULL. */
void newcopy_close(node_server *ns);

/* Marks what the copies new in new miss (above), and publishes new's
 * version as the one newcopy_filling answers for. REQUIRES: new is the
 * current map; called by maps_apply, one at a time. */
void newcopy_note(node_server *ns, const pmap *old, const pmap *new);

/* A batch of source partition src_part of table table_id, sent with the
 * sender's map version src_version, was applied here: the table no
 * longer waits on that source if the sender's map was new enough. */
void newcopy_reached(node_server *ns, uint32_t table_id, uint32_t src_part, uint64_t src_version);

/* The waits now, copied into *out (caller frees; NULL when none).
 * Returns how many. */
size_t newcopy_waits(node_server *ns, newcopy_wait **out);

/* Whether a map newer than version gave this node new GSI or stream
 * copies of table table_id: a batch filtered by that older map would skip
 * them after their missing mark was written, so replicate_apply refuses
 * it (the source resends it, filtered by the new map). Cheap when no
 * table got any since version. */
int newcopy_added_after(node_server *ns, uint32_t table_id, uint64_t version);

/* Whether table table_id waits on a source (its joining copies answer no
 * read). */
int newcopy_waiting(node_server *ns, uint32_t table_id);

/* The tables of pm whose GSI or stream copies here are filling, at most
 * max into ids; *version gets the map version they hold for (read before
 * them). Returns how many. */
size_t newcopy_filling(node_server *ns, const pmap *pm, uint32_t *ids, size_t max,
                       uint64_t *version);

#endif
