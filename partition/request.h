/*
 * request.h: the remembered outcomes of writes that carry a request id
 * (docs/replication.md, "Retried writes").
 *
 * A client draws 16 random bytes per PutItem, DeleteItem or UpdateItem and
 * sends them with every attempt of that call. The write's WriteBatch also
 * stores a request record under (table, partition, id), so the record is
 * replicated with the write and is on every replica that has the write.
 * Another attempt of the same call finds the record and answers from it
 * instead of applying the write a second time: after a time-out, after a
 * failover to a replica, or while the first attempt is still in flight.
 *
 * A BatchWrite call's id is one for all its partitions: each partition's
 * record lists a digest of every write of the call it applied (a retry may
 * group the call's writes into requests differently), so a retry applies
 * exactly the writes no earlier attempt applied.
 *
 * Key (family requests): u32be table id | u32be partition | id (16 bytes).
 * Value: u64be wall-clock ms of the write | u8 kind | for an update, the
 * new item's item_encode bytes (the call's answer); for a batch, the u64be
 * digests of the writes applied (request_write_digest). The family expires by
 * itself (db_options.expiring_cf): records older than REQUEST_KEEP_MS go
 * at the next compaction that reaches them, with no deletes to replicate.
 *
 * Thread-safe: pure functions over caller-owned buffers and a db.
 */
#ifndef LAPSE_REQUEST_H
#define LAPSE_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "../common/buf.h"
#include "../storage/db.h"

#define REQUEST_ID_BYTES 16
/* How long an outcome is remembered at least: far beyond any client's
 * retries (their whole call is bounded by its timeout, seconds). */
#define REQUEST_KEEP_MS (10 * 60 * 1000)

typedef enum request_kind {
    REQUEST_PUT = 'P',
    REQUEST_DELETE = 'D',
    REQUEST_UPDATE = 'U',
    REQUEST_BATCH = 'B'
} request_kind;

/* A record read back (request_recall). */
typedef struct request_outcome {
    request_kind kind;
    const uint8_t *item; /* an update's new item (item_encode); a batch's
                            digests (u64be each); else NULL */
    size_t item_len;
} request_outcome;

/* The digest a batch record keeps of one write: its item key bytes and,
 * for a put, the encoded item (value NULL: a delete). */
uint64_t request_write_digest(const void *key, size_t klen, const void *value, size_t vlen);
/* Whether a batch record's digests (o->item, o->item_len) hold digest. */
int request_batch_has(const request_outcome *o, uint64_t digest);

/* Clears k and writes the key of request id (REQUEST_ID_BYTES) of
 * (table_id, part). 0 or LAPSE_ENOMEM. */
int request_key(buf *k, uint32_t table_id, uint32_t part, const uint8_t *id);
/* Adds to b, in family cf, the record under key: kind and, for an update,
 * its new item item[0..ilen). scratch holds the value. 0 or LAPSE_ENOMEM. */
int request_remember(db_batch *b, db *d, int cf, const buf *key, request_kind kind,
                     const void *item, size_t ilen, buf *scratch);
/* Reads the record under key into val; *found says whether there is one
 * and then *out points into val. Returns 0, LAPSE_EIO, or LAPSE_ECORRUPT
 * for a record that is too short or of no known kind. */
int request_recall(db *d, int cf, const buf *key, buf *val, int *found, request_outcome *out,
                   char *err, size_t errlen);

#endif
