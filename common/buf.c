/* buf.c: growable byte buffer (buf.h). */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lapse_err.h"

void buf_init(buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void buf_fini(buf *b)
{
    if (b == NULL) {
        return;
    }
    free(b->data);
    buf_init(b);
}

void buf_clear(buf *b)
{
    b->len = 0;
    if (b->data != NULL) {
        b->data[0] = 0;
    }
}

int buf_reserve(buf *b, size_t extra)
{
    if (extra > SIZE_MAX - 1 - b->len) {
        return LAPSE_ENOMEM;
    }
    size_t need = b->len + extra;
    if (need <= b->cap && b->data != NULL) {
        return 0;
    }
    size_t cap = b->cap < 64 ? 64 : b->cap;
    while (cap < need) {
        if (cap > (SIZE_MAX - 1) / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    uint8_t *p = realloc(b->data, cap + 1); /* +1: the terminator of invariant 2 */
    if (p == NULL) {
        return LAPSE_ENOMEM;
    }
    p[b->len] = 0;
    b->data = p;
    b->cap = cap;
    return 0;
}

int buf_append(buf *b, const void *p, size_t n)
{
    int rv;
    if ((rv = buf_reserve(b, n)) != 0) {
        return rv;
    }
    if (n > 0) {
        memcpy(b->data + b->len, p, n);
    }
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

int buf_append_byte(buf *b, uint8_t c)
{
    return buf_append(b, &c, 1);
}

int buf_append_str(buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

int buf_append_u32be(buf *b, uint32_t v)
{
    uint8_t x[4];
    buf_put_u32be(x, v);
    return buf_append(b, x, sizeof(x));
}

int buf_append_u64be(buf *b, uint64_t v)
{
    uint8_t x[8];
    buf_put_u64be(x, v);
    return buf_append(b, x, sizeof(x));
}

int buf_printf(buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return LAPSE_ENOMEM;
    }
    int rv;
    if ((rv = buf_reserve(b, (size_t)n)) != 0) {
        return rv;
    }
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

char *buf_detach(buf *b)
{
    char *p = (char *)b->data;
    if (p == NULL) {
        p = calloc(1, 1);
        if (p == NULL) {
            return NULL;
        }
    }
    buf_init(b);
    return p;
}

uint32_t buf_get_u32be(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

uint64_t buf_get_u64be(const uint8_t *p)
{
    return ((uint64_t)buf_get_u32be(p) << 32) | buf_get_u32be(p + 4);
}

void buf_put_u32be(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

void buf_put_u64be(uint8_t *p, uint64_t v)
{
    buf_put_u32be(p, (uint32_t)(v >> 32));
    buf_put_u32be(p + 4, (uint32_t)v);
}

int buf_append_varint(buf *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t k = 0;
    while (v >= 0x80) {
        tmp[k++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[k++] = (uint8_t)v;
    return buf_append(b, tmp, k);
}

/* ------------------------------------------------------------------------
 * Bounded reader
 * ---------------------------------------------------------------------- */

void buf_reader_init(buf_reader *r, const void *data, size_t len)
{
    r->p = data;
    r->end = r->p + len;
}

int buf_read_varint(buf_reader *r, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) {
            return LAPSE_ECORRUPT;
        }
        uint8_t b = *r->p++;
        if (shift == 63 && (b & 0x7e) != 0) {
            return LAPSE_ECORRUPT; /* overflows 64 bits */
        }
        v |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0) {
            *out = v;
            return 0;
        }
    }
    return LAPSE_ECORRUPT;
}

int buf_read_count(buf_reader *r, size_t unit_min, size_t *out)
{
    uint64_t v;
    if (buf_read_varint(r, &v) != 0) {
        return LAPSE_ECORRUPT;
    }
    if (unit_min > 0 && v > (uint64_t)(r->end - r->p) / unit_min) {
        return LAPSE_ECORRUPT;
    }
    *out = (size_t)v;
    return 0;
}

int buf_read_bytes(buf_reader *r, size_t n, const uint8_t **out)
{
    if (n > (size_t)(r->end - r->p)) {
        return LAPSE_ECORRUPT;
    }
    *out = r->p;
    r->p += n;
    return 0;
}

int buf_read_byte(buf_reader *r, uint8_t *out)
{
    if (r->p >= r->end) {
        return LAPSE_ECORRUPT;
    }
    *out = *r->p++;
    return 0;
}
