/*
 * catalog_etcd.h: the coordinator's durable state in etcd, for coordinators
 * that keep none of their own (--etcd). Same contents and encoding as the
 * local catalog (catalog.h), under the cluster's prefix:
 *
 *   /lapse/<cluster>/catalog/pmap           packed lapse.PartitionMap
 *   /lapse/<cluster>/catalog/next_table_id  4 bytes, big-endian
 *
 * Both keys change together in one etcd transaction, which commits only if
 * (a) the map key is still at the revision this catalog last read or wrote,
 * and (b) the fence holds: the committing coordinator's leader key still
 * exists with the create revision it won the election with. So a coordinator
 * that lost leadership (lease expired while it was stalled, say) or read a
 * map that another has since replaced can never overwrite a newer state.
 *
 * Thread-safety: callers serialize calls (server.lock), as for catalog.h.
 *
 * Invariants:
 *  1. A save that returns 0 is durable in etcd (a quorum has it).
 *  2. A save commits only on top of the state this catalog loaded or saved
 *     last, and only under the fence set (never without one).
 *  3. LAPSE_ESTATE from a save means nothing was written: the caller has lost
 *     leadership or its state is stale, and must load again before acting.
 */
#ifndef LAPSE_COORD_CATALOG_ETCD_H
#define LAPSE_COORD_CATALOG_ETCD_H

#include <stddef.h>
#include <stdint.h>

#include "../etcd/etcd.h"
#include "../etcd/etcd_keys.h"
#include "catalog.h"

typedef struct catalog_etcd catalog_etcd;

/* A catalog at keys in ec (both borrowed; they outlive the catalog). Sends
 * nothing. Returns 0 or LAPSE_ENOMEM. */
int catalog_etcd_open(catalog_etcd **out, etcd *ec, const etcd_keys *keys, char *err,
                      size_t errlen);
void catalog_etcd_close(catalog_etcd *c); /* accepts NULL */

/* Reads the state (both keys at one revision) into *st (caller frees
 * st->pm); a cluster with no catalog yet is a new, empty one. Returns 0,
 * LAPSE_ECORRUPT, LAPSE_ENOMEM or an etcd error. */
int catalog_etcd_load(catalog_etcd *c, catalog_state *st, char *err, size_t errlen);

/* Sets the fence of later saves: the leader key and its create revision.
 * key NULL clears it (saves then fail with LAPSE_ESTATE). */
void catalog_etcd_fence(catalog_etcd *c, const char *key, int64_t rev);

/* Replaces the stored state with *st (borrowed) under invariant 2. Returns 0,
 * LAPSE_ESTATE (fence or revision compare failed; nothing written), or an
 * etcd error (for EUNAVAILABLE/ETIMEDOUT the outcome may be unknown: load
 * again). */
int catalog_etcd_save(catalog_etcd *c, const catalog_state *st, char *err, size_t errlen);

/* Confirms, with a transaction that writes nothing, that the state this
 * catalog loaded or saved last is still etcd's and the fence still holds:
 * what a coordinator answers from that state without saving (a change
 * already made, say) is then true at this instant, as a save would be.
 * Returns 0, LAPSE_ESTATE (no longer so: load again) or an etcd error. */
int catalog_etcd_confirm(catalog_etcd *c, char *err, size_t errlen);

/* Stores *st only if the cluster has no catalog in etcd yet (a one-time
 * import of a local catalog, --import-catalog). Returns 0, LAPSE_EEXISTS (a
 * catalog is there; nothing written) or an etcd error. */
int catalog_etcd_import(catalog_etcd *c, const catalog_state *st, char *err, size_t errlen);

#endif
