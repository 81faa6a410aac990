/*
 * maps.h: the node's current partition map: loading it from store meta,
 * applying newer maps (from the coordinator's push, a heartbeat-triggered
 * fetch or an on-demand refresh), and handing out references to readers.
 *
 * The map is an immutable pmap wrapped in a reference-counted node_map.
 * Readers take a reference under the read lock (maps_acquire), use the map
 * for as long as they like without any lock, and drop it (maps_release); the
 * last reference frees it. maps_apply builds the new node_map off-lock and
 * swaps the pointer under the write lock, so no reader ever sees a freed or
 * half-built map.
 *
 * Thread-safety: every function may be called from any thread.
 *
 * Invariants:
 *  1. The version of the current map never decreases: maps_apply ignores a
 *     map whose version is not higher than the current one.
 *  2. Before a map becomes current, every table id that was in the previous
 *     map and is not in the new one has been dropped from the store
 *     (store_drop_table, idempotent), and the new map has been persisted in
 *     meta NODE_META_PMAP. A crash between the two steps repeats the drop on
 *     the next apply, since the persisted map still names the table. After
 *     the swap, maps_apply waits for the requests still routed by the old
 *     map (their references) and drops those tables once more, so a write
 *     that raced the first drop leaves nothing behind.
 *  3. Callers never hold a map reference while calling maps_apply or
 *     maps_refresh (the drain in 2 would wait for them).
 *  4. At most one GetPartitionMap call is in flight; on-demand refreshes
 *     start at most one call per MAPS_REFRESH_MIN_INTERVAL_MS, however many
 *     stale requests arrive.
 *  5. A dropped table's expiry index goes with its items. After the swap
 *     (and, when a table's TTL went from enabled to disabled, after the
 *     drain of 2, so no write routed by the old map can still add an index
 *     entry), maps_apply calls expiry_engine_sync with the new map before
 *     returning: when PushPartitionMap answers, the node already follows
 *     the new TTL config.
 *
 * Partition ownership as the node sees it (per partition of each table):
 *
 *                 maps_apply (map names us as replicas[0])
 *   NOT OWNED ------------------------------------------> OWNED
 *       ^                                                   |
 *       +---------------------------------------------------+
 *         maps_apply (another owner, or the table is gone:
 *         then its items are dropped before the swap)
 */
#ifndef LAPSE_MAPS_H
#define LAPSE_MAPS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../placement/pmap.h"
#include "../rpc/rpc.h"
#include "node.h"

#define MAPS_REFRESH_MIN_INTERVAL_MS 100 /* between on-demand fetches */
#define MAPS_FETCH_TIMEOUT_MS 1000       /* cap on one GetPartitionMap call */
#define MAPS_DRAIN_TIMEOUT_MS 5000       /* wait for requests on a replaced map */

/* One published map. */
struct node_map {
    pmap *pm;        /* owned, immutable while published */
    atomic_int refs; /* the current-map slot holds one, each reader one */
};

/*
 * Initializes the map fields of ns and loads the map persisted in meta, or an
 * empty map (version 0) when there is none. Returns 0, LAPSE_ECORRUPT (with
 * a reason: the persisted bytes do not decode), LAPSE_EIO or LAPSE_ENOMEM;
 * on error nothing needs freeing (maps_fini is still safe).
 * REQUIRES: ns->st is open; ns is zeroed apart from the fixed fields.
 */
int maps_init(node_server *ns, char *err, size_t errlen);

/* Whether commits to partition part (PMAP_ANY_PART: any) of one-copy table
 * table_id go through the replication log now (pmap_logged on the current
 * map): 0 at once on a node whose maps never moved such a set. The store's
 * hook (store_repl_hook.logged) and the quick-call test ask it. */
int maps_logged(node_server *ns, uint32_t table_id, uint32_t part);
/* Frees the current map and the locks. REQUIRES: no thread uses ns. */
void maps_fini(node_server *ns);

/* Returns a reference to the current map (never NULL once maps_init has
 * succeeded). The caller drops it with maps_release. */
node_map *maps_acquire(node_server *ns);
/* Drops a reference; frees the map when it was the last. Accepts NULL. */
void maps_release(node_map *m);
/* The current map's version. */
uint64_t maps_version(node_server *ns);

/*
 * Makes pm the current map if its version is higher than the current one
 * (invariant 2: drop removed tables, persist, swap). Takes ownership of pm
 * in every case (it is freed when ignored or on error). Returns 0 (applied
 * or ignored as not newer; *applied says which when non-NULL), LAPSE_EIO
 * (drop or persist failed: the current map is unchanged) or LAPSE_ENOMEM.
 */
int maps_apply(node_server *ns, pmap *pm, int *applied, char *err, size_t errlen);
/* Decodes pb (wire_pmap_from_pb) and applies it. Returns as maps_apply, or
 * LAPSE_EINVAL for a map that does not decode. pb is borrowed. */
int maps_apply_pb(node_server *ns, const Lapse__PartitionMap *pb, int *applied, char *err,
                  size_t errlen);

/*
 * Fetches the map from the coordinator (GetPartitionMap) and applies it,
 * waiting at most until deadline_mono_ms. When another fetch is in flight,
 * waits for it instead of starting one. With rate_limited, returns at once
 * (0) when a fetch finished less than MAPS_REFRESH_MIN_INTERVAL_MS ago: the
 * caller then works with the map it has. Returns 0 or the fetch's error
 * (LAPSE_ETIMEDOUT, LAPSE_EUNAVAILABLE, ...) with a reason in err; on error
 * the current map is unchanged.
 */
int maps_refresh(node_server *ns, int64_t deadline_mono_ms, int rate_limited, char *err,
                 size_t errlen);

#endif
