/*
 * wire.h: conversions between Lapse's structs (common/, placement/pmap.h) and
 * protobuf-c messages. Outgoing trees are allocated from an arena; incoming
 * messages are validated completely, since they come from the network:
 * every AttributeValue has exactly one value set, N values are valid numbers,
 * names are non-empty without NUL bytes, nesting stays within
 * ITEM_MAX_DEPTH, key types are S/N/B.
 *
 * Thread-safe (pure functions on caller-owned data).
 *
 * Implemented in four files: wire.c (values, items, status codes),
 * wire_pmap.c (schemas, table maps, partition maps), wire_nesting.c
 * (wire_check_nesting) and wire_stream.c (stream records).
 */
#ifndef LAPSE_WIRE_H
#define LAPSE_WIRE_H

#include <stddef.h>

#include "../common/arena.h"
#include "../common/item.h"
#include "../common/schema.h"
#include "../placement/pmap.h"
#include "lapse.pb-c.h"

/* Limits on a decoded partition map, so a hostile map cannot make decoding
 * quadratic (node and table lookups are linear scans). */
#define WIRE_MAX_NODES 1024
#define WIRE_MAX_TABLES 4096

/* Nesting of protobuf messages accepted from the wire: the envelope and call
 * (a few levels) plus ITEM_MAX_DEPTH levels of M values, three messages each
 * (AttributeValue, MapValue, Attribute). */
#define WIRE_MAX_NESTING (3 * ITEM_MAX_DEPTH + 16)

/* The length of Request.request_id: a write call's id, the same on every
 * attempt (docs/replication.md, "Retried writes"). */
#define WIRE_REQUEST_ID_BYTES 16

/*
 * Checks, without unpacking, that data is well-framed protobuf of message
 * type desc whose submessages nest at most max_depth levels (the top level
 * counts as 1). protobuf-c's unpacker and free_unpacked recurse without a
 * limit, so every message from the network passes this first.
 * Returns 0, or LAPSE_EPROTO when too deep or badly framed.
 */
int wire_check_nesting(const ProtobufCMessageDescriptor *desc, const void *data, size_t len,
                       int max_depth);

/* To protobuf: return trees allocated from a (every string and byte array is
 * copied into a, so the tree does not borrow from the source), or NULL on
 * OOM. */
Lapse__AttributeValue *wire_value_to_pb(arena *a, const attr_value *v);
Lapse__Item *wire_item_to_pb(arena *a, const item *it);
/* A whole item carried as an M value m (a condition's ITEM_EQUALS): its
 * attributes count as top-level ones, so an item nested ITEM_MAX_DEPTH
 * deep fits, as it does as an item (the M adds no level). NULL on OOM or
 * when m is not an M. */
Lapse__AttributeValue *wire_item_value_to_pb(arena *a, const attr_value *m);
Lapse__TableSchema *wire_schema_to_pb(arena *a, const table_schema *t);
Lapse__TableMap *wire_table_to_pb(arena *a, const pmap_table *t);
Lapse__PartitionMap *wire_pmap_to_pb(arena *a, const pmap *pm);

/* From protobuf: return 0, LAPSE_EINVAL (with a reason in err) or
 * LAPSE_ENOMEM. On success the caller owns the result. */
int wire_value_from_pb(const Lapse__AttributeValue *pb, attr_value *out, char *err, size_t errlen);
int wire_item_from_pb(const Lapse__Item *pb, item **out, char *err, size_t errlen);
/* The M value of wire_item_value_to_pb, its attributes as top-level ones. */
int wire_item_value_from_pb(const Lapse__AttributeValue *pb, attr_value *out, char *err,
                            size_t errlen);
/* Structural checks only (names fit and are non-empty, key types S/N/B, a
 * sort key either absent or complete; at most SCHEMA_MAX_LSI LSIs and
 * SCHEMA_MAX_GSI GSIs with names that fit, keys as above when present, a
 * known projection, an LSI's partition key absent or the table's): partitions
 * and index ids may be 0 and names are not checked against the naming rules,
 * so a caller that needs a complete schema (CreateTable after applying
 * defaults) runs schema_validate itself. A stream that is not enabled decodes
 * as all zero. On error *out is unspecified. */
