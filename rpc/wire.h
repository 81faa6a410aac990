/*
 * wire.h: conversions between Lapse's structs (common/, partition/pmap.h) and
 * protobuf-c messages. Outgoing trees are allocated from an arena; incoming
 * messages are validated completely, since they come from the network:
 * every AttributeValue has exactly one value set, N values are valid numbers,
 * names are non-empty without NUL bytes, nesting stays within
 * ITEM_MAX_DEPTH, key types are S/N/B.
 *
 * Thread-safe (pure functions on caller-owned data).
 */
#ifndef LAPSE_WIRE_H
#define LAPSE_WIRE_H

#include <stddef.h>

#include "../common/arena.h"
#include "../common/item.h"
#include "../common/schema.h"
#include "../partition/pmap.h"
#include "lapse.pb-c.h"

/* To protobuf: return trees allocated from a, or NULL on OOM. */
Lapse__AttributeValue *wire_value_to_pb(arena *a, const attr_value *v);
Lapse__Item *wire_item_to_pb(arena *a, const item *it);
Lapse__TableSchema *wire_schema_to_pb(arena *a, const table_schema *t);
Lapse__TableMap *wire_table_to_pb(arena *a, const pmap_table *t);
Lapse__PartitionMap *wire_pmap_to_pb(arena *a, const pmap *pm);

/* From protobuf: return 0, LAPSE_EINVAL (with a reason in err) or
 * LAPSE_ENOMEM. On success the caller owns the result. */
int wire_value_from_pb(const Lapse__AttributeValue *pb, attr_value *out, char *err,
                       size_t errlen);
int wire_item_from_pb(const Lapse__Item *pb, item **out, char *err, size_t errlen);
int wire_schema_from_pb(const Lapse__TableSchema *pb, table_schema *out, char *err,
                        size_t errlen);
/* Adds the table to pm (pmap_add_table_assigned). */
int wire_table_from_pb(const Lapse__TableMap *pb, pmap *pm, char *err, size_t errlen);
int wire_pmap_from_pb(const Lapse__PartitionMap *pb, pmap **out, char *err, size_t errlen);

/* lapse_status <-> Lapse__Status: identical numbers; out-of-range values
 * from the wire become LAPSE_EPROTO. */
int wire_status_from_pb(int pb_status);

#endif
