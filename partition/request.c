/*
 * request.c: request records (request.h): their key, value and lookup.
 */
#include "request.h"

#include <stdio.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../placement/hash.h"
#include "itemkey.h"

#define STAMP_BYTES 8

int request_key(buf *k, uint32_t table_id, uint32_t part, const uint8_t *id)
{
    buf_clear(k);
    if (itemkey_append_prefix(k, table_id, part) != 0 ||
        buf_append(k, id, REQUEST_ID_BYTES) != 0) {
        return LAPSE_ENOMEM;
    }
    return 0;
}

int request_remember(db_batch *b, db *d, int cf, const buf *key, request_kind kind,
                     const void *item, size_t ilen, buf *scratch)
{
    buf_clear(scratch);
    if (buf_append_u64be(scratch, (uint64_t)clock_wall_now().ms) != 0 ||
        buf_append_byte(scratch, (uint8_t)kind) != 0 ||
        (item != NULL && buf_append(scratch, item, ilen) != 0)) {
        return LAPSE_ENOMEM;
    }
    db_batch_put(b, d, cf, key->data, key->len, scratch->data, scratch->len);
    return 0;
}

int request_recall(db *d, int cf, const buf *key, buf *val, int *found, request_outcome *out,
                   char *err, size_t errlen)
{
    int rv = db_get(d, cf, key->data, key->len, val, found, err, errlen);
    if (rv != 0 || !*found) {
        return rv;
    }
    if (val->len < STAMP_BYTES + 1) {
        snprintf(err, errlen, "request record of %zu bytes", val->len);
        return LAPSE_ECORRUPT;
    }
    out->kind = (request_kind)val->data[STAMP_BYTES];
    out->item = NULL;
    out->item_len = 0;
    switch (out->kind) {
    case REQUEST_PUT:
    case REQUEST_DELETE:
        return 0;
    case REQUEST_UPDATE:
    case REQUEST_BATCH:
        out->item = val->data + STAMP_BYTES + 1;
        out->item_len = val->len - STAMP_BYTES - 1;
        if (out->kind == REQUEST_BATCH && out->item_len % 8 != 0) {
            snprintf(err, errlen, "batch request record of %zu digest bytes", out->item_len);
            return LAPSE_ECORRUPT;
        }
        return 0;
    default:
        snprintf(err, errlen, "request record of unknown kind %u", val->data[STAMP_BYTES]);
        return LAPSE_ECORRUPT;
    }
}

uint64_t request_write_digest(const void *key, size_t klen, const void *value, size_t vlen)
{
    /* A delete and a put of one key differ by the seed of the second part. */
    uint64_t h = hash_bytes64(key, klen, 0x5eed);
    return value != NULL ? hash_bytes64(value, vlen, h) : hash_bytes64("", 0, ~h);
}

int request_batch_has(const request_outcome *o, uint64_t digest)
{
    for (size_t off = 0; off + 8 <= o->item_len; off += 8) {
        uint64_t d = 0;
        for (int i = 0; i < 8; i++) {
            d = d << 8 | o->item[off + (size_t)i];
        }
        if (d == digest) {
            return 1;
        }
    }
    return 0;
}