int wire_schema_from_pb(const Lapse__TableSchema *pb, table_schema *out, char *err, size_t errlen);
/* Adds the table to pm (pmap_add_table_placed) after checking that its
 * schema passes schema_validate, has an id, is new in pm (name and id), and
 * that it has exactly schema.partitions replica lists, each of 1 to
 * PMAP_MAX_REPLICAS distinct ids of nodes already in pm; one GSI placement
 * per schema GSI, each with that GSI's partition count of such lists; and,
 * exactly when the stream is enabled, schema.partitions stream shard hosts,
 * each a node already in pm. On error pm is unchanged. */
int wire_table_from_pb(const Lapse__TableMap *pb, pmap *pm, char *err, size_t errlen);
/* One replica set: 1 to PMAP_MAX_REPLICAS distinct non-zero ids, an in-sync
 * set naming only members and, when not 0, the primary; epoch as given.
 * Whether the ids are nodes of a map is the caller's to check. 0 or
 * LAPSE_EINVAL (err says why). */
int wire_replicas_from_pb(const Lapse__PartitionReplicas *pb, pmap_replicas *out, char *err,
                          size_t errlen);
/* Node ids non-zero and unique, addresses shorter than PMAP_MAX_ADDR, states
 * UP or DOWN, at most WIRE_MAX_NODES nodes and WIRE_MAX_TABLES tables, each
 * table as wire_table_from_pb. The result passes pmap_check. */
int wire_pmap_from_pb(const Lapse__PartitionMap *pb, pmap **out, char *err, size_t errlen);
/* Unpacks len bytes of a packed lapse.PartitionMap and converts it as
 * wire_pmap_from_pb. The node's legacy reader: before pmap_encode, a node
 * persisted its map so (docs/storage-format.md, "The partition map in
 * `meta`"), and only rpc/ decodes protobuf. Returns 0, LAPSE_EINVAL (does
 * not unpack, or an invalid map; err says which) or LAPSE_ENOMEM; on error
 * *out is NULL. */
int wire_pmap_unpack(const void *data, size_t len, pmap **out, char *err, size_t errlen);

/* A table's TTL config. wire_ttl_from_pb accepts NULL (never configured:
 * all zero) and checks: attribute set when enabled, at most
 * SCHEMA_MAX_KEY_NAME bytes; 0 <= offset <= WIRE_MAX_TTL_OFFSET_S;
 * 0 <= guard years <= WIRE_MAX_TTL_GUARD_YEARS. The table schema
 * conversions carry it (and hide_expired) along. */
#define WIRE_MAX_TTL_OFFSET_S (100LL * 366 * 24 * 3600) /* a century */
#define WIRE_MAX_TTL_GUARD_YEARS 1000
Lapse__TtlConfig *wire_ttl_to_pb(arena *a, const table_ttl *t);
int wire_ttl_from_pb(const Lapse__TtlConfig *pb, table_ttl *out, char *err, size_t errlen);

/* A stored stream record (a change record, common/change.h, of the
 * shard it was read from) as a StreamRecord allocated from a: sequence_number
 * is the stream seq, the keys and images decoded into Items, size_bytes the
 * encoded bytes of the keys and images (DynamoDB's SizeBytes,
 * approximately), the TTL fields set for a TTL delete; the images view (the
 * table's StreamViewType) hides are left out, never decoded or sent.
 * Returns 0, LAPSE_ECORRUPT (the record does not decode; *out NULL) or
 * LAPSE_ENOMEM. */
int wire_stream_record_to_pb(arena *a, const void *data, size_t len, stream_view view,
                             Lapse__StreamRecord **out);

/* lapse_status <-> Lapse__Status: identical numbers; out-of-range values
 * from the wire become LAPSE_EPROTO. */
int wire_status_from_pb(int pb_status);

#endif
