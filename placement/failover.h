/*
 * failover.h: changes of a replica set's membership (docs/replication.md,
 * "Failover"): what the coordinator leader commits, in one fenced etcd
 * transaction with the map, when a node goes DOWN or a replica has caught
 * up. Pure functions on a map copy; the caller bumps the version and
 * commits.
 *
 * When node id goes DOWN, for each base partition of a replicated table
 * that holds it in sync:
 *  - as a follower, it leaves the in-sync set (the primary then acks writes
 *    with the others, as long as min-in-sync copies remain);
 *  - as the primary, the first in-sync follower (in list order) becomes the
 *    primary: it moves to ids[0], the old primary leaves the in-sync set,
 *    and the epoch goes up by one, so the members refuse the old primary's
 *    records from then on. Every acknowledged write is on every in-sync
 *    member, so the new primary has them all. With no in-sync follower the
 *    set is left as it is: the partition waits for its primary rather than
 *    lose acknowledged writes.
 * A node that is back rejoins the in-sync set only through
 * pmap_replica_join, which its primary asks for once it has caught it up.
 * A follower that is UP but does not confirm the primary's records (cut
 * off from it, or failing) leaves the in-sync set through
 * pmap_replica_shrink, which its primary asks for, as long as
 * PMAP_MIN_IN_SYNC copies stay in sync.
 *
 * Whenever a change leaves the primary the only copy in sync, the set
 * notes the member that left last (last_out): it holds every acknowledged
 * write, so it takes over should the primary lose its copy
 * (pmap_lose_node_copies).
 *
 * Every change of a set, and every DOWN or shrink of a follower that is
 * not in sync (which cancels a join its primary may have asked), bumps the
 * set's changes count. A join names the count its asker saw and is refused
 * at any other: its primary counts the follower in sync from the ask until
 * its map shows another count, so a join asked before a change can never
 * land after it, when the primary may have stopped waiting for the
 * follower (docs/replication.md, "Rejoining").
 *
 * Invariants (pmap_test):
 *  1. A change never adds a member to the in-sync set, and never leaves
 *     ids[0] outside it (except a set left as it was).
 *  2. The epoch changes exactly when ids[0] does, and only goes up.
 *  3. changes only goes up, and goes up with every change of the set.
 */
#ifndef LAPSE_FAILOVER_H
#define LAPSE_FAILOVER_H

#include <stddef.h>
#include <stdint.h>

#include "pmap.h"

/* What pmap_fail_node did. */
typedef struct pmap_failover {
    size_t shrunk;    /* sets that lost a follower from the in-sync set */
    size_t promoted;  /* sets with a new primary */
    size_t stranded;  /* sets whose primary is id with no in-sync follower */
    size_t recovered; /* pmap_lose_node_copies: sets taken over by last_out */
} pmap_failover;

/* Applies node id's DOWN to every replicated base partition of pm (above).
 * Fills *out (may be NULL). Does not bump version. */
void pmap_fail_node(pmap *pm, uint32_t id, pmap_failover *out);

/* Node id lost its copies (it came back on an empty data dir): as
 * pmap_fail_node, except that a set whose only copy in sync was id's is
 * taken over by its last_out member, alone in sync at a new epoch (it holds
 * every acknowledged write: none is acknowledged with one copy in sync),
 * rather than left to id, which holds nothing; and last_out no longer
 * names id anywhere. A set with no last_out stays with id (counted
 * stranded: its acknowledged writes are lost). Does not bump version. */
void pmap_lose_node_copies(pmap *pm, uint32_t id, pmap_failover *out);

/* Adds node id to the in-sync set of partition part of table table_id, as
 * its primary primary_id asks at epoch, having seen the set at changes.
 * Returns 0 (added, or already in sync), LAPSE_ENOTFOUND (no such table or
 * partition), LAPSE_EWRONGNODE (primary_id is not the set's primary or
 * epoch is not its epoch: the asker's map is stale), LAPSE_EINVAL (id is
 * not a member) or LAPSE_ESTATE (the set changed since the asker saw it at
 * changes: the join can never land). Does not bump version. */
int pmap_replica_join(pmap *pm, uint32_t table_id, uint32_t part, uint32_t primary_id,
                      uint64_t epoch, uint32_t id, uint64_t changes);

/* Copies in sync (the primary's included) a write needs; a set of fewer
 * members needs them all. */
#define PMAP_MIN_IN_SYNC 2

/* The copies a write to r, a set of a table of rf copies, needs in sync:
 * PMAP_MIN_IN_SYNC, or r->n or rf when smaller (a one-copy table's set
 * being moved needs its primary only: docs/replication.md, "Moving a
 * one-copy partition"). */
uint32_t pmap_min_in_sync(const pmap_replicas *r, uint32_t rf);

/* Whether the commits to partition part of t go through the replication
 * log (partition/replog.h): always for a table of two copies or more; for
 * a one-copy table, while a move gives the set a second member, and on a
 * node (self) that is not the set's primary, so that a write routed by an
 * older map is refused at its commit rather than written where no copy
 * will follow it (docs/replication.md, "Moving a one-copy partition").
 * part PMAP_ANY_PART: whether any set of t has a second member. */
#define PMAP_ANY_PART UINT32_MAX
int pmap_logged(const pmap_table *t, uint32_t part, uint32_t self);

/* Takes follower id out of the in-sync set of partition part of table
 * table_id, as its primary primary_id asks at epoch; a follower already out
 * stays out and the set's changes go up (its join, if asked, is
 * cancelled). Returns 0 (taken out, or already out), LAPSE_ENOTFOUND, LAPSE_EWRONGNODE (as for
 * join), LAPSE_EINVAL (id is not a follower of the set) or LAPSE_EUNAVAILABLE (fewer than
 * pmap_min_in_sync copies would stay in sync: the primary's writes stay refused instead). Does not
 * bump version. */
