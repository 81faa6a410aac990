/* keycodec.c: order-preserving key encodings (keycodec.h).
 *
 * The format is documented in docs/key-encoding.md. In short:
 *   S, B  the bytes with 0x00 escaped as 00 FF, terminated by 00 01.
 *   N     a marker (NEG < ZERO < POS); for non-zero values a biased 2-byte
 *         exponent and the digits as nibbles (digit + 1), ended by a 0 nibble
 *         and padded to a byte; for negatives every byte after the marker
 *         is complemented, which reverses their order. */
#include "keycodec.h"

#include <string.h>

#include "lapse_err.h"
#include "number.h"

#define N_MARK_NEG 0x01
#define N_MARK_ZERO 0x02
#define N_MARK_POS 0x03
#define N_EXP_BIAS 0x8000

static int append_escaped(buf *out, const uint8_t *p, size_t n)
{
    int rv;
    /* worst case every byte doubles; reserving keeps failure atomic */
    if (n > (SIZE_MAX - 2) / 2 || (rv = buf_reserve(out, 2 * n + 2)) != 0) {
        return LAPSE_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        out->data[out->len++] = p[i];
        if (p[i] == 0x00) {
            out->data[out->len++] = 0xFF;
        }
    }
    out->data[out->len] = 0;
    return 0;
}

static int append_number(buf *out, const number *n)
{
    uint8_t tmp[3 + NUMBER_MAX_DIGITS / 2 + 1];
    size_t k = 0;
    if (n->ndigits == 0) {
        return buf_append_byte(out, N_MARK_ZERO);
    }
    tmp[k++] = n->neg ? N_MARK_NEG : N_MARK_POS;
    uint16_t e = (uint16_t)(n->exp + N_EXP_BIAS);
    tmp[k++] = (uint8_t)(e >> 8);
    tmp[k++] = (uint8_t)e;
    /* nibbles: digit + 1, then a 0 nibble; the low nibble of the last byte
     * is left 0 as padding */
    for (int i = 0; i <= n->ndigits; i += 2) {
        uint8_t hi = (uint8_t)(i < n->ndigits ? n->digits[i] - '0' + 1 : 0);
        uint8_t lo = (uint8_t)(i + 1 < n->ndigits ? n->digits[i + 1] - '0' + 1 : 0);
        tmp[k++] = (uint8_t)(hi << 4 | lo);
    }
    if (n->neg) {
        for (size_t i = 1; i < k; i++) {
            tmp[i] = (uint8_t)~tmp[i];
        }
    }
    return buf_append(out, tmp, k);
}

int keycodec_append(buf *out, const attr_value *v)
{
    switch (v->type) {
    case ATTR_S:
    case ATTR_B: {
        size_t start = out->len;
        int rv = append_escaped(out, (const uint8_t *)v->u.bytes.ptr, v->u.bytes.len);
        if (rv == 0) {
            rv = buf_append(out, "\x00\x01", 2); /* cannot fail: reserved */
        }
        if (rv != 0) {
            out->len = start;
        }
        return rv;
    }
    case ATTR_N: {
        number n;
        if (number_parse(v->u.bytes.ptr, v->u.bytes.len, &n, NULL, 0) != 0) {
            return LAPSE_EINVAL;
        }
        return append_number(out, &n);
    }
    default:
        return LAPSE_EINVAL;
    }
}

int keycodec_append_prefix(buf *out, const attr_value *v)
{
    if (v->type != ATTR_S && v->type != ATTR_B) {
        return LAPSE_EINVAL;
    }
    return append_escaped(out, (const uint8_t *)v->u.bytes.ptr, v->u.bytes.len);
}

static int decode_bytes(const uint8_t *p, size_t len, attr_type t, attr_value *out, size_t *used)
{
    /* First pass: find the terminator and the decoded length. */
    size_t i = 0, n = 0;
    for (;;) {
        if (i >= len) {
            return LAPSE_ECORRUPT;
        }
        if (p[i] != 0x00) {
            i++;
            n++;
            continue;
        }
        if (i + 1 >= len) {
            return LAPSE_ECORRUPT;
        }
        if (p[i + 1] == 0x01) {
            break;
        }
        if (p[i + 1] != 0xFF) {
            return LAPSE_ECORRUPT;
        }
        i += 2;
        n++;
    }
    size_t total = i + 2;
    int rv;
    /* item_value_init_bytes copies; build the decoded bytes in place of a
     * temporary by allocating through it and then unescaping. */
    if ((rv = item_value_init_bytes(out, t, p, n)) != 0) {
        return rv;
    }
    uint8_t *d = (uint8_t *)out->u.bytes.ptr;
    size_t k = 0;
    for (size_t j = 0; j < i; j++) {
        d[k++] = p[j];
        if (p[j] == 0x00) {
            j++; /* skip the FF of the escape */
        }
    }
    *used = total;
    return 0;
}

static int decode_number(const uint8_t *p, size_t len, attr_value *out, size_t *used)
{
    number n;
    memset(&n, 0, sizeof(n));
    if (len < 1) {
        return LAPSE_ECORRUPT;
    }
    size_t k = 1;
    if (p[0] == N_MARK_ZERO) {
        goto done;
    }
    if (p[0] != N_MARK_NEG && p[0] != N_MARK_POS) {
        return LAPSE_ECORRUPT;
    }
    n.neg = p[0] == N_MARK_NEG;
    uint8_t flip = n.neg ? 0xFF : 0x00;
    if (len < 3) {
        return LAPSE_ECORRUPT;
    }
    n.exp = (int)((unsigned)(p[1] ^ flip) << 8 | (unsigned)(p[2] ^ flip)) - N_EXP_BIAS;
    k = 3;
    for (;;) {
        if (k >= len) {
            return LAPSE_ECORRUPT;
        }
        uint8_t b = p[k++] ^ flip;
        uint8_t nib[2] = {(uint8_t)(b >> 4), (uint8_t)(b & 0x0F)};
        int ended = 0;
        for (int h = 0; h < 2; h++) {
            if (nib[h] == 0) {
                /* the terminator; a pad nibble after it must be 0 too */
                if (h == 0 && nib[1] != 0) {
                    return LAPSE_ECORRUPT;
                }
                ended = 1;
                break;
            }
            if (nib[h] > 10 || n.ndigits >= NUMBER_MAX_DIGITS) {
                return LAPSE_ECORRUPT;
            }
            n.digits[n.ndigits++] = (char)('0' + nib[h] - 1);
        }
        if (ended) {
            break;
        }
    }
    /* a normalized number has a non-zero first and last digit */
    if (n.ndigits == 0 || n.digits[0] == '0' || n.digits[n.ndigits - 1] == '0') {
        return LAPSE_ECORRUPT;
    }
done:;
    char text[64];
    number_format(&n, text, sizeof(text));
    /* number_validate also rejects an exponent outside the range */
    int rv = item_value_init_bytes(out, ATTR_N, text, strlen(text));
    if (rv != 0) {
        return rv == LAPSE_EINVAL ? LAPSE_ECORRUPT : rv;
    }
    *used = k;
    return 0;
}

int keycodec_decode(const uint8_t *p, size_t len, attr_type t, attr_value *out, size_t *used)
{
    item_value_init_null(out);
    switch (t) {
    case ATTR_S:
    case ATTR_B:
        return decode_bytes(p, len, t, out, used);
    case ATTR_N:
        return decode_number(p, len, out, used);
    default:
        return LAPSE_ECORRUPT;
    }
}
