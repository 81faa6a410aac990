/*
 * stream.h: the client side of the change stream (docs/replication.md):
 * listing a table's shards from the cached map, reading shards from their
 * hosts (GetStreamRecords, long polls included), and rendering records as
 * DynamoDB Streams JSON. The public calls are lapse_stream_* (lapse.h); the
 * functions below are the pure steps, separate so that they can be tested
 * without a cluster.
 *
 * Thread-safety: a lapse_stream_batch belongs to one thread at a time; the
 * stream_* functions are pure.
 *
 * Invariants of a batch built by stream_batch_from_pb:
 *  1. Records are in strictly increasing sequence order, all after the
 *     request's after_seq, all of the requested shard.
 *  2. Every record has keys; images are present as the wire had them,
 *     less those the view hides (KEYS_ONLY: both, NEW_IMAGE: the old one,
 *     OLD_IMAGE: the new one); ttl_attribute is never NULL ("" for user
 *     records).
 *  3. The batch owns everything its records point to.
 */
#ifndef LAPSE_CLIENT_STREAM_H
#define LAPSE_CLIENT_STREAM_H

#include <jansson.h>

#include "client.h"

/* One record and the storage its pointers borrow. */
typedef struct stream_slot {
    lapse_stream_record rec;
    struct lapse_item keys, old_image, new_image; /* .it NULL: absent */
    char *ttl_attr;                               /* owned; NULL for user records */
} stream_slot;

struct lapse_stream_batch {
    stream_slot *v; /* owned array of n */
    size_t n;
    uint64_t last_seq, oldest_seq;
};

/* Converts reply r of a read of shard after after_seq, of a table whose
 * stream has view, into a new batch (caller frees with
 * lapse_stream_batch_free). Returns 0, LAPSE_EPROTO (a
 * record without keys, with a bad item, or breaking invariant 1; message in
 * err) or LAPSE_ENOMEM; on error *out is NULL. */
int stream_batch_from_pb(const Lapse__GetStreamRecordsResponse *r, uint32_t shard,
                         uint64_t after_seq, lapse_stream_view view, lapse_stream_batch **out,
                         lapse_error *err);

/* The lapse_stream_record_to_json document of rec: a new reference, or NULL
 * on OOM. */
json_t *stream_record_json(const lapse_stream_record *rec);

#endif
