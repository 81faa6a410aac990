/*
 * pmap.h: the partition map: the cluster's nodes, its tables and, for each
 * partition of each table, the list of nodes holding it (replicas[0] is the
 * owner; replication will add followers to the same list). The coordinator
 * holds the authoritative copy; nodes and clients hold cached copies and
 * compare versions.
 *
 * Pure data: no RocksDB, no network, no protobuf (rpc/wire_pmap.c converts).
 * Not thread-safe: callers share a pmap under their own lock, or replace a
 * pointer to an immutable copy.
 *
 * A table with global secondary indexes also places each GSI's own
 * partitions (gsi_parts), and a table with a stream names, for each base
 * partition, the nodes holding that partition's stream shard
 * (stream_shards; docs/replication.md). Each has as many copies as the
 * table (schema_replication), every one fed by the base partitions'
 * outboxes on its own; ids[0] is the copy readers try first, and no epoch
 * or in-sync set applies to them. Both are chosen once, by pmap_add_table,
 * and travel with the map.
 *
 * Invariants (pmap_check):
 *  1. version increases with every change the coordinator makes.
 *  2. Node ids are unique and non-zero; table names and ids are unique.
 *  3. Every table has exactly schema.partitions entries in parts, each with
 *     1 <= n <= PMAP_MAX_REPLICAS node ids of known nodes.
 *  4. For i < schema.ngsi, gsi_parts[i] has schema.gsi[i].partitions entries
 *     as in 3; gsi_parts[i] is NULL for i >= schema.ngsi.
 *  5. stream_shards is non-NULL exactly when schema.stream.enabled, and
 *     then has schema.partitions entries as in 3.
 *
 * Node states:
 *
 *      pmap_set_node(UP)         3 s without heartbeat
 *   (new) ---------------> UP ------------------------> DOWN
 *                           ^                             |
 *                           +-----------------------------+
 *                         RegisterNode or Heartbeat (coordinator)
 */
#ifndef LAPSE_PMAP_H
#define LAPSE_PMAP_H

#include <stddef.h>
#include <stdint.h>

#include "../common/buf.h"
#include "../common/schema.h"

#define PMAP_MAX_REPLICAS                                                                          \
    4 /* a table keeps at most 3 (SCHEMA_MAX_REPLICATION); a set                                   \
         being moved holds one more copy for a while */
#define PMAP_MAX_ADDR 256
#define PMAP_MAX_ZONE 64           /* a zone's name, NUL included: [A-Za-z0-9._-], 1..63 bytes */
#define PMAP_MAX_DESTINATIONS 1024 /* pmap_outbox_destinations; a map has <= 1024 nodes */

typedef enum pmap_node_state { PMAP_NODE_DOWN = 0, PMAP_NODE_UP = 1 } pmap_node_state;

typedef struct pmap_node {
    uint32_t id;
    char address[PMAP_MAX_ADDR]; /* the node's RPC URL, e.g. tcp://127.0.0.1:7401 */
    pmap_node_state state;
    int64_t lease;            /* the etcd lease it was last seen UP with (0: none, heartbeat
                                 liveness): it leads replica sets only under this lease
                                 (docs/replication.md, "Leases and fencing") */
    uint64_t incarnation;     /* its data dir's random id as last seen UP (0:
                                 unknown): a new one means the node came back on
                                 an empty dir and holds none of its copies */
    uint8_t draining;         /* lapse node drain: its copies move elsewhere and
                                 new tables place nothing on it */
    uint8_t removed;          /* lapse node remove: a dead node whose copies are made
                                 anew elsewhere; it stays DOWN for good (its
                                 RegisterNode is refused), and stays listed while a
                                 set names it */
    char zone[PMAP_MAX_ZONE]; /* its --zone ("": none, one zone with every other
                                 node of none): a set's copies go to as many
                                 zones as they can (docs/replication.md, "Zones") */
} pmap_node;

/* One partition's replica set (docs/replication.md, "Replica sets"): ids[0]
 * is the primary, which alone serves writes, strongly consistent reads and
 * the TTL sweep; ids[1..n) are followers. in_sync says which members hold
 * every acknowledged write (bit i: ids[i]); the primary acknowledges a
 * write only once every in-sync member has it. epoch counts the set's
 * changes of primary; replicas refuse log records of an older epoch.
 * A map from before replication has epoch 0 and in_sync 0: read both
 * through pmap_in_sync, which counts such a set as all in sync. */
