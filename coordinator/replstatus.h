/*
 * replstatus.h: the lag of replica sets' followers as the coordinator knows
 * it (docs/replication.md, "Watching replica sets"). Each primary reports
 * the followers of the sets it leads in its heartbeats (replica_lag); the
 * latest report per node is kept in its node_live, and ClusterStatus and
 * DescribeTable show, for each set, the report of the node the map names
 * its primary (an ex-primary's older report is left out).
 *
 * Thread-safety: replstatus_record takes s->lock; replstatus_lag_pb
 * requires it held.
 */
#ifndef LAPSE_COORDINATOR_REPLSTATUS_H
#define LAPSE_COORDINATOR_REPLSTATUS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/arena.h"
#include "server.h"

/* Keeps lags[0..n) as node's latest report (replacing the one before). An
 * allocation failure keeps the older report. */
void replstatus_record(server *s, uint32_t node, Lapse__ReplicaLag *const *lags, size_t n);

/* The reports of the current primaries of table_id's sets (0: every
 * table's), allocated from a. REQUIRES: s->lock held. 0 or LAPSE_ENOMEM. */
/* Records node's report of the tables whose GSI or stream copies there
 * are filling, as of its map version version (node_live.filling). */
void replstatus_record_filling(server *s, uint32_t node, const uint32_t *tables, size_t n,
                               uint64_t version);
/* Whether node reported, with a map version since or later, every GSI and
 * stream copy of table table_id it holds whole. REQUIRES: s->lock held. */
int replstatus_copies_whole(server *s, uint32_t node, uint32_t table_id, uint64_t since);

int replstatus_lag_pb(server *s, uint32_t table_id, arena *a, Lapse__ReplicaLag ***out, size_t *n);

#endif
