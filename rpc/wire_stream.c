/*
 * wire_stream.c: a stored stream record (a change record, common/change.h)
 * -> protobuf-c StreamRecord, for GetStreamRecords (docs/replication.md,
 * "Stream reading"). The record comes from the node's own store, but it is
 * decoded with every check all the same (change_decode checks the images
 * as item_decode would), so a damaged record is an error, never a crash.
 */
#include <stdint.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/change.h"
#include "rpc_internal.h"
#include "wire.h"

/* The item encoded in b (present), as a protobuf tree from a. */
static int image_to_pb(arena *a, const change_bytes *b, Lapse__Item **out)
{
    item *it = NULL;
    int rv = item_decode(b->data, b->len, &it);
    if (rv != 0) {
        return rv;
    }
    *out = wire_item_to_pb(a, it);
    item_free(it);
    return *out == NULL ? LAPSE_ENOMEM : 0;
}

int wire_stream_record_to_pb(arena *a, const void *data, size_t len, stream_view view,
                             Lapse__StreamRecord **out)
{
    change_record r;
    *out = NULL;
    int rv = change_decode(data, len, &r);
    if (rv != 0) {
        return rv;
    }
    Lapse__StreamRecord *pb = arena_alloc(a, sizeof(*pb));
    if (pb == NULL) {
        return LAPSE_ENOMEM;
    }
    lapse__stream_record__init(pb);
    pb->sequence_number = r.stream_seq;
    pb->shard = r.part;
    pb->approximate_creation_ms = r.commit_ms;
    switch (r.event) {
    case CHANGE_INSERT:
        pb->event_name = LAPSE__STREAM_RECORD__EVENT_NAME__INSERT;
        break;
    case CHANGE_MODIFY:
        pb->event_name = LAPSE__STREAM_RECORD__EVENT_NAME__MODIFY;
        break;
    default:
        pb->event_name = LAPSE__STREAM_RECORD__EVENT_NAME__REMOVE;
        break;
    }
    /* As DynamoDB's SizeBytes, approximately: the keys and images as stored. */
    pb->size_bytes = r.keys.len + (r.old_image.data != NULL ? r.old_image.len : 0) +
                     (r.new_image.data != NULL ? r.new_image.len : 0);
    const int old_shown = view == STREAM_VIEW_NEW_AND_OLD || view == STREAM_VIEW_OLD_IMAGE;
    const int new_shown = view == STREAM_VIEW_NEW_AND_OLD || view == STREAM_VIEW_NEW_IMAGE;
    if ((rv = image_to_pb(a, &r.keys, &pb->keys)) != 0 ||
        (old_shown && r.old_image.data != NULL &&
         (rv = image_to_pb(a, &r.old_image, &pb->old_image)) != 0) ||
        (new_shown && r.new_image.data != NULL &&
         (rv = image_to_pb(a, &r.new_image, &pb->new_image)) != 0)) {
        return rv;
    }
    if (r.principal == CHANGE_TTL) {
        pb->ttl_delete = 1;
        pb->ttl_expires_at_ms = r.expires_at_ms;
        pb->ttl_deleted_at_ms = r.deleted_at_ms;
        if ((pb->ttl_attribute = arena_strndup(a, (const char *)r.ttl_attr.data, r.ttl_attr.len)) ==
            NULL) {
            return LAPSE_ENOMEM;
        }
    }
    *out = pb;
    return 0;
}