typedef struct pmap_replicas {
    uint32_t n;
    uint32_t ids[PMAP_MAX_REPLICAS]; /* ids[0] owns the partition (its primary) */
    uint32_t in_sync;                /* bit i: ids[i] is in sync */
    uint64_t epoch;                  /* >= 1 once placed; 0: an old map's */
    uint64_t changes;  /* counts changes of the set and cancelled joins (failover.h) */
    uint32_t last_out; /* while ids[0] alone is in sync: the member that left last, holding
                          every acknowledged write; else 0 (failover.h) */
    uint32_t leaving;  /* a member the rebalancer moves off: it leaves once the copy added
                          for it is in sync; else 0 (failover.h, "Moves") */
    /* A handover under way (failover.h, pmap_replica_step_down): the map
     * version from which the primary stops serving writes and strong reads
     * (0: none), and the in-sync follower to take over (0: any). */
    uint64_t handing_since;
    uint32_t handing_to;
    /* GSI partitions and stream shards only (failover.h, "Moving GSI and
     * stream copies"): a copy added for one that leaves, read by no client
     * until its node reports it whole (0: none), and the map version that
     * added it. */
    uint32_t joining;
    uint64_t joining_since;
} pmap_replicas;

typedef struct pmap_table {
    table_schema schema;
    pmap_replicas *parts; /* owned; schema.partitions entries */
    /* owned; gsi_parts[i]: schema.gsi[i].partitions entries, NULL past ngsi */
    pmap_replicas *gsi_parts[SCHEMA_MAX_GSI];
    /* owned; with a stream, schema.partitions entries: stream_shards[p]
     * holds the stream shard of base partition p; NULL without a stream */
    pmap_replicas *stream_shards;
} pmap_table;

/* A table's placement given explicitly (pmap_add_table_placed). Borrowed. */
typedef struct pmap_placement {
    const pmap_replicas *parts;                     /* schema.partitions entries */
    const pmap_replicas *gsi_parts[SCHEMA_MAX_GSI]; /* per GSI: its partitions' entries */
    const pmap_replicas *stream_shards; /* with a stream: schema.partitions entries; else NULL */
} pmap_placement;

typedef struct pmap {
    uint64_t version;
    pmap_node *nodes; /* owned array */
    size_t nnodes;
    pmap_table *tables; /* owned array */
    size_t ntables;
} pmap;

/* Returns a new empty map (version 0), or NULL on OOM. */
pmap *pmap_new(void);
void pmap_free(pmap *pm);       /* accepts NULL */
pmap *pmap_dup(const pmap *pm); /* NULL on OOM */

/* Lookups return borrowed pointers, valid until pm is modified, or NULL. */
const pmap_node *pmap_node_find(const pmap *pm, uint32_t id);
/* Whether node id is draining or removed: every copy it holds leaves
 * (docs/replication.md, "Draining a node", "Removing a dead node"). */
int pmap_node_leaving(const pmap *pm, uint32_t id);
/* Whether r is lost: it has members and every one of them but its joining
 * copy is on a removed node, so no copy of what it held is left (a
 * one-copy table's set on a node removed with --lose-data;
 * docs/replication.md, "Removing a dead node"). */
int pmap_set_lost(const pmap *pm, const pmap_replicas *r);
/* Whether a base partition of t is lost (pmap_set_lost): its GSI
 * partitions and stream shards can no longer be filled anew, as the
 * lost partition's records are gone. */
int pmap_table_lost(const pmap *pm, const pmap_table *t);
const pmap_table *pmap_table_find(const pmap *pm, const char *name);
const pmap_table *pmap_table_find_id(const pmap *pm, uint32_t id);
/* The owner node id of partition part of t, or 0 when out of range. */
uint32_t pmap_owner(const pmap_table *t, uint32_t part);
/* The replica set of partition part of t, or NULL when out of range. */
const pmap_replicas *pmap_part(const pmap_table *t, uint32_t part);
/* The position of node id in r's list, or -1. */
int pmap_replicas_index(const pmap_replicas *r, uint32_t id);
/* 1 when ids[i] of r is in the in-sync set (every member of a set with
 * in_sync 0, as maps from before replication have). */
int pmap_in_sync(const pmap_replicas *r, uint32_t i);
/* How many members of r are in sync (pmap_in_sync), the primary included. */
uint32_t pmap_in_sync_count(const pmap_replicas *r);
/* r's epoch, an old map's 0 read as 1. */
uint64_t pmap_epoch(const pmap_replicas *r);
/* Counts the base partitions (over all tables) that node id holds as a
 * follower (ids[1..n)). */
