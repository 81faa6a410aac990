/*
 * base64.h: RFC 4648 base64, standard alphabet, with padding: DynamoDB JSON's
 * B values and etcd's gateway keys and values.
 *
 * Thread-safety: pure functions, safe from any thread.
 *
 * Invariants:
 *  1. base64_decode(base64_encode(x)) == x for every x.
 *  2. Decoding is strict: every input it accepts is the one canonical
 *     encoding of its bytes.
 */
#ifndef LAPSE_BASE64_H
#define LAPSE_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* Returns a malloc'd NUL-terminated encoding of p[0..n) (caller frees), or
 * NULL on OOM. */
char *base64_encode(const uint8_t *p, size_t n);

/* Decodes s[0..n) strictly: length a multiple of 4, '=' only as final
 * padding, and the unused bits of the last group zero. On success *out is
 * malloc'd (caller frees; NUL-terminated, the NUL not counted) and *outlen
 * set. Returns 0, LAPSE_EINVAL or LAPSE_ENOMEM; on error *out is untouched. */
int base64_decode(const char *s, size_t n, uint8_t **out, size_t *outlen);

#endif
