/*
 * mover.h: draining a node (docs/replication.md, "Draining a node"), and
 * removing a dead one (below): `lapse node drain N` marks node N draining
 * in the map (NodeDrain), and the coordinator leader then moves every copy
 * it holds of a replicated table's base partitions to other nodes, each
 * move a few changes of one replica set (placement/failover.h), each
 * committed with the map:
 *   1. a copy is added on the UP, not draining node holding fewest base
 *      copies, out of the in-sync set; the set's primary catches it up (from
 *      its log, or a snapshot) and asks its join (node/resync.c), as for
 *      any member out of sync;
 *   2. once the set has as many in-sync copies off draining nodes as the
 *      table keeps, a draining primary hands the primaryship to the first
 *      of them in two map changes (pmap_replica_step_down): it steps down
 *      (serves no write or strong read once it holds that map), and once
 *      it confirmed holding it (push reply or heartbeat) or is not UP, the
 *      successor becomes primary at epoch + 1 (finish_handover): in the
 *      same pass when its answer to that pass's push confirmed it
 *      (finish_handovers_now), else in a later one; writes to the
 *      partition are refused meanwhile, two commits and pushes;
 *   3. the draining node's copy is removed from the set.
 * The state of every move is the map itself (which sets hold a draining
 * node, which of their copies are in sync), so a new leader after a
 * coordinator failover carries on where the old one stopped. At most
 * --max-concurrent-moves sets (server.max_moves, MOVER_MAX_CONCURRENT by
 * default) are between steps 1 and 3 at once, so a drain does not flood
 * the primaries with snapshots.
 *
 * The same steps carry out the rebalancer's moves (docs/replication.md,
 * "Rebalancing"): while every node is UP (removed ones no set names
 * aside) and none drains, each pass starts moves from
 * pmap_rebalance_plan, up to --max-concurrent-moves in all, each marking
 * the copy that leaves (pmap_replicas.leaving) and adding the new one in
 * the same commit; a node that joins so gets its share of the tables made
 * before it. With --balance-primaries N (server.balance_primaries;
 * MOVER_BALANCE_PRIMARIES by default, 0 turns it off), once copies are
 * even the plan is handovers of primaryships
 * instead (pmap_move.handover), made at once, at most N per pass and no
 * more than moves could start, until every node leads within one of the
 * others' count of sets.
 *
 * A removed node (NodeRemove: a DOWN node given up on, docs/replication.md,
 * "Removing a dead node") is moved off as a draining one, except that its
 * copy, out of sync for good, may go before the new one is in sync, and
 * goes at once when the set has no room for a new one (a move's new copy
 * whose node died and was removed).
 *
 * GSI and stream copies (mover_derived.c; placement/derived.h): each pass
 * also replaces every copy of a GSI partition or stream shard held by a
 * leaving node: a copy is added on the UP node, neither draining nor
 * removed, holding fewest such copies, marked joining, and once that node
 * reports the table's copies whole with a map that new (its heartbeat:
 * replstatus_copies_whole), the leaving copy goes. No limit on how many
 * at once: a new node fills all its new copies of a table in one pass
 * over the table's items (node/newcopy.h), so adding them together costs
 * least. When the rebalancer may run and no such copy moves, up to
 * --max-concurrent-moves copies move from the node holding most of them to
 * the one holding fewest, until every UP node is within one.
 *
 * Not moved: copies of single-copy tables' base partitions (they keep no
 * log to catch a new copy up from); NodeDrain counts them apart. A node
 * drops a removed copy's keys itself (node/copydrop.h).
 *
 * Thread-safety: as membership.h; each says whether it takes server.lock.
 */
#ifndef LAPSE_COORD_MOVER_H
#define LAPSE_COORD_MOVER_H

#include <stdint.h>

#include "../common/arena.h"
#include "../rpc/rpc.h"
#include "server.h"