size_t pmap_follower_copies(const pmap *pm, uint32_t id);
/* Counts the partitions (over all tables) owned by node id. */
size_t pmap_partitions_owned(const pmap *pm, uint32_t id);

/* The position of t's GSI called name in t->schema.gsi, or -1. */
int pmap_gsi_find(const pmap_table *t, const char *name);
/* The copies of partition part of t's GSI number gsi (a position in
 * t->schema.gsi, not an index id), or NULL when either is out of range. */
const pmap_replicas *pmap_gsi_part(const pmap_table *t, uint32_t gsi, uint32_t part);
/* The first copy of partition part of t's GSI number gsi, or 0 when either
 * is out of range. */
uint32_t pmap_gsi_owner(const pmap_table *t, uint32_t gsi, uint32_t part);
/* The copies of the stream shard of t's base partition part, or NULL when
 * t has no stream or part is out of range. */
const pmap_replicas *pmap_stream_shard(const pmap_table *t, uint32_t part);
/* The first copy of the stream shard of t's base partition part, or 0 when
 * t has no stream or part is out of range. */
uint32_t pmap_stream_host(const pmap_table *t, uint32_t part);
/* Counts the GSI partitions (over all tables and GSIs) whose first copy is
 * node id. */
size_t pmap_gsi_partitions_owned(const pmap *pm, uint32_t id);
/* Counts the copies of GSI partitions and stream shards (over all tables)
 * that node id holds beyond their first. */
size_t pmap_derived_copies(const pmap *pm, uint32_t id);
/* Counts the stream shards (over all tables) whose first copy is node id. */
size_t pmap_stream_shards_hosted(const pmap *pm, uint32_t id);
/* The nodes that the outbox of t's base partition part ships to: every copy
 * of every partition of t's GSIs and of part's stream shard,
 * distinct, in ascending id order (the source's own node included when it is
 * one), at most PMAP_MAX_DESTINATIONS of them. Writes up to cap of them into
 * ids (may be NULL when cap is 0) and returns how many there are (0 for a
 * table without an outbox or a part out of range). */
size_t pmap_outbox_destinations(const pmap_table *t, uint32_t part, uint32_t *ids, size_t cap);

/* Adds or updates node id (address and state). 0, LAPSE_EINVAL (id 0, NULL
 * address or one of PMAP_MAX_ADDR bytes or more) or LAPSE_ENOMEM. */
int pmap_set_node(pmap *pm, uint32_t id, const char *address, pmap_node_state state);
/* Records the etcd lease node id is UP with (a new node starts with 0).
 * 0 or LAPSE_ENOTFOUND (no such node; pm unchanged). */
int pmap_set_node_lease(pmap *pm, uint32_t id, int64_t lease);
/* Records the incarnation of node id's data dir (a new node starts with
 * 0). 0 or LAPSE_ENOTFOUND (no such node; pm unchanged). */
int pmap_set_node_incarnation(pmap *pm, uint32_t id, uint64_t incarnation);
/* Records node id's zone ("" or NULL: none). 0, LAPSE_ENOTFOUND or
 * LAPSE_EINVAL (not pmap_zone_valid; pm unchanged). */
int pmap_set_node_zone(pmap *pm, uint32_t id, const char *zone);
/* Whether zone is a zone's name: 1..PMAP_MAX_ZONE - 1 bytes of letters,
 * digits, '.', '_' and '-'. */
int pmap_zone_valid(const char *zone);
/* How many zones the members of r are in, leaving out member without (0:
 * none left out) and counting node with (0: none) as a member. */
uint32_t pmap_zones_of(const pmap *pm, const pmap_replicas *r, uint32_t without, uint32_t with);
/* Whether node id's zone is that of a member of r other than without (0:
 * none left out). */
int pmap_zone_held(const pmap *pm, const pmap_replicas *r, uint32_t id, uint32_t without);
/* Whether r's copies stay in as many zones with node to for member from:
 * the rebalancers' test of a move (failover.c, coordinator/mover_derived.c). */
int pmap_move_keeps_zones(const pmap *pm, const pmap_replicas *r, uint32_t from, uint32_t to);
/* Marks node id draining (1) or not (0). 0 or LAPSE_ENOTFOUND. */
int pmap_set_node_draining(pmap *pm, uint32_t id, int draining);
/* Marks node id removed (docs/replication.md, "Removing a dead node"); there
 * is no way back. 0 or LAPSE_ENOTFOUND. */
