/*
 * derived.h: moving the copies of GSI partitions and stream shards, the
 * "derived" copies (docs/replication.md, "Moving GSI and stream copies").
 *
 * Such a list has no primary, epoch or log of its own: each copy is one
 * more destination of the base partitions' outboxes, applying their
 * records by sequence. So a copy moves without a snapshot: its new node
 * fills it as it fills a copy that lost records (the GSI entries from the
 * source partitions' items, the shard from another copy) and the outboxes
 * feed it from then on. A copy on a leaving node (draining or removed) is
 * replaced in two map changes, both made by the coordinator leader's
 * mover:
 *
 *   1. pmap_derived_add: the new copy joins the end of the list, marked
 *      joining from the map version that adds it. Its node, on applying
 *      that map, notes what the copy misses and fills it (node/newcopy.h);
 *      liblapse reads no joining copy.
 *   2. pmap_derived_settle, once that node reports the table's copies
 *      whole with a map at least that new: the mark goes and the leaving
 *      copy leaves the list. Its node then drops the copy's data.
 *
 * Pure functions on a map copy; the caller bumps the version and commits.
 *
 * Invariants (pmap_test):
 *  1. A list keeps at least one copy: settle removes a leaving copy only
 *     when another one stays.
 *  2. joining, when not 0, names a member, and at most one at a time.
 */
#ifndef LAPSE_DERIVED_H
#define LAPSE_DERIVED_H

#include <stddef.h>
#include <stdint.h>

#include "pmap.h"

/* The copies of GSI gsi's partition part of t, or with gsi < 0 of stream
 * shard part; NULL when there is no such list. */
pmap_replicas *pmap_derived_list(pmap_table *t, int gsi, uint32_t part);

/* Whether node id holds a joining copy of one of t's GSI partitions or
 * stream shards; *since (when not NULL, and it does) gets the oldest map
 * version such a copy joins from. */
int pmap_derived_joining(const pmap_table *t, uint32_t id, uint64_t *since);

/* Adds node id to the end of list r, joining from map version since. 0,
 * LAPSE_EEXISTS (a member already), LAPSE_ESTATE (a copy is joining
 * already) or LAPSE_EUNAVAILABLE (PMAP_MAX_REPLICAS copies already). */
int pmap_derived_add(pmap_replicas *r, uint32_t id, uint64_t since);

/* The joining copy is whole: it may be read, and member leave (not the
 * joining one) leaves the list. 0, LAPSE_ESTATE (no copy joining),
 * LAPSE_EINVAL (leave is not a member, or is the joining copy). */
int pmap_derived_settle(pmap_replicas *r, uint32_t leave);

/* Member id leaves r, joining or not (a joining copy whose node leaves
 * too). 0, LAPSE_EINVAL (not a member) or LAPSE_ESTATE (the last copy). */
int pmap_derived_drop(pmap_replicas *r, uint32_t id);

#endif
