/*
 * catalog.h: the coordinator's durable state, in its own RocksDB (storage/db.h)
 * in the data directory. Format: docs/coordinator.md.
 *
 * Column family "meta" holds:
 *   "pmap"           the partition map, a packed lapse.PartitionMap
 *                    (rpc/wire.h wire_pmap_to_pb)
 *   "next_table_id"  4 bytes, big-endian: the id the next table gets
 * Both are written in one WriteBatch with sync = 1, so a map and the id
 * counter never disagree after a crash or power loss. Per-table TTL config
 * is part of each table's schema in the map (TableSchema.ttl), so it is
 * saved with it and needs no key of its own (docs/ttl.md).
 *
 * Thread-safety: catalog_save may be called from any thread, but callers
 * serialize saves (server.lock) so that a later version is never overwritten
 * by an earlier one.
 *
 * Invariants:
 *  1. A saved map decodes again with catalog_open (pmap_check holds).
 *  2. After catalog_save returns 0 the state survives kill -9 and power loss.
 *  3. Exactly one process has a catalog open at a time (RocksDB's LOCK file).
 */
#ifndef LAPSE_COORD_CATALOG_H
#define LAPSE_COORD_CATALOG_H

#include <stddef.h>
#include <stdint.h>

#include "../common/buf.h"
#include "../placement/pmap.h"

typedef struct catalog catalog;

/* Everything the catalog stores (TTL config rides in pm's table schemas). */
typedef struct catalog_state {
    pmap *pm;               /* the partition map; owned by whoever holds the state */
    uint32_t next_table_id; /* the id the next CreateTable assigns */
} catalog_state;

/*
 * Opens (creating the directory and database when missing) the catalog in
 * dir and loads it into *st: the stored map (a new empty map, version 0, when
 * the catalog is new; caller frees st->pm with pmap_free) and the stored
 * counter (1 when new). Returns 0 with *out set, or LAPSE_EIO (cannot create
 * dir, RocksDB error, LOCK held by another process), LAPSE_ECORRUPT (stored
 * bytes do not decode) or LAPSE_ENOMEM, with a reason in err; on error *st is
 * untouched and nothing stays open.
 */
int catalog_open(catalog **out, const char *dir, catalog_state *st, char *err, size_t errlen);

/* Durably replaces the stored state with *st (one batch, sync = 1); st is
 * borrowed. Returns 0, LAPSE_ENOMEM or LAPSE_EIO with a reason in err; on
 * error the stored state is unchanged. */
int catalog_save(catalog *c, const catalog_state *st, char *err, size_t errlen);

/* The stored form, shared with the catalog in etcd (catalog_etcd.h):
 * encodes st into *pmap_bytes (a packed lapse.PartitionMap) and id (4 bytes,
 * big-endian). Returns 0 or LAPSE_ENOMEM. */
int catalog_encode(const catalog_state *st, buf *pmap_bytes, uint8_t id[4], char *err,
                   size_t errlen);
/* Decodes a stored map and counter into *st (caller frees st->pm); a missing
 * map (has_pmap 0) is a new cluster's empty map, a missing counter 1. Checks
 * pmap_check and invariant 4 of server.h. Returns 0, LAPSE_ECORRUPT or
 * LAPSE_ENOMEM; on error *st is untouched. */
int catalog_decode(const void *pmap_bytes, size_t pmap_len, int has_pmap, const void *id_bytes,
                   size_t id_len, int has_id, catalog_state *st, char *err, size_t errlen);

/* Closes the database. Accepts NULL. */
void catalog_close(catalog *c);

#endif
