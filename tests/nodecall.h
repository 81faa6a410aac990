/*
 * nodecall.h: the calls of the cluster's own protocol that the black-box
 * tests and the chaos checker make directly, beside liblapse: the
 * coordinator's partition map, a copy's PartitionDigest, a strongly
 * consistent GetItem sent to one node whatever the map says (a client
 * acting on an old map), what one copy of a GSI partition or of a
 * stream shard holds, and a Replicate batch sent as a rogue source would
 * (the chaos planter's; the callers need no generated protobuf types).
 *
 * Thread-safety: none needed; each call uses what it is given.
 */
#ifndef LAPSE_TEST_NODECALL_H
#define LAPSE_TEST_NODECALL_H

#include <stddef.h>
#include <stdint.h>

#include "../common/buf.h"
#include "../placement/pmap.h"
#include "../rpc/rpc.h"

/* One copy's digest, as PartitionDigest on its node reports it. */
typedef struct nodecall_digest {
    uint64_t items, hash, epoch, seq;
    uint64_t log_first;    /* the first record the copy's log holds */
    uint64_t outbox_first; /* the first outbox record it holds (0: none) */
    uint64_t outbox_last;  /* its last outbox seq, trimmed or not */
} nodecall_digest;

/* The coordinator's current map (caller frees with pmap_free), one call
 * of 3 s at most. 0, or the call's or the decode's error with err. */
int nodecall_map(const char *coordinator_url, pmap **out, char *err, size_t len);
/* A ReplicaJoin as a primary asks it (coordinator/replicas.h). */
typedef struct nodecall_join {
    uint32_t table_id, part;
    uint32_t primary; /* the asker */
    uint64_t epoch;   /* the set's epoch in the asker's map */
    uint32_t node;    /* the member to put in sync */
    uint64_t changes; /* the set's count of changes in the asker's map */
} nodecall_join;

/* Sends j to the coordinator at coordinator_url alone (forwarded from
 * there if it does not lead), 3 s at most. 0 with *version the map the
 * answer holds, or the refusal or the call's error with err. */
int nodecall_replica_join(const char *coordinator_url, const nodecall_join *j, uint64_t *version,
                          char *err, size_t len);

/* PartitionDigest of (table_id, part) on the node of client c, 3 s at
 * most. 0, or the call's error with err. */
int nodecall_partition_digest(rpc_client *c, uint32_t table_id, uint32_t part, nodecall_digest *out,
                              char *err, size_t len);
/* The digest of the node's copy of partition gpart of GSI index_id (an
 * index id, not a position) of table_id: items and digest only. */
int nodecall_gsi_digest(rpc_client *c, uint32_t table_id, uint32_t index_id, uint32_t gpart,
                        nodecall_digest *out, char *err, size_t len);
/* GetItem of key in table on the node of client c (strongly consistent:
 * only a primary under its lease may answer), timeout_ms at most. 0 with
 * *out the item or NULL (none; caller frees with item_free), or the call's
 * error (EWRONGNODE: not this node's to answer) with err. */
int nodecall_get(rpc_client *c, const char *table, const item *key, int timeout_ms, item **out,
                 char *err, size_t len);

/* What one copy of a GSI partition holds for one partition key value:
 * the items of a Query of index (a GSI of table) on partition part with
 * partition key value pk_s (type S), sent to the node of client c, one
 * page of at most 1 MiB, 3 s at most. 0 with *items, or the call's error
 * (EWRONGNODE: the node holds no copy) with err. */
int nodecall_gsi_count(rpc_client *c, const char *table, const char *index, uint32_t part,
                       const char *pk_s, size_t *items, char *err, size_t len);
/* What one copy of a stream shard holds: GetStreamRecords of shard of
 * table from the oldest record, at most 1000 records, sent to the node of
 * client c, 3 s at most. 0 with *records (how many came) and *last (the
 * shard's last sequence number there), or the call's error with err. */
int nodecall_stream_shard(rpc_client *c, const char *table, uint32_t shard, size_t *records,
                          uint64_t *last, char *err, size_t len);
/* Sends the node of client c a Replicate batch (from, to] of source
 * partition part of table_id holding the n encoded change records
 * recs[0..n) (recs may be NULL when n is 0), 3 s at most. When the reply
 * carries the node's applied seq, *applied gets it (else it is left as
 * it was). Returns the reply's status (ESTATE: a batch not following what
 * the node applied) or the call's error, with err. */
int nodecall_replicate(rpc_client *c, uint32_t table_id, uint32_t part, uint64_t from, uint64_t to,
                       const buf *recs, size_t n, uint64_t *applied, char *err, size_t len);

#endif
