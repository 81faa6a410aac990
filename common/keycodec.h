/*
 * keycodec.h: order-preserving, self-delimiting encoding of key values.
 *
 * For two values a and b of the same key type (S, N or B), memcmp order of
 * their encodings equals DynamoDB's order of the values: S and B bytewise
 * (UTF-8 byte order for S), N numerically, including negative, fractional and
 * very large or small values. An encoding ends itself, so a partition-key
 * encoding followed by a sort-key encoding sorts by partition key first.
 * The format is documented in docs/key-encoding.md.
 *
 * Thread-safe (pure functions).
 */
#ifndef LAPSE_KEYCODEC_H
#define LAPSE_KEYCODEC_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "item.h"

/* Appends the encoding of v to out. Returns 0, LAPSE_EINVAL (v is not S, N
 * or B, or N is not a valid number) or LAPSE_ENOMEM. */
int keycodec_append(buf *out, const attr_value *v);
/* Decodes one value of type t from the start of p. On success *out owns the
 * value (N in normalized text) and *used is the count of bytes read.
 * Returns 0, LAPSE_ECORRUPT or LAPSE_ENOMEM. */
int keycodec_decode(const uint8_t *p, size_t len, attr_type t, attr_value *out, size_t *used);
/* Appends the encoding of the prefix s of an S or B value, without the
 * terminator, for begins_with range scans. 0 or LAPSE_ENOMEM. */
int keycodec_append_prefix(buf *out, const attr_value *v);

#endif