int pmap_replica_shrink(pmap *pm, uint32_t table_id, uint32_t part, uint32_t primary_id,
                        uint64_t epoch, uint32_t id);

/* Moves (docs/replication.md, "Draining a node"): a copy is added out of
 * the in-sync set, its primary catches it up and asks the join
 * (pmap_replica_join), the primaryship is handed over when the leaving copy
 * holds it, and the leaving copy is removed. Each is one change of the set
 * (changes goes up), committed by the coordinator leader with the map.
 *
 * pmap_replica_add: node id joins the set of partition part of table
 * table_id as a follower out of sync. 0, LAPSE_ENOTFOUND (no such set),
 * LAPSE_EINVAL (no such node), LAPSE_EEXISTS (already a member) or
 * LAPSE_EUNAVAILABLE (PMAP_MAX_REPLICAS members already). */
int pmap_replica_add(pmap *pm, uint32_t table_id, uint32_t part, uint32_t id);
/* In-sync follower to becomes the primary at epoch + 1; the old primary
 * leaves the in-sync set (as in a failover: its records of the old epoch
 * are refused from then on, and a suffix it alone holds is dropped when
 * its copy is next resynced). 0, LAPSE_ENOTFOUND, LAPSE_EINVAL (to is not
 * a follower) or LAPSE_ESTATE (to is not in sync). */
int pmap_replica_handover(pmap *pm, uint32_t table_id, uint32_t part, uint32_t to);
/* Begins a handover of the primaryship of set (table_id, part) to its
 * in-sync follower to (0: any, pmap_handover_target), in two map changes
 * (docs/replication.md, "Handing over a primaryship"): this one marks the
 * set from map version since (the version it is committed as) on, and its
 * primary, once it has that map, serves no write and no strong read of the
 * partition; pmap_replica_handover, committed once the primary has
 * confirmed that map (or is DOWN), makes to the primary at epoch + 1 and
 * ends the mark. So the old primary has stopped before the new one starts,
 * as after a failover, where the lost lease stops it. 0, LAPSE_ENOTFOUND,
 * LAPSE_EINVAL (to is not a follower), LAPSE_ESTATE (to is not in sync, or
 * a handover is under way already). Does not bump version or changes (a
 * join asked meanwhile still lands). */
int pmap_replica_step_down(pmap *pm, uint32_t table_id, uint32_t part, uint32_t to, uint64_t since);
/* The follower a handover under way in r goes to: its handing_to while
 * that is an in-sync follower, else the first in-sync follower not
 * leaving; 0 with no handover under way or no such follower. */
uint32_t pmap_handover_target(const pmap_replicas *r);
/* Follower id leaves the set. 0, LAPSE_ENOTFOUND, LAPSE_EINVAL (not a
 * member), LAPSE_ESTATE (id is the primary: hand over first) or
 * LAPSE_EUNAVAILABLE (id is in sync and fewer than min-in-sync copies of
 * the smaller set would stay in sync; or id is the set's last_out, the one
 * copy beside the primary that holds every acknowledged write, even while
 * out of sync: removed, its node would drop them, and the primary's copy
 * would be their only one until another member joins; not for a one-copy
 * table, whose primary's copy is meant to be the only one). */
int pmap_replica_remove(pmap *pm, uint32_t table_id, uint32_t part, uint32_t id);
/* Rebalancing (docs/replication.md, "Rebalancing"): a move of set
 * (table_id, part)'s copy from one node to another, or (handover) of its
 * primaryship from its primary to an in-sync follower. */
typedef struct pmap_move {
    uint32_t table_id, part;
    uint32_t from, to;
    int handover; /* 1: from leads the set, to follows it; no copy moves */
} pmap_move;
/* Up to max moves, into out, that bring every UP node that is not draining
 * within one of the others' count of base copies of replicated tables
 * (first and follower copies, pmap_partitions_owned +
 * pmap_follower_copies): greedily, a copy of the fullest node to the
 * emptiest, a follower's before a primary's (no handover), from sets that
 * are settled (as many members as their table keeps, all in sync, none
 * leaving, all UP and not draining), one move per set. Once the copies are
 * within one, and only then (a plan holds moves or handovers, never both),
 * up to max_handovers (and max) handovers that bring every such node
 * within one of the others' count of replicated base sets it leads: from
 * settled sets, from the primary to the follower whose counts differ most
 * (by two or more), one per set; max_handovers 0 plans none. Returns how
 * many; 0 when balanced (or out of memory). pm is not changed. */
size_t pmap_rebalance_plan(const pmap *pm, pmap_move *out, size_t max, size_t max_handovers);
/* Starts move m: m->to is added out of sync (pmap_replica_add) and m->from
 * marked the set's leaving member, which the mover removes once the set
 * has its copies in sync without it. A handover is begun
 * (pmap_replica_step_down from map version since) and finished by the
 * mover. 0, LAPSE_ENOTFOUND, LAPSE_EINVAL (from is not a member, or for a
 * handover not the primary, or the set is moving already), or
 * pmap_replica_add's or pmap_replica_step_down's errors. */
int pmap_move_start(pmap *pm, const pmap_move *m, uint64_t since);
/* How many base partitions of replicated tables have node id as their
 * primary in new after another primary in old at a lower epoch: the
 * promotions of id from old to new (a failover that made it primary). A
 * table in only one of the maps counts nothing. */
size_t pmap_promotions(const pmap *old, const pmap *new, uint32_t id);

/* Changes of primary over every base partition of pm's replicated tables
 * (each set's epoch counts them, from 1): the failovers the map has seen. */
uint64_t pmap_primary_changes(const pmap *pm);

#endif
