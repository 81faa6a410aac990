/*
 * buf.h: a growable byte buffer, the project's one way to build encodings.
 *
 * Not thread-safe; a buf belongs to one thread at a time.
 *
 * Invariants:
 *  1. len <= cap; data is NULL exactly when cap == 0.
 *  2. When cap > 0, data[len] is a valid byte set to 0, so a buf holding text
 *     is always NUL-terminated (the terminator is not counted in len).
 */
#ifndef LAPSE_BUF_H
#define LAPSE_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct buf {
    uint8_t *data; /* owned; NULL when empty and never grown */
    size_t len;    /* bytes in use */
    size_t cap;    /* bytes allocated, excluding the terminator */
} buf;

/* Initializes an empty buf. Never fails. */
void buf_init(buf *b);
/* Frees the storage; b is empty afterwards and may be reused. Accepts NULL. */
void buf_fini(buf *b);
/* Sets len to 0, keeping the storage. */
void buf_clear(buf *b);
/* Ensures room for extra more bytes. Returns 0 or LAPSE_ENOMEM (b unchanged). */
int buf_reserve(buf *b, size_t extra);
/* Appends. Each returns 0 or LAPSE_ENOMEM; on error b is unchanged. */
int buf_append(buf *b, const void *p, size_t n);
int buf_append_byte(buf *b, uint8_t c);
int buf_append_str(buf *b, const char *s);
int buf_append_u32be(buf *b, uint32_t v);
int buf_append_u64be(buf *b, uint64_t v);
/* Appends v as a little-endian base-128 varint (7 bits a byte, the high bit
 * set on every byte but the last; 1 to 10 bytes, docs/key-encoding.md). */
int buf_append_varint(buf *b, uint64_t v);
/* printf-style append; returns 0 or LAPSE_ENOMEM. */
int buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Moves the storage out: returns data (caller frees with free()), b becomes
 * empty. Returns a freshly allocated "" when b was never grown, NULL on OOM. */
char *buf_detach(buf *b);

/* Big-endian readers and writers for fixed-width fields (keys and values
 * on disk, docs/storage-format.md); p must hold the bytes (4 or 8). */
uint32_t buf_get_u32be(const uint8_t *p);
uint64_t buf_get_u64be(const uint8_t *p);
void buf_put_u32be(uint8_t *p, uint32_t v);
void buf_put_u64be(uint8_t *p, uint64_t v);

/* A bounded reader over untrusted bytes (from disk or a peer): every read
 * checks what is left first, so no input makes a decoder read outside
 * [p, end). Each read returns 0, or LAPSE_ECORRUPT with p unspecified
 * (the decoder gives up). Borrows the bytes. */
typedef struct buf_reader {
    const uint8_t *p;
    const uint8_t *end;
} buf_reader;

void buf_reader_init(buf_reader *r, const void *data, size_t len);
/* Reads a varint as buf_append_varint writes it; one past 64 bits is
 * corrupt. */
int buf_read_varint(buf_reader *r, uint64_t *out);
/* Reads a varint length or count that must fit in the rest of the input,
 * given that each unit takes at least unit_min bytes (0: no bound). */
int buf_read_count(buf_reader *r, size_t unit_min, size_t *out);
/* Points *out at the next n bytes (borrowed) and skips them. */
int buf_read_bytes(buf_reader *r, size_t n, const uint8_t **out);
/* Reads one byte. */
int buf_read_byte(buf_reader *r, uint8_t *out);

#endif