int pmap_set_node_removed(pmap *pm, uint32_t id);
/* Adds a table with its partitions assigned to the UP nodes, balanced
 * (docs/replication.md, "GSI partitions and stream shards"): each kind of
 * set of the table (base partitions, each GSI's, the stream shards) is
 * spread evenly, every UP node holding its share of their first copies and
 * of all their copies within one; the map's load breaks ties (base and GSI
 * partitions owned; shards hosted; follower copies), then the lowest id,
 * so on a fixed set of nodes partitions owned differ by at most one. A
 * shard's first copy avoids its partition's owner unless that is the only
 * UP node. Does not bump version. Returns 0,
 * LAPSE_EEXISTS, LAPSE_EINVAL, LAPSE_EUNAVAILABLE (no UP node) or
 * LAPSE_ENOMEM; on error pm is unchanged.
 * REQUIRES: schema_validate(schema) passed and schema->id is set. */
int pmap_add_table(pmap *pm, const table_schema *schema);
/* Adds a table with explicit placements (decoding a map), taking copies.
 * Returns 0, LAPSE_EEXISTS, LAPSE_EINVAL (a missing array, an entry with n
 * outside 1..PMAP_MAX_REPLICAS, a zero id, stream_shards given without a
 * stream, more than SCHEMA_MAX_GSI GSIs or a GSI without partitions) or
 * LAPSE_ENOMEM; on error pm is unchanged. Node ids need not be known yet
 * (nodes may be decoded after tables); pmap_check verifies that they are. */
int pmap_add_table_placed(pmap *pm, const table_schema *schema, const pmap_placement *pl);
/* pmap_add_table_placed with base partitions only: LAPSE_EINVAL for a
 * schema with GSIs or a stream. */
int pmap_add_table_assigned(pmap *pm, const table_schema *schema, const pmap_replicas *parts);
/* Sets the stream config of table name to *st (UpdateStream): turning it
 * on places new stream shards for every base partition as pmap_add_table
 * does (a shard's first copy off its partition's owner, the map's shard
 * load balanced); turning it off drops the shards. Does not bump version.
 * Returns 0, LAPSE_ENOTFOUND (no such table), LAPSE_EUNAVAILABLE (fewer UP
 * nodes than the table's copies) or LAPSE_ENOMEM; on error pm is unchanged. */
int pmap_set_stream(pmap *pm, const char *name, const table_stream *st);
/* Removes the table; returns 1 if it existed, else 0. */
int pmap_remove_table(pmap *pm, const char *name);
/* Checks invariants 2-5; returns 1 when they hold. For assert(). */
int pmap_check(const pmap *pm);
/* Checks one replica set on its own: 1..PMAP_MAX_REPLICAS distinct
 * non-zero ids, in-sync bits only of members and with the primary's,
 * joining and leaving members, handing_to a follower. Returns 0 or
 * LAPSE_EINVAL with the reason in err. Whether its ids are known nodes is
 * pmap_check's. */
int pmap_replicas_check(const pmap_replicas *r, char *err, size_t errlen);

/* ---- pmap_codec.c: the map's own persistent encoding ----
 *
 * docs/storage-format.md ("The partition map in `meta`"): a format byte,
 * then every field of the map as varints and length-prefixed strings. A
 * node persists its map so (node/maps.c); no protobuf is involved, and a
 * byte 0x00-0x07 never starts a protobuf message (field number 0), so a
 * reader tells this format from an older packed lapse.PartitionMap by its
 * first byte. */
#define PMAP_FORMAT_V1 0x01
#define PMAP_FORMAT_V2 0x02 /* V1 and each node's zone; what pmap_encode writes */

/* Appends pm's encoding to out. Returns 0, LAPSE_EINVAL (pm breaks
 * invariants 3-5) or LAPSE_ENOMEM; on error out is as it was. */
int pmap_encode(const pmap *pm, buf *out);
/* Decodes len bytes of data into a new map *out (caller frees with
 * pmap_free), checked as completely as a map off the wire: every field in
 * range, schemas valid, sets as pmap_replicas_check, pmap_check. Returns
 * 0, LAPSE_ECORRUPT (truncated, garbled, trailing bytes or an unknown
 * format byte) or LAPSE_ENOMEM, with a reason in err; on error *out is
 * NULL. */
int pmap_decode(const void *data, size_t len, pmap **out, char *err, size_t errlen);

#endif
