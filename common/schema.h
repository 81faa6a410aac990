/*
 * schema.h: a table's key schema and the checks every write makes against it.
 *
 * Thread-safe (pure functions on caller-owned structs).
 *
 * Invariants of a valid table_schema (schema_validate):
 *  1. name is 3-255 characters of [A-Za-z0-9_.-].
 *  2. pk.name is set and pk.type is ATTR_S, ATTR_N or ATTR_B; sk is either
 *     absent (sk.name[0] == 0) or the same, with a different name.
 *  3. partitions is a power of two from 1 to SCHEMA_MAX_PARTITIONS.
 *  4. At most SCHEMA_MAX_LSI LSIs, only on a table with a sort key; each has
 *     no partition key of its own, a sort key as in 2 named differently from
 *     the table's partition key, and partitions 0.
 *  5. At most SCHEMA_MAX_GSI GSIs; each has a partition key and an optional
 *     sort key as in 2, and partitions as in 3.
 *  6. Index names follow 1, are unique over the LSIs and GSIs; index ids are
 *     non-zero and unique; a key attribute name has one type over the
 *     table's and the indexes' keys; projections are ALL or KEYS.
 *  7. stream.retention_hours <= SCHEMA_MAX_STREAM_RETENTION_HOURS.
 */
#ifndef LAPSE_SCHEMA_H
#define LAPSE_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include "item.h"

#define SCHEMA_MAX_NAME 255
#define SCHEMA_MAX_KEY_NAME 255
#define SCHEMA_DEFAULT_PARTITIONS 64
#define SCHEMA_MAX_PARTITIONS 4096
#define SCHEMA_MAX_REPLICATION 3  /* PMAP_MAX_REPLICAS less the copy a move adds */
#define SCHEMA_MAX_KEY_BYTES 2048 /* DynamoDB: partition key 2048 B, sort key 1024 B */
#define SCHEMA_MAX_SORT_KEY_BYTES 1024

typedef struct key_def {
    char name[SCHEMA_MAX_KEY_NAME + 1]; /* "" when absent */
    attr_type type;                     /* ATTR_S, ATTR_N or ATTR_B */
} key_def;

/*
 * A table's TTL configuration (docs/ttl.md), set by the coordinator and
 * carried in the partition map. With enabled set, every write to the table
 * keeps the expiry index, and the scanners delete due items unless paused.
 * The displayed status (ENABLING, ENABLED, DISABLING, DISABLED) is derived by
 * the coordinator from enabled and the nodes' progress on config_version.
 */
typedef struct table_ttl {
    int enabled;                             /* desired: items expire */
    char attribute[SCHEMA_MAX_KEY_NAME + 1]; /* "" when never configured */
    int64_t offset_s;                        /* >= 0: due at value + offset */
    int32_t guard_years;                     /* values older are ignored; 0 = 5 */
    int paused;                              /* deletion stopped, index kept */
    uint64_t config_version;                 /* map version of the last enable/disable */
} table_ttl;

/*
 * Secondary indexes (docs/replication.md), declared at create-table and never
 * changed. A local secondary index (LSI) keeps the table's partition key and
 * another sort key; its entries live beside the item and are written in the
 * item's WriteBatch. A global secondary index (GSI) has its own partition key
 * (and optional sort key) and its own partitions, placed on nodes by the
 * coordinator; its entries arrive through the outbox. Sparse: an item
 * without every key attribute of an index is not in it; an index key
 * attribute of another type is refused (schema_check_item). An entry projects the table's keys, the
 * index's keys and the TTL attribute (INDEX_PROJECT_KEYS), or the whole item (INDEX_PROJECT_ALL).
 */
#define SCHEMA_MAX_LSI 5  /* DynamoDB's limit */
#define SCHEMA_MAX_GSI 20 /* DynamoDB's default quota */

typedef enum index_projection { INDEX_PROJECT_ALL = 0, INDEX_PROJECT_KEYS = 1 } index_projection;

typedef struct index_def {
    uint32_t id; /* 1.., unique among the table's indexes (LSI and GSI), in keys */
    char name[SCHEMA_MAX_NAME + 1]; /* 3-255 of [A-Za-z0-9_.-], unique in the table */
    key_def pk;                     /* GSI: its partition key; LSI: unused ("") */
    key_def sk;                     /* LSI: required; GSI: optional ("" = none) */
    index_projection projection;
    uint32_t partitions; /* GSI: its own partition count (power of two); LSI: 0 */
} index_def;

