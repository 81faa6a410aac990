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
 * Invariants (pmap_check):
 *  1. version increases with every change the coordinator makes.
 *  2. Node ids are unique and non-zero; table names and ids are unique.
 *  3. Every table has exactly schema.partitions entries in parts, each with
 *     1 <= n <= PMAP_MAX_REPLICAS node ids of known nodes.
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

#include "../common/schema.h"

#define PMAP_MAX_REPLICAS 3
#define PMAP_MAX_ADDR 256

typedef enum pmap_node_state { PMAP_NODE_DOWN = 0, PMAP_NODE_UP = 1 } pmap_node_state;

typedef struct pmap_node {
    uint32_t id;
    char address[PMAP_MAX_ADDR]; /* the node's RPC URL, e.g. tcp://127.0.0.1:7401 */
    pmap_node_state state;
} pmap_node;

typedef struct pmap_replicas {
    uint32_t n;
    uint32_t ids[PMAP_MAX_REPLICAS]; /* ids[0] owns the partition */
} pmap_replicas;

typedef struct pmap_table {
    table_schema schema;
    pmap_replicas *parts; /* owned; schema.partitions entries */
} pmap_table;

typedef struct pmap {
    uint64_t version;
    pmap_node *nodes; /* owned array */
    size_t nnodes;
    pmap_table *tables; /* owned array */
    size_t ntables;
} pmap;

/* Returns a new empty map (version 0), or NULL on OOM. */
pmap *pmap_new(void);
void pmap_free(pmap *pm); /* accepts NULL */
pmap *pmap_dup(const pmap *pm); /* NULL on OOM */

/* Lookups return borrowed pointers, valid until pm is modified, or NULL. */
const pmap_node *pmap_node_find(const pmap *pm, uint32_t id);
const pmap_table *pmap_table_find(const pmap *pm, const char *name);
const pmap_table *pmap_table_find_id(const pmap *pm, uint32_t id);
/* The owner node id of partition part of t, or 0 when out of range. */
uint32_t pmap_owner(const pmap_table *t, uint32_t part);
/* Counts the partitions (over all tables) owned by node id. */
size_t pmap_partitions_owned(const pmap *pm, uint32_t id);

/* Adds or updates node id (address and state). 0, LAPSE_EINVAL (id 0, NULL
 * address or one of PMAP_MAX_ADDR bytes or more) or LAPSE_ENOMEM. */
int pmap_set_node(pmap *pm, uint32_t id, const char *address, pmap_node_state state);
/* Adds a table with its partitions assigned to the UP nodes, balanced: each
 * partition goes to the UP node owning fewest partitions overall (ties to the
 * lowest id), so partition counts differ by at most one after adding tables
 * to a fixed set of nodes. Does not bump version. Returns 0, LAPSE_EEXISTS,
 * LAPSE_EUNAVAILABLE (no UP node) or LAPSE_ENOMEM; on error pm is unchanged.
 * REQUIRES: schema_validate(schema) passed and schema->id is set. */
int pmap_add_table(pmap *pm, const table_schema *schema);
/* Adds a table with explicit assignments (decoding a map). Takes a copy of
 * schema->partitions entries. Returns 0, LAPSE_EEXISTS, LAPSE_EINVAL (an
 * entry with n outside 1..PMAP_MAX_REPLICAS or a zero id) or LAPSE_ENOMEM;
 * on error pm is unchanged. Node ids need not be known yet (nodes may be
 * decoded after tables); pmap_check verifies that they are. */
int pmap_add_table_assigned(pmap *pm, const table_schema *schema, const pmap_replicas *parts);
/* Removes the table; returns 1 if it existed, else 0. */
int pmap_remove_table(pmap *pm, const char *name);
/* Checks invariants 2-3; returns 1 when they hold. For assert(). */
int pmap_check(const pmap *pm);

#endif
