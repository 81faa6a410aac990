/*
 * wire_nesting.c: wire_check_nesting (wire.h), a raw walk over protobuf
 * framing that bounds message nesting before protobuf-c's recursive unpacker
 * sees the bytes. The limit is explained in docs/wire-protocol.md
 * ("Validation").
 */
#include "wire.h"

#include <stdint.h>

#include "../common/lapse_err.h"

static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (*p >= end) {
            return -1;
        }
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* Walks one message's fields; recursion is bounded by depth_left. */
static int scan(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end,
                int depth_left)
{
    while (p < end) {
        uint64_t key;
        uint64_t v;
        if (read_varint(&p, end, &key) != 0) {
            return -1;
        }
        switch (key & 7) {
        case 0: /* varint */
            if (read_varint(&p, end, &v) != 0) {
                return -1;
            }
            break;
        case 1: /* 64-bit */
            if (end - p < 8) {
                return -1;
            }
            p += 8;
            break;
        case 5: /* 32-bit */
            if (end - p < 4) {
                return -1;
            }
            p += 4;
            break;
        case 2: { /* length-delimited: bytes, string, packed or a submessage */
            if (read_varint(&p, end, &v) != 0 || v > (uint64_t)(end - p)) {
                return -1;
            }
            uint64_t num = key >> 3;
            const ProtobufCFieldDescriptor *f =
                (d != NULL && num <= UINT32_MAX)
                    ? protobuf_c_message_descriptor_get_field(d, (unsigned)num)
                    : NULL;
            if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (depth_left <= 0 || scan(f->descriptor, p, p + v, depth_left - 1) != 0) {
                    return -1;
                }
            }
            p += v;
            break;
        }
        default: /* groups (3, 4) are not proto3; 6, 7 do not exist */
            return -1;
        }
    }
    return 0;
}

int wire_check_nesting(const ProtobufCMessageDescriptor *desc, const void *data, size_t len,
                       int max_depth)
{
    if (max_depth < 1 || (data == NULL && len > 0)) {
        return LAPSE_EPROTO;
    }
    const uint8_t *p = data;
    return scan(desc, p, p + len, max_depth - 1) == 0 ? 0 : LAPSE_EPROTO;
}