/* The default of --max-concurrent-moves (server.max_moves), and its most. */
#define MOVER_MAX_CONCURRENT 4
/* --balance-primaries by default: handovers the rebalancer starts per pass. */
#define MOVER_BALANCE_PRIMARIES 4
#define MOVER_MAX_MOVES_LIMIT 64

/* One step of every move that can take one now, committed in one map
 * change and pushed. A no-op unless this coordinator leads and a node is
 * draining. REQUIRES: s->lock held (released while pushing). */
void mover_pass(server *s);

/* What is left on a node (mover_count). */
typedef struct mover_left {
    uint32_t base;          /* copies of base partitions that move */
    uint32_t moving;        /* sets and lists being moved off it now */
    uint32_t other;         /* copies that wait: one-copy tables' base partitions on a node down */
    uint32_t derived;       /* copies of GSI partitions and stream shards that move */
    uint32_t lost;          /* copies lost with it, removed (--lose-data): no copy left anywhere,
                             * or of a table that lost a base partition so */
    const char *lost_table; /* the first table of those copies (borrowed from the map), or NULL */
} mover_left;

/* What is left on node id in pm (mover_left). */
void mover_count(const pmap *pm, uint32_t id, mover_left *out);

/* What mover_derived_pass did. */
typedef struct mover_derived_done {
    size_t added, settled, dropped, stuck;
    size_t rebalanced; /* of added: what rebalancing started */
} mover_derived_done;

/* Whether a GSI partition or stream shard list of pm has a copy joining or
 * a member leaving. */
int mover_derived_has_work(const pmap *pm);
/* Whether the rebalancer has a GSI or stream copy to move in pm (pm's UP
 * nodes hold counts of them more than one apart). */
int mover_derived_unbalanced(const pmap *pm);
/* One step of every GSI and stream copy move in next (above), the map
 * committed as version since; with rebalance > 0 and no such move under
 * way, first up to rebalance moves that bring the UP nodes within one of
 * each other's count of GSI and stream copies, each
 * marking the copy that leaves (pmap_replicas.leaving). REQUIRES: s->lock
 * held. */
void mover_derived_pass(server *s, pmap *next, uint64_t since, size_t rebalance,
                        mover_derived_done *done);
/* Adds to *out node id's GSI and stream copies in pm that move (derived),
 * the lists of them with a copy joining (moving), and its copies of lists
 * that no longer move (lost, lost_table): lost with a removed node, or of
 * a table that lost a base partition so (docs/replication.md, "Removing a
 * dead node"). */
void mover_derived_count(const pmap *pm, uint32_t id, mover_left *out);

/* NodeDrain: marks the node draining (or, with stop, not), committed and
 * pushed, and answers what is left on it. ENOTFOUND (no such node),
 * EUNAVAILABLE (fewer UP nodes would be left outside the draining ones than
 * a replicated table keeps copies), EIO (the commit failed). Takes
 * s->lock. */
void mover_drain(server *s, const Lapse__NodeDrainRequest *r, Lapse__Response *resp, arena *a);

/* NodeRemove: marks a DOWN node removed, its copies counted lost
 * (pmap_lose_node_copies), committed and pushed, and answers what is left
 * on it; already removed, only answers. ENOTFOUND (no such node), ESTATE
 * (no etcd, where alone the mover runs; the node is UP: drain it instead;
 * or it holds the only copy known to have a set's acknowledged writes), EUNAVAILABLE (fewer UP
 * nodes, not draining nor removed, would be left than a replicated table keeps copies), EIO (the
 * commit failed). Takes s->lock. */
void mover_remove(server *s, const Lapse__NodeRemoveRequest *r, Lapse__Response *resp, arena *a);

/* Rebalance (lapse rebalance --dry-run): the moves or handovers
 * pmap_rebalance_plan finds on the current map, all of them (the leader
 * starts at most --max-concurrent-moves at a time on its own), and how many
 * sets are moving now. Takes s->lock. */
void mover_rebalance(server *s, const Lapse__RebalanceRequest *r, Lapse__Response *resp, arena *a);

#endif
