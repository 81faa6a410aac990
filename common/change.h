/*
 * change.h: the change record, one per change of a base item in a table
 * with an outbox (a GSI or a stream): what the source partition puts in its
 * outbox, ships to the destinations, and what a stream shard stores. A
 * versioned binary format built with common/buf.h (not protobuf, so
 * the store needs no generated code); the layout is in docs/replication.md.
 *
 * Pure functions (no RocksDB): part of common/ (lapse_common), so the client
 * can decode stream records too. Thread-safe; a change_list belongs to one
 * thread at a time.
 *
 * Invariants of a record that change_encode writes and change_decode
 * accepts:
 *  1. event is INSERT exactly when the old image is absent and the new one
 *     present, MODIFY when both are present, REMOVE when the new image is
 *     absent (the old one may be absent too: the stored value of a deleted
 *     item did not decode).
 *  2. principal TTL only with REMOVE; then the TTL attribute name is 1..255
 *     bytes, else it is empty.
 *  3. keys is present; keys and both images, when present, are item_encode()d
 *     items that item_decode accepts.
 *  4. seq >= 1.
 */
#ifndef LAPSE_CHANGE_H
#define LAPSE_CHANGE_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define CHANGE_FORMAT_V1 0x01
#define CHANGE_MAX_ATTR_NAME 255

typedef enum change_event { CHANGE_INSERT = 1, CHANGE_MODIFY = 2, CHANGE_REMOVE = 3 } change_event;

typedef enum change_principal {
    CHANGE_USER = 1, /* a put, update, delete or batch write */
    CHANGE_TTL = 2   /* the TTL sweep deleted an expired item */
} change_principal;

/* A byte string inside a record: data NULL means absent. */
typedef struct change_bytes {
    const uint8_t *data;
    size_t len;
} change_bytes;

/* One change record. The byte fields are borrowed (change_encode reads
 * them; change_decode points them into its input). */
typedef struct change_record {
    uint32_t table_id;
    uint32_t part;       /* the source (base) partition, also the stream shard */
    uint64_t seq;        /* the partition's outbox sequence, from 1, gapless */
    uint64_t stream_seq; /* the shard's stream sequence, gapless; 0: not in the stream */
    int64_t commit_ms;   /* wall clock of the write, epoch ms */
    change_event event;
    change_principal principal;
    change_bytes ttl_attr; /* TTL only: the attribute name, not NUL-terminated */
    int64_t expires_at_ms; /* TTL only: the item's due instant */
    int64_t deleted_at_ms; /* TTL only: when the sweep deleted it */
    change_bytes keys;     /* item_encode of the key attributes */
    change_bytes old_image;
    change_bytes new_image;
} change_record;

/* Appends the encoding of r to out. r->event must agree with the images
 * (invariant 1). Returns 0, LAPSE_EINVAL (r breaks an invariant; the images
 * are not decoded here) or LAPSE_ENOMEM; on error out is unchanged. */
int change_encode(const change_record *r, buf *out);
/* Decodes the record in data[0..len) into *r, whose byte fields then point
 * into data. Checks every byte, the images included (invariants 1-4).
 * Returns 0, LAPSE_ECORRUPT (malformed, truncated, trailing bytes, an
 * unknown version) or LAPSE_ENOMEM; never reads outside data. */
int change_decode(const void *data, size_t len, change_record *r);
/* Decodes only the fixed head (version through principal) for scans that
 * need the sequence numbers or commit time: the byte fields of *r are left
 * absent. 0 or LAPSE_ECORRUPT. */
int change_decode_head(const void *data, size_t len, change_record *r);

/* A list of records read from an outbox or a stream: seq is the outbox or
 * the stream sequence. Each entry owns a copy of its bytes. */
typedef struct change_entry {
    uint64_t seq;
    uint8_t *data; /* owned */
    size_t len;
} change_entry;

typedef struct change_list {
    change_entry *v; /* owned array */
    size_t n, cap;
    size_t bytes; /* sum of len */
} change_list;

void change_list_init(change_list *l);
/* Frees every entry; l is empty afterwards. Accepts NULL. */
void change_list_fini(change_list *l);
/* Appends a copy of data. 0 or LAPSE_ENOMEM (l unchanged). */
int change_list_push(change_list *l, uint64_t seq, const void *data, size_t len);

#endif