/* The table's change stream: one shard per base partition, each hosted on a
 * node other than the partition's (docs/replication.md). */
typedef enum stream_view {
    STREAM_VIEW_NEW_AND_OLD = 0, /* also every stream from before views */
    STREAM_VIEW_KEYS_ONLY = 1,
    STREAM_VIEW_NEW_IMAGE = 2,
    STREAM_VIEW_OLD_IMAGE = 3
} stream_view;

/* Shards keep both images whatever the view: the reads leave out what it
 * does not show (wire_stream_record_to_pb on the host, liblapse again). */
typedef struct table_stream {
    int enabled;
    stream_view view;
    int ttl_deletes;          /* 1: TTL deletes are in the stream (the default) */
    uint32_t retention_hours; /* records older are trimmed; 0 = 24 */
    /* 0: the stream CreateTable made; +1 each time UpdateStream turns it on
     * again. Kept while enabled is 0, so the next stream is a new one. */
    uint32_t generation;
    int64_t since_ms; /* epoch ms this generation was turned on (0: created_ms) */
} table_stream;

/* Generation g >= 1 numbers its records from g << SCHEMA_STREAM_GEN_SHIFT in
 * each shard (2^40 records per shard and generation), so a reader of one
 * generation starts past every record of the ones before
 * (docs/replication.md, "A stream turned on again"). */
#define SCHEMA_STREAM_GEN_SHIFT 40

/* The first stream seq of s's generation (0 for generation 0: from 1). */
static inline uint64_t schema_stream_base(const table_stream *s)
{
    return (uint64_t)s->generation << SCHEMA_STREAM_GEN_SHIFT;
}

#define SCHEMA_DEFAULT_STREAM_RETENTION_HOURS 24
#define SCHEMA_MAX_STREAM_RETENTION_HOURS 8760 /* a year */

typedef struct table_schema {
    uint32_t id; /* assigned by the coordinator, never reused; 0 = unassigned */
    char name[SCHEMA_MAX_NAME + 1];
    key_def pk;
    key_def sk;
    uint32_t partitions;
    table_ttl ttl;    /* all zero: TTL never configured */
    int hide_expired; /* reads hide expired items by default */
    uint32_t nlsi, ngsi;
    index_def lsi[SCHEMA_MAX_LSI];
    index_def gsi[SCHEMA_MAX_GSI];
    table_stream stream; /* all zero: no stream */
    /* copies of each partition (replication.md "Replica sets"): 1 to
     * SCHEMA_MAX_REPLICATION; 0 (a schema from before replication) means 1 */
    uint32_t replication;
    int64_t created_ms; /* wall-clock epoch ms of CreateTable; 0: not kept (older tables) */
} table_schema;

/* The copies of each of t's partitions (1 for a schema that predates
 * replication). */
static inline uint32_t schema_replication(const table_schema *t)
{
    return t->replication > 1 ? t->replication : 1;
}

/* 1 when writes to t produce outbox records: it has a GSI or a stream. */
static inline int schema_has_outbox(const table_schema *t)
{
    return t->ngsi > 0 || t->stream.enabled;
}

/* Returns 0 or LAPSE_EINVAL with a reason in err. */
int schema_validate_table_name(const char *name, char *err, size_t errlen);
/* Checks invariants 1-7. Returns 0 or LAPSE_EINVAL with a reason in err
 * naming the table key or index at fault. */
int schema_validate(const table_schema *t, char *err, size_t errlen);
/* Checks that it carries the key attributes with the declared types, that key
 * values are within the size limits (and non-empty for S and B), and that the
 * item is within ITEM_MAX_BYTES. Without key_only, index key attributes
 * (LSI sort keys, GSI keys) may be absent but, when present, obey the same
 * rules as the table's keys. With key_only, also that it carries nothing
 * else. Also that no value is nested deeper than ITEM_MAX_DEPTH (a top-level
 * attribute is level 1). Returns 0, LAPSE_EINVAL or LAPSE_ETOOBIG (a key value
 * or the whole item over its size limit) with a reason in err. */
int schema_check_item(const table_schema *t, const item *it, int key_only, char *err,
                      size_t errlen);
/* Copies it's key attributes into a new item *out (caller frees).
 * REQUIRES: schema_check_item(t, it, 0) passed. 0 or LAPSE_ENOMEM. */
int schema_key_of(const table_schema *t, const item *it, item **out);

#endif
